"""Answers and stream events in OpenAI's shapes: completions, chat completions, Responses.

Chat and completions streams are `data:` lines only (no `event:` names: older openai-python
versions mangle named events) ending with `data: [DONE]`; Responses streams name every event
and end with `response.completed` even when cut off, with `incomplete_details` saying so, since
the SDK's `get_final_response()` accepts nothing else.
"""

from __future__ import annotations

import copy
import json
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from sse_starlette import ServerSentEvent

from server import __version__
from server.core.chat import ToolCall
from server.core.tool_stream import (
    ChatStreamEvent,
    TextDelta,
    ToolArgumentsDelta,
    ToolCallDone,
    ToolCallStart,
)
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    TokenChoice,
    TokenLogprob,
)
from server.dialects.common import ChatAnswer, failed, failure_message
from server.dialects.errors import Dialect, ErrorKind, error_body
from server.dialects.llama.adapter import generation_settings
from server.dialects.llama.formatter import native_answer, predicted_timings, timings
from server.dialects.llama.schemas import NativeCompletion, PredictedTimings
from server.dialects.openai.schemas import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatLogprobs,
    ChunkDelta,
    Completion,
    CompletionLogprobs,
    ContentPartEvent,
    ErrorEvent,
    FunctionCallItem,
    ItemEvent,
    MessageItem,
    ModelMeta,
    OpenAISamplingFields,
    OpenAIUsage,
    OutputItem,
    OutputText,
    ResponseEvent,
    ResponseLifecycleEvent,
    ResponseObject,
    ResponsesRequest,
    ResponseUsage,
    TextDeltaEvent,
    TextDoneEvent,
    TokenLogprobOut,
    ToolCallDelta,
    ToolCallOut,
)
from server.dialects.respond import ChoicesFormat, SSEFormat
from server.models.gguf import GGUFSummary

DONE = ServerSentEvent("[DONE]")
# llama-server's clients (and its tests) read a build tag starting with "b" here.
SYSTEM_FINGERPRINT = f"b-hearth-{__version__}"


def model_meta(summary: GGUFSummary) -> ModelMeta:
    return {
        "n_vocab": summary.vocabulary_size,
        "n_ctx_train": summary.context_length or 0,
        "n_embd": summary.architecture_number("embedding_length") or 0,
        "n_params": summary.parameter_count,
        "size": summary.file_size,
        "architecture": summary.architecture,
        "quantization": summary.quantization,
        "chat_template": summary.chat_template is not None,
    }


def finish_reason(outcome: GenerationOutcome, tool_call: bool = False) -> str:
    if tool_call:
        return "tool_calls"
    # OpenAI clients switch on exactly stop/length/tool_calls; an abort reads as "stop".
    return "length" if outcome.finish_reason is FinishReason.LENGTH else "stop"


def usage(outcome: GenerationOutcome) -> OpenAIUsage:
    return {
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": outcome.reused_prompt_tokens},
    }


def _data(payload: Mapping[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(json.dumps(payload))


def _failure(outcome: GenerationOutcome) -> list[ServerSentEvent]:
    """A failure after the stream began: openai-python raises APIError on this."""
    body = error_body(Dialect.OPENAI, failure_message(outcome), ErrorKind.SERVER)
    return [_data(body), DONE]


def _piece(choice: TokenChoice) -> str:
    return choice.piece.decode("utf-8", errors="replace")


def chat_logprobs(tokens: tuple[TokenLogprob, ...]) -> ChatLogprobs:
    """Chat's `logprobs`: each token with its bytes and its most likely alternatives."""
    content: list[TokenLogprobOut] = [
        {
            "token": _piece(token.chosen),
            "logprob": token.chosen.logprob,
            "bytes": list(token.chosen.piece),
            "top_logprobs": [
                {"token": _piece(top), "logprob": top.logprob, "bytes": list(top.piece)}
                for top in token.top
            ],
        }
        for token in tokens
    ]
    return {"content": content, "refusal": None}


def completion_logprobs(
    tokens: tuple[TokenLogprob, ...], before: bytes = b""
) -> CompletionLogprobs:
    """The legacy completions' parallel lists; `before`: the reply's bytes sent before these
    tokens. `text_offset` counts characters of the decoded text, so a character split across
    tokens counts once (at the token that completes it)."""
    offsets = []
    sent = before
    for token in tokens:
        offsets.append(len(sent.decode("utf-8", errors="ignore")))
        sent += token.chosen.piece
    return {
        "tokens": [_piece(token.chosen) for token in tokens],
        "token_logprobs": [token.chosen.logprob for token in tokens],
        "top_logprobs": [{_piece(t): t.logprob for t in token.top} for token in tokens],
        "text_offset": offsets,
    }


def merged_outcome(outcomes: Sequence[GenerationOutcome]) -> GenerationOutcome:
    """The figures of several choices of one request, as one: they share the prompt (counted
    once, as OpenAI does) and generate together, so their replies' tokens add up while the
    time is the longest's."""
    first = outcomes[0]
    return GenerationOutcome(
        first.finish_reason,
        prompt_tokens=first.prompt_tokens,
        completion_tokens=sum(o.completion_tokens for o in outcomes),
        prompt_seconds=first.prompt_seconds,
        generation_seconds=max(o.generation_seconds for o in outcomes),
        seed=first.seed,
        reused_prompt_tokens=first.reused_prompt_tokens,
    )


@dataclass(frozen=True, slots=True)
class LlamaExtras:
    """What llama-server adds to an OpenAI answer on request: `__verbose` (its native
    /completion answer, the rendered prompt and the settings that ran included) and
    `timings` on every content chunk (`timings_per_token`; the last chunk always has them)."""

    generation: GenerationRequest
    n_ctx: int
    verbose: bool = False
    timings_per_token: bool = False

    @classmethod
    def of(cls, body: OpenAISamplingFields, generation: GenerationRequest, n_ctx: int) -> Self:
        return cls(generation, n_ctx, body.verbose, body.timings_per_token)

    def native(self, answer: ChatAnswer, model: str, index: int, stream: bool) -> NativeCompletion:
        generation = self.generation
        settings = generation_settings(
            generation,
            answer.outcome.seed,
            self.n_ctx,
            n_predict=generation.max_tokens,
            stream=stream,
        )
        tokens = list(answer.tokens.token_ids)
        return native_answer(answer, index, answer.text, tokens, model, settings, generation.prompt)


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
    def _usage_chunk(self, outcome: GenerationOutcome) -> Mapping[str, Any]:
        """The stream's last chunk (no choices) with the usage and timings of `outcome`."""

    def closing(self, answers: Sequence[ChatAnswer]) -> list[ServerSentEvent]:
        """After every choice's ending: the usage of them all, if asked, and `[DONE]`."""
        for answer in answers:
            if failed(answer.outcome):
                return _failure(answer.outcome)
        if not self._include_usage:
            return [DONE]
        outcome = merged_outcome([answer.outcome for answer in answers])
        return [_data(self._usage_chunk(outcome)), DONE]

    def _finished(self, answer: ChatAnswer, finish: dict[str, Any]) -> list[ServerSentEvent]:
        """The end of this wire's choice: its finish chunk, then, when this is the stream's
        end, the usage chunk if asked (the last chunk has `timings`) and `[DONE]`."""
        if failed(answer.outcome):
            return _failure(answer.outcome) if self._ends_stream else []
        finish.update(self._verbose(answer, stream=True))
        if not self._ends_stream:
            return [_data(finish)]
        if not self._include_usage:
            return [_data({**finish, "timings": timings(answer.outcome)}), DONE]
        return [_data(finish), _data(self._usage_chunk(answer.outcome)), DONE]

    def whole_choices(self, answers: Sequence[ChatAnswer]) -> Mapping[str, Any]:
        wholes = [self.choice(index).whole(answer) for index, answer in enumerate(answers)]
        outcome = merged_outcome([answer.outcome for answer in answers])
        return {
            **wholes[0],
            "choices": [whole["choices"][0] for whole in wholes],
            "usage": usage(outcome),
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
            return [_data(chunk)]
        return []  # a plain completion has no tool calls

    def _usage_chunk(self, outcome: GenerationOutcome) -> Mapping[str, Any]:
        last = self._object("", None)
        last["choices"], last["usage"], last["timings"] = [], usage(outcome), timings(outcome)
        return last

    def ending(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        return self._finished(answer, {**self._object("", finish_reason(answer.outcome))})


# -- /v1/chat/completions --------------------------------------------------------------------


def openai_tool_call(call: ToolCall) -> ToolCallOut:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }


class ChatWire(_OpenAIStream):
    def whole(self, answer: ChatAnswer) -> Mapping[str, Any]:
        tool_calls = [openai_tool_call(call) for call in answer.tool_calls]
        message: AssistantMessage = {
            "role": "assistant",
            "content": answer.text or (None if tool_calls else ""),
            "refusal": None,
        }
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
            "usage": usage(answer.outcome),
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
        return [_data(self._chunk({"role": "assistant", "content": None}))]

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        match item:
            case TextDelta(text=text, logprobs=tokens, token_ids=ids):
                logprobs = chat_logprobs(tokens) if self._logprobs else None
                chunk = self._chunk({"content": text}, logprobs=logprobs)
                so_far = self._timings_so_far(len(ids))
                if so_far is not None:
                    chunk["timings"] = so_far
                return [_data(chunk)]
            case ToolCallStart(index=index, call_id=call_id, name=name):
                # id, type and name once per index: the SDK concatenates repeated strings.
                call: ToolCallDelta = {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                return [_data(self._chunk({"tool_calls": [call]}))]
            case ToolArgumentsDelta(index=index, fragment=fragment):
                more: ToolCallDelta = {"index": index, "function": {"arguments": fragment}}
                return [_data(self._chunk({"tool_calls": [more]}))]
        return []  # ToolCallDone: the client has the whole call already

    def _usage_chunk(self, outcome: GenerationOutcome) -> Mapping[str, Any]:
        last = self._chunk({})
        last["choices"], last["usage"], last["timings"] = [], usage(outcome), timings(outcome)
        return last

    def ending(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        reason = finish_reason(answer.outcome, bool(answer.tool_calls))
        return self._finished(answer, {**self._chunk({}, reason)})


# -- /v1/responses ---------------------------------------------------------------------------


def _call_item_id(call_id: str) -> str:
    """The Responses item id of a function call (`fc_…`), from its call id (`call_…`)."""
    return "fc_" + call_id.removeprefix("call_")


def _named(event: ResponseEvent) -> ServerSentEvent:
    return ServerSentEvent(json.dumps(event), event=event["type"])


class ResponsesWire(SSEFormat):
    """The Response object of one request and its stream's events, numbered in order.

    The stream's output items are an assistant message (opened by the first text, closed by a
    tool call or the end) and function calls, in the order they began.
    """

    dialect = Dialect.OPENAI

    def __init__(self, response_id: str, model: str, body: ResponsesRequest) -> None:
        self._id = response_id
        self._message_id = "msg_" + response_id.removeprefix("resp_")
        self._model = model
        self._body = body
        self._created = int(time.time())
        self._sequence = 0
        self._output: list[OutputItem | None] = []  # None: a place still being streamed
        self._message_index: int | None = None  # the open message's output_index
        self._message_parts: list[str] = []
        self._calls: dict[int, tuple[int, ToolCallStart]] = {}  # tool index → (place, start)

    def whole(self, answer: ChatAnswer) -> ResponseObject:
        items: list[OutputItem] = []
        if answer.text or not answer.tool_calls:
            items.append(self._message_item(answer.text))
        items += [self._call_item(c.id, c.name, json.dumps(c.arguments)) for c in answer.tool_calls]
        return self._response("completed", items, answer.outcome)

    # -- the objects -----------------------------------------------------------------------

    def _next_number(self) -> int:
        self._sequence += 1
        return self._sequence - 1

    def _response(
        self,
        status: str,
        output: list[OutputItem],
        outcome: GenerationOutcome | None = None,
        error: str | None = None,
    ) -> ResponseObject:
        cut_off = outcome is not None and outcome.finish_reason is FinishReason.LENGTH
        body = self._body
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created,
            "status": "incomplete" if cut_off and status == "completed" else status,
            "model": self._model,
            "output": output,
            "output_text": "".join(
                part["text"]
                for item in output
                if item["type"] == "message"
                for part in item["content"]
            ),
            "error": None if error is None else {"code": "server_error", "message": error},
            "incomplete_details": {"reason": "max_output_tokens"} if cut_off else None,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "parallel_tool_calls": False,
            "temperature": body.temperature,
            "top_p": body.top_p,
            "tool_choice": body.tool_choice or "auto",
            "tools": [t.model_dump() for t in body.tools or ()],
            "text": body.text or {"format": {"type": "text"}},
            "metadata": {},
            "usage": None if outcome is None else _response_usage(outcome),
        }

    def _message_item(self, text: str, status: str = "completed") -> MessageItem:
        content: list[OutputText] = []
        if status != "in_progress":
            content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
        return {
            "type": "message",
            "id": self._message_id,
            "role": "assistant",
            "status": status,
            "content": content,
        }

    def _call_item(
        self, call_id: str, name: str, arguments: str, status: str = "completed"
    ) -> FunctionCallItem:
        return {
            "type": "function_call",
            "id": _call_item_id(call_id),
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    def _lifecycle(self, kind: str, response: ResponseObject) -> ServerSentEvent:
        event: ResponseLifecycleEvent = {
            "type": kind,
            "sequence_number": self._next_number(),
            "response": response,
        }
        return _named(event)

    def _item_event(self, kind: str, output_index: int, item: OutputItem) -> ServerSentEvent:
        event: ItemEvent = {
            "type": kind,
            "sequence_number": self._next_number(),
            "output_index": output_index,
            "item": item,
        }
        return _named(event)

    # -- the stream ------------------------------------------------------------------------

    def opening(self) -> list[ServerSentEvent]:
        started = self._response("in_progress", [])
        return [
            self._lifecycle("response.created", started),
            self._lifecycle("response.in_progress", started),
        ]

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        match item:
            case TextDelta(text=text):
                opened = self._open_message() if self._message_index is None else []
                assert self._message_index is not None
                return [*opened, self._text_delta(self._message_index, text)]
            case ToolCallStart():
                return [*self._close_message(), self._start_call(item)]
            case ToolArgumentsDelta(index=index, fragment=fragment):
                return [self._arguments_delta(index, fragment)]
            case ToolCallDone(index=index, call=call):
                return self._finish_call(index, json.dumps(call.arguments))
        return []

    def ending(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        outcome = answer.outcome
        if failed(outcome):
            return self._failure(outcome)
        # An empty reply still has its (empty) message.
        opened = self._open_message() if not self._output else []
        closed = self._close_message()
        output = [item for item in self._output if item is not None]
        done = self._lifecycle("response.completed", self._response("completed", output, outcome))
        return [*opened, *closed, done]

    def _open_message(self) -> list[ServerSentEvent]:
        index = self._message_index = len(self._output)
        self._output.append(None)
        pending = self._message_item("", "in_progress")
        item = self._item_event("response.output_item.added", index, pending)
        return [item, self._content_part("response.content_part.added", index, "")]

    def _content_part(self, kind: str, index: int, text: str) -> ServerSentEvent:
        event: ContentPartEvent = {
            "type": kind,
            "sequence_number": self._next_number(),
            "item_id": self._message_id,
            "output_index": index,
            "content_index": 0,
            "part": {"type": "output_text", "text": text, "annotations": []},
        }
        return _named(event)

    def _text_delta(self, index: int, text: str) -> ServerSentEvent:
        self._message_parts.append(text)
        event: TextDeltaEvent = {
            "type": "response.output_text.delta",
            "sequence_number": self._next_number(),
            "item_id": self._message_id,
            "output_index": index,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
        }
        return _named(event)

    def _close_message(self) -> list[ServerSentEvent]:
        if self._message_index is None:
            return []
        index, text = self._message_index, "".join(self._message_parts)
        item = self._message_item(text)
        self._output[index] = item
        done: TextDoneEvent = {
            "type": "response.output_text.done",
            "sequence_number": self._next_number(),
            "item_id": self._message_id,
            "output_index": index,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        }
        part = self._content_part("response.content_part.done", index, text)
        self._message_index = None
        return [_named(done), part, self._item_event("response.output_item.done", index, item)]

    def _start_call(self, start: ToolCallStart) -> ServerSentEvent:
        self._calls[start.index] = (len(self._output), start)
        self._output.append(None)
        pending = self._call_item(start.call_id, start.name, "", "in_progress")
        return self._item_event("response.output_item.added", len(self._output) - 1, pending)

    def _arguments_delta(self, index: int, fragment: str) -> ServerSentEvent:
        output_index, start = self._calls[index]
        event: ArgumentsDeltaEvent = {
            "type": "response.function_call_arguments.delta",
            "sequence_number": self._next_number(),
            "item_id": _call_item_id(start.call_id),
            "output_index": output_index,
            "delta": fragment,
        }
        return _named(event)

    def _finish_call(self, index: int, arguments: str) -> list[ServerSentEvent]:
        output_index, start = self._calls[index]
        item = self._call_item(start.call_id, start.name, arguments)
        self._output[output_index] = item
        done: ArgumentsDoneEvent = {
            "type": "response.function_call_arguments.done",
            "sequence_number": self._next_number(),
            "item_id": item["id"],
            "output_index": output_index,
            "name": start.name,
            "arguments": arguments,
        }
        return [_named(done), self._item_event("response.output_item.done", output_index, item)]

    def _failure(self, outcome: GenerationOutcome) -> list[ServerSentEvent]:
        message = failure_message(outcome)
        error: ErrorEvent = {
            "type": "error",
            "sequence_number": self._next_number(),
            "code": "server_error",
            "message": message,
            "param": None,
        }
        failed_response = self._response("failed", [], outcome, message)
        return [_named(error), self._lifecycle("response.failed", failed_response)]


def _response_usage(outcome: GenerationOutcome) -> ResponseUsage:
    return {
        "input_tokens": outcome.prompt_tokens,
        "input_tokens_details": {"cached_tokens": outcome.reused_prompt_tokens},
        "output_tokens": outcome.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
    }
