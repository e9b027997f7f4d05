"""Tools the server itself runs for a client: llama-server's `/tools` (`--tools`, MCP servers).

llama-server's web UI (and agents built on it) let the model read and edit files, search a
folder and run shell commands on the machine the server runs on, and call the tools of MCP
servers the server starts. This layer is those tools, in plain Python:

- `registry`: what a tool is (`ServerTool`), one call of it (`ToolCall`), the errors a call
  ends in (`ToolError`: the tool's own failure, answered in-band; `ToolRefused`: a call that
  must not run, llama-server's 500), and `ToolBox`, the tools a server offers.
- `builtin` (`builtin_tools`: the tools --tools names) over `tool_base`, `builtin_files`
  (read, write and edit a file; `text_edits` matches the edits), `file_search` (glob and grep
  a folder; `globs`) and `shell` (run a command; `process_run` streams, caps and stops it).
- Where they run: `runtimes` reads a runtime spec (this machine, `docker-container:ID`,
  `podman-container:ID`, `ssh:TARGET`) into a `runtime_io` interface, done by `runtime_host`
  and `runtime_isolate`; `runtime_spawn` starts the container of `--tools-runtime docker:IMAGE`.
- `mcp_config`, `mcp_client` (one stdio session; `mcp_pipes` reads and writes its pipes),
  `mcp_tools`: MCP servers (`--mcp-servers-json`, `--mcp-servers-config`), each tool offered
  as `<server>_<tool>`.

Nothing here runs unless the server was started with `--tools` or an MCP configuration.

May import: `server.base` and the standard library. Never the core, the dialects, the
process, the settings model or llama_cpp: `server/dialects/llama/tool_routes.py` serves it.
"""
