"""Search Hugging Face: find a GGUF repository, pick a file, download it with progress.

Query → repositories (downloads, likes) → the chosen repository's GGUF files (quantization,
size; a split model as one row) → Download (bytes, speed, time left; Cancel keeps the partial
file and Download resumes it). When the file is there the dialog closes with its path in
`chosen_path`. A token field serves gated or private repositories (kept for this session
only; HF_TOKEN in the environment works too). The network work is `HubClient`'s.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.hub_client import HubClient
from server.models.hub import ModelFile, RepoHit
from server.models.memory import mib

ERROR_STYLE = "color: #b3261e;"


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().hide()
    table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    return table


class HubSearchDialog(QDialog):
    def __init__(self, hub: HubClient, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Search Hugging Face")
        self.resize(720, 520)
        self.hub = hub
        self.chosen_path = ""
        self._downloading = False
        self.repos: list[RepoHit] = []
        self.files: list[ModelFile] = []
        self.query = QLineEdit()
        self.query.setPlaceholderText("Model name, e.g. gemma 3 270m")
        self.search_button = QPushButton("Search")
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("Hugging Face token, for gated or private models")
        self.repo_table = _table(["Repository", "Downloads", "Likes"])
        self.file_table = _table(["File", "Quantization", "Size"])
        self.progress = QProgressBar()
        self.progress.setFormat("%p%")
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.download_button = QPushButton("Download")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.download_button.setEnabled(False)
        self._lay_out()
        self.search_button.clicked.connect(self.search)
        self.query.returnPressed.connect(self.search)
        self.repo_table.itemSelectionChanged.connect(self._repo_chosen)
        self.file_table.itemSelectionChanged.connect(self._file_chosen)
        self.download_button.clicked.connect(self.download)
        self.cancel_button.clicked.connect(hub.cancel)
        hub.searched.connect(self._show_repos)
        hub.files_listed.connect(self._show_files)
        hub.progress.connect(self._show_progress)
        hub.downloaded.connect(self._done)
        hub.cancelled.connect(self._cancelled)
        hub.failed.connect(self._failed)

    def _lay_out(self) -> None:
        search_row = QHBoxLayout()
        search_row.addWidget(self.query, 1)
        search_row.addWidget(self.search_button)
        buttons = QHBoxLayout()
        buttons.addWidget(self.progress, 1)
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addLayout(search_row)
        layout.addWidget(self.token)
        layout.addWidget(self.repo_table, 3)
        layout.addWidget(self.file_table, 2)
        layout.addLayout(buttons)
        layout.addWidget(self.status)

    # -- asking ------------------------------------------------------------------------

    def _use_token(self) -> None:
        self.hub.token = self.token.text().strip() or None

    def search(self) -> None:
        self._use_token()
        self._say("Searching…")
        self.hub.search(self.query.text().strip())

    def _repo_chosen(self) -> None:
        row = self.repo_table.currentRow()
        if 0 <= row < len(self.repos):
            self._use_token()
            self._say(f"Listing {self.repos[row].repo}…")
            self.file_table.setRowCount(0)
            self.hub.list_files(self.repos[row].repo)

    def _file_chosen(self) -> None:
        self.download_button.setEnabled(
            0 <= self.file_table.currentRow() < len(self.files) and not self._downloading
        )

    def download(self) -> None:
        row = self.file_table.currentRow()
        if not 0 <= row < len(self.files):
            return
        self._use_token()
        self._downloading = True
        self.download_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self._say(f"Downloading {self.files[row].name}…")
        self.hub.download(self.files[row])

    # -- answers -----------------------------------------------------------------------

    def _show_repos(self, repos: list[RepoHit]) -> None:
        self.repos = repos
        self.repo_table.setRowCount(len(repos))
        for row, hit in enumerate(repos):
            name = hit.repo + (" (gated)" if hit.gated else "")
            for column, text in enumerate([name, f"{hit.downloads:,}", f"{hit.likes:,}"]):
                self.repo_table.setItem(row, column, QTableWidgetItem(text))
        self._say(f"{len(repos)} GGUF repositories." if repos else "No GGUF repository found.")

    def _show_files(self, repo: str, files: list[ModelFile]) -> None:
        self.files = files
        self.file_table.setRowCount(len(files))
        for row, file in enumerate(files):
            for column, text in enumerate([file.name, file.quant, mib(file.size)]):
                self.file_table.setItem(row, column, QTableWidgetItem(text))
        self._say(f"{repo}: {len(files)} GGUF files." if files else f"{repo} has no GGUF file.")

    def _show_progress(self, done: int, total: int, speed: float) -> None:
        if total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(done * 1000 // total)
            left = (total - done) / speed if speed > 0 else 0.0
            self._say(f"{mib(done)} of {mib(total)}, {speed / 2**20:.1f} MB/s, {left:.0f} s left")
        else:
            self.progress.setRange(0, 0)
            self._say(f"{mib(done)}, {speed / 2**20:.1f} MB/s")

    def _done(self, path: str) -> None:
        self.chosen_path = path
        self.cancel_button.setEnabled(False)
        self.progress.setRange(0, 1000)
        self.progress.setValue(1000)
        self._say(f"Downloaded to {path}")
        self.accept()

    def _cancelled(self) -> None:
        # Told by the download's own thread as it ends: not `hub.downloading`, which may still
        # see that thread alive for a moment.
        self._downloading = False
        self.cancel_button.setEnabled(False)
        self._file_chosen()
        self._say("Cancelled. Download again to resume where it stopped.")

    def _failed(self, message: str) -> None:
        self._downloading = False
        self.cancel_button.setEnabled(False)
        self._file_chosen()
        self._say(message, error=True)

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(ERROR_STYLE if error else "")
