"""KoboldAI request → GenerationRequest, and engine events → KoboldAI JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from server.api.common import SamplingFields, sampling_from
from server.api.kobold.schemas import KoboldGenerateRequest
from server.core.types import FinishReason, GenerationOutcome, GenerationRequest

# KoboldCpp reports a stop-string hit as "length" (its C++ stop reason 2 falls through to the
# default). Hearth says "stop", which is what clients expect from the other dialects too.
_FINISH_REASONS = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.CANCELLED: "abort",
    FinishReason.ERROR: "error",
}

# The C++ stop_reason KoboldCpp's perf endpoint reports: -2 error, -1 aborted, 0 out of tokens,
# 1 end-of-sequence, 2 custom stop string.
_PERF_STOP_REASONS = {
    FinishReason.ERROR: -2,
    FinishReason.CANCELLED: -1,
    FinishReason.LENGTH: 0,
}


SAMPLING_FIELDS: SamplingFields = {
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "rep_pen": "rep_pen",
    "rep_pen_range": "rep_pen_range",
    "presence_penalty": "presence_penalty",
    "sampler_seed": "seed",
}


def to_generation_request(
    body: KoboldGenerateRequest, request_id: str, default_max_length: int
) -> GenerationRequest:
    sampling = replace(
        sampling_from(body, SAMPLING_FIELDS),
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


def finish_reason(outcome: GenerationOutcome) -> str:
    return _FINISH_REASONS[outcome.finish_reason]


def perf_stop_reason(outcome: GenerationOutcome | None) -> int:
    if outcome is None:
        return 0
    if outcome.finish_reason is FinishReason.STOP:
        return 2 if outcome.stop_sequence is not None else 1
    return _PERF_STOP_REASONS[outcome.finish_reason]


def token_event_data(text: str) -> str:
    return json.dumps({"token": text, "finish_reason": None})


def final_event_data(outcome: GenerationOutcome) -> str:
    return json.dumps({"token": "", "finish_reason": finish_reason(outcome)})


def error_event_data(message: str) -> str:
    return json.dumps({"detail": {"msg": message, "type": "server_error"}})


def generate_response(text: str, outcome: GenerationOutcome) -> dict[str, Any]:
    return {
        "results": [
            {
                "text": text,
                "tool_calls": [],
                "finish_reason": finish_reason(outcome),
                "logprobs": None,
                "prompt_tokens": outcome.prompt_tokens,
                "completion_tokens": outcome.completion_tokens,
            }
        ]
    }
