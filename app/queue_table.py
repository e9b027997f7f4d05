"""The running view's queue table: the line of waiting requests, in the fair order the server
serves them, from /api/extra/perf's `queue_line`.

Each row is a place and its owner's label: one label per API key (or per client address on a
server without keys) for as long as the server runs, never the key or the address itself, so
the table shows at a glance whether one client holds most of the line.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

MAX_HEIGHT = 150  # as the requests table beside it


class QueueTable(QTableWidget):
    """Place and owner of each waiting request, the next one served first."""

    COLUMNS = ("Place", "Owner")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(self.COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.verticalHeader().hide()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.horizontalHeader().setStretchLastSection(True)
        self.setMaximumHeight(MAX_HEIGHT)

    def show_line(self, line: object) -> None:
        """Show perf's `queue_line`; anything else (a server older than the fair queue sends
        none) shows an empty line."""
        labels = [str(label) for label in line] if isinstance(line, list) else []
        self.setRowCount(len(labels))
        for index, label in enumerate(labels):
            self._set_text(index, 0, str(index + 1))
            self._set_text(index, 1, label)

    def rows(self) -> list[tuple[str, str]]:
        """What the table shows now: (place, owner) per row."""
        return [(self._text(row, 0), self._text(row, 1)) for row in range(self.rowCount())]

    def _set_text(self, row: int, column: int, text: str) -> None:
        # In place: a table redrawn twice a second must not flicker.
        item = self.item(row, column)
        if item is None:
            self.setItem(row, column, QTableWidgetItem(text))
        elif item.text() != text:
            item.setText(text)

    def _text(self, row: int, column: int) -> str:
        item = self.item(row, column)
        return item.text() if item is not None else ""


def beside(requests: QWidget, queue: QueueTable) -> QHBoxLayout:
    """The requests table with the line at its right, narrower (two short columns)."""
    row = QHBoxLayout()
    row.addWidget(requests, 3)
    row.addWidget(queue, 1)
    return row
