"""Admitting a request, whichever dialect and whatever its kind: which model it runs on, and
its place in the queue (503 with KoboldCpp's body when full).
"""

from __future__ import annotations

import dataclasses

from fastapi import Request

from server.core.scheduling.job import Job
from server.core.scheduling.scheduler import OwnerShareFullError, QueueFullError, Scheduler
from server.core.types import GenerationRequest
from server.dialects.edge.api_keys import key_name
from server.dialects.edge.client_address import cache_owner, client_address
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, busy_error
from server.dialects.edge.rate_limit import admit as count_against_rate_limits
from server.dialects.pipeline.model_choice import ModelChoice


async def named_model(
    request: Request, scheduler: Scheduler, name: str | None, dialect: Dialect
) -> ModelInfo:
    """The model a body names (the dialect's 404 if none matches), else the one serving now."""
    choice: ModelChoice = request.app.state.model_choice
    return await choice.info_for(name, dialect, scheduler.snapshot().serving)


def on_model(model: ModelInfo, generation: GenerationRequest) -> GenerationRequest:
    """The generation, to be run on `model` (the scheduler loads it first if need be)."""
    return dataclasses.replace(generation, model=model.name)


def submit(
    scheduler: Scheduler, model: ModelInfo, generation: GenerationRequest, dialect: Dialect
) -> Job:
    """Take a queue place or answer 503 with KoboldCpp's body (the same for every dialect).

    A JSON schema (response format, tool parameters) that cannot become a grammar is refused
    here with a 400, before any byte of a stream: found later it could only be a failure."""
    if generation.json_schema is not None:
        try:
            model.schemas.check_json_schema(generation.json_schema)
        except ValueError as exc:
            raise APIError(400, f"Unusable JSON schema: {exc}", dialect=dialect) from None
    elif generation.grammar is not None:
        try:
            model.schemas.check_grammar(generation.grammar)
        except ValueError as exc:
            raise APIError(400, f"Invalid grammar: {exc}", dialect=dialect) from None
    refuse_media_it_cannot_read(model, generation, dialect)
    # Who asked and how, for the launcher's live view of requests
    # (server/dialects/routes/admin_live.py), the private prompt cache and the fair queue's turns
    # (one identity for both).
    owner = cache_owner()
    generation = dataclasses.replace(
        generation,
        client=client_address(),
        dialect=dialect.value,
        key_name=key_name(),
        cache_owner=owner,
        queue_owner=owner,
    )
    count_against_rate_limits(generation, dialect)  # --ratelimit, --keyratelimit: the 503
    try:
        job = scheduler.submit(generation)
    except OwnerShareFullError as exc:
        raise share_full_error(exc.share) from None
    except QueueFullError:
        raise busy_error() from None
    scheduler.count_admitted(dialect.value)
    return job


def share_full_error(share: int) -> APIError:
    """--multiuserperkey's refusal: the busy 503 in the same (KoboldCpp's) body, saying that
    it is this key's or address's share of the queue that is full, not the whole queue."""
    message = (
        f"Your share of the queue is full: {share} requests in flight for this API key or "
        "address (--multiuserperkey); please try again when one has finished."
    )
    body = {"detail": {"msg": message, "type": "service_unavailable"}}
    return APIError(503, message, ErrorKind.SERVER, body=body)


# The model's modality that reads each kind of media item.
_READS = {"image": "vision", "audio": "audio"}


def refuse_media_it_cannot_read(
    model: ModelInfo, generation: GenerationRequest, dialect: Dialect
) -> None:
    """A 400 for an image sent to a model that has no vision (no --mmproj, or a projector
    for another model), or a sound to one that cannot hear: answered without it, the reply
    would be about a picture nobody showed the model."""
    for item in generation.media:
        if _READS.get(item.kind) not in model.modalities:
            can = " and ".join(sorted(model.modalities))
            reason = f"its projector takes {can} only" if can else "it has no projector (--mmproj)"
            raise APIError(
                400,
                f"{item.kind} input is not supported by {model.name}: {reason}",
                dialect=dialect,
            )
