"""A small MCP server over stdio for the tests of server/server_tools/mcp_*.py.

Run as `python stdio_server.py [options]`. It speaks newline-delimited JSON-RPC on stdin and
stdout, one request at a time, and offers these tools:

- echo(message) → "echo: <message>"      - add(a, b) → their sum
- fail_once → a JSON-RPC error the first time in this process, "ok" after
- sleep(seconds) → "slept", after sleeping (touching --started first, when given)
- crash → answers "crashing <pid>", then exits with code 3
- die → says "fatal: dying" on stderr and exits with code 4, answering nothing
- pid → this process's id                  - broken → an `isError` result
- parts → two text parts with an image part between them

Options shape how it misbehaves:
  --notify before   a progress notification, flushed on its own, before each tool's answer
  --notify burst    the notification and the answer in one write
  --garbage         a line that is not JSON and a JSON array before each tool's answer
  --ping            before each tool's answer, ping the client and wait for its reply
  --stderr-kib N    write N KiB to stderr before reading anything (more than a pipe holds)
  --grandchild F    start a child that keeps this process's stdio open; its pid goes to F
  --started F       the sleep tool writes F when it starts sleeping
  --no-tools        tools/list answers no tools
  --page-size N     tools/list answers N tools a page, with nextCursor
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TOOLS = [
    {
        "name": "echo",
        "description": "Echo back the input message",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
    {
        "name": "add",
        "description": "Add two numbers",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        },
    },
    {"name": "fail_once", "description": "Fails the first time", "inputSchema": {"type": "object"}},
    {"name": "sleep", "description": "Sleeps", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Answers, then exits"},
    {"name": "die", "description": "Exits without answering"},
    {"name": "pid", "description": "This server's process id"},
    {"name": "broken", "description": "Always an isError result"},
    {"name": "parts", "description": "Several content parts"},
]

options: argparse.Namespace
state = {"failed_once": False}


def write_lines(*messages: Any) -> None:
    """Everything in one write, as a server that does not flush between lines would."""
    data = "".join(m if isinstance(m, str) else json.dumps(m) + "\n" for m in messages)
    os.write(1, data.encode())


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's result, or {"error": ...} for a JSON-RPC error."""
    if name == "echo":
        return text(f"echo: {arguments.get('message', '')}")
    if name == "add":
        return text(str(arguments.get("a", 0) + arguments.get("b", 0)))
    if name == "fail_once" and not state["failed_once"]:
        state["failed_once"] = True
        return {"error": {"code": -32000, "message": "transient error"}}
    if name == "fail_once":
        return text("ok")
    if name == "sleep":
        if options.started:
            Path(options.started).write_text(str(os.getpid()))
        time.sleep(float(arguments.get("seconds", 1)))
        return text("slept")
    if name == "crash":
        return text(f"crashing {os.getpid()}")
    if name == "die":
        os.write(2, b"fatal: dying\n")
        os._exit(4)
    if name == "pid":
        return text(str(os.getpid()))
    if name == "broken":
        return {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    if name == "parts":
        image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        return {
            "content": [{"type": "text", "text": "one"}, image, {"type": "text", "text": "two"}]
        }
    return {"error": {"code": -32602, "message": f"Unknown tool: {name}"}}


def list_tools(params: dict[str, Any]) -> dict[str, Any]:
    tools = [] if options.no_tools else TOOLS
    if not options.page_size:
        return {"tools": tools}
    start = int(params.get("cursor") or 0)
    page: dict[str, Any] = {"tools": tools[start : start + options.page_size]}
    if start + options.page_size < len(tools):
        page["nextCursor"] = str(start + options.page_size)
    return page


def ping_client() -> None:
    write_lines({"jsonrpc": "2.0", "id": "server-ping", "method": "ping"})
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if message.get("id") == "server-ping" and "result" in message:
            return


def answer_tool_call(ident: Any, params: dict[str, Any]) -> None:
    if options.ping:
        ping_client()
    name = params.get("name", "")
    result = call_tool(name, params.get("arguments") or {})
    reply = {"jsonrpc": "2.0", "id": ident}
    reply.update(result if "error" in result else {"result": result})
    before: list[Any] = []
    if options.garbage:
        before += ["this is not JSON\n", [1, 2, 3]]
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    if options.notify == "before":
        write_lines(*before, progress)
        write_lines(reply)
    elif options.notify == "burst":
        write_lines(*before, progress, reply)
    else:
        write_lines(*before, reply)
    if name == "crash":
        os._exit(3)


def answer(message: dict[str, Any]) -> None:
    ident, method = message.get("id"), message.get("method")
    params = message.get("params") or {}
    if ident is None:
        return  # a notification: nothing to answer
    if method == "initialize":
        info = {"name": "hearth-test", "version": "1.0"}
        result = {
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": info,
        }
        write_lines({"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        write_lines({"jsonrpc": "2.0", "id": ident, "result": list_tools(params)})
    elif method == "tools/call":
        answer_tool_call(ident, params)
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        write_lines({"jsonrpc": "2.0", "id": ident, "error": error})


def main() -> None:
    global options
    parser = argparse.ArgumentParser()
    parser.add_argument("--notify", choices=["none", "before", "burst"], default="none")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--ping", action="store_true")
    parser.add_argument("--stderr-kib", type=int, default=0)
    parser.add_argument("--grandchild")
    parser.add_argument("--started")
    parser.add_argument("--no-tools", action="store_true")
    parser.add_argument("--page-size", type=int, default=0)
    options = parser.parse_args()
    if options.grandchild:
        # Inherits stdin, stdout and stderr: the pipes stay open after this process is gone.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        Path(options.grandchild).write_text(str(child.pid))
    for _ in range(options.stderr_kib):
        os.write(2, b"x" * 1023 + b"\n")
    for line in sys.stdin.buffer:
        if line.strip():
            answer(json.loads(line))


if __name__ == "__main__":
    main()
