"""The app factory: one FastAPI app per loaded engine, with the scheduler in its lifespan."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from server import __version__
from server.core.scheduling.engine import Engine
from server.core.scheduling.job import DEFAULT_MAX_PENDING_EVENTS
from server.core.scheduling.scheduler import Scheduler
from server.dialects.anthropic import install as anthropic_routes
from server.dialects.edge.api_keys import KeyRing
from server.dialects.edge.bodies import IgnoredFields
from server.dialects.edge.client_address import trusted_networks
from server.dialects.edge.cors import CORSOriginsMiddleware
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import (
    APIError,
    api_error_handler,
    http_error_handler,
    request_validation_handler,
)
from server.dialects.edge.rate_limit import (
    RateLimitedError,
    RateLimitMiddleware,
    RateLimits,
    rate_limited_handler,
)
from server.dialects.kobold import install as kobold_routes
from server.dialects.kobold.lite import LiteFeatures, lite_features
from server.dialects.llama import install as llama_routes
from server.dialects.ollama import install as ollama_routes
from server.dialects.ollama.pull import PullLocks
from server.dialects.openai import install as openai_routes
from server.dialects.pipeline.model_choice import ModelChoice
from server.dialects.pipeline.openapi import document_request_models
from server.dialects.routes import install as server_routes
from server.dialects.routes.metrics import metrics_registry
from server.dialects.routes.sleep_wake import WakeOnUseMiddleware
from server.dialects.streams.resumable import DEFAULT_STREAM_BYTES, ResumableStreams
from server.dialects.streams.streaming import ClientDisconnectedError, client_gone_handler
from server.process.console import RequestLog
from server.server_tools.registry import ToolBox
from server.settings.config import HearthSettings

DEFAULT_KEEPALIVE_SECONDS = 5.0


# Every route, by the package that serves it (each package's install.py), in matching order.
ROUTE_INSTALLERS = (
    kobold_routes.install,
    openai_routes.install,
    anthropic_routes.install,
    ollama_routes.install,
    llama_routes.install,
    server_routes.install,
)


def create_app(
    settings: HearthSettings,
    engine: Engine,
    *,
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
    request_log: RequestLog | None = None,
    max_pending_events: int = DEFAULT_MAX_PENDING_EVENTS,
    model_choice: ModelChoice | None = None,
    resumable_stream_bytes: int = DEFAULT_STREAM_BYTES,
    key_ring: KeyRing | None = None,
    tool_box: ToolBox | None = None,
    lite: LiteFeatures | None = None,
) -> FastAPI:
    """Build the HTTP app around an already loaded engine.

    The engine is loaded (and later closed) by the caller, so model loading can show progress
    before the server starts listening and tests can pass a scripted engine instead.
    `keepalive_seconds` is how long a stream may stay silent before a keep-alive comment;
    `max_pending_events` how many unread events a stream may have before it is dropped;
    `resumable_stream_bytes` how many bytes of events one resumable stream may retain;
    `key_ring` the API keys already read from the settings (None: read them here);
    `tool_box` the tools /tools serves (server/process/server_tools.py), closed with the app;
    `lite` KoboldAI Lite's features already built from the settings (None: built here;
    LiteSetupError when a file they name is unusable).
    """
    log = request_log or RequestLog(quiet=settings.quiet)
    scheduler = _scheduler(settings, engine, log, max_pending_events)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        scheduler.start()
        try:
            yield
        finally:
            app.state.resumable_streams.shut_down()
            if tool_box is not None:
                tool_box.close()
            scheduler.stop()

    app = FastAPI(title="Hearth", version=__version__, lifespan=lifespan)
    app.state.settings = settings
    app.state.scheduler = scheduler
    app.state.tool_box = tool_box
    app.state.lite = lite_features(settings) if lite is None else lite
    # The API keys (read here unless given: KeyFileError when --api-key-file is unusable).
    app.state.key_ring = KeyRing.from_settings(settings) if key_ring is None else key_ring
    if model_choice is not None:  # the engine is a pool: its models come and go
        app.state.model_info = model_choice.served_info(engine.placement)
    else:
        app.state.model_info = _engine_info(engine)
        model_choice = ModelChoice.only(app.state.model_info)
    model_choice.label_served(settings.alias_list, settings.tag_list)  # --alias, --tags
    app.state.model_choice = model_choice
    app.state.keepalive_seconds = keepalive_seconds
    app.state.resumable_streams = ResumableStreams(
        settings.resumegrace, stream_bytes=resumable_stream_bytes
    )
    _add_request_state(app, settings, scheduler)
    _add_routes_and_handlers(app)
    return app


def _scheduler(
    settings: HearthSettings, engine: Engine, log: RequestLog, max_pending_events: int
) -> Scheduler:
    return Scheduler(
        engine,
        multiuser=settings.multiuser,
        on_finished=log.finished,
        max_pending_events=max_pending_events,
        default_seed=settings.seed,
        owner_share=settings.multiuserperkey,
        sleep_idle_seconds=settings.sleep_idle_seconds,
    )


def _engine_info(engine: Engine) -> ModelInfo:
    """The model of an engine that no pool switches, described by the engine itself."""
    return ModelInfo(
        engine.model_name,
        engine.context_size,
        engine,
        engine.chat_template,
        engine,
        engine.model_path,
        engine.placement,
        getattr(engine, "modalities", frozenset()),  # a scripted engine may have none
    )


def _add_request_state(app: FastAPI, settings: HearthSettings, scheduler: Scheduler) -> None:
    app.state.max_request_bytes = settings.max_request_bytes
    app.state.ignored_fields = IgnoredFields()
    app.state.pull_locks = PullLocks()
    app.state.request_numbers = itertools.count(1)
    # /metrics (--metrics): a registry of this app's own; None answers its 404.
    app.state.metrics_registry = (
        metrics_registry(scheduler, app.state.key_ring) if settings.metrics else None
    )
    app.state.started_at_unix = time.time()
    # Who a request is from behind a proxy, and how often it may generate (issue 29).
    app.state.trusted_proxies = trusted_networks(settings.trustedproxies)
    app.state.rate_limits = RateLimits.of(settings)


def _add_routes_and_handlers(app: FastAPI) -> None:
    app.add_exception_handler(APIError, api_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(RequestValidationError, request_validation_handler)
    app.add_exception_handler(ClientDisconnectedError, client_gone_handler)
    app.add_exception_handler(RateLimitedError, rate_limited_handler)  # with Retry-After
    app.add_middleware(RateLimitMiddleware)
    app.add_middleware(WakeOnUseMiddleware)  # --sleep-idle-seconds: what wakes the model
    # Browsers may call the API straight from a page (hosted APIs often refuse this), from
    # the pages --cors-origins names (server/dialects/edge/cors.py).
    # With tools on, pages from elsewhere are refused unless --cors-origins says otherwise.
    settings = app.state.settings
    tools_on = settings.server_tools_wanted() or app.state.tool_box is not None
    origins = settings.cors_origin_list(tools_on=tools_on)
    app.add_middleware(CORSOriginsMiddleware, origins=origins)
    # Each package registers its own routes; the order is the order routes are matched in.
    for install in ROUTE_INSTALLERS:
        install(app)
    document_request_models(app)
