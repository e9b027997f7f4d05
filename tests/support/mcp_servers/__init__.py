"""MCP servers for the tests of server/server_tools/mcp_*.py: `stdio_server.py` and the
configurations that run it (`stdio_config`), plus small waits on processes."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from server.server_tools.mcp.mcp_config import DEFAULT_TIMEOUT_MS, McpServerConfig

STDIO_SERVER = Path(__file__).with_name("stdio_server.py")


def stdio_config(name: str, *options: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> McpServerConfig:
    """The test server under `name`, run by this interpreter with `options`."""
    return McpServerConfig(
        name=name,
        command=sys.executable,
        args=(str(STDIO_SERVER), *options),
        timeout_ms=timeout_ms,
    )


def wait_until(condition: Callable[[], bool], within_s: float = 10.0) -> bool:
    """Whether `condition` came true within `within_s` (looked at every 10 ms)."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def process_gone(pid: int) -> bool:
    """The process has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return status.rsplit(")", 1)[1].split()[0] in ("Z", "X")
