"""The settings tabs, KoboldCpp's layout: Quick Launch, Network, Context, Admin (and Loaded
Files, in app.tabs.loaded_files), and SettingsTabs, the tab widget that shows each of them in a
scroll area.

Each tab places bindings (app.tabs.settings_table) in rows; loading and reading the settings is
the form's own (app.tabs.form), over the rows in order. Quick Launch adds the model's facts
under its path (with what the Loaded Files tab's projector adds: "vision", "audio") and the GPU
fields (app.tabs.gpu_fields).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.hub_client import HubClient
from app.hub_dialog import HubSearchDialog
from app.model_info import describe_model
from app.tabs import lite_table
from app.tabs import settings_table as table
from app.tabs.fields import ERROR_STYLE, INFO_STYLE
from app.tabs.form import SettingsForm
from app.tabs.gpu_fields import GpuFields, setting_file
from app.tabs.rope_fields import RopeFields
from server.base.netcheck import is_loopback
from server.devices.backends import gpu_backends as find_gpu_backends
from server.models.files import bundled_model_file
from server.settings.config import LOOPBACK_HOST, HearthSettings


class QuickLaunchTab(SettingsForm):
    def __init__(
        self,
        parent: QWidget | None = None,
        gpu_backends: tuple[str, ...] | None = None,
        hub: HubClient | None = None,
    ) -> None:
        """`gpu_backends`: the GPU backends of this llama.cpp build (found on disk if None);
        `hub`: the Hugging Face client Search uses (the window's; a new one if None)."""
        super().__init__(parent)
        backends = find_gpu_backends() if gpu_backends is None else gpu_backends
        self.hub = hub or HubClient(self)
        self.hub_dialog: HubSearchDialog | None = None
        self.search_hub = QPushButton("Search Hugging Face…")
        self.search_hub.clicked.connect(self.open_hub_search)
        self.model_path = self.add(table.MODEL, row=self._model_picker)
        self.model_info = QLabel()
        self.model_info.setWordWrap(True)
        self._layout.addRow("", self.model_info)
        self.model_dir = self.add(table.MODEL_DIR)
        self.max_loaded = self.add(table.MAX_LOADED)
        self.default_model = self.add(table.DEFAULT_MODEL)
        self.embeddings_model = self.add(table.EMBEDDINGS_MODEL)
        self.jinja_template = self.add(table.JINJA_TEMPLATE)
        self.context_size = self.add(table.CONTEXT_SIZE)
        self.threads = self.add(table.THREADS)
        self.gpu = GpuFields(backends, self)
        self.gpu_layers, self.gpu_note = self.gpu.gpu_layers, self.gpu.note
        self.add_row("usevulkan", "Backend:", self.gpu.backend, self.gpu.backend_tip)
        self.add_row("gpulayers", "GPU Layers:", self.gpu.layers_row(), self.gpu.layers_tip)
        # On a CPU-only build the fields show "None" but the loaded values are saved back as
        # they were, so a .kcpps written for a GPU machine survives a round trip here.
        self.add_part(self.gpu)
        self.launch_browser = self.add(table.LAUNCH_BROWSER)
        self.quiet = self.add(table.QUIET)
        self._projector: Path | None = None  # the Loaded Files tab's, for the model's facts
        # Both mean something only with a folder; their values are kept (and saved) either way.
        self.model_dir.textChanged.connect(self._model_dir_changed)
        self._model_dir_changed()
        self.model_path.editingFinished.connect(self._model_changed)
        self.context_size.valueChanged.connect(self._model_changed)

    def _model_picker(self, edit: QLineEdit) -> QWidget:
        """The model's path with Browse… (which also shows the model's facts) and Search."""
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._choose_model)
        picker = QWidget()
        picker_row = QHBoxLayout(picker)
        picker_row.setContentsMargins(0, 0, 0, 0)
        picker_row.addWidget(edit, 1)
        picker_row.addWidget(browse)
        picker_row.addWidget(self.search_hub)
        return picker

    def _choose_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a GGUF model", "", "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.model_path.setText(path)
            self._model_changed()

    def open_hub_search(self) -> None:
        """The search dialog (modal, not blocking): a downloaded file fills the model field."""
        dialog = HubSearchDialog(self.hub, self)
        dialog.accepted.connect(lambda: self._downloaded(dialog.chosen_path))
        self.hub_dialog = dialog
        dialog.open()

    def _downloaded(self, path: str) -> None:
        if path:
            self.model_path.setText(path)
            self._model_changed()

    def _model_dir_changed(self) -> None:
        has_folder = bool(self.model_dir.text().strip())
        self.max_loaded.setEnabled(has_folder)
        self.default_model.setEnabled(has_folder)

    def _model_changed(self) -> None:
        """The model's facts and the memory estimates follow the model and the context."""
        text = self.model_path.text().strip()
        if text.startswith(("http://", "https://")):
            self.gpu.set_model(None, self.context_size.value())
            self.model_info.setText("Downloaded when the server starts.")
            self.model_info.setStyleSheet(INFO_STYLE)
            return
        model = Path(text).expanduser() if text else bundled_model_file()
        usable = model if model is not None and model.is_file() else None
        self.gpu.set_model(usable, self.context_size.value())
        if usable is None:
            self.model_info.setText("No such file." if text else "")
            self.model_info.setStyleSheet(ERROR_STYLE)
            return
        info = describe_model(usable, self.context_size.value(), self._projector)
        self.model_info.setText(info.text)
        self.model_info.setStyleSheet(ERROR_STYLE if info.problem else INFO_STYLE)

    def set_projector(self, projector: Path | None, on_cpu: bool) -> None:
        """The projector and Projector on CPU as the Loaded Files tab says now: the model's
        facts say what it adds, and the GPU estimate counts it."""
        self._projector = projector
        self.gpu.set_projector(projector, on_cpu)
        self._model_changed()

    def load(self, settings: HearthSettings) -> None:
        super().load(settings)
        self._projector = setting_file(settings.mmproj)
        self._model_changed()


EXPOSED_WARNING = (
    "Anyone on the network can use this server: generate text and embeddings with every API, "
    "read the loaded model's name and settings, download models from Hugging Face onto this "
    "disk and delete them, and switch models when model switching (Admin tab) is on without "
    "an admin password. Set a Password, API Keys or an API Key File to stop that."
)


class NetworkTab(SettingsForm):
    """KoboldCpp's Network tab, with llama-server's API keys. A warning under Host says what
    anyone on the network can do while the host is not loopback and no key is set. The SSL
    Cert and Key are saved as KoboldCpp's `ssl` pair ([cert, key] or null), whichever
    spelling they were loaded from; half a pair (kept in llama-server's keys) or a file that
    is not there stops a launch with a message beside the field (`problems`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.exposed_warning = QLabel(EXPOSED_WARNING)
        self.exposed_warning.setWordWrap(True)
        self.exposed_warning.setStyleSheet(ERROR_STYLE)
        self.host = self.add(table.HOST, row=self._host_row)
        self.port = self.add(table.PORT)
        self.multiuser = self.add(table.MULTIUSER)
        self.parallel = self.add(table.PARALLEL_REQUESTS)
        self.ssl_cert = self.add(table.SSL_CERT)
        self.ssl_key = self.add(table.SSL_KEY)
        self._errors["ssl"] = self._errors["ssl_cert_file"]  # KoboldCpp's pair: by its first
        self.password = self.add(table.PASSWORD)
        self.api_keys = self.add(table.API_KEYS)
        self.api_key_file = self.add(table.API_KEY_FILE)
        self.quiet = self.add(table.QUIET)
        self.multiplayer = self.add(lite_table.MULTIPLAYER)  # KoboldAI Lite's, as KoboldCpp's
        self.websearch = self.add(lite_table.WEBSEARCH)
        self.metrics = self.add(table.METRICS)
        self.rpc = self.add(table.RPC)
        for field in (self.host, self.password, self.api_keys, self.api_key_file):
            field.textChanged.connect(self._guard_changed)
        self._guard_changed()

    def _host_row(self, edit: QLineEdit) -> QWidget:
        row = QWidget()
        layout = QVBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(edit)
        layout.addWidget(self.exposed_warning)
        return row

    def _guard_changed(self) -> None:
        """The warning follows the host and the keys as they are typed."""
        host = self.host.text().strip() or LOOPBACK_HOST
        keys = (self.password.text(), self.api_keys.text(), self.api_key_file.text())
        self.exposed_warning.setVisible(not is_loopback(host) and not any(k.strip() for k in keys))

    def load(self, settings: HearthSettings) -> None:
        super().load(settings)
        if settings.ssl:  # KoboldCpp's pair, which wins over llama-server's two keys
            cert, key = [*settings.ssl, "", ""][:2]
            self.ssl_cert.setText(cert)
            self.ssl_key.setText(key)

    def read(self) -> dict[str, Any]:
        values = super().read()
        cert, key = values["ssl_cert_file"], values["ssl_key_file"]
        whole = cert is not None and key is not None
        values.update(
            ssl=[cert, key] if whole else None,
            ssl_cert_file=None if whole else cert,
            ssl_key_file=None if whole else key,
        )
        return values

    def problems(self) -> dict[str, str]:
        """What stops a launch here before the server would refuse it: half a TLS pair, or a
        TLS file that is not there (by settings key)."""
        cert, key = self.ssl_cert.text().strip(), self.ssl_key.text().strip()
        if bool(cert) != bool(key):
            missing = "ssl_key_file" if cert else "ssl_cert_file"
            return {missing: "HTTPS needs both the SSL Cert and its SSL Key."}
        return {
            setting: "No such file."
            for setting, path in (("ssl_cert_file", cert), ("ssl_key_file", key))
            if path and not Path(path).expanduser().is_file()
        }


class ContextTab(SettingsForm):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context_size = self.add(table.CONTEXT_SIZE)
        self.default_gen = self.add(table.DEFAULT_GEN_AMOUNT)
        self.batch_size = self.add(table.BATCH_SIZE)
        self.fast_forward = self.add(table.FAST_FORWARD)
        self.context_shift = self.add(table.CONTEXT_SHIFT)
        self.prompt_cache = self.add(table.PROMPT_CACHE)
        self.smart_cache = self.add(table.SMART_CACHE)
        self.cache_dir = self.add(table.CACHE_DIR)
        self.cache_disk = self.add(table.CACHE_DISK)
        self.private_cache = self.add(table.PRIVATE_CACHE)
        self.slot_save_path = self.add(table.SLOT_SAVE_PATH)
        self.jinja_tools = self.add(table.JINJA_TOOLS)
        self.jinja_think = self.add(table.JINJA_THINK)
        self.think_effort = self.add(table.THINK_EFFORT)
        self.jinja_kwargs = self.add(table.JINJA_KWARGS)
        self.reasoning_format = self.add(table.REASONING_FORMAT)
        self.reasoning_budget = self.add(table.REASONING_BUDGET)
        self.rope = RopeFields(self)  # before Quantize KV, as in KoboldCpp
        self.add_row("ropeconfig", "", self.rope.row(), self.rope.tooltip)
        self.add_part(self.rope)
        self.quantize_kv = self.add(table.QUANTIZE_KV)
        self.flash_attention = self.add(table.FLASH_ATTENTION)
        self.low_vram = self.add(table.LOW_VRAM)
        self.use_mmap = self.add(table.USE_MMAP)
        self.use_mlock = self.add(table.USE_MLOCK)
        self.moe_cpu = self.add(table.MOE_CPU)
        self.no_bos = self.add(table.NO_BOS)
        self.gen_limit = self.add(table.GEN_LIMIT)
        self.speculation = self.add(table.SPECULATION)
        # The cache is filled from reused prefixes, so it needs FastForwarding, and the slot
        # count bounds a cache that is on; the values are kept (and saved) either way.
        self.fast_forward.toggled.connect(self._prompt_cache_changed)
        self.prompt_cache.valueChanged.connect(self._prompt_cache_changed)
        self._prompt_cache_changed()

    def _prompt_cache_changed(self) -> None:
        fast_forward = self.fast_forward.isChecked()
        self.prompt_cache.setEnabled(fast_forward)
        cache_on = fast_forward and self.prompt_cache.value() > 0
        for key in ("smartcache", "cachedir", "cachedisk", "privatecache"):
            self.row_widget(key).setEnabled(cache_on)  # a folder's Browse… button too


class AdminTab(SettingsForm):
    """KoboldCpp's Admin tab: model switching over the admin API."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.admin = self.add(table.ADMIN)
        self.admin_dir = self.add(table.ADMIN_DIR)
        self.admin_dir_picker = self.row_widget(table.ADMIN_DIR.key)
        self.admin_password = self.add(table.ADMIN_PASSWORD)
        # The folder and password matter only in admin mode; their values are kept either way.
        self.admin.toggled.connect(self._admin_toggled)
        self._admin_toggled(self.admin.isChecked())

    def _admin_toggled(self, enabled: bool) -> None:
        self.admin_dir_picker.setEnabled(enabled)  # the field and its Browse… button
        self.admin_password.setEnabled(enabled)


class ScrollingPage(QScrollArea):
    """A settings tab that scrolls vertically when the window is shorter than its rows, so the
    tab with the most rows (Context) does not set the window's minimum height beyond a laptop
    screen. Frameless and never scrolled sideways: it looks like the bare tab."""

    def __init__(self, page: QWidget) -> None:
        super().__init__()
        self.setWidget(page)
        self.setWidgetResizable(True)
        # Unfilled, so the tab's own pane shows through as it did without a scroll area.
        page.setAutoFillBackground(False)  # (setWidget turned it on)
        self.viewport().setAutoFillBackground(False)
        # No Tab stop of its own: Tab goes from the tab bar to the first field as before, and
        # a field that takes the focus is scrolled into view.
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # The mouse wheel scrolls the page, not the number or choice that passes under the
        # pointer: a field takes the wheel only once it has the focus (clicked or tabbed to).
        for field in page.findChildren(QAbstractSpinBox) + page.findChildren(QComboBox):
            field.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            field.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.Wheel
            and isinstance(watched, (QAbstractSpinBox, QComboBox))
            and not watched.hasFocus()
        ):
            QCoreApplication.sendEvent(self.verticalScrollBar(), event)
            return True
        return super().eventFilter(watched, event)

    def sizeHint(self) -> QSize:
        # The whole page (QScrollArea's own stops at 24 lines), so a window at its natural
        # size shows every row with no scroll bar when the screen has room.
        return self._page().sizeHint()

    def minimumSizeHint(self) -> QSize:
        # As wide as the page needs beside a shown scroll bar (nothing is cut at the right);
        # as short as a scroll area may be.
        width = self._page().minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
        return QSize(width, super().minimumSizeHint().height())

    def _page(self) -> QWidget:
        page = self.widget()
        assert page is not None  # set in __init__, never taken
        return page


class SettingsTabs(QTabWidget):
    """The window's tabs: settings pages in a ScrollingPage each (`add_page`), found by the
    page itself as well as by what the tab holds."""

    def add_page(self, page: QWidget, label: str) -> int:
        return self.addTab(ScrollingPage(page), label)

    def indexOf(self, widget: QWidget, /) -> int:
        """The tab showing `widget`, itself or inside its scroll area (-1: none)."""
        for index in range(self.count()):
            held = self.widget(index)
            if widget is held or (isinstance(held, ScrollingPage) and held.widget() is widget):
                return index
        return -1

    def setCurrentWidget(self, widget: QWidget, /) -> None:
        self.setCurrentIndex(self.indexOf(widget))
