"""Answers and stream events in OpenAI's completions and chat completions shapes.

Their streams are `data:` lines only (no `event:` names: older openai-python versions mangle
named events) ending with `data: [DONE]`; a failure after the stream began is an OpenAI error
body (openai-python raises APIError on it), then `[DONE]`. Several choices of one request
(`n`) are written by a copy of the wire each. With llama-server's `return_progress`, chunks
with `prompt_progress` come while the prompt is read. Responses are responses.py.
"""

from __future__ import annotations

import copy
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Self

from sse_starlette import ServerSentEvent

from server import __version__
from server.core.tool_calls.tool_stream import (
    ChatStreamEvent,
    ReasoningDelta,
    TextDelta,
    ToolArgumentsDelta,
    ToolCallStart,
)
from server.core.types import GenerationOutcome, Progress
from server.dialects.chat.answers import ChatAnswer, failed, failure_message
from server.dialects.edge.errors import Dialect
from server.dialects.openai.answer_fields import (
    chat_logprobs,
    completion_logprobs,
    finish_reason,
    merged_outcome,
    openai_tool_call,
    usage,
)
from server.dialects.openai.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatLogprobs,
    ChunkDelta,
    Completion,
    CompletionLogprobs,
    ToolCallDelta,
)
from server.dialects.routes.llama_extensions import (
    LlamaExtras,
    PredictedTimings,
    predicted_timings,
    prompt_progress,
    timings,
)
from server.dialects.streams.wire import ChoicesFormat, SSEFormat, sse_json

DONE = ServerSentEvent("[DONE]")
# llama-server's clients (and its tests) read a build tag starting with "b" here.
SYSTEM_FINGERPRINT = f"b-hearth-{__version__}"


class _OpenAIStream(ChoicesFormat[ServerSentEvent], SSEFormat):
    """What completions and chat share: the ids, usage and llama-server's extras, and
    answering several choices (`n`): a copy of the wire per choice writes that choice."""

    dialect = Dialect.OPENAI

    def __init__(
        self,
        completion_id: str,
        model: str,
        include_usage: bool,
        logprobs: bool = False,
        extras: LlamaExtras | None = None,
    ) -> None:
        self._id = completion_id
        self._model = model
        self._created = int(time.time())
        self._include_usage = include_usage
        self._logprobs = logprobs  # the client asked for them: sent, even when empty
        self._extras = extras
        self._index = 0  # the choice this wire writes
        self._ends_stream = True  # its ending is the stream's (one choice), not one of several
        self._first_text_at: float | None = None  # for timings_per_token
        self._predicted = 0

    def choice(self, index: int) -> Self:
        wire = copy.copy(self)
        wire._index, wire._ends_stream = index, False
        return wire

    def _verbose(self, answer: ChatAnswer, stream: bool) -> dict[str, Any]:
        extras = self._extras
        if extras is None or not extras.verbose:
            return {}
        return {"__verbose": extras.native(answer, self._model, self._index, stream)}

    def _timings_so_far(self, tokens: int) -> PredictedTimings | None:
        """llama-server's `timings_per_token` (None when not asked): the reply's figures up to
        this chunk, timed from its first text (the prompt's figures come with the last chunk)."""
        if self._extras is None or not self._extras.timings_per_token:
            return None
        now = time.perf_counter()
        if self._first_text_at is None:
            self._first_text_at = now
        self._predicted += tokens
        return predicted_timings(self._predicted, now - self._first_text_at)

    @abstractmethod
    def _usage_chunk(self, outcome: GenerationOutcome, reasoning_tokens: int) -> Mapping[str, Any]:
        """The stream's last chunk (no choices) with the usage and timings of `outcome`."""

    def closing(self, answers: Sequence[ChatAnswer]) -> list[ServerSentEvent]:
        """After every choice's ending: the usage of them all, if asked, and `[DONE]`; or
        the first failure."""
        for answer in answers:
            if failed(answer.outcome):
                return self.failure(failure_message(answer.outcome), answer)
        if not self._include_usage:
            return [DONE]
        outcome = merged_outcome([answer.outcome for answer in answers])
        thought = sum(answer.reasoning_tokens for answer in answers)
        return [sse_json(self._usage_chunk(outcome, thought)), DONE]

    def failure(self, message: str, answer: ChatAnswer) -> list[ServerSentEvent]:
        # One of several choices failing says nothing yet: `closing` reports it.
        return super().failure(message, answer) if self._ends_stream else []

    def after_failure(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        return [DONE]

    def _finished(self, answer: ChatAnswer, finish: dict[str, Any]) -> list[ServerSentEvent]:
        """The end of this wire's choice: its finish chunk, then, when this is the stream's
        end, the usage chunk if asked (the last chunk has `timings`) and `[DONE]`."""
        finish.update(self._verbose(answer, stream=True))
        if not self._ends_stream:
            return [sse_json(finish)]
        if not self._include_usage:
            return [sse_json({**finish, "timings": timings(answer.outcome)}), DONE]
        last = self._usage_chunk(answer.outcome, answer.reasoning_tokens)
        return [sse_json(finish), sse_json(last), DONE]

    def whole_choices(self, answers: Sequence[ChatAnswer]) -> Mapping[str, Any]:
        wholes = [self.choice(index).whole(answer) for index, answer in enumerate(answers)]
        outcome = merged_outcome([answer.outcome for answer in answers])
        return {
            **wholes[0],
            "choices": [whole["choices"][0] for whole in wholes],
            "usage": usage(outcome, sum(answer.reasoning_tokens for answer in answers)),
            "timings": timings(outcome),
        }


# -- /v1/completions -------------------------------------------------------------------------


class CompletionWire(_OpenAIStream):
    _sent = b""  # the bytes of the tokens streamed so far, for the next chunk's text_offset

    def _object(
        self, text: str, reason: str | None, logprobs: CompletionLogprobs | None = None
    ) -> Completion:
        return {
            "id": self._id,
            "object": "text_completion",
            "created": self._created,
            "model": self._model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [
                {"index": self._index, "text": text, "logprobs": logprobs, "finish_reason": reason}
            ],
        }

    def whole(self, answer: ChatAnswer) -> Mapping[str, Any]:
        logprobs = completion_logprobs(answer.tokens.logprobs) if self._logprobs else None
        completion = self._object(answer.text, finish_reason(answer.outcome), logprobs)
        completion["usage"] = usage(answer.outcome)
        completion["timings"] = timings(answer.outcome)
        return {**completion, **self._verbose(answer, stream=False)}

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        if isinstance(item, TextDelta):
            logprobs = None
            if self._logprobs:
                logprobs = completion_logprobs(item.logprobs, self._sent)
                self._sent += b"".join(token.chosen.piece for token in item.logprobs)
            chunk = self._object(item.text, None, logprobs)
            so_far = self._timings_so_far(len(item.token_ids))
            if so_far is not None:
                chunk["timings"] = so_far
            return [sse_json(chunk)]
        return []  # a plain completion has no tool calls

    def progress(self, progress: Progress) -> list[ServerSentEvent]:
        chunk = self._object("", None)
        chunk["prompt_progress"] = prompt_progress(progress)
        return [sse_json(chunk)]

    def _usage_chunk(self, outcome: GenerationOutcome, reasoning_tokens: int) -> Mapping[str, Any]:
        last = self._object("", None)
        last["choices"], last["usage"], last["timings"] = [], usage(outcome), timings(outcome)
        return last

    def finished(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        return self._finished(answer, {**self._object("", finish_reason(answer.outcome))})


# -- /v1/chat/completions --------------------------------------------------------------------


class ChatWire(_OpenAIStream):
    def whole(self, answer: ChatAnswer) -> Mapping[str, Any]:
        tool_calls = [openai_tool_call(call) for call in answer.tool_calls]
        message: AssistantMessage = {
            "role": "assistant",
            "content": answer.text or (None if tool_calls else ""),
            "refusal": None,
        }
        if answer.reasoning:  # llama-server's field (DeepSeek's API), only when there is one
            message["reasoning_content"] = answer.reasoning
        if tool_calls:
            message["tool_calls"] = tool_calls
        reason = finish_reason(answer.outcome, bool(answer.tool_calls))
        logprobs = chat_logprobs(answer.tokens.logprobs) if self._logprobs else None
        completion: ChatCompletion = {
            "id": self._id,
            "object": "chat.completion",
            "created": self._created,
            "model": self._model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [
                {
                    "index": self._index,
                    "message": message,
                    "logprobs": logprobs,
                    "finish_reason": reason,
                }
            ],
            "usage": usage(answer.outcome, answer.reasoning_tokens),
            "timings": timings(answer.outcome),
        }
        return {**completion, **self._verbose(answer, stream=False)}

    def _chunk(
        self, delta: ChunkDelta, reason: str | None = None, logprobs: ChatLogprobs | None = None
    ) -> ChatCompletionChunk:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [
                {
                    "index": self._index,
                    "delta": delta,
                    "logprobs": logprobs,
                    "finish_reason": reason,
                }
            ],
        }

    def opening(self) -> list[ServerSentEvent]:
        # content null, not "": llama.cpp's conformance tests reject an empty content delta.
        return [sse_json(self._chunk({"role": "assistant", "content": None}))]

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        match item:
            case TextDelta(text=text, logprobs=tokens, token_ids=ids):
                logprobs = chat_logprobs(tokens) if self._logprobs else None
                chunk = self._chunk({"content": text}, logprobs=logprobs)
                so_far = self._timings_so_far(len(ids))
                if so_far is not None:
                    chunk["timings"] = so_far
                return [sse_json(chunk)]
            case ReasoningDelta(text=text):
                return [sse_json(self._chunk({"reasoning_content": text}))]
            case ToolCallStart(index=index, call_id=call_id, name=name):
                # id, type and name once per index: the SDK concatenates repeated strings.
                call: ToolCallDelta = {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                return [sse_json(self._chunk({"tool_calls": [call]}))]
            case ToolArgumentsDelta(index=index, fragment=fragment):
                more: ToolCallDelta = {"index": index, "function": {"arguments": fragment}}
                return [sse_json(self._chunk({"tool_calls": [more]}))]
        return []  # ToolCallDone: the client has the whole call already

    def progress(self, progress: Progress) -> list[ServerSentEvent]:
        # llama-server's shape: an empty delta (the role's), the figures beside the choices.
        chunk = self._chunk({"role": "assistant", "content": None})
        chunk["prompt_progress"] = prompt_progress(progress)
        return [sse_json(chunk)]

    def _usage_chunk(self, outcome: GenerationOutcome, reasoning_tokens: int) -> Mapping[str, Any]:
        last = self._chunk({})
        last["choices"], last["timings"] = [], timings(outcome)
        last["usage"] = usage(outcome, reasoning_tokens)
        return last

    def finished(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        reason = finish_reason(answer.outcome, bool(answer.tool_calls))
        return self._finished(answer, {**self._chunk({}, reason)})
