"""Answers and stream lines in Ollama's shapes (durations in nanoseconds).

NDJSON has no comment lines: ollama-python parses every line, so keep-alives are ordinary
empty-content lines, and a failure mid-stream is an `{"error": ...}` line (which the client
raises as ResponseError) before the usual last line.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from server.core.templates.chat import ToolCall
from server.core.tool_calls.tool_stream import (
    ChatStreamEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallDone,
)
from server.core.types import FinishReason, GenerationOutcome
from server.dialects.chat.answers import ChatAnswer
from server.dialects.edge.errors import Dialect
from server.dialects.ollama.schemas import (
    ChatChunk,
    GenerateChunk,
    ModelDetails,
    ModelEntry,
    OllamaChunk,
    StreamError,
)
from server.dialects.streams.wire import NDJSONFormat
from server.models.gguf import GGUFSummary, rfc3339

_NANOSECONDS = 1_000_000_000

OllamaLine = OllamaChunk | StreamError


def created_at() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def done_reason(outcome: GenerationOutcome) -> str:
    if outcome.server_stopping:
        return "unload"  # Ollama's word for a model going away under a request
    if outcome.finish_reason is FinishReason.ERROR:
        return "error"
    return "length" if outcome.finish_reason is FinishReason.LENGTH else "stop"


def _finish(chunk: OllamaChunk, outcome: GenerationOutcome) -> None:
    """Make `chunk` the last one: the counts and real durations (KoboldCpp sends fake ones)."""
    prompt_ns = int(outcome.prompt_seconds * _NANOSECONDS)
    eval_ns = int(outcome.generation_seconds * _NANOSECONDS)
    chunk["done"] = True
    chunk["done_reason"] = done_reason(outcome)
    chunk["total_duration"] = prompt_ns + eval_ns
    chunk["load_duration"] = 0
    chunk["prompt_eval_count"] = outcome.prompt_tokens
    chunk["prompt_eval_duration"] = prompt_ns
    chunk["eval_count"] = outcome.completion_tokens
    chunk["eval_duration"] = eval_ns


class _OllamaLines(NDJSONFormat[OllamaLine]):
    dialect = Dialect.OLLAMA

    def __init__(self, model: str) -> None:
        self._model = model  # echoed back as the client named it

    @abstractmethod
    def _chunk(self, text: str, calls: Sequence[ToolCall] = (), thinking: str = "") -> OllamaChunk:
        """A line that is not the last, with `text` (and whole tool calls, for chat) and a
        piece of the thought (`thinking`, sent only when there is one, as Ollama)."""

    def whole(self, answer: ChatAnswer) -> OllamaChunk:
        chunk = self._chunk(answer.text, answer.tool_calls, answer.reasoning)
        _finish(chunk, answer.outcome)
        return chunk

    def keepalive(self) -> list[OllamaLine]:
        return [self._chunk("")]

    def loaded(self, reason: str) -> OllamaChunk:
        """The answer to a request that only loaded ("load") or unloaded ("unload") its model."""
        chunk = self._chunk("")
        chunk["done"] = True
        chunk["done_reason"] = reason
        return chunk

    def event(self, item: ChatStreamEvent) -> list[OllamaLine]:
        if isinstance(item, TextDelta):
            return [self._chunk(item.text)]
        if isinstance(item, ReasoningDelta):
            return [self._chunk("", thinking=item.text)]
        if isinstance(item, ToolCallDone):
            return [self._chunk("", (item.call,))]  # Ollama sends each call whole
        return []

    def finished(self, answer: ChatAnswer) -> list[OllamaLine]:
        last = self._chunk("")
        _finish(last, answer.outcome)
        return [last]

    def after_failure(self, answer: ChatAnswer) -> list[OllamaLine]:
        return self.finished(answer)  # the usual last line, its done_reason "error"


class GenerateWire(_OllamaLines):
    """/api/generate."""

    def _chunk(
        self, text: str, calls: Sequence[ToolCall] = (), thinking: str = ""
    ) -> GenerateChunk:
        chunk: GenerateChunk = {
            "model": self._model,
            "created_at": created_at(),
            "response": text,
            "done": False,
        }
        if thinking:
            chunk["thinking"] = thinking
        return chunk


class ChatWire(_OllamaLines):
    """/api/chat: tool calls go whole, arguments as an object."""

    def _chunk(self, text: str, calls: Sequence[ToolCall] = (), thinking: str = "") -> ChatChunk:
        chunk: ChatChunk = {
            "model": self._model,
            "created_at": created_at(),
            "message": {"role": "assistant", "content": text},
            "done": False,
        }
        if thinking:
            chunk["message"]["thinking"] = thinking
        if calls:
            chunk["message"]["tool_calls"] = [
                {"function": {"index": index, "name": call.name, "arguments": call.arguments}}
                for index, call in enumerate(calls)
            ]
        return chunk


# -- the model list (/api/tags, /api/ps, /api/show) ----------------------------------------


def details(summary: GGUFSummary | None) -> ModelDetails:
    family = summary.architecture if summary else ""
    return {
        "format": "gguf",
        "family": family,
        "families": [family] if family else None,
        "parameter_size": summary.parameter_size if summary else "",
        "quantization_level": summary.quantization if summary else "",
        "parent_model": "",
    }


def model_entry(name: str, context_size: int, file: tuple[GGUFSummary, str] | None) -> ModelEntry:
    summary, digest = file or (None, "")
    tagged = name if ":" in name else f"{name}:latest"  # hf.co/owner/repo:QUANT has its tag
    return {
        "name": tagged,
        "model": tagged,
        "modified_at": rfc3339(summary.modified_at) if summary else None,
        "size": summary.file_size if summary else 0,
        "digest": digest,
        "details": details(summary),
        "context_length": context_size,
    }


def model_info(summary: GGUFSummary | None) -> dict[str, Any]:
    """Ollama's `model_info`: the GGUF's metadata keys (long arrays such as the vocabulary as
    null, as Ollama sends them unless verbose; the chat template goes in `template`), plus
    `general.parameter_count`."""
    if summary is None:
        return {}
    info: dict[str, Any] = {
        key: value for key, value in summary.metadata.items() if key != "tokenizer.chat_template"
    }
    info["general.parameter_count"] = summary.parameter_count
    return info
