"""uvicorn with Hearth's shutdown order: first end every open request, then close connections.

uvicorn alone stops listening, waits a while for open responses and then cuts them, so a
stream being generated simply stopped mid-reply (no finish reason, no `[DONE]`). Here the
scheduler first ends every job with a shutdown outcome: each stream sends its dialect's ending
and each waiting non-streamed request gets the 503 busy answer, and only then does uvicorn
close the connections (which are idle by then).
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from fastapi import FastAPI

from server.core.scheduling.scheduler import Scheduler
from server.dialects.streams.streaming import SHUTDOWN_GRACE_SECONDS
from server.process.tls import TlsFiles
from server.server_tools.registry import ToolBox

# How long open requests get to finish after shutdown began: running ones stop within a token.
DRAIN_SECONDS = 1.5
# uvicorn's own wait for open connections before it cancels them (after the drain): longer
# than the grace sse-starlette gives a stream to send its ending.
GRACEFUL_SECONDS = 3
assert GRACEFUL_SECONDS > SHUTDOWN_GRACE_SECONDS
_DRAIN_POLL_SECONDS = 0.02


class HearthServer(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, scheduler: Scheduler, tool_box: ToolBox | None = None
    ) -> None:
        super().__init__(config)
        self._scheduler = scheduler
        self._tool_box = tool_box

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._scheduler.shut_down()
        if self._tool_box is not None:  # ends tool calls in flight (an MCP server's slow call)
            self._tool_box.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_SECONDS
        while not self._scheduler.idle() and loop.time() < deadline:
            await asyncio.sleep(_DRAIN_POLL_SECONDS)
        await super().shutdown(sockets)


def listening_sockets(hosts: list[str], port: int) -> list[socket.socket] | None:
    """Sockets bound to each of several addresses (llama-server's `--host a,b`), for
    `HearthServer.run(sockets=...)`; None for one address, which uvicorn binds itself. With
    several, `::` binds IPv6 alone, as llama-server says, so it may sit beside `0.0.0.0`."""
    if len(hosts) < 2:
        return None
    bound: list[socket.socket] = []
    try:
        for host in hosts:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((host, port))
    except OSError:
        for sock in bound:
            sock.close()
        raise
    return bound


def http_server(
    app: FastAPI,
    host: str,
    port: int,
    log_level: str = "warning",
    tls: TlsFiles | None = None,
) -> HearthServer:
    """The server for an app made by `create_app` (its scheduler is on `app.state`); HTTPS with
    `tls`, files server/process/tls.py has checked."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
        # uvicorn would believe X-Forwarded-For from any loopback peer by itself, so any
        # process on this machine could name itself another client: only --trustedproxies
        # decides (server/dialects/edge/client_address.py).
        proxy_headers=False,
        ssl_certfile=None if tls is None else tls.certificate,
        ssl_keyfile=None if tls is None else tls.key,
    )
    scheduler: Scheduler = app.state.scheduler
    return HearthServer(config, scheduler, app.state.tool_box)
