"""Small facts every layer shares: atomic file writes, where bundled files live, network
helpers, and the few defaults both the settings and the core need.

May import: the standard library only. Everything in `server` and `app` may import it.
"""
