"""The Anthropic Messages dialect."""
