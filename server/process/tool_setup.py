"""The tools `/tools` serves, built once at start from --tools, --tools-runtime and the MCP
settings (server/server_tools; the route is server/dialects/llama/tool_routes.py).

A mistake the user must fix (an unknown tool name, a runtime that cannot be, an unreadable or
invalid MCP configuration, a container image that does not start) stops the start, as
llama-server's does; an MCP server that does not start is only logged, and its tools are
missing. Whenever tools are on, the console says so: they act on this machine (or the runtime
named) for whoever can reach the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from server.base.netcheck import is_loopback
from server.server_tools.builtin.builtin import builtin_tools
from server.server_tools.mcp.mcp_config import McpServerConfig, mcp_configs_from
from server.server_tools.mcp.mcp_tools import start_mcp_tools
from server.server_tools.registry import ServerTool, ToolBox, ToolRefused
from server.server_tools.runtimes.runtime_spawn import SpawnedContainer
from server.server_tools.runtimes.runtimes import check_runtime_spec
from server.settings.config import HearthSettings

logger = logging.getLogger("hearth")
Closer = Callable[[], None]


class ToolSetupFailed(Exception):
    """The tools' settings are wrong; the message is the console's line."""


def tool_box_for(settings: HearthSettings) -> ToolBox | None:
    """The tools to serve, or None when --tools and the MCP settings are all unset."""
    if not settings.server_tools_wanted():
        return None
    _refuse_an_open_door(settings)
    builtin, configs = _read_settings(settings)
    runtime, closers = _runtime(settings.tools_runtime)
    mcp_tools, close_mcp = start_mcp_tools(configs, logger.warning) if configs else ([], None)
    if close_mcp is not None:
        closers.append(close_mcp)
    box = ToolBox.of(builtin, closers, default_runtime=runtime)
    for tool in mcp_tools:
        if not box.add(tool):
            logger.warning("hearth: MCP tool %s has the name of another tool; skipped", tool.name)
    logger.warning(
        "hearth: /tools is on (%d tools, experimental): they act on this machine for anyone "
        "who can reach this server.",
        len(box.tools),
    )
    return box


def _refuse_an_open_door(settings: HearthSettings) -> None:
    """Tools on an address others reach, with no key: anyone there could run commands here.
    llama-server only warns; Hearth asks for a key first."""
    exposed = [host for host in settings.listen_hosts if not is_loopback(host)]
    keyed = settings.password or settings.api_key or settings.api_key_file
    if exposed and not keyed:
        raise ToolSetupFailed(
            f"server tools on {', '.join(exposed)} (reachable from other machines) need an API "
            "key: add --api-key KEY (or --password), or listen on 127.0.0.1 only."
        )


def _read_settings(settings: HearthSettings) -> tuple[list[ServerTool], list[McpServerConfig]]:
    try:
        names = settings.server_tool_names()
        builtin = builtin_tools(names) if names else []  # the runtime is checked by _runtime
        configs = mcp_configs_from(settings.mcp_servers_json, settings.mcp_servers_config)
    except ValueError as exc:  # McpConfigError too, an unreadable file included
        raise ToolSetupFailed(str(exc)) from None
    return builtin, configs


def _runtime(spec: str | None) -> tuple[Callable[[], str | None], list[Closer]]:
    """Where calls run by default: the spec as given, or a container started now from an
    image (`docker:IMAGE`), stopped with the server."""
    try:
        image = check_runtime_spec(spec)
        if image is None:
            return (lambda: spec), []
        logger.info("hearth: starting the tools' container (%s:%s)", image.engine, image.name)
        container = SpawnedContainer.start(image)
    except (ToolRefused, OSError) as exc:
        raise ToolSetupFailed(f"--tools-runtime: {exc}") from None
    return container.spec, [container.close]
