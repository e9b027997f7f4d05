"""The MCP servers a server starts: llama-server's `--mcp-servers-json` / `--mcp-servers-config`.

Both take the same JSON, the `mcpServers` shape that Cursor and Claude Desktop use:

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "@scope/server", "/data"],
                              "env": {"TOKEN": "…"}, "cwd": "/srv", "timeout_ms": 30000}}}

Each key names a server (its tools are offered as `<name>_<tool>`); `command` is the program
to run and is the one field it must have. `env` is laid over the server's own environment,
`cwd` is where the program starts (else the server's working directory) and `timeout_ms` bounds
each call of one of its tools (30 s unless set).

As in llama-server, JSON that does not parse and a file that cannot be read stop the start
(`McpConfigError`); a document without `mcpServers` or an entry without a `command` (an HTTP
server given by `url`, say: only stdio servers are spoken) is logged and left out. Fields of
the wrong type are errors here, where llama-server drops some of them silently.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_MS = 30_000
INLINE_SOURCE = "--mcp-servers-json"

Log = Callable[[str], None]


class McpConfigError(ValueError):
    """The MCP configuration cannot be used: the server must not start with it."""


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server to run over stdio."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # (name, value) pairs laid over the inherited ones
    cwd: str | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS


def mcp_configs_from(
    json_text: str | None, config_path: str | Path | None, log: Log | None = None
) -> list[McpServerConfig]:
    """The servers of `--mcp-servers-config` (read first) then `--mcp-servers-json`.

    A name both give is kept from the first. What is left out is said through `log` (by
    default the "hearth" logger's warnings). Raises McpConfigError.
    """
    log = log or logging.getLogger("hearth").warning
    configs: list[McpServerConfig] = []
    sources: list[tuple[str, str]] = []
    if config_path:
        sources.append((read_config_file(config_path), str(config_path)))
    if json_text:
        sources.append((json_text, INLINE_SOURCE))
    for text, source in sources:
        for config in parse_mcp_servers(text, source, log):
            if any(known.name == config.name for known in configs):
                log(f"MCP config ({source}): duplicate server name {config.name!r}, skipped")
                continue
            configs.append(config)
    return configs


def read_config_file(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise McpConfigError(f"cannot read the MCP config file {str(path)!r}: {reason}") from exc


def parse_mcp_servers(text: str, source: str, log: Log) -> list[McpServerConfig]:
    """The servers one JSON document names, in its order. Raises McpConfigError."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise McpConfigError(f"MCP config ({source}) is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise McpConfigError(f'MCP config ({source}) must be a JSON object with "mcpServers"')
    servers = document.get("mcpServers")
    if servers is None:
        log(f'MCP config ({source}): no "mcpServers", so no MCP servers')
        return []
    if not isinstance(servers, dict):
        raise McpConfigError(f'MCP config ({source}): "mcpServers" must be an object')
    configs = []
    for name, entry in servers.items():
        config = _server_config(name, entry, f"MCP config ({source}): server {name!r}")
        if config is None:
            log(
                f'MCP config ({source}): server {name!r} has no "command" (only stdio '
                "servers are supported), skipped"
            )
            continue
        configs.append(config)
    if not configs:
        log(f"MCP config ({source}): no MCP servers found")
    return configs


def _server_config(name: str, entry: Any, where: str) -> McpServerConfig | None:
    if not name:
        raise McpConfigError(f"{where}: a server needs a non-empty name")
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where} must be an object")
    command = entry.get("command")
    if command is None or command == "":
        return None
    if not isinstance(command, str):
        raise McpConfigError(f'{where}: "command" must be a string')
    return McpServerConfig(
        name=name,
        command=command,
        args=_string_list(entry.get("args", []), where),
        env=_string_map(entry.get("env", {}), where),
        cwd=_optional_string(entry.get("cwd"), "cwd", where),
        timeout_ms=_timeout_ms(entry.get("timeout_ms", DEFAULT_TIMEOUT_MS), where),
    )


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise McpConfigError(f'{where}: "args" must be a list of strings')
    return tuple(value)


def _string_map(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise McpConfigError(f'{where}: "env" must be an object of strings')
    return tuple((str(key), text) for key, text in value.items())


def _optional_string(value: Any, field: str, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise McpConfigError(f'{where}: "{field}" must be a string')
    return value


def _timeout_ms(value: Any, where: str) -> int:
    # bool is an int to Python, never a timeout to a person writing JSON.
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise McpConfigError(f'{where}: "timeout_ms" must be a positive number of milliseconds')
    return int(value)
