"""KoboldAI generate requests → the scheduler's GenerationRequest."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from server.core.scheduling.engine import Tokenizer
from server.core.types import MEDIA_MARKER, GenerationRequest, MediaInput
from server.dialects.chat.token_bias import resolve_logit_bias
from server.dialects.edge.errors import Dialect
from server.dialects.edge.sampling import sampling_from
from server.dialects.kobold.schemas import KoboldGenerateRequest
from server.dialects.media.media import check_media_count, media_from_base64

_KOBOLD_BIAS_LIMIT = 100.0


def grammar_or_schema(grammar: str | dict[str, Any] | None) -> tuple[str | None, Any]:
    """KoboldAI's `grammar`: GBNF text, or a JSON schema (KoboldCpp converts those)."""
    if grammar is None or isinstance(grammar, dict):
        return None, grammar
    if not grammar.strip():
        return None, None
    if grammar.lstrip().startswith("{"):
        try:
            schema = json.loads(grammar)
        except json.JSONDecodeError:
            return grammar, None  # not JSON after all: GBNF (the check reports errors)
        if isinstance(schema, dict):
            return None, schema
    return grammar, None


def to_generation_request(
    body: KoboldGenerateRequest,
    request_id: str,
    default_max_length: int,
    tokenizer: Tokenizer,
) -> GenerationRequest:
    sampling = replace(
        sampling_from(body),
        ban_eos=body.ban_eos_token or body.use_default_badwordsids,
        logit_bias=resolve_logit_bias(
            body.logit_bias, tokenizer, Dialect.KOBOLD, limit=_KOBOLD_BIAS_LIMIT
        ),
    )
    grammar, schema = grammar_or_schema(body.grammar)
    media = images_of(body.images)
    return GenerationRequest(
        request_id=request_id,
        prompt=with_image_markers(body.prompt, media),
        media=media,
        memory=body.memory,
        max_tokens=body.max_length or default_max_length,
        max_context_length=body.max_context_length,
        sampling=sampling,
        stop=tuple(s for s in body.stop_sequence or () if s),
        trim_stop=body.trim_stop,
        genkey=body.genkey,
        grammar=grammar,
        json_schema=schema,
    )


def images_of(images: list[str] | None) -> tuple[MediaInput, ...]:
    """KoboldCpp's `images` on generate: base64 (or data: URIs), each checked."""
    media = tuple(
        media_from_base64(data, Dialect.KOBOLD, where=f"images[{index}]")
        for index, data in enumerate(images or ())
    )
    check_media_count(media, Dialect.KOBOLD)
    return media


def with_image_markers(prompt: str, media: tuple[MediaInput, ...]) -> str:
    """The prompt with the images' markers ahead of it, as KoboldCpp places `images`: after
    the memory, before the prompt."""
    if not media:
        return prompt
    return "\n".join([*(MEDIA_MARKER for _ in media), prompt])
