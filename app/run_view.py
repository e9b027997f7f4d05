"""The running view: live log, live queue (polled from /api/extra/perf), tokens/s plot, and
the Stop / Restart / Open Chat buttons. It shows what it is told; it owns no process."""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

from PySide6.QtCore import QObject, QPointF, QTimer, QUrl, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtNetwork import QNetworkAccessManager, QNetworkReply, QNetworkRequest
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

LOG_MAX_LINES = 5000
LOG_FLUSH_MS = 50
POLL_INTERVAL_MS = 500
PLOT_WINDOW_SECONDS = 300


class LogView(QPlainTextEdit):
    """Bounded, read-only log that follows the tail only while scrolled to the bottom.

    Lines are appended in batches on a short timer, so a fast log costs one repaint per batch
    instead of one per line.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(LOG_MAX_LINES)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self._pending: list[str] = []
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(LOG_FLUSH_MS)
        self._flush_timer.timeout.connect(self.flush)

    def append_lines(self, lines: list[str]) -> None:
        self._pending.extend(lines)
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def flush(self) -> None:
        if not self._pending:
            return
        bar = self.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 2
        kept = bar.value()
        self.appendPlainText("\n".join(self._pending[-LOG_MAX_LINES:]))
        self._pending.clear()
        bar.setValue(bar.maximum() if at_bottom else kept)

    def text_lines(self) -> list[str]:
        self.flush()
        return self.toPlainText().splitlines()


class ThroughputPlot(QWidget):
    """Tokens/s of each finished generation over the last few minutes, as a line."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(80)
        self.points: deque[tuple[float, float]] = deque(maxlen=600)

    def add(self, tokens_per_second: float) -> None:
        self.points.append((time.monotonic(), tokens_per_second))
        self.update()

    def paintEvent(self, _event: object) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("#fafafa"))
        painter.setPen(QColor("#888"))
        painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        now = time.monotonic()
        recent = [(t, v) for t, v in self.points if now - t <= PLOT_WINDOW_SECONDS]
        top = max((v for _, v in recent), default=0.0) or 1.0
        painter.drawText(6, 14, f"tokens/s (last {PLOT_WINDOW_SECONDS // 60} min), max {top:.0f}")
        if not recent:
            return
        width, height = self.width() - 12, self.height() - 24

        def point(t: float, v: float) -> QPointF:
            x = 6 + width * (1 - (now - t) / PLOT_WINDOW_SECONDS)
            return QPointF(x, 20 + height * (1 - v / top))

        painter.setPen(QPen(QColor("#1a73e8"), 2))
        previous = None
        for t, v in recent:
            current = point(t, v)
            painter.drawEllipse(current, 2, 2)
            if previous is not None:
                painter.drawLine(previous, current)
            previous = current


class PerfPoller(QObject):
    """Polls GET /api/extra/perf about twice a second without blocking the GUI thread."""

    updated = Signal(dict)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._network = QNetworkAccessManager(self)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_INTERVAL_MS)
        self._timer.timeout.connect(self._poll)
        self._url = QUrl()
        self._in_flight = False

    def start(self, base_url: str) -> None:
        self._url = QUrl(f"{base_url}/api/extra/perf")
        self._timer.start()
        self._poll()

    def stop(self) -> None:
        self._timer.stop()

    def _poll(self) -> None:
        if self._in_flight:
            return  # a slow answer must not pile up requests
        self._in_flight = True
        request = QNetworkRequest(self._url)
        request.setTransferTimeout(2000)
        reply = self._network.get(request)
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
            if isinstance(data, dict):
                self.updated.emit(data)
        finally:
            reply.deleteLater()


class RunView(QWidget):
    """What the running server is doing; emits the user's requests as signals."""

    stop_requested = Signal()
    restart_requested = Signal()
    open_chat_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = QLabel("Not running")
        self.state.setStyleSheet("font-weight: bold;")
        self.state.setWordWrap(True)  # a model being loaded is named here, and names are long
        self.model = QLabel("Model: -")
        self.model.setWordWrap(True)
        self.waiting = QLabel("-")
        self.total = QLabel("-")
        self.prompt_speed = QLabel("-")
        self.generation_speed = QLabel("-")
        self.placement = QLabel("Runs on: -")
        self.placement.setWordWrap(True)
        figures = QGridLayout()
        for row, (caption, value) in enumerate(
            [
                ("Waiting requests:", self.waiting),
                ("Generations:", self.total),
                ("Last prompt speed:", self.prompt_speed),
                ("Last generation speed:", self.generation_speed),
            ]
        ):
            figures.addWidget(QLabel(caption), row, 0)
            figures.addWidget(value, row, 1)
        self.plot = ThroughputPlot()
        self.log = LogView()
        self.stop_button = QPushButton("Stop")
        self.restart_button = QPushButton("Restart")
        self.open_chat_button = QPushButton("Open Chat")
        self.stop_button.clicked.connect(self.stop_requested)
        self.restart_button.clicked.connect(self.restart_requested)
        self.open_chat_button.clicked.connect(self.open_chat_requested)
        buttons = QHBoxLayout()
        for button in (self.stop_button, self.restart_button, self.open_chat_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        top = QHBoxLayout()
        left = QVBoxLayout()
        left.addWidget(self.state)
        left.addLayout(figures)
        top.addLayout(left, 1)
        top.addWidget(self.plot, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.model)  # full width, as model names and their list are long
        layout.addWidget(self.placement)  # full width: the reason can be a sentence
        layout.addLayout(buttons)
        layout.addWidget(self.log, 1)
        self._last_total: int | None = None
        self.set_running(False)

    def set_running(self, running: bool) -> None:
        self.stop_button.setEnabled(running)
        self.open_chat_button.setEnabled(running)

    def show_state(self, text: str) -> None:
        self.state.setText(text)

    def show_perf(self, perf: dict[str, Any]) -> None:
        """One answer of /api/extra/perf. Keys a server does not send (older ones, or without
        a model folder) leave their figure as "-" instead of failing."""
        waiting = int(perf.get("queue", 0))
        generating = not perf.get("idle", 1)
        loading = perf.get("loading_model")
        if isinstance(loading, str) and loading:
            # Requests for that model wait in the queue until it is loaded: say why they wait.
            self.state.setText(f"Loading model {loading}… ({waiting} waiting)")
        elif generating:
            self.state.setText("Generating" + (f", {waiting} waiting" if waiting else ""))
        else:
            self.state.setText("Idle")
        self.waiting.setText(str(waiting))
        self.model.setText(f"Model: {model_text(perf)}")
        self.placement.setText(f"Runs on: {perf.get('placement', '-')}")
        total = int(perf.get("total_gens", 0))
        self.total.setText(str(total))
        self.prompt_speed.setText(f"{float(perf.get('last_process_speed', 0)):.1f} tokens/s")
        speed = float(perf.get("last_eval_speed", 0))
        self.generation_speed.setText(f"{speed:.1f} tokens/s")
        if self._last_total is not None and total > self._last_total and speed > 0:
            self.plot.add(speed)
        self._last_total = total


def model_text(perf: dict[str, Any]) -> str:
    """The model serving now, and the others kept loaded beside it."""
    if "model" not in perf:
        return "-"
    serving = perf["model"]
    if not isinstance(serving, str) or not serving:
        return "none loaded"
    loaded = perf.get("loaded_models")
    others = [name for name in loaded if name != serving] if isinstance(loaded, list) else []
    if not others:
        return serving
    return f"{serving} (also loaded: {', '.join(map(str, others))})"
