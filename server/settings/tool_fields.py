"""llama-server's server-side tools as settings: `--tools`, `--tools-runtime`,
`--mcp-servers-json` and `--mcp-servers-config` (server/server_tools, served at /tools by
server/dialects/llama/tool_routes.py). Kept apart so the settings model stays readable;
`HearthSettings` inherits them.

All four are off by default and meant for a server only its owner reaches: the tools read and
write files and run commands on this machine. As in llama-server, turning any of them on
narrows the default of --cors-origins to `localhost` (`cors_origin_list`), so that a web page
from elsewhere cannot drive them through the user's browser.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from server.settings.flags import flags


class ToolFields(BaseModel):
    # llama-server's --tools read_file,grep_search,... or `all`.
    server_tools: str | None = Field(
        default=None,
        description="Built-in tools served at /tools for agents: all, or some of read_file, "
        "file_glob_search, grep_search, exec_shell_command, write_file, edit_file, get_info. "
        "They run on this machine: only for a server no one else reaches.",
        json_schema_extra=flags("--tools", metavar="all|TOOL[,TOOL]"),
    )
    # llama-server's --tools-runtime docker:IMAGE | docker-container:ID | ssh:TARGET ...
    tools_runtime: str | None = Field(
        default=None,
        description="Where the tools run instead of this machine: docker-container:ID, "
        "podman-container:ID or ssh:TARGET.",
        json_schema_extra=flags("--tools-runtime", metavar="KIND:TARGET"),
    )
    # llama-server's --mcp-servers-json / --mcp-servers-config (Cursor's mcpServers format).
    mcp_servers_json: str | None = Field(
        default=None,
        description='MCP servers whose tools are served at /tools, as JSON: {"mcpServers": '
        '{"name": {"command": ..., "args": [...]}}}.',
        json_schema_extra=flags("--mcp-servers-json", metavar="JSON"),
    )
    mcp_servers_config: str | None = Field(
        default=None,
        description="A JSON file of MCP servers, as --mcp-servers-json.",
        json_schema_extra=flags("--mcp-servers-config", metavar="FILE"),
    )

    @field_validator(
        "server_tools", "tools_runtime", "mcp_servers_json", "mcp_servers_config", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value

    def server_tool_names(self) -> list[str]:
        """--tools as a list of names (`all` stays a name); [] when off."""
        return [name.strip() for name in (self.server_tools or "").split(",") if name.strip()]

    def server_tools_wanted(self) -> bool:
        """Whether /tools is on: built-in tools or MCP servers asked for."""
        return bool(self.server_tool_names() or self.mcp_servers_json or self.mcp_servers_config)
