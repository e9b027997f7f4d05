"""MCP servers over stdio (`--mcp-servers-json`, `--mcp-servers-config`): `mcp_config`,
`mcp_client` (one session; `mcp_pipes` reads and writes its pipes) and `mcp_tools` (each
tool offered as `<server>_<tool>`).

May import: `server.server_tools.registry`, the standard library.
"""
