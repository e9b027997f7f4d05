"""The OpenAI dialect: completions, chat completions, Responses and the model list."""
