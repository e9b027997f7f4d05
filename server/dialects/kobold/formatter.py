"""KoboldAI answers and stream events, as KoboldCpp sends them."""

from __future__ import annotations

from sse_starlette import ServerSentEvent

from server.core.tool_calls.tool_stream import ChatStreamEvent, TextDelta
from server.core.types import FinishReason, GenerationOutcome
from server.dialects.chat.answers import ChatAnswer
from server.dialects.edge.errors import Dialect
from server.dialects.kobold.schemas import KoboldGenerateResponse, KoboldResult, KoboldTokenData
from server.dialects.streams.wire import SSEFormat, sse_json

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


def finish_reason(outcome: GenerationOutcome) -> str:
    return _FINISH_REASONS[outcome.finish_reason]


def perf_stop_reason(outcome: GenerationOutcome | None) -> int:
    if outcome is None:
        return 0
    if outcome.finish_reason is FinishReason.STOP:
        return 2 if outcome.stop_sequence is not None else 1
    return _PERF_STOP_REASONS[outcome.finish_reason]


class GenerateWire(SSEFormat):
    """/api/v1/generate's answer and /api/extra/generate/stream's `message` events; a failure
    is an `error` event before them."""

    dialect = Dialect.KOBOLD
    error_event = "error"

    def whole(self, answer: ChatAnswer) -> KoboldGenerateResponse:
        outcome = answer.outcome
        result: KoboldResult = {
            "text": answer.text,
            "tool_calls": [],
            "finish_reason": finish_reason(outcome),
            "logprobs": None,
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
        }
        return {"results": [result]}

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        if isinstance(item, TextDelta):
            return [sse_json({"token": item.text, "finish_reason": None}, "message")]
        return []  # a plain completion has no tool calls

    def finished(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        final: KoboldTokenData = {"token": "", "finish_reason": finish_reason(answer.outcome)}
        return [sse_json(final, "message")]

    def after_failure(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        return self.finished(answer)  # the usual last event, its finish reason "error"
