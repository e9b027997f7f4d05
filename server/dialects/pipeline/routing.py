"""One skeleton per kind of route, whichever dialect registers it.

`generation_route` registers a generation endpoint, given a planner: body → `Generation` (the
`ChatPlan` from its adapter and the `WireFormat` from its formatter); `json_route` registers
any other endpoint with a JSON body, given a handler: body → answer. Both do, once: the password
check in the dialect's error shape, parsing the body (size, depth and validation errors in that
shape too), the model the body names when the route takes one, the remote image URLs it names
fetched when --remoteimages allows (server/dialects/media/remote_media.py), and the OpenAPI
description of the body and the answer. A generation is then served by
server/dialects/pipeline/serving.py (several choices by server/dialects/pipeline/choices.py).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel

from server.core.scheduling.scheduler import Scheduler
from server.dialects.chat.plans import ChatOptions, ChatPlan
from server.dialects.chat.request_fields import new_id
from server.dialects.chat.thinking import server_thinking
from server.dialects.edge.bodies import parse_json_body
from server.dialects.edge.deps import (
    ModelInfo,
    ModelInfoDep,
    SchedulerDep,
    SettingsDep,
    key_required,
)
from server.dialects.edge.errors import Dialect
from server.dialects.media.local_media import read_local_images
from server.dialects.media.remote_media import fetch_remote_images
from server.dialects.pipeline.admission import named_model
from server.dialects.pipeline.choices import choice_plans, serve_choices
from server.dialects.pipeline.openapi import json_answer, json_body
from server.dialects.pipeline.preparing import engine_ready
from server.dialects.pipeline.serving import load_or_unload, serve
from server.dialects.streams.resumable import wants_resumable
from server.dialects.streams.wire import ChoicesFormat, WireFormat
from server.settings.config import HearthSettings


@dataclass(frozen=True, slots=True)
class Served:
    """What a route's planner or handler may use besides its body: `model` is the model the
    body names when the route takes one, else the model the server started with."""

    request: Request
    settings: HearthSettings
    model: ModelInfo
    scheduler: Scheduler

    def chat_options(self, id_prefix: str) -> ChatOptions:
        return ChatOptions(
            self.model.chat_template,
            new_id(id_prefix),
            self.settings.defaultgenamt,
            self.settings.jinja_tools,
            server_thinking(self.settings.reasoning_format, self.settings.reasoning_budget),
        )

    def prompt_size(self, plan: ChatPlan) -> int:
        """The prompt tokens a planned generation sends (when nothing has to be cut to fit):
        what the token-counting routes answer, planned as their generation route plans."""
        generation = plan.generation
        return len(self.model.tokenizer.tokenize(generation.memory + generation.prompt))


@dataclass(frozen=True, slots=True)
class Generation:
    """A planned generation, the wire it is answered in, and whether it streams."""

    plan: ChatPlan
    wire: WireFormat[Any]
    stream: bool
    # A request that only loads or unloads its model (plan.generation.model_only): the whole
    # answer, given "load" or "unload" (Ollama's empty prompt).
    model_only_answer: Callable[[str], Mapping[str, object]] | None = None
    # OpenAI's `n`: this many replies, each its own generation (`wire` is a ChoicesFormat).
    choices: int = 1
    # The body asked for a stream that survives a dropped connection
    # (server/dialects/streams/resumable.py); the `X-Hearth-Resumable` header asks the same of any
    # SSE route.
    resumable: bool = False


Body = TypeVar("Body", bound=BaseModel)
Planner = Callable[[Body, Served], Generation]
Handler = Callable[[Body, Served], Awaitable[Any]]


def generation_route(
    router: APIRouter, path: str, body_model: type[Body], answer: Any, dialect: Dialect
) -> Callable[[Planner[Body]], Planner[Body]]:
    """Register a generation endpoint at `path` serving the decorated planner's generation.
    `answer` documents the whole (non-streamed) answer's shape, or is None."""

    def register(planner: Planner[Body]) -> Planner[Body]:
        async def endpoint(
            request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
        ) -> Response:
            body = await parse_json_body(request, body_model, dialect)
            model = await named_model(request, scheduler, getattr(body, "model", None), dialect)
            # --remoteimages, --media-path: image URLs read into data: URIs (adapters do no I/O)
            await fetch_remote_images(body, settings.remoteimages, dialect)
            await read_local_images(body, settings.media_path, dialect)
            served = Served(request, settings, model, scheduler)
            return await _generate(served, planner(body, served))

        router.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            name=planner.__name__,
            dependencies=[key_required(dialect)],
            openapi_extra=json_body(body_model),
            responses=None if answer is None else json_answer(answer),
        )
        return planner

    return register


async def _generate(served: Served, generation: Generation) -> Response:
    """Serve a planned generation: load or unload only, several choices, or one."""
    request, scheduler, model = served.request, served.scheduler, served.model
    plan, wire, stream = generation.plan, generation.wire, generation.stream
    plan = await engine_ready(plan, model, wire.dialect, stream=stream)
    resumable = stream and (generation.resumable or wants_resumable(request))
    if generation.model_only_answer is not None:
        answer = generation.model_only_answer
        return await load_or_unload(scheduler, model, plan, wire.dialect, answer)
    if generation.choices > 1:
        assert isinstance(wire, ChoicesFormat)
        plans = choice_plans(plan, generation.choices, served.settings.seed)
        return await serve_choices(
            request, scheduler, model, plans, wire, stream=stream, resumable=resumable
        )
    return await serve(request, scheduler, model, plan, wire, stream=stream, resumable=resumable)


def json_route(
    router: APIRouter,
    path: str,
    body_model: type[Body],
    dialect: Dialect,
    *,
    answer: Any = None,
    names_model: bool = False,
    key: bool = True,
    optional: bool = False,
    methods: Sequence[str] = ("POST",),
    name: str | None = None,
) -> Callable[[Handler[Body]], Handler[Body]]:
    """Register an endpoint at `path` answering the decorated handler's answer to its body.

    As FastAPI's own decorators, the handler's return annotation is the answer's validated
    shape, unless it returns a `Response` (whose JSON `answer` then documents). `names_model`:
    `Served.model` is the model the body's `model` names (404 if none matches); `key`: the
    password guards the route; `optional`: an empty body stands for `{}`."""

    def register(handler: Handler[Body]) -> Handler[Body]:
        async def endpoint(
            request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
        ) -> Any:
            body = await parse_json_body(request, body_model, dialect, optional=optional)
            if names_model:  # a body planned as its generation route's (token counts…)
                model = await named_model(request, scheduler, getattr(body, "model", None), dialect)
                await fetch_remote_images(body, settings.remoteimages, dialect)
                await read_local_images(body, settings.media_path, dialect)
            return await handler(body, Served(request, settings, model, scheduler))

        returns = typing.get_type_hints(handler).get("return")
        raw = inspect.isclass(returns) and issubclass(returns, Response)
        router.add_api_route(
            path,
            endpoint,
            methods=list(methods),
            name=name or handler.__name__,
            description=inspect.cleandoc(handler.__doc__ or ""),
            dependencies=[key_required(dialect)] if key else None,
            openapi_extra=json_body(body_model, required=not optional),
            response_model=None if raw else returns,
            responses=None if answer is None else json_answer(answer),
        )
        return handler

    return register
