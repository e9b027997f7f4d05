"""MainWindow: the tabs, the bottom bar (Presets, Load, Save, Launch) and the wiring between
the settings, the server process and the running view. Widgets only show and ask; files go
through `app.settings_store`, the process through `app.server_process`."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QCloseEvent, QDesktopServices, QShowEvent
from PySide6.QtNetwork import QNetworkAccessManager, QNetworkReply, QSslCertificate, QSslError
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import settings_store
from app.device_probe import DeviceProbe
from app.hub_client import HubClient
from app.paths import config_dir, presets_dir, server_command
from app.pollers import LivePoller, PerfPoller
from app.run_view import RunView
from app.server_process import ServerProcess
from app.tabs.loaded_files import LoadedFilesTab
from app.tabs.settings_tabs import (
    AdminTab,
    ContextTab,
    NetworkTab,
    QuickLaunchTab,
    SettingsTabs,
)
from server.base.netcheck import port_in_use, url_host
from server.settings.config import HearthSettings
from server.settings.kcpps import SettingsFileError

NOTICE_STYLES = {
    "info": "background: #e8f0fe; color: #174ea6; padding: 6px;",
    "error": "background: #fce8e6; color: #a50e0e; padding: 6px;",
}
_LOADING = re.compile(r"Loading .*: (\d+)%")
LAUNCH_FILE = "last-launch.kcpps"


class MainWindow(QMainWindow):
    """The launcher window."""

    server_ready = Signal()  # the server answered its first perf poll

    def __init__(
        self,
        settings: HearthSettings | None = None,
        preferences: settings_store.Preferences | None = None,
    ) -> None:
        super().__init__()
        self.setWindowTitle("Hearth")
        self.resize(820, 600)
        self.preferences = preferences or settings_store.Preferences()
        self.settings = settings_store.apply_launcher_rules(
            settings or self.preferences.last_settings
        )
        self.hub = HubClient(self)
        self.quick = QuickLaunchTab(hub=self.hub)
        self.network = NetworkTab()
        self.context = ContextTab()
        self.loaded = LoadedFilesTab()
        self.admin = AdminTab()
        self.run_view = RunView()
        self.tabs = SettingsTabs()  # the settings pages scroll on a short screen
        self.tabs.add_page(self.quick, "Quick Launch")
        self.tabs.add_page(self.network, "Network")
        self.tabs.add_page(self.context, "Context")
        self.tabs.add_page(self.loaded, "Loaded Files")
        self.tabs.add_page(self.admin, "Admin")
        self.tabs.addTab(self.run_view, "Running")  # its log and table scroll by themselves
        self.notice = QLabel()
        self.notice.setWordWrap(True)
        self.notice.hide()
        self.presets_button = QToolButton()
        self.presets_button.setText("Presets")
        self.presets_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.presets_menu = QMenu(self)
        self.presets_button.setMenu(self.presets_menu)
        self.load_button = QPushButton("Load Config")
        self.save_button = QPushButton("Save Config")
        self.launch_button = QPushButton("Launch")
        self.launch_button.setDefault(True)
        self._lay_out()

        self.server = ServerProcess(self)
        self.device_probe = DeviceProbe(self)
        self.poller = PerfPoller(self)
        self.live = LivePoller(self)  # the admin-only view of requests, with the server's token
        self._ready = False
        self._base_url = ""
        self._certificates: list[QSslCertificate] = []  # the server's HTTPS chain, leaf first
        self._mirror_duplicated_fields()
        self._fill_presets_menu()
        self._connect_signals()
        self.show_settings(self.settings)

    def _lay_out(self) -> None:
        """Tabs under the notice line; presets, load and save at the left, Launch at the right."""
        bar = QHBoxLayout()
        bar.addWidget(self.presets_button)
        bar.addWidget(self.load_button)
        bar.addWidget(self.save_button)
        bar.addStretch(1)
        bar.addWidget(self.launch_button)
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.addWidget(self.notice)
        layout.addWidget(self.tabs, 1)
        layout.addLayout(bar)
        self.setCentralWidget(body)

    def _connect_signals(self) -> None:
        self.load_button.clicked.connect(self._ask_load)
        self.save_button.clicked.connect(self._ask_save)
        self.launch_button.clicked.connect(self.launch)
        self.run_view.stop_requested.connect(self.stop)
        self.run_view.restart_requested.connect(self.restart)
        self.run_view.open_chat_requested.connect(self.open_chat)
        self.server.lines_received.connect(self._on_lines)
        self.server.exited.connect(self._on_exited)
        self.server.failed.connect(self._on_failed)
        self.poller.updated.connect(self._on_perf)
        self.live.updated.connect(self._on_live)
        self.run_view.abort_requested.connect(self.live.abort)
        self.live.abort_answered.connect(self._on_abort_answered)
        for poller in (self.poller, self.live):  # under HTTPS: _trust_own_certificate
            for network in poller.findChildren(QNetworkAccessManager):
                network.sslErrors.connect(self._trust_own_certificate)
        self.device_probe.found.connect(self.quick.gpu.set_devices)
        self.device_probe.failed.connect(self.quick.gpu.show_probe_failure)
        # The user's own changes only (not a file's loading, which sets the estimate itself).
        self.context.quantize_kv.activated.connect(self._kv_changed)
        self.context.flash_attention.clicked.connect(self._kv_changed)
        self.context.low_vram.clicked.connect(self._kv_changed)
        self.loaded.draft_changed.connect(self.quick.gpu.set_draft)
        self.loaded.projector_changed.connect(self.quick.set_projector)

    def _kv_changed(self) -> None:
        """GPU Layers' estimate follows the Context tab's KV cache fields as they change."""
        context = self.context
        flash = "auto" if context.flash_attention.isChecked() else "off"
        kv_type = str(context.quantize_kv.currentData())
        self.quick.gpu.set_kv(kv_type, flash, not context.low_vram.isChecked())

    # -- settings <-> widgets ------------------------------------------------------------------

    def _forms(self) -> list[Any]:
        return [self.quick, self.network, self.context, self.loaded, self.admin]

    def show_settings(self, settings: HearthSettings) -> None:
        self.settings = settings
        for form in self._forms():
            form.clear_errors()
            form.load(settings)

    def read_settings(self) -> HearthSettings | None:
        """The form as validated settings (unknown keys kept), or None with errors shown."""
        for form in self._forms():
            form.clear_errors()
        values: dict[str, Any] = {}
        for form in self._forms():
            values.update(form.read())
        settings, problems = settings_store.validate_form(self.settings, values)
        problems.update(self.network.problems())
        if problems:
            for key, message in problems.items():
                for form in self._forms():
                    form.show_error(key, message)
            self.show_notice("Some settings need a look: see the messages beside them.", "error")
            return None
        return settings

    def _mirror_duplicated_fields(self) -> None:
        """Fields shown on two tabs (as in KoboldCpp) stay equal."""
        pairs: list[tuple[QWidget, QWidget]] = [
            (self.quick.context_size, self.context.context_size),
            (self.quick.quiet, self.network.quiet),
        ]
        for first, second in pairs:
            if isinstance(first, QSpinBox) and isinstance(second, QSpinBox):
                first.valueChanged.connect(second.setValue)
                second.valueChanged.connect(first.setValue)
            elif isinstance(first, QCheckBox) and isinstance(second, QCheckBox):
                first.toggled.connect(second.setChecked)
                second.toggled.connect(first.setChecked)

    # -- files -----------------------------------------------------------------------------

    def load_file(self, path: Path) -> bool:
        """Load a `.kcpps`; on failure say why and leave the form exactly as it was."""
        try:
            settings = settings_store.load_for_launcher(path)
        except SettingsFileError as exc:
            self.show_notice(f"Could not load settings: {exc}", "error")
            return False
        self.show_settings(settings)
        self._remember(path)
        text, why = settings_store.loaded_notice(path.name, settings)
        self.show_notice(text, "info")
        self.notice.setToolTip(why)  # the keys Hearth does not apply, and why
        return True

    def save_file(self, path: Path) -> Path | None:
        settings = self.read_settings()
        if settings is None:
            return None
        try:
            written = settings_store.save_kcpps(settings, path)
        except OSError as exc:
            self.show_notice(f"Could not save {path}: {exc}", "error")
            return None
        self.settings = settings
        self._remember(written)
        self.show_notice(f"Saved {written}.", "info")
        return written

    def _remember(self, path: Path) -> None:
        if path.parent.resolve() != presets_dir().resolve():
            self.preferences.remember_file(path.resolve())
            self._fill_presets_menu()

    def _ask_load(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self, "Load settings", "", "KoboldCpp settings (*.kcpps *.kcppt);;All (*)"
        )
        if name:
            self.load_file(Path(name))

    def _ask_save(self) -> None:
        name, _ = QFileDialog.getSaveFileName(
            self, "Save settings", "", "KoboldCpp settings (*.kcpps)"
        )
        if name:
            self.save_file(Path(name))

    def _fill_presets_menu(self) -> None:
        self.presets_menu.clear()
        for preset in sorted(presets_dir().glob("*.kcpps")):
            action = self.presets_menu.addAction(preset.stem.replace("-", " ").capitalize())
            action.triggered.connect(lambda _=False, p=preset: self.load_file(p))
        recent = [Path(name) for name in self.preferences.recent_files]
        if recent:
            self.presets_menu.addSection("Recent files")
            for path in recent:
                action = self.presets_menu.addAction(str(path))
                action.triggered.connect(lambda _=False, p=path: self.load_file(p))

    def show_notice(self, text: str, kind: str = "info") -> None:
        self.notice.setText(text)
        self.notice.setToolTip("")
        self.notice.setStyleSheet(NOTICE_STYLES[kind])
        self.notice.show()

    # -- running -------------------------------------------------------------------------

    def launch(self) -> bool:
        """Start the server from the form's settings, in a subprocess."""
        if self.server.running:
            return False
        settings = self.read_settings()
        if settings is None:
            return False
        if port_in_use(settings.listen_host, settings.port_param):
            self.show_notice(
                f"Port {settings.port_param} on {settings.listen_host} is already in use "
                "(another Hearth or KoboldCpp?). Choose another port on the Network tab.",
                "error",
            )
            return False
        self.settings = settings
        self.preferences.last_settings = settings
        try:
            config_dir().mkdir(parents=True, exist_ok=True)
            launch_file = settings_store.save_kcpps(settings, config_dir() / LAUNCH_FILE)
        except OSError as exc:  # a full disk or a read-only config folder: say so, start nothing
            self.show_notice(f"Could not write the launch settings: {exc}", "error")
            return False
        program, arguments = server_command(launch_file)
        self._ready = False
        tls = settings.tls_files()  # a whole pair or none: read_settings refused half
        self._certificates = QSslCertificate.fromPath(tls[0]) if tls else []
        scheme = "http" if tls is None else "https"
        self._base_url = f"{scheme}://{url_host(settings.listen_host)}:{settings.port_param}"
        self.run_view.log.clear()
        self.run_view.show_state("Starting…")
        self.run_view.set_running(True)
        self.launch_button.setEnabled(False)
        self.tabs.setCurrentWidget(self.run_view)
        self.show_notice(f"Starting the server on {self._base_url} …", "info")
        self.server.start(program, arguments)
        self.poller.start(self._base_url)
        self.live.start(self._base_url, self.server.admin_token)
        return True

    def stop(self) -> None:
        self.run_view.show_state("Stopping…")
        self.server.stop()

    def restart(self) -> None:
        if not self.server.running:
            self.launch()
            return
        self.server.exited.connect(self._launch_once_after_exit)
        self.stop()

    def _launch_once_after_exit(self, _code: int, _reason: str) -> None:
        self.server.exited.disconnect(self._launch_once_after_exit)
        self.launch()

    def _trust_own_certificate(self, reply: QNetworkReply, _errors: list[QSslError]) -> None:
        """The pollers trust the server's own certificate, whatever address or authority."""
        if reply.sslConfiguration().peerCertificate() in self._certificates[:1]:
            reply.ignoreSslErrors()

    def open_chat(self) -> None:
        QDesktopServices.openUrl(QUrl(self._base_url + "/"))

    def _on_lines(self, lines: list[str]) -> None:
        self.run_view.log.append_lines(lines)
        if not self._ready:
            for line in lines:
                loading = _LOADING.search(line)
                if loading:
                    self.run_view.show_state(f"Loading model… {loading.group(1)}%")

    def _on_perf(self, perf: dict[str, Any]) -> None:
        if not self.server.running:
            return
        if not self._ready:
            self._ready = True
            self.show_notice(f"Serving on {self._base_url}", "info")
            self.server_ready.emit()
            if self.settings.launch:
                self.open_chat()
        self.run_view.show_perf(perf)

    def _on_live(self, live: dict[str, Any]) -> None:
        if self.server.running:
            self.run_view.show_live(live)

    def _on_abort_answered(self, request_id: str, found: bool) -> None:
        if not found:  # over already, or the server is gone: the row may ask again
            self.run_view.requests.abort_failed(request_id)

    def _on_exited(self, code: int, reason: str) -> None:
        self.poller.stop()
        self.live.stop()
        self.run_view.log.flush()
        self.run_view.set_running(False)
        self.launch_button.setEnabled(True)
        self.run_view.show_state(f"Server {reason} (exit code {code})")
        if reason == "stopped":
            self.show_notice(f"Server stopped (exit code {code}).", "info")
        else:
            tail = "\n".join(self.server.last_lines[-5:])
            self.show_notice(f"Server {reason} (exit code {code}). Last lines:\n{tail}", "error")

    def _on_failed(self, message: str) -> None:
        self.poller.stop()
        self.live.stop()
        self.run_view.set_running(False)
        self.launch_button.setEnabled(True)
        self.show_notice(f"The server could not start: {message}", "error")

    def closeEvent(self, event: QCloseEvent) -> None:
        settings = self.read_settings()
        if settings is not None:
            self.preferences.last_settings = settings
        with contextlib.suppress(OSError):  # remembering is a convenience; closing must work
            settings_store.save_preferences(self.preferences)
        # Wait for the server here: once the window is gone the application quits, and
        # QProcess's destructor would kill the server in the middle of its shutdown.
        self.server.stop_and_wait()
        self.device_probe.stop()
        self.hub.cancel()  # a download in progress stops; its partial file resumes next time
        self.hub.wait()
        super().closeEvent(event)

    def showEvent(self, event: QShowEvent) -> None:
        # The devices are asked for once the window shows (not for windows never shown, as in
        # tests), and only when this build has a GPU backend to choose.
        if self.quick.gpu.has_gpu:
            self.device_probe.start()
        super().showEvent(event)
