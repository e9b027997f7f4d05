"""The built-in tools `--tools` turns on: all of them (`all`) or those it names.

They act on the machine the server runs on (or on the `--tools-runtime` container or ssh host):
whoever can reach the server can read and write files and run commands there. That is why
they are off unless asked for, one by one or all together.
"""

from __future__ import annotations

from server.server_tools.builtin.builtin_files import EditFile, ReadFile, WriteFile
from server.server_tools.builtin.file_search import FileGlobSearch, GrepSearch
from server.server_tools.builtin.shell import ExecShellCommand, GetInfo
from server.server_tools.registry import ServerTool, ToolRefused
from server.server_tools.runtimes.runtimes import check_runtime_spec
from server.server_tools.tool_base import BuiltinTool

# llama-server's order, which is the order of GET /tools
BUILTIN_TOOLS: tuple[type[BuiltinTool], ...] = (
    ReadFile,
    FileGlobSearch,
    GrepSearch,
    ExecShellCommand,
    WriteFile,
    EditFile,
    GetInfo,
)
BUILTIN_TOOL_NAMES = tuple(tool.name for tool in BUILTIN_TOOLS)


def builtin_tools(enabled: list[str], runtime: str | None = None) -> list[ServerTool]:
    """The tools `enabled` names ("all" for every one).

    Raises ValueError for a name that is no tool, or for a `runtime` spec (--tools-runtime,
    when given) that is not valid. Each call says where it runs (ToolCall.runtime: the
    ToolBox fills in --tools-runtime, or the running container a `docker:<image>` started).
    """
    wanted = {name.strip() for name in enabled if name.strip()}
    unknown = sorted(wanted - {"all", *BUILTIN_TOOL_NAMES})
    if unknown:
        raise ValueError(
            f"unknown tool {', '.join(repr(name) for name in unknown)}. available tools: "
            f"{', '.join(BUILTIN_TOOL_NAMES)} (or all)"
        )
    try:
        check_runtime_spec(runtime)
    except ToolRefused as err:
        raise ValueError(str(err)) from err
    return [tool() for tool in BUILTIN_TOOLS if "all" in wanted or tool.name in wanted]
