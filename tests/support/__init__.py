"""Helpers the tests share: servers to start, local stand-ins (the Hub, proxies, nginx, a
scripted engine), and readers of what the server sends (SSE, metrics, wire shapes).

Test code only: imports `server` and `app` as the tests do, never a test module or a conftest
(fixtures live in the conftest files and are built from these helpers).
"""
