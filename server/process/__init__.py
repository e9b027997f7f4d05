"""The running process: `serve` (the `hearth` command: settings → models → app → uvicorn),
the app factory (`app`), the HTTP server's shutdown order (`http_server`), the console
(`console`), the watch on the launcher (`parent_watch`), the edge from the settings model to the
core's `LoadSettings` (`load_settings`), and the subcommands `hearth list-devices`
(`list_devices`) and `hearth rpc-worker` (`rpc_worker`) with the parent that supervises a
server using RPC workers (`rpc_supervisor`).

May import: every other layer of `server`, never the launcher (the `hearth` command,
hearth/__main__.py, hands `serve.main` the launcher to open). Imported only by the entry points
(`server/__main__.py`, `hearth/__main__.py`) and tests: the launcher runs the server as a child
process.
"""
