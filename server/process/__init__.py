"""The running process: `serve` (settings → models → app → uvicorn), the app factory (`app`),
the HTTP server's shutdown order, the console, the watch on the launcher, and the RPC worker
and supervisor.

May import: every other layer of `server`. Nothing imports it but `server.__main__`.
"""
