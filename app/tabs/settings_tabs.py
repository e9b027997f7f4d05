"""The settings tabs, KoboldCpp's layout: Quick Launch, Network, Context, Admin.

Each tab moves data both ways through two explicit methods: `load(settings)` fills the
widgets, `read()` returns the values as settings keys. Tabs never save or validate on their
own; the main window does both. Only settings the server honours appear.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPushButton, QWidget

from app.hub_client import HubClient
from app.hub_dialog import HubSearchDialog
from app.model_info import describe_model
from app.settings_store import LAUNCHER_MIN_MULTIUSER
from app.tabs.fields import (
    ERROR_STYLE,
    SettingsForm,
    file_picker,
    folder_picker,
    line_edit,
    spin_box,
)
from app.tabs.gpu_fields import GpuFields
from server.devices.backends import gpu_backends as find_gpu_backends
from server.models.files import bundled_model_file
from server.settings.config import HearthSettings

INFO_STYLE = "color: #5f6368;"  # a grey note, not an error
CONTEXT_TOOLTIP = "Tokens the model can see at once: prompt plus reply (256 to 262144)."
MODEL_DIR_TOOLTIP = (
    "Every GGUF in this folder (subfolders too) is listed by /v1/models, /api/tags and "
    "/api/admin/list_options, and a request's model field switches to it; requests naming "
    "no model get the model loaded now. Empty: serve the GGUF Text Model above only."
)
MAX_LOADED_TOOLTIP = (
    "Models of the folder kept loaded at once, each in its own memory; loading one more "
    "unloads the least recently used. Needs a model folder."
)
DEFAULT_MODEL_TOOLTIP = (
    "The model (its name as /v1/models lists it) that serves requests naming a model the "
    "folder does not have. Empty: those requests get 'model not found'. Needs a model folder."
)
ADMIN_TOOLTIP = (
    "KoboldCpp's admin mode: clients may switch the model with /api/admin/reload_config, "
    "choosing among what /api/admin/list_options lists. Hearth switches in place, without "
    "restarting the server."
)
ADMIN_DIR_TOOLTIP = (
    "Folder of the .kcpps files and GGUF models /api/admin/list_options offers to switch to "
    "(a .kcpps file switches to its model). Empty: the Model Folder of the Quick Launch tab."
)
ADMIN_PASSWORD_TOOLTIP = (
    "Required as 'Authorization: Bearer …' (or x-api-key) on the admin API. Empty: the "
    "server's password (Network tab) guards it; with neither, anyone who can reach the port "
    "may switch the model."
)

METRICS_TOOLTIP = (
    "Serve Prometheus metrics at /metrics on the server's address (e.g. "
    "http://127.0.0.1:5001/metrics), as llama-server's --metrics does: "
    "llama-server's llamacpp:* figures (tokens, speeds, requests running and waiting) and "
    "Hearth's own (503s, aborts, disconnects, queue wait). The password, when set, guards it."
)

RPC_TOOLTIP = (
    "Other machines running `hearth rpc-worker` (llama.cpp's RPC), as host:port, separated "
    "by commas: their GPUs (or memory) take layers of the model as if they were this "
    "machine's, for a model too big for it (llama-server's --rpc). llama.cpp's RPC has no "
    "password: use it only on a network you trust. Empty: every layer stays here."
)


EMBEDDINGS_MODEL_TOOLTIP = (
    "A separate GGUF for /v1/embeddings, /api/embed and /api/extra/embeddings (KoboldCpp's "
    "--embeddingsmodel), such as nomic-embed or bge. Empty: the text model embeds, which is "
    "slow for long inputs on models with a large vocabulary."
)


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
        self.model_path = line_edit("Bundled model: Gemma 3 270M (Q4_K_M)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._choose_model)
        self.search_hub = QPushButton("Search Hugging Face…")
        self.search_hub.clicked.connect(self.open_hub_search)
        picker = QWidget()
        picker_row = QHBoxLayout(picker)
        picker_row.setContentsMargins(0, 0, 0, 0)
        picker_row.addWidget(self.model_path, 1)
        picker_row.addWidget(browse)
        picker_row.addWidget(self.search_hub)
        self.add_row(
            "model_param",
            "GGUF Text Model:",
            picker,
            "The GGUF model to serve. Leave empty for the bundled Gemma 3 270M.",
        )
        self.model_info = QLabel()
        self.model_info.setWordWrap(True)
        self._layout.addRow("", self.model_info)
        self.model_dir = line_edit("none: serve the model above only")
        self.model_dir.setToolTip(MODEL_DIR_TOOLTIP)
        self.add_row(
            "modeldir",
            "Model Folder:",
            folder_picker(self.model_dir, "Choose a folder of GGUF models"),
            MODEL_DIR_TOOLTIP,
        )
        self.max_loaded = spin_box("maxloadedmodels")
        self.add_row("maxloadedmodels", "Max Loaded Models:", self.max_loaded, MAX_LOADED_TOOLTIP)
        self.default_model = line_edit("none: unknown names are not found")
        self.add_row("defaultmodel", "Default Model:", self.default_model, DEFAULT_MODEL_TOOLTIP)
        self.embeddings_model = line_edit("none: the text model embeds")
        self.add_row(
            "embeddingsmodel",
            "Embeddings Model:",
            file_picker(
                self.embeddings_model,
                "Choose a GGUF embedding model",
                "GGUF models (*.gguf);;All files (*)",
            ),
            EMBEDDINGS_MODEL_TOOLTIP,
        )
        # Both mean something only with a folder; their values are kept (and saved) either way.
        self.model_dir.textChanged.connect(self._model_dir_changed)
        self._model_dir_changed()
        self.context_size = spin_box("contextsize", step=256)
        self.add_row("contextsize", "Context Size:", self.context_size, CONTEXT_TOOLTIP)
        self.threads = spin_box("threads", special="Auto")
        self.add_row(
            "threads",
            "Threads:",
            self.threads,
            "CPU threads for generation. Auto uses every core (up to 8).",
        )
        self.gpu = GpuFields(backends, self)
        self.gpu_layers, self.gpu_note = self.gpu.gpu_layers, self.gpu.note
        self.add_row("usevulkan", "Backend:", self.gpu.backend, self.gpu.backend_tip)
        self.add_row("gpulayers", "GPU Layers:", self.gpu.layers_row(), self.gpu.layers_tip)
        self.model_path.editingFinished.connect(self._model_changed)
        self.context_size.valueChanged.connect(self._model_changed)
        self.launch_browser = self.add_check(
            "launch", "Launch Browser", "Open the server's page in a browser once it is ready."
        )
        self.quiet = self.add_check(
            "quiet", "Quiet Mode", "Hide prompts and replies in the log (figures still show)."
        )
        # No "Use Jinja" box: Hearth always uses the model's own chat template when the GGUF
        # has one (KoboldCpp's --jinja is implied), and the console says when it has none.
        # The `jinja` key of a .kcpps file is kept as it was.

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
        info = describe_model(usable, self.context_size.value())
        self.model_info.setText(info.text)
        self.model_info.setStyleSheet(ERROR_STYLE if info.problem else INFO_STYLE)

    def load(self, settings: HearthSettings) -> None:
        self.model_path.setText(settings.model_param or "")
        self.model_dir.setText(settings.modeldir or "")
        self.max_loaded.setValue(settings.maxloadedmodels)
        self.default_model.setText(settings.defaultmodel or "")
        self.embeddings_model.setText(settings.embeddingsmodel or "")
        self.context_size.setValue(settings.contextsize)
        self.threads.setValue(settings.threads if settings.threads > 0 else -1)
        # On a CPU-only build the fields show "None" but the loaded values are saved back as
        # they were, so a .kcpps written for a GPU machine survives a round trip here.
        self.gpu.load(settings)
        self._model_changed()
        self.launch_browser.setChecked(bool(settings.launch))
        self.quiet.setChecked(settings.quiet)

    def read(self) -> dict[str, Any]:
        return {
            "model_param": self.model_path.text().strip() or None,
            "modeldir": self.model_dir.text().strip() or None,
            "maxloadedmodels": self.max_loaded.value(),
            "defaultmodel": self.default_model.text().strip() or None,
            "embeddingsmodel": self.embeddings_model.text().strip() or None,
            "contextsize": self.context_size.value(),
            "threads": self.threads.value(),
            **self.gpu.read(),
            "launch": self.launch_browser.isChecked(),
            "quiet": self.quiet.isChecked(),
        }


class NetworkTab(SettingsForm):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host = line_edit("127.0.0.1 (this computer only)")
        self.add_row(
            "host",
            "Host:",
            self.host,
            "Interface to listen on. Empty: this computer only. 0.0.0.0: every "
            "network this computer is on (set a password then).",
        )
        self.port = spin_box("port_param")
        self.add_row("port_param", "Port:", self.port, "TCP port of every API (default 5001).")
        self.multiuser = spin_box("multiuser", minimum=LAUNCHER_MIN_MULTIUSER)
        self.add_row(
            "multiuser",
            "Multiuser Queue:",
            self.multiuser,
            "Requests in flight, counting the one generating; more get HTTP 503. "
            "Waiters are served in arrival order.",
        )
        self.parallel = spin_box("parallelrequests", minimum=1)  # ≤ 1 shows as 1
        self.add_row(
            "parallelrequests",
            "Parallel Requests:",
            self.parallel,
            "Requests generated together (1 = one at a time).",
        )
        self.password = line_edit("none: anyone who can reach the port may use it", password=True)
        self.add_row(
            "password",
            "Password:",
            self.password,
            "Required as 'Authorization: Bearer …' (or Anthropic's x-api-key) on the text APIs.",
        )
        self.quiet = self.add_check(
            "quiet", "Quiet Mode", "Hide prompts and replies in the log (figures still show)."
        )
        self.metrics = self.add_check("metrics", "Prometheus Metrics", METRICS_TOOLTIP)
        self.rpc = line_edit("none: every layer on this computer")
        self.add_row("rpc", "RPC Workers:", self.rpc, RPC_TOOLTIP)

    def load(self, settings: HearthSettings) -> None:
        self.host.setText(settings.host)
        self.port.setValue(settings.port_param)
        self.multiuser.setValue(settings.multiuser)
        self.parallel.setValue(max(settings.parallelrequests, 1))
        self.password.setText(settings.password or "")
        self.quiet.setChecked(settings.quiet)
        self.metrics.setChecked(settings.metrics)
        self.rpc.setText(settings.rpc or "")

    def read(self) -> dict[str, Any]:
        return {
            "host": self.host.text().strip(),
            "port_param": self.port.value(),
            "multiuser": self.multiuser.value(),
            "parallelrequests": self.parallel.value(),
            "password": self.password.text() or None,
            "quiet": self.quiet.isChecked(),
            "metrics": self.metrics.isChecked(),
            "rpc": self.rpc.text().strip() or None,
        }


class ContextTab(SettingsForm):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context_size = spin_box("contextsize", step=256)
        self.add_row("contextsize", "Context Size:", self.context_size, CONTEXT_TOOLTIP)
        self.default_gen = spin_box("defaultgenamt")
        self.add_row(
            "defaultgenamt",
            "Default Gen Amt:",
            self.default_gen,
            "Tokens generated when a request does not say (frontends usually do).",
        )
        self.batch_size = spin_box("batchsize", step=16, minimum=16)
        self.add_row(
            "batchsize",
            "Batch Size:",
            self.batch_size,
            "Prompt tokens processed per step: larger reads long prompts faster.",
        )
        self.fast_forward = self.add_check(
            "nofastforward",
            "FastForwarding",
            "Reuse the cached start of the previous prompt instead of reading it again.",
        )
        self.context_shift = self.add_check(
            "noshift",
            "Use ContextShift",
            "When a chat outgrows the context, trim its start and shift the cache instead of "
            "reading everything again. Parallel Requests turn it off.",
        )
        self.jinja_tools = self.add_check(
            "jinja_tools",
            "Jinja for Tools",
            "Tool calls in the model's own format, streamed live when Hearth knows it "
            "(<tool_call> tags). The model's own chat template is always used when it has "
            "one, so there is no separate Use Jinja box.",
        )

    def load(self, settings: HearthSettings) -> None:
        self.context_size.setValue(settings.contextsize)
        self.default_gen.setValue(settings.defaultgenamt)
        self.batch_size.setValue(settings.batchsize if settings.batchsize >= 16 else 512)
        self.fast_forward.setChecked(not settings.nofastforward)
        self.context_shift.setChecked(not settings.noshift)
        self.jinja_tools.setChecked(settings.jinja_tools)

    def read(self) -> dict[str, Any]:
        return {
            "contextsize": self.context_size.value(),
            "defaultgenamt": self.default_gen.value(),
            "batchsize": self.batch_size.value(),
            "nofastforward": not self.fast_forward.isChecked(),
            "noshift": not self.context_shift.isChecked(),
            "jinja_tools": self.jinja_tools.isChecked(),
        }


class AdminTab(SettingsForm):
    """KoboldCpp's Admin tab: model switching over the admin API."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.admin = self.add_check("admin", "Enable Model Switching", ADMIN_TOOLTIP)
        self.admin_dir = line_edit("same as the model folder")
        self.admin_dir.setToolTip(ADMIN_DIR_TOOLTIP)
        self.admin_dir_picker = folder_picker(self.admin_dir, "Choose the admin folder")
        self.add_row("admindir", "Admin Folder:", self.admin_dir_picker, ADMIN_DIR_TOOLTIP)
        self.admin_password = line_edit("none: no key asked", password=True)
        self.add_row(
            "adminpassword", "Admin Password:", self.admin_password, ADMIN_PASSWORD_TOOLTIP
        )
        # The folder and password matter only in admin mode; their values are kept either way.
        self.admin.toggled.connect(self._admin_toggled)
        self._admin_toggled(self.admin.isChecked())

    def _admin_toggled(self, enabled: bool) -> None:
        self.admin_dir_picker.setEnabled(enabled)  # the field and its Browse… button
        self.admin_password.setEnabled(enabled)

    def load(self, settings: HearthSettings) -> None:
        self.admin.setChecked(settings.admin)
        self.admin_dir.setText(settings.admindir or "")
        self.admin_password.setText(settings.adminpassword or "")

    def read(self) -> dict[str, Any]:
        return {
            "admin": self.admin.isChecked(),
            "admindir": self.admin_dir.text().strip() or None,
            "adminpassword": self.admin_password.text() or None,
        }
