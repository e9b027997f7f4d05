"""Small network facts shared by the server and the launcher (import-light: no Qt, no llama)."""

from __future__ import annotations

import socket


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (a live listener, not TIME_WAIT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # Bind as uvicorn does (SO_REUSEADDR), so only a real listener makes it fail.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def url_host(host: str) -> str:
    """The host to put in a URL for a server listening on `host`."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
