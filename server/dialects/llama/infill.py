"""llama-server's /infill: fill-in-the-middle for code editors (llama.vscode and others).

The body is a /completion body (sampling, `stream`, `n_predict`, ...) with the code around the
cursor: `input_prefix` and `input_suffix` (text, or token ids and text mixed), `input_extra`
(other files, `[{"filename", "text"}]`) and `prompt` (what is typed at the cursor). The model's
own FIM tokens build the prompt (server/core/llama/loading/infill.py, as llama-server builds it);
the answer is /completion's, its `prompt` the built prompt with its special tokens written out.

A model without prefix, suffix and middle tokens gets llama-server's 501 `not_supported_error`
naming the ones it lacks; unlike llama-server, a malformed body is a 400 on any model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol, runtime_checkable

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import Field

from server.core.types import InfillParts
from server.dialects.chat.plans import ChatPlan
from server.dialects.chat.request_fields import new_id
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, error_body
from server.dialects.llama import adapter
from server.dialects.llama.formatter import NativeCompletionWire
from server.dialects.llama.schemas import CompletionRequest, LlamaBase
from server.dialects.pipeline.routing import Served, json_route
from server.dialects.pipeline.serving import serve
from server.dialects.routes import lora
from server.dialects.streams.resumable import wants_resumable

router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI
NOT_SUPPORTED = 501
# llama-server's name for a file sent without one.
UNNAMED_FILE = "tmp"

CodeText = str | list[str | int]  # text, or token ids and text mixed (llama-server's rule)


class InfillFile(LlamaBase):
    """One other file of the project, as llama.vscode sends it (`input_extra`)."""

    text: str
    filename: str = UNNAMED_FILE


class InfillRequest(CompletionRequest):
    """POST /infill: a /completion body with the code around the cursor."""

    input_prefix: CodeText = Field(description="The code before the cursor.")
    input_suffix: CodeText = Field(description="The code after the cursor.")
    input_extra: list[InfillFile] = Field(default_factory=list)
    prompt: str = Field(default="", description="Text typed at the cursor, after the prefix.")


@runtime_checkable
class FimVocabulary(Protocol):
    """A model's vocabulary that can build fill-in-the-middle prompts
    (server/core/llama/loading/model.py's Vocabulary)."""

    def missing_fim_tokens(self) -> list[str]: ...

    def infill_prompt(
        self, parts: InfillParts, batch: int, generate: int, spm: bool
    ) -> list[int]: ...


def not_supported(message: str) -> APIError:
    """llama-server's 501 for a feature the server or its model lacks."""
    body = dict(error_body(OPENAI, message, ErrorKind.SERVER))
    body["error"] = {**body["error"], "type": "not_supported_error", "code": NOT_SUPPORTED}  # type: ignore[dict-item]
    return APIError(NOT_SUPPORTED, message, ErrorKind.SERVER, body=body)


def fim_vocabulary(model: ModelInfo) -> FimVocabulary:
    """The model's vocabulary if it has every FIM token /infill needs, else the 501. A
    model's card holds it; a stand-in engine has none, as a model without FIM tokens."""
    vocabulary = getattr(model.tokenizer, "vocabulary", None)
    if not isinstance(vocabulary, FimVocabulary):
        raise _no_infill(["prefix", "suffix", "middle"])
    missing = vocabulary.missing_fim_tokens()
    if missing:
        raise _no_infill(missing)
    return vocabulary


def _no_infill(missing: list[str]) -> APIError:
    lacking = " ".join(f"{role} token is missing." for role in missing)
    return not_supported(f"Infill is not supported by this model: {lacking}")


def infill_plan(body: InfillRequest, served: Served) -> ChatPlan:
    """The request as a /completion of the built prompt's token ids."""
    vocabulary = fim_vocabulary(served.model)
    tokenizer, settings = served.model.tokenizer, served.settings
    plan = adapter.completion_plan(body, "", new_id("cmpl-"), tokenizer, settings.defaultgenamt)
    parts = InfillParts(
        _parts(body.input_prefix),
        _parts(body.input_suffix),
        tuple((item.filename, item.text) for item in body.input_extra),
        body.prompt,
    )
    generation = plan.generation
    try:
        ids = vocabulary.infill_prompt(
            parts, settings.batch_size, generation.max_tokens, settings.spm_infill
        )
    except ValueError as exc:
        raise APIError(400, str(exc), dialect=OPENAI) from None
    generation = replace(
        generation, prompt=tokenizer.detokenize(ids, special=True), prompt_tokens=tuple(ids)
    )
    return lora.with_lora(replace(plan, generation=generation), body.lora, settings, OPENAI)


def _parts(value: CodeText) -> str | tuple[str | int, ...]:
    return value if isinstance(value, str) else tuple(value)


@json_route(router, "/infill", InfillRequest, OPENAI, names_model=True)
async def infill(body: InfillRequest, served: Served) -> Response:
    """Fill in the middle: the code that goes between `input_prefix` and `input_suffix`."""
    plan = infill_plan(body, served)
    model = served.model
    wire = NativeCompletionWire(body, model.name, plan.generation, model.context_size)
    resumable = body.stream and wants_resumable(served.request)
    return await serve(
        served.request,
        served.scheduler,
        model,
        plan,
        wire,
        stream=body.stream,
        resumable=resumable,
    )
