"""The running view: live log, live queue (and its line by owner) and prompt cache (from
/api/extra/perf), the requests open now with an Abort button each and a live tokens/s plot (from
the admin-only /api/admin/requests), and the Stop / Restart / Open Chat buttons. It shows what
it is told: it owns no process and asks the server nothing (app.pollers does, for the main
window)."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from PySide6.QtCore import QPointF, QTimer, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.queue_table import QueueTable, beside

LOG_MAX_LINES = 5000
LOG_FLUSH_MS = 50
PLOT_WINDOW_SECONDS = 60  # live points come twice a second: the last minute reads well


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
    """The server's live generation speed over the last few minutes, as a line: a point per
    poll while something generates (every generating request together), 0 when it stops."""

    added = Signal(float)  # a point was plotted (tokens/s)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(80)
        self.points: deque[tuple[float, float]] = deque(maxlen=600)

    def add(self, tokens_per_second: float) -> None:
        self.points.append((time.monotonic(), tokens_per_second))
        self.update()
        self.added.emit(tokens_per_second)

    def paintEvent(self, _event: object) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("#fafafa"))
        painter.setPen(QColor("#888"))
        painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        now = time.monotonic()
        recent = [(t, v) for t, v in self.points if now - t <= PLOT_WINDOW_SECONDS]
        top = max((v for _, v in recent), default=0.0) or 1.0
        caption = f"tokens/s generating (last {PLOT_WINDOW_SECONDS // 60} min), max {top:.0f}"
        painter.drawText(6, 14, caption)
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


def _who(row: dict[str, Any]) -> str:
    """Who sent a request: the name of the API key it used (never the key, which the server
    does not send) before the client's address, or the address alone on a server without keys."""
    client, key = str(row.get("client", "")), str(row.get("key", ""))
    return f"{key} ({client})" if key else client


class RequestTable(QTableWidget):
    """The requests open now, one row each: id, who sent it, dialect, state, prompt progress,
    tokens so far, speed, and an Abort button that asks for that request alone to end."""

    abort_requested = Signal(str)  # request id
    COLUMNS = ("ID", "Client", "Dialect", "State", "Prompt", "Tokens", "Tokens/s", "")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(self.COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.verticalHeader().hide()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)  # the progress bar
        self.ids: list[str] = []  # the request of each row, as shown now
        self._aborting: set[str] = set()

    def show_rows(self, rows: list[dict[str, Any]]) -> None:
        """Rows are updated in place (no flicker, and a button under the mouse stays)."""
        self.setRowCount(len(rows))
        self.ids = [str(row.get("id", "")) for row in rows]
        self._aborting &= set(self.ids)
        for index, row in enumerate(rows):
            request_id = self.ids[index]
            cells = (
                request_id,
                _who(row),
                str(row.get("dialect", "")),
                str(row.get("state", "")),
                None,
                str(row.get("tokens", 0)),
                f"{float(row.get('tokens_per_second', 0)):.1f}",
            )
            for column, text in enumerate(cells):
                if text is not None:
                    self._set_text(index, column, text)
            self._progress(index).show_row(row)
            button = self._button(index)
            button.setEnabled(request_id not in self._aborting)
            button.setText("Aborting…" if request_id in self._aborting else "Abort")

    def abort_row(self, index: int) -> None:
        """What the row's Abort button does: ask once for that request to end."""
        request_id = self.ids[index]
        self._aborting.add(request_id)
        button = self._button(index)
        button.setEnabled(False)
        button.setText("Aborting…")
        self.abort_requested.emit(request_id)

    def abort_failed(self, request_id: str) -> None:
        """The server did not end it (already over, or unreachable): the row may ask again."""
        self._aborting.discard(request_id)

    def _set_text(self, row: int, column: int, text: str) -> None:
        item = self.item(row, column)
        if item is None:
            self.setItem(row, column, QTableWidgetItem(text))
        elif item.text() != text:
            item.setText(text)

    def _progress(self, row: int) -> PromptProgress:
        bar = self.cellWidget(row, 4)
        if not isinstance(bar, PromptProgress):
            bar = PromptProgress()
            self.setCellWidget(row, 4, bar)
        return bar

    def _button(self, row: int) -> QPushButton:
        button = self.cellWidget(row, 7)
        if not isinstance(button, QPushButton):
            button = QPushButton("Abort")
            # Looked up when clicked: the row's request then, not when the button was made.
            button.clicked.connect(lambda _=False, b=button: self._clicked(b))
            self.setCellWidget(row, 7, button)
        return button

    def _clicked(self, button: QPushButton) -> None:
        for row in range(self.rowCount()):
            if self.cellWidget(row, 7) is button:
                self.abort_row(row)
                return


class PromptProgress(QProgressBar):
    """How much of a request's prompt has been read: "1200/4000" while reading, full once
    generating, empty while waiting."""

    def show_row(self, row: dict[str, Any]) -> None:
        done, total = int(row.get("prompt_done", 0)), int(row.get("prompt_total", 0))
        self.setRange(0, max(total, 1))
        self.setValue(min(done, max(total, 1)))
        self.setFormat(f"{done}/{total}" if total else "-")


class RunView(QWidget):
    """What the running server is doing; emits the user's requests as signals."""

    stop_requested = Signal()
    restart_requested = Signal()
    open_chat_requested = Signal()
    abort_requested = Signal(str)  # a row's Abort: that request's id

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
        self.live_speed = QLabel("-")
        self.placement = QLabel("Runs on: -")
        self.placement.setWordWrap(True)
        self.prompt_cache = QLabel("Prompt cache: -")
        self.prompt_cache.setWordWrap(True)
        figures = QGridLayout()
        for row, (caption, value) in enumerate(
            [
                ("Waiting requests:", self.waiting),
                ("Generations:", self.total),
                ("Last prompt speed:", self.prompt_speed),
                ("Last generation speed:", self.generation_speed),
                ("Generating now:", self.live_speed),
            ]
        ):
            figures.addWidget(QLabel(caption), row, 0)
            figures.addWidget(value, row, 1)
        self.plot = ThroughputPlot()
        self.requests = RequestTable()
        self.requests.setMaximumHeight(150)
        self.requests.abort_requested.connect(self.abort_requested)
        self.queue = QueueTable()
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
        layout.addWidget(self.prompt_cache)
        layout.addLayout(beside(self.requests, self.queue))
        layout.addLayout(buttons)
        layout.addWidget(self.log, 1)
        self._was_generating = False
        self.set_running(False)

    def set_running(self, running: bool) -> None:
        self.stop_button.setEnabled(running)
        self.open_chat_button.setEnabled(running)
        if not running:
            self.requests.show_rows([])
            self.queue.show_line([])
            self.live_speed.setText("-")
            self._was_generating = False

    def show_live(self, live: dict[str, Any]) -> None:
        """One answer of /api/admin/requests: the rows, and a plot point while something
        generates (a last 0 when it stops, so the line falls instead of hanging there)."""
        rows = [row for row in live.get("requests", []) if isinstance(row, dict)]
        self.requests.show_rows(rows)
        speed = float(live.get("tokens_per_second", 0))
        generating = any(row.get("state") == "generating" for row in rows)
        self.live_speed.setText(f"{speed:.1f} tokens/s" if generating else "-")
        if generating and speed > 0:
            self.plot.add(speed)
        elif self._was_generating and not generating:
            self.plot.add(0.0)
        self._was_generating = generating

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
        self.queue.show_line(perf.get("queue_line"))
        self.model.setText(f"Model: {model_text(perf)}")
        self.placement.setText(f"Runs on: {perf.get('placement', '-')}")
        self.prompt_cache.setText(f"Prompt cache: {prompt_cache_text(perf)}")
        total = int(perf.get("total_gens", 0))
        self.total.setText(str(total))
        self.prompt_speed.setText(f"{float(perf.get('last_process_speed', 0)):.1f} tokens/s")
        speed = float(perf.get("last_eval_speed", 0))
        self.generation_speed.setText(f"{speed:.1f} tokens/s")


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


def prompt_cache_text(perf: dict[str, Any]) -> str:
    """What the prompt cache holds against its bound, and what it has spared so far; "off"
    when the server keeps no prompts (--cacheram 0, an engine without a cache, or a server
    older than the cache, whose perf has no `prompt_cache`)."""
    cache = perf.get("prompt_cache")
    if not isinstance(cache, dict) or int(cache.get("max_bytes", 0)) <= 0:
        return "off"
    held = f"{mib_text(cache.get('bytes', 0))} of {mib_text(cache['max_bytes'])} in memory"
    parts = [counted(int(cache.get("states", 0)), "prompt"), held]
    on_disk = cache.get("disk_bytes")  # only with --cachedir, and only where it is reported
    if isinstance(on_disk, int):
        parts.append(f"{size_text(on_disk)} on disk")
    reused = int(cache.get("restored_tokens", 0))
    parts.append(f"{counted(int(cache.get('restored', 0)), 'hit')}, {reused:,} tokens reused")
    return " · ".join(parts)


def counted(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def mib_text(size: Any) -> str:
    """In MiB, as --cacheram is given: tenths below 10 (a small model's states are small)."""
    mib = int(size) / 2**20
    return f"{mib:.1f} MiB" if 0 < mib < 10 else f"{mib:,.0f} MiB"


def size_text(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else mib_text(size)
