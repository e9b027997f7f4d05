"""exec_shell_command and get_info: run a shell command where the call's runtime is, and say
what that runtime is.

The command runs as `sh -c <command>` in the call's cwd, stdout and stderr together; its answer
(or, streamed, its last piece) ends with "[exit code: N]". It is ended at its timeout (10 s
unless asked, 60 s at most), and at once when the client leaves (`should_stop`): the whole
process group goes, not only the shell. Streamed, the output goes to the client as it comes.
"""

from __future__ import annotations

import os

from server.server_tools.registry import Emit, JsonObject, ToolCall, ToolError
from server.server_tools.runtimes.process_run import ExecResult
from server.server_tools.runtimes.runtime_io import Runtime
from server.server_tools.tool_base import BuiltinTool, int_param, prop, reason, text_param

EXEC_DEFAULT_TIMEOUT_S = 10
EXEC_MAX_TIMEOUT_S = 60
EXEC_MAX_OUTPUT = 16 * 1024
INFO_TIMEOUT_S = 5
INFO_MAX_OUTPUT = 4096


class ExecShellCommand(BuiltinTool):
    name = "exec_shell_command"
    display_name = "Execute shell command"
    permission_write = True
    support_stream = True
    description = (
        "Run a shell command (sh -c) and answer its output, stdout and stderr together, "
        "followed by its exit code."
    )
    parameters = {
        "command": prop("string", "The shell command to run"),
        "timeout": prop("integer", f"Seconds before it is stopped (default "
                        f"{EXEC_DEFAULT_TIMEOUT_S}, at most {EXEC_MAX_TIMEOUT_S})"),
        "max_output_size": prop("integer", f"At most this many bytes of output (default and "
                                f"most: {EXEC_MAX_OUTPUT})"),
    }  # fmt: skip
    required = ("command",)

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        command = text_param(call.params, "command")
        timeout = int_param(call.params, "timeout", EXEC_DEFAULT_TIMEOUT_S)
        timeout = min(max(timeout, 1), EXEC_MAX_TIMEOUT_S)
        max_output = int_param(call.params, "max_output_size", EXEC_MAX_OUTPUT)
        max_output = min(max(max_output, 0), EXEC_MAX_OUTPUT)
        runtime = self.runtime(call)
        try:
            result = runtime.run(
                ["sh", "-c", command],
                max_output=max_output,
                timeout=timeout,
                on_chunk=emit,
                should_stop=call.should_stop,
            )
        except OSError as err:
            where = f" in {runtime.cwd}" if runtime.cwd else ""
            raise ToolError(f"failed to run the command{where}: {reason(err)}") from err
        if emit is not None:
            if not result.stopped:  # nobody is left to read it
                emit(_ending(result))
            return {}
        return {"plain_text_response": result.text() + _ending(result)}


def _ending(result: ExecResult) -> str:
    """What follows the output: a note when it was cut, then the exit code."""
    ending = "\n[output truncated]" if result.truncated else ""
    ending += f"\n[exit code: {result.exit_code}]"
    if result.timed_out:
        ending += " [exit due to timed out]"
    return ending


class GetInfo(BuiltinTool):
    name = "get_info"
    display_name = "Get Runtime Info"
    description = (
        "Tell the operating system (its name and version) and the current working directory "
        "where the tools run."
    )
    parameters = {}

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        runtime = self.runtime(call)
        return {"os": _answer(runtime, ["uname", "-a"]), "cwd": _cwd(runtime)}


def _answer(runtime: Runtime, argv: list[str]) -> str:
    """What a small command printed, or "unknown" when it failed."""
    try:
        result = runtime.run(argv, max_output=INFO_MAX_OUTPUT, timeout=INFO_TIMEOUT_S)
    except OSError:
        return "unknown"
    # a failure's message is not an OS name or a folder
    return result.text().strip() if result.ok else "unknown"


def _cwd(runtime: Runtime) -> str:
    if runtime.cwd:
        return runtime.cwd
    return os.getcwd() if runtime.is_host else _answer(runtime, ["pwd"])
