"""Tools the server itself runs for a client: llama-server's `/tools` (`--tools`, MCP servers).

llama-server's web UI (and agents built on it) let the model read and edit files, search a
folder and run shell commands on the machine the server runs on, and call the tools of MCP
servers the server starts. This layer is those tools, in plain Python:

- `registry`: what a tool is (`ServerTool`), one call of it (`ToolCall`), the errors a call
  ends in (`ToolError`, answered in-band; `ToolRefused`, llama-server's 500), and `ToolBox`,
  the tools a server offers; `tool_base`: what the built-in tools share.
- `builtin/`: the tools --tools names (files, search, shell); `runtimes/`: where they run
  (this machine, a container, ssh); `mcp/`: MCP servers over stdio.

Nothing here runs unless the server was started with `--tools` or an MCP configuration.

May import: `server.base` and the standard library. Never the core, the dialects, the
process, the settings model or llama_cpp: `server/dialects/llama/tool_routes.py` serves it.
"""
