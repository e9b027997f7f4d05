"""KoboldAI generate requests → the scheduler's GenerationRequest."""

from __future__ import annotations

from dataclasses import replace

from server.api.kobold.schemas import KoboldGenerateRequest
from server.api.sampling import sampling_from
from server.core.types import GenerationRequest


def to_generation_request(
    body: KoboldGenerateRequest, request_id: str, default_max_length: int
) -> GenerationRequest:
    sampling = replace(
        sampling_from(body),
        ban_eos=body.ban_eos_token or body.use_default_badwordsids,
    )
    return GenerationRequest(
        request_id=request_id,
        prompt=body.prompt,
        memory=body.memory,
        max_tokens=body.max_length or default_max_length,
        max_context_length=body.max_context_length,
        sampling=sampling,
        stop=tuple(s for s in body.stop_sequence or () if s),
        trim_stop=body.trim_stop,
        genkey=body.genkey,
    )
