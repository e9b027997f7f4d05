"""One MCP server over stdio: its process, newline-delimited JSON-RPC both ways, and its end.

MCP's stdio transport (protocol 2024-11-05, the one llama-server speaks): the client starts the
server as a child process and writes one JSON-RPC message per line to its stdin; the server
answers one per line on its stdout and logs on its stderr. A session opens with `initialize`
and the `notifications/initialized` notification; then requests are answered by id, in any
order, with notifications (progress, logging) mixed in that answer nothing.

Why it is built this way:
- The server's output is read by `mcp_pipes.OutputPump`, never with a blocking read to EOF (a
  grandchild the server left running can hold the pipes open), and stderr always (a full
  pipe would stop the server); its tail goes into the errors.
- Replies are matched to requests by id through a table of waiting calls, so calls from many
  threads share one process, a late reply to a call that timed out is dropped, and a
  notification is never taken for an answer (even when both arrive in one read).
- The server runs in a session (and process group) of its own; closing signals the whole
  group (SIGTERM, then SIGKILL after a short grace), so what it started ends with it.
POSIX only (`select` on pipes, process groups).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from server.server_tools.mcp.mcp_config import McpServerConfig
from server.server_tools.mcp.mcp_pipes import OutputPump, PipeClosed, PipeStalled, write_all

PROTOCOL_VERSION = "2024-11-05"
CLIENT_INFO = {"name": "hearth", "version": "1.0"}
WAIT_SLICE_S = 0.05  # how often a waiting call looks at its should_stop
PUMP_JOIN_S = 0.5
MAX_TOOL_PAGES = 100

logger = logging.getLogger("hearth")
JsonObject = dict[str, Any]
StopCheck = Callable[[], bool]


class McpError(Exception):
    """A request got no usable answer; the message says why, in words the model can read."""


class McpSpawnError(McpError):
    """The server's program could not be started."""


class McpNotSent(McpError):
    """The request never reached the server (it had already ended): safe to send again."""


@dataclass
class _Waiter:
    done: threading.Event = field(default_factory=threading.Event)
    reply: JsonObject | None = None
    failure: str | None = None


class StdioSession:
    """One running MCP server process and the JSON-RPC session with it."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.name = config.name
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # the waiters, the next id and why the session ended
        self._write_lock = threading.Lock()  # one message at a time on the server's stdin
        self._waiters: dict[int, _Waiter] = {}
        self._next_id = 1
        self._ended: str | None = None
        self._closing = threading.Event()
        self._finished = False
        self._pump: OutputPump | None = None
        self._stderr_tail: deque[str] = deque(maxlen=20)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        process = self._process
        return self._ended is None and process is not None and process.poll() is None

    @property
    def end_reason(self) -> str:
        """Why it ended (its exit code, when the pump has not said yet)."""
        return self._ended or self._exit_reason()

    def start(self) -> None:
        """Start the process and its pump. Raises McpSpawnError."""
        config = self.config
        env = {**os.environ, **dict(config.env)} if config.env else None
        try:
            process = subprocess.Popen(
                [config.command, *config.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=config.cwd,
                env=env,
                start_new_session=True,  # its own process group, and no terminal's Ctrl-C
            )
        except (OSError, ValueError) as exc:
            raise McpSpawnError(
                f"cannot start MCP server {self.name!r} ({config.command}): {exc}"
            ) from exc
        self._process = process
        assert process.stdin and process.stdout and process.stderr
        for pipe in (process.stdin, process.stdout, process.stderr):
            os.set_blocking(pipe.fileno(), False)
        self._pump = OutputPump(
            self.name,
            (process.stdout.fileno(), process.stderr.fileno()),
            (self._on_message, self._on_stderr),
            still_running=lambda: process.poll() is None,
            on_end=lambda: self._end(self._exit_reason()),
        )
        self._pump.start()

    def initialize(self, deadline: float, should_stop: StopCheck) -> JsonObject:
        """The handshake: `initialize`, then `notifications/initialized`. Raises McpError."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": CLIENT_INFO,
        }
        result = self.request("initialize", params, deadline, should_stop)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"}, deadline)
        return result

    def list_tools(self, deadline: float, should_stop: StopCheck) -> list[JsonObject]:
        """Every tool the server offers (following `nextCursor` pages). Raises McpError."""
        tools: list[JsonObject] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor else {}
            result = self.request("tools/list", params, deadline, should_stop)
            page = result.get("tools")
            if isinstance(page, list):
                tools.extend(tool for tool in page if isinstance(tool, dict))
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        return tools

    def request(
        self, method: str, params: JsonObject, deadline: float, should_stop: StopCheck
    ) -> JsonObject:
        """The `result` of one request. Raises McpError (McpNotSent when it never left)."""
        ident, waiter = self._enlist()
        try:
            message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
            self._send(message, deadline)
            self._wait(waiter, method, deadline, should_stop)
        finally:
            with self._lock:
                self._waiters.pop(ident, None)
        return self._result_of(waiter.reply or {})

    def close(self, grace_s: float = 0.05) -> None:
        """Stop it: calls in flight end now; the process group has `grace_s` before SIGKILL."""
        self.begin_close()
        self.finish_close(time.monotonic() + grace_s)

    def begin_close(self) -> None:
        """End the waiting calls, wake the pump and ask the process group to stop (SIGTERM)."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._end(f"MCP server {self.name!r} was stopped")
        if self._pump is not None:
            self._pump.stop()
        self._signal_group(signal.SIGTERM)

    def finish_close(self, deadline: float) -> None:
        """After begin_close: let the process go until `deadline`, then kill what is left."""
        if self._finished:
            return
        self._finished = True
        process = self._process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            self._signal_group(signal.SIGKILL)  # the leader's grandchildren too
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=PUMP_JOIN_S)  # reaped, not left a zombie
        pump_done = self._pump is None or self._pump.join(PUMP_JOIN_S)
        self._release_pipes(pump_done)

    # The request side.

    def _enlist(self) -> tuple[int, _Waiter]:
        with self._lock:
            if self._ended is not None:
                raise McpNotSent(self._ended)
            ident = self._next_id
            self._next_id += 1
            waiter = _Waiter()
            self._waiters[ident] = waiter
            return ident, waiter

    def _wait(self, waiter: _Waiter, method: str, deadline: float, should_stop: StopCheck) -> None:
        while not waiter.done.wait(min(WAIT_SLICE_S, max(0.0, deadline - time.monotonic()))):
            if should_stop():
                raise McpError(f"the call to MCP server {self.name!r} was cancelled")
            if time.monotonic() >= deadline:
                raise McpError(
                    f"MCP server {self.name!r} did not answer {method} in time "
                    f"(timeout_ms {self.config.timeout_ms})"
                )
        if waiter.failure is not None:
            raise McpError(waiter.failure)

    def _result_of(self, reply: JsonObject) -> JsonObject:
        error = reply.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            raise McpError(message if isinstance(message, str) and message else "unknown error")
        result = reply.get("result")
        if not isinstance(result, dict):
            raise McpError(f"invalid response from MCP server {self.name!r}")
        return result

    def _send(self, message: JsonObject, deadline: float) -> None:
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        process = self._process
        assert process is not None and process.stdin is not None
        if not self._write_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise McpError(f"MCP server {self.name!r} is not reading its input")
        try:
            if self._closing.is_set():  # its stdin may be closed already
                raise PipeClosed("stopped")
            write_all(process.stdin.fileno(), data, deadline, self._closing.is_set)
        except PipeClosed as exc:  # it has gone (or is being stopped): nothing was read
            raise McpNotSent(self._ended or f"MCP server {self.name!r} has ended") from exc
        except PipeStalled as exc:  # part of a line may sit in the pipe: the session is over
            self._end(f"MCP server {self.name!r} stopped reading its input")
            raise McpError(self.end_reason) from exc
        finally:
            self._write_lock.release()

    # What the server says, from the pump's thread.

    def _on_message(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            logger.debug("MCP server %s wrote a line that is not JSON; ignored", self.name)
            return
        if not isinstance(message, dict):
            return
        ident = message.get("id")
        if "method" in message:  # from the server: a notification, or a request of its own
            if ident is not None:
                self._answer_server_request(ident, message.get("method"))
            return
        if type(ident) is not int:
            return
        with self._lock:
            waiter = self._waiters.pop(ident, None)
        if waiter is not None:  # None: a late reply to a call that has given up
            waiter.reply = message
            waiter.done.set()

    def _answer_server_request(self, ident: Any, method: Any) -> None:
        # We offer no client features (sampling, roots); a ping is answered so it is not left
        # waiting. Sent from a thread of its own: the pump must never wait on a full stdin.
        reply: JsonObject = {"jsonrpc": "2.0", "id": ident}
        if method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601, "message": f"method not supported: {method}"}
        threading.Thread(target=self._send_quietly, args=(reply,), daemon=True).start()

    def _send_quietly(self, message: JsonObject) -> None:
        with contextlib.suppress(McpError):
            self._send(message, time.monotonic() + 5.0)

    def _on_stderr(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace")
        self._stderr_tail.append(text[:500])
        logger.debug("MCP server %s: %s", self.name, text)

    # The end.

    def _end(self, reason: str) -> None:
        """No more replies will come: every waiting call fails with `reason`."""
        with self._lock:
            if self._ended is not None:
                return
            self._ended = reason
            waiters = list(self._waiters.values())
            self._waiters.clear()
        for waiter in waiters:
            waiter.failure = reason
            waiter.done.set()

    def _exit_reason(self) -> str:
        code = None
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._process.wait(timeout=0.05)
        if code is None:
            how = "closed its output"
        elif code >= 0:
            how = f"exited with code {code}"
        else:
            how = f"was killed by signal {-code}"
        tail = f"; its stderr ended: {' | '.join(list(self._stderr_tail)[-3:])}"
        return f"MCP server {self.name!r} {how}{tail if self._stderr_tail else ''}"

    def _signal_group(self, signum: int) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signum)

    def _release_pipes(self, pump_done: bool) -> None:
        process = self._process
        if process is None:
            return
        if self._write_lock.acquire(timeout=PUMP_JOIN_S):
            try:
                with contextlib.suppress(OSError):
                    if process.stdin is not None:
                        process.stdin.close()
            finally:
                self._write_lock.release()
        if pump_done:  # never close an fd the pump may still be selecting on
            for pipe in (process.stdout, process.stderr):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()
