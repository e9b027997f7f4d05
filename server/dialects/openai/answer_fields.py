"""The fields OpenAI's completion and chat answers share, whole or streamed: the finish
reason, usage, log-probabilities in the chat and the legacy shapes, a tool call, the outcome of
several choices together, and a model's metadata for /v1/models. formatter.py writes the
answers and chunks with them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from server.core.templates.chat import ToolCall
from server.core.types import FinishReason, GenerationOutcome, TokenChoice, TokenLogprob
from server.dialects.openai.schemas import (
    ChatLogprobs,
    CompletionLogprobs,
    ModelMeta,
    OpenAIUsage,
    TokenLogprobOut,
    ToolCallOut,
)
from server.models.gguf import GGUFSummary


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
    # Clients switch on exactly stop/length/tool_calls: an abort is "stop", a cut call "length".
    if outcome.finish_reason is FinishReason.LENGTH:
        return "length"
    return "tool_calls" if tool_call else "stop"


def usage(outcome: GenerationOutcome, reasoning_tokens: int = 0) -> OpenAIUsage:
    return {
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": outcome.reused_prompt_tokens},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


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


def openai_tool_call(call: ToolCall) -> ToolCallOut:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }
