"""The server itself: settings → models → app → uvicorn, then a clean shutdown.

`serve` is what `hearth` runs once server/process/serve.py has read the command line and chose
to serve; `load_models` and `with_models` build the engine pool and the API's model choice.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path
from types import FrameType

from server.base.netcheck import port_in_use
from server.core.load_settings import LoadSettings
from server.core.scheduling.engine import Embedder, Engine, EngineError
from server.core.scheduling.engine_pool import EnginePool
from server.devices.backends import gpu_backends
from server.dialects.edge.api_keys import KeyFileError, KeyRing, reload_on_hangup
from server.dialects.kobold.lite import LiteFeatures, LiteSetupError, lite_features
from server.dialects.pipeline.model_choice import ModelChoice
from server.models.catalog import ModelCatalog
from server.models.fetch import ModelFiles, downloaded_models, model_files_for
from server.models.files import ModelFileError, check_gguf_file
from server.models.projector_files import projector_beside
from server.process.app import create_app
from server.process.console import announce_start
from server.process.exit_codes import EXIT_MODEL_FAILED, EXIT_USAGE
from server.process.http_server import http_server, listening_sockets
from server.process.load_settings import TemplateSettingError, for_model, load_settings
from server.process.tls import TlsFiles
from server.process.tool_setup import ToolSetupFailed, tool_box_for
from server.server_tools.registry import ToolBox
from server.settings.config import HearthSettings

logger = logging.getLogger("hearth")


class StartFailed(Exception):
    """Serving cannot start; the message is the console's line (after "hearth: ")."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def serve(settings: HearthSettings, tls: TlsFiles | None) -> int:
    """Load the model, serve until interrupted, and close the model before returning. `tls`:
    the HTTPS files the settings name, checked (server/process/tls.py)."""
    for host in settings.listen_hosts:  # llama-server's --host takes several addresses
        if port_in_use(host, settings.port_param):
            logger.error(
                "hearth: port %d on %s is already in use (another Hearth or KoboldCpp?); "
                "choose another with --port.",
                settings.port_param,
                host,
            )
            return EXIT_USAGE
    try:
        key_ring, lite, tool_box = _before_the_model(settings)
    except StartFailed as exc:
        logger.error("hearth: %s", exc)
        return exc.exit_code
    try:
        engine, choice = load_models(settings)
    except StartFailed as exc:
        logger.error("hearth: %s", exc)
        if tool_box is not None:
            tool_box.close()
        return exc.exit_code
    # From here SIGTERM (the launcher's Stop, a logout, a service manager) is a normal stop,
    # like Ctrl-C: uvicorn re-raises the signal it caught once it has shut down, and the
    # default SIGTERM action would end the process before the model is closed. (While loading
    # the default is right: there is nothing to close, and an exception raised inside
    # llama.cpp's progress callback would be swallowed by ctypes.)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            app = create_app(
                settings,
                engine,
                model_choice=choice,
                key_ring=key_ring,
                tool_box=tool_box,
                lite=lite,
            )
            announce_start(
                settings,
                engine.model_name,
                engine.chat_template,
                engine.placement,
                gpu_backends(),
            )
            server = http_server(app, settings.listen_host, settings.port_param, tls=tls)
            server.run(listening_sockets(settings.listen_hosts, settings.port_param))
    finally:
        # Closing explicitly: llama-cpp-python's finalizers raise at interpreter shutdown.
        engine.close()
        choice.close()
        if tool_box is not None:
            tool_box.close()
    logger.info("Hearth stopped.")
    return 0


def _before_the_model(settings: HearthSettings) -> tuple[KeyRing, LiteFeatures, ToolBox | None]:
    """What is read before the model loads, so that a bad file stops at once: StartFailed."""
    try:
        key_ring = KeyRing.from_settings(settings)
        reload_on_hangup(key_ring)  # SIGHUP re-reads it, and no longer ends the process
        lite = lite_features(settings)  # --savedatafile, --preloadstory
        tool_box = tool_box_for(settings)  # --tools, MCP servers
    except KeyFileError as exc:
        raise StartFailed(f"--api-key-file {exc}", EXIT_USAGE) from None
    except (LiteSetupError, ToolSetupFailed) as exc:
        raise StartFailed(str(exc), EXIT_USAGE) from None
    return key_ring, lite, tool_box


def load_models(settings: HearthSettings) -> tuple[EnginePool, ModelChoice]:
    """The model (downloaded first when remote), the embeddings model if separate, and the
    pool and model choice around them; StartFailed, with nothing left open, when one fails."""
    # Imported here so `hearth --help` and settings errors never pay for loading llama.cpp.
    from server.core.llama import LlamaCppEngine
    from server.core.llama.embedding.embedder import Embedder as LlamaEmbedder

    try:
        # Built once, before any download or load: a bad chat template stops the start.
        loading = load_settings(settings, projector=None)
        fetched = model_files_for(settings)
        model_path = fetched.model
        projector = start_projector(settings, fetched)
        embeddings_path = embeddings_model_path(settings)
    except (ModelFileError, TemplateSettingError) as exc:
        raise StartFailed(str(exc), EXIT_USAGE) from None
    try:
        engine: Engine = LlamaCppEngine.load(model_path, for_model(loading, model_path, projector))
    except EngineError as exc:
        raise StartFailed(str(exc), EXIT_MODEL_FAILED) from None
    try:
        embedder = None if embeddings_path is None else LlamaEmbedder.load(embeddings_path, loading)
    except EngineError as exc:
        engine.close()
        raise StartFailed(f"--embeddingsmodel {exc}", EXIT_MODEL_FAILED) from None
    try:
        return with_models(settings, loading, model_path, engine, embedder, projector)
    except ModelFileError as exc:
        engine.close()
        if embedder is not None:
            embedder.close()
        raise StartFailed(str(exc), EXIT_USAGE) from None


def embeddings_model_path(settings: HearthSettings) -> Path | None:
    """--embeddingsmodel's file, checked before anything loads (None: the chat model embeds)."""
    if not settings.embeddingsmodel:
        return None
    path = Path(settings.embeddingsmodel).expanduser()
    if not path.is_file():
        raise ModelFileError(f"--embeddingsmodel {path}: no such model file")
    check_gguf_file(path)
    return path


def start_projector(settings: HearthSettings, fetched: ModelFiles) -> Path | None:
    """The start model's projector: --mmproj, else (unless --no-mmproj) the one --hf fetched
    with it, else, for a model inside --modeldir (or the admin folder), the one beside it."""
    if settings.mmproj:
        return Path(settings.mmproj).expanduser()
    if settings.no_mmproj:
        return None
    if fetched.projector is not None or settings.hf:
        return fetched.projector
    model = fetched.model.resolve()
    for value in (settings.modeldir, settings.admin_folder):
        folder = Path(value).expanduser().resolve() if value else None
        if folder is not None and model.is_relative_to(folder):
            paired = projector_beside(fetched.model)
            return None if paired is None else paired.path
    return None


def with_models(
    settings: HearthSettings,
    loading: LoadSettings,
    model_path: Path,
    engine: Engine,
    embedder: Embedder | None,
    projector: Path | None,
) -> tuple[EnginePool, ModelChoice]:
    """The engine behind a pool that loads, switches and unloads models between jobs, and the
    API's model choice: the served model, and with --modeldir (or --admin's folder) every GGUF
    there, each with the projector beside it, and every model downloaded into the Hugging Face
    cache. `embedder`: a separate embeddings model (--embeddingsmodel), which then serves every
    embedding request; `projector`: the served model's (start_projector); `loading`: the load
    settings built once at start, fitted to each model file as it loads."""
    from server.core.llama import LlamaCppEngine

    if projector is None and settings.mmproj:
        projector = Path(settings.mmproj).expanduser()
    catalog = ModelCatalog.scan(
        model_path,
        _folder("--modeldir", settings.modeldir),
        downloaded_models() if settings.modeldir or settings.admin else (),
        settings.defaultmodel,
        _folder("--admindir", settings.admin_folder),
        served_projector=projector,
        pair_projectors=not settings.no_mmproj,
    )
    if catalog.has_model_dir:
        logger.info("Models: %s", ", ".join(catalog.names))
    for entry in catalog.entries:
        paired = catalog.projector_of(entry.path)
        if paired is not None:
            logger.info("Projector for %s: %s (%s)", entry.name, paired.path.name, paired.takes)

    def load(path: Path) -> Engine:
        return LlamaCppEngine.load(path, for_model(loading, path, catalog.projector_for(path)))

    pool = EnginePool(
        engine.model_name,
        engine,
        {entry.name: entry.path for entry in catalog.entries},
        load,
        settings.maxloadedmodels,
        embedder,
    )
    return pool, _model_choice(loading, catalog, pool, engine, model_path)


def _model_choice(
    loading: LoadSettings,
    catalog: ModelCatalog,
    pool: EnginePool,
    engine: Engine,
    model_path: Path,
) -> ModelChoice:
    """The API's model choice over the catalog; what each model takes besides text is its
    projector's (read from the header), the served model's from its loaded engine."""
    from server.core.llama.card import ModelCard

    slots = max(1, loading.parallelrequests)
    choice = ModelChoice(
        catalog,
        lambda path: ModelCard.load(
            path, loading.contextsize, slots, loading.template, loading.options
        ),
        engine.context_size,  # what llama.cpp made of --contextsize
        on_added=pool.add,
        on_removed=pool.forget,
    )
    for entry in catalog.entries:
        paired = catalog.projector_of(entry.path)
        if paired is not None:
            choice.modalities[entry.path] = frozenset(paired.modalities)
    choice.modalities[model_path] = getattr(engine, "modalities", frozenset())
    return choice


def _folder(option: str, value: str | None) -> Path | None:
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise ModelFileError(f"{option} {folder}: no such folder")
    return folder


def _interrupt(_signal: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt
