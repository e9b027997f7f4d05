"""llama-server's router endpoints for models, on Hearth's model switching.

llama-server in router mode runs one child server per model and lists, loads and unloads them:
GET /models (each model with its `status`), POST /models/load and POST /models/unload, both
with a body `{"model": NAME}`. Hearth switches models inside one process instead (server/core/
engine_pool.py), so these routes list its catalog (--modeldir, else the model served) with
each model's state (server/dialects/routes/router_models.py) and load or unload a model by name as a
model-only job: in the same line as every request, after the running ones end, never evicting
a model mid-answer. Up to --maxloadedmodels stay loaded, least recently used going first.

Differences, on purpose: a load or unload answers once done (llama-server answers at once and
the client polls /models), so a failure is the answer's 500 rather than a `failed` status; an
unknown name is a 404 for both (llama-server's unload says 400).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from server.core.types import FinishReason, GenerationRequest
from server.dialects.chat.request_fields import new_id
from server.dialects.edge.deps import SchedulerDep
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, busy_error
from server.dialects.pipeline.admission import submit
from server.dialects.pipeline.model_choice import ModelChoice
from server.dialects.pipeline.routing import Served, json_route
from server.dialects.routes.router_models import (
    RouterModelList,
    listed_model,
    model_states,
    router_entry,
)

OPENAI = Dialect.OPENAI
router = APIRouter(tags=["llama-server"])


class RouterModelRequest(BaseModel):
    """POST /models/load and /models/unload."""

    model_config = ConfigDict(extra="allow")

    model: str


class RouterDone(TypedDict):
    success: bool


@router.get("/models")
async def router_models(request: Request, scheduler: SchedulerDep) -> RouterModelList:
    """Every model this server can serve, with its state (never loads or wakes one)."""
    states = model_states(scheduler)
    choice: ModelChoice = request.app.state.model_choice
    listed = choice.listed()
    entries = [router_entry(name, path, states, choice) for name, path in listed]
    models = [listed_model(choice.public_name(name), path, choice) for name, path in listed]
    return {"object": "list", "data": entries, "models": models}


@json_route(router, "/models/load", RouterModelRequest, OPENAI)
async def load_model(body: RouterModelRequest, served: Served) -> RouterDone:
    """Load the model named (in line with the requests), answered once it is loaded."""
    name = _catalog_name(served, body.model)
    if model_states(served.scheduler).get(name) in ("loaded", "loading"):
        raise APIError(400, "model is already running", dialect=OPENAI)
    await _model_job(served, name, unload=False)
    return {"success": True}


@json_route(router, "/models/unload", RouterModelRequest, OPENAI)
async def unload_model(body: RouterModelRequest, served: Served) -> RouterDone:
    """Unload the model named once the requests running on it end; the next request naming
    it loads it again."""
    name = _catalog_name(served, body.model)
    if model_states(served.scheduler).get(name) not in ("loaded", "loading"):
        raise APIError(400, "model is not running", dialect=OPENAI)
    choice: ModelChoice = served.request.app.state.model_choice
    if not choice.switches_models:
        raise APIError(400, "this server serves one model, which stays loaded", dialect=OPENAI)
    await _model_job(served, name, unload=True)
    return {"success": True}


def _catalog_name(served: Served, requested: str) -> str:
    """The catalog's name of the model a body names, by the catalog's rules (404 if none)."""
    choice: ModelChoice = served.request.app.state.model_choice
    return choice.named(requested, OPENAI)[0]


async def _model_job(served: Served, name: str, unload: bool) -> None:
    """Queue a model-only job, as Ollama's empty prompt and KoboldCpp's admin reload do, and
    wait for its end: loading or unloading happens on the worker, between jobs."""
    scheduler = served.scheduler
    generation = GenerationRequest(
        request_id=new_id("model-"),
        prompt="",
        max_tokens=1,
        model=name,
        model_only=True,
        keep_alive=0.0 if unload else None,
    )
    job = submit(scheduler, served.model, generation, OPENAI)
    _text, outcome = await scheduler.collect(job)
    if outcome.server_stopping:
        raise busy_error()
    if outcome.finish_reason is not FinishReason.STOP:
        message = outcome.error or f"model '{name}' was not loaded"
        raise APIError(500, message, ErrorKind.SERVER, OPENAI)
