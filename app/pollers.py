"""The launcher's pollers: the running server's JSON endpoints, asked about twice a second
without blocking the GUI thread. PerfPoller reads the anonymous /api/extra/perf; LivePoller
the admin-only /api/admin/requests with the launcher's token, and posts aborts. They emit
what they read; the main window hands it to the running view (app.run_view)."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QObject, QTimer, QUrl, Signal
from PySide6.QtNetwork import QNetworkAccessManager, QNetworkReply, QNetworkRequest

POLL_INTERVAL_MS = 500


class JsonPoller(QObject):
    """Polls one JSON endpoint of the server about twice a second without blocking the GUI
    thread (with the launcher's token as Bearer, when given)."""

    updated = Signal(dict)
    path = ""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._network = QNetworkAccessManager(self)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_INTERVAL_MS)
        self._timer.timeout.connect(self._poll)
        self._base_url = ""
        self._token = b""
        self._in_flight = False

    def start(self, base_url: str, token: str = "") -> None:
        self._base_url = base_url
        self._token = token.encode()
        self._timer.start()
        self._poll()

    def stop(self) -> None:
        self._timer.stop()

    def accepts(self, data: dict[str, Any]) -> bool:
        """Whether an answer has the endpoint's shape (an older server may answer otherwise)."""
        return True

    def _request(self, path: str) -> QNetworkRequest:
        request = QNetworkRequest(QUrl(self._base_url + path))
        if self._token:
            request.setRawHeader(b"Authorization", b"Bearer " + self._token)
        request.setTransferTimeout(2000)
        return request

    def _poll(self) -> None:
        if self._in_flight:
            return  # a slow answer must not pile up requests
        self._in_flight = True
        reply = self._network.get(self._request(self.path))
        reply.finished.connect(lambda: self._answered(reply))

    def _answered(self, reply: QNetworkReply) -> None:
        self._in_flight = False
        try:
            if reply.error() != QNetworkReply.NetworkError.NoError:
                return  # not up yet, or gone: the process's own signals say which
            try:
                data = json.loads(bytes(reply.readAll().data()))
            except ValueError:
                return
            if isinstance(data, dict) and self.accepts(data):
                self.updated.emit(data)
        finally:
            reply.deleteLater()


class PerfPoller(JsonPoller):
    """GET /api/extra/perf: the anonymous figures (queue, speeds, model, placement, prompt
    cache)."""

    path = "/api/extra/perf"


class LivePoller(JsonPoller):
    """The admin-only GET /api/admin/requests (Bearer: the launcher's token), and aborts
    posted to /api/admin/abort."""

    path = "/api/admin/requests"
    abort_answered = Signal(str, bool)  # request id, whether the server found it open

    def accepts(self, data: dict[str, Any]) -> bool:
        return isinstance(data.get("requests"), list)

    def abort(self, request_id: str) -> None:
        body = json.dumps({"id": request_id}).encode()
        request = self._request("/api/admin/abort")
        request.setHeader(QNetworkRequest.KnownHeaders.ContentTypeHeader, "application/json")
        reply = self._network.post(request, body)
        reply.finished.connect(lambda: self._abort_answered(reply, request_id))

    def _abort_answered(self, reply: QNetworkReply, request_id: str) -> None:
        found = reply.error() == QNetworkReply.NetworkError.NoError
        reply.deleteLater()
        self.abort_answered.emit(request_id, found)
