"""What a planned generation goes through before it is queued, whichever route planned it
(server/dialects/pipeline/routing.py's skeleton, and llama-server's /completion and /infill, which
serve their plans themselves): its too-large images scaled down off the event loop
(image_scaling.py), and on the OpenAI dialect (OpenAI's and llama-server's routes) a prompt
longer than the context refused rather than cut at the front, as both of them do.
"""

from __future__ import annotations

import asyncio
import dataclasses

from server.core.scheduling.engine import ContextOverflow
from server.core.types import GenerationRequest
from server.dialects.chat.plans import ChatPlan
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import Dialect, context_overflow_error
from server.dialects.media.image_scaling import with_images_scaled


async def engine_ready(
    plan: ChatPlan, model: ModelInfo, dialect: Dialect, *, stream: bool
) -> ChatPlan:
    generation = await with_images_scaled(plan.generation, dialect)
    if dialect is Dialect.OPENAI:
        generation = dataclasses.replace(generation, refuse_overflow=True)
        if stream and not generation.media:
            await _refuse_overflow_early(model, generation)
    if generation is plan.generation:
        return plan
    return dataclasses.replace(plan, generation=generation)


async def _refuse_overflow_early(model: ModelInfo, request: GenerationRequest) -> None:
    """A stream's headers go out before the engine reads its prompt, so a prompt over the
    context is found here first: a plain 400, as llama-server's, not an error inside a 200
    stream. Counting that fails otherwise is left to the engine, which says why in-band."""
    try:
        await asyncio.to_thread(model.tokenizer.count_prompt_tokens, request)
    except ContextOverflow as exc:
        sizes = (exc.prompt_tokens, exc.context)
        raise context_overflow_error(sizes, str(exc), Dialect.OPENAI) from None
    except Exception:
        return
