"""Small network facts shared by the server and the launcher (import-light: no Qt, no llama)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlparse


def is_loopback(host: str) -> bool:
    """Whether `host` is this computer only (localhost, 127.x, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


def reachable(url: str, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to `url`'s host and port opens within `timeout` seconds (a
    quick answer before an HTTP client's own retries, which take many seconds offline)."""
    parsed = urlparse(url)
    if parsed.hostname is None:
        return False
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout):
            return True
    except OSError:  # refused, unreachable, no DNS, timed out
        return False


def url_host(host: str) -> str:
    """The host to put in a URL for a server listening on `host`."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
