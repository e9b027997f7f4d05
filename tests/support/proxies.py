"""Two small TCP proxies a test puts between a browser and Hearth, to play a bad network.

- `CuttingProxy` forwards bytes as they come; `cut()` closes every connection open through it
  at once (a dropped Wi-Fi), and new connections are served again afterwards.
- `BufferingProxy` answers each request only once the upstream response is complete, in one
  lump, as a proxy that buffers whole responses does (one request per connection; it asks the
  upstream to close after answering, so "complete" is the upstream's end of stream).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from tests.support.servers import RunningServer


class _Proxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    def cut(self) -> None:
        """Close every connection open now, both ends."""
        with self._lock:
            open_now, self._sockets = self._sockets, set()
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._track(client)
            self._track(upstream)
            threading.Thread(target=self._serve, args=(client, upstream), daemon=True).start()

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        raise NotImplementedError


def _pump(source: socket.socket, target: socket.socket, done: Callable[[], None]) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        done()


class CuttingProxy(_Proxy):
    def __init__(self, upstream_port: int) -> None:
        super().__init__(upstream_port)
        self.connections = 0

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        self.connections += 1

        def close_both() -> None:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=_pump, args=(upstream, client, close_both), daemon=True).start()
        _pump(client, upstream, close_both)


class BufferingProxy(_Proxy):
    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            request = _read_request(client)
            if request is None:
                return
            upstream.sendall(request)
            answer = bytearray()
            while chunk := upstream.recv(65536):
                answer += chunk
            client.sendall(bytes(answer))  # everything at once, when the upstream is done
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()


def _read_request(client: socket.socket) -> bytes | None:
    """One HTTP/1.1 request, its Connection header made `close`."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if not line.lower().startswith(b"connection:")]
    sizes = [line.split(b":", 1)[1] for line in kept if line.lower().startswith(b"content-length:")]
    length = int(sizes[0]) if sizes else 0
    while len(body) < length:
        chunk = client.recv(65536)
        if not chunk:
            return None
        body += chunk
    return b"\r\n".join([lines[0], *kept, b"Connection: close"]) + b"\r\n\r\n" + body


Proxy = TypeVar("Proxy", bound=_Proxy)


@contextlib.contextmanager
def in_front_of(server: RunningServer, kind: type[Proxy]) -> Iterator[Proxy]:
    """A proxy of `kind` to `server`, closed (every connection with it) afterwards."""
    proxy = kind(int(server.base_url.rsplit(":", 1)[1]))
    try:
        yield proxy
    finally:
        proxy.close()
