"""Waking a sleeping server (--sleep-idle-seconds) for the requests that wake llama-server.

A generation wakes the server by itself: its job loads the model it needs. llama-server also
wakes for the requests that read its model without generating: tokenizing, counting a prompt's
tokens, rendering the template, its slots and LoRA adapters. Hearth answers those from the
model's card (a vocabulary-only load) and needs no engine for them, but wakes for them too, as
clients expect: one that counts its prompt is about to send it, and the model loads meanwhile.
The read-only routes (/health, /props, /models, /metrics, …) never wake it.

The wake comes after the route's own checks passed (a request refused for its key or its body
wakes nothing): it runs when the answer starts, a model-only job in line with every request,
and the answer goes out once the model is loaded.
"""

from __future__ import annotations

import itertools
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.core.scheduling.request_queue import QueueFullError
from server.core.scheduling.scheduler import Scheduler
from server.core.types import GenerationRequest

logger = logging.getLogger(__name__)

# llama-server's routes that wake it without generating (its others either generate or, as
# /health, /props, /models and /metrics, answer while it sleeps).
WAKING_PATHS = frozenset(
    {"/tokenize", "/detokenize", "/apply-template", "/slots", "/lora-adapters", "/props"}
    | {"/chat/completions/input_tokens", "/v1/chat/completions/input_tokens"}
    | {"/responses/input_tokens", "/v1/responses/input_tokens", "/v1/messages/count_tokens"}
)
_numbers = itertools.count(1)


def wakes(scope: Scope) -> bool:
    path: str = scope["path"]
    if path == "/props":  # reading it never wakes; only llama-server's POST /props does
        return bool(scope["method"] == "POST")
    return path in WAKING_PATHS or path.startswith("/slots/")


class WakeOnUseMiddleware:
    """Wakes a sleeping server before the answer of a request on WAKING_PATHS goes out."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = getattr(scope.get("app"), "state", None)
        scheduler: Scheduler | None = getattr(state, "scheduler", None)
        if scope["type"] != "http" or scheduler is None or not wakes(scope):
            await self.app(scope, receive, send)
            return

        async def send_once_awake(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                await wake(scheduler)
            await send(message)

        await self.app(scope, receive, send_once_awake)


async def wake(scheduler: Scheduler) -> None:
    """Load the model the server slept on (a model-only job naming none), if it sleeps."""
    if not scheduler.sleeping:
        return
    request = GenerationRequest(
        request_id=f"wake-{next(_numbers)}", prompt="", max_tokens=1, model_only=True
    )
    try:
        job = scheduler.submit(request)
    except QueueFullError:  # a full line wakes it anyway, soon
        return
    _text, outcome = await scheduler.collect(job)
    if outcome.error:
        logger.warning("Waking from sleep failed: %s", outcome.error)
