"""llama-server's native /completion requests → plans for the scheduler.

Its prompt may be text, token ids, both mixed in one list, an object with `prompt_string`,
or a list of such prompts (each becomes its own generation, answered as a list).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from server.core.scheduling.engine import Tokenizer
from server.core.types import MEDIA_MARKER, GenerationRequest, MediaInput
from server.dialects.chat.plans import ChatPlan, text_plan
from server.dialects.chat.request_fields import stop_list, tokens_without_bos, with_penalty_window
from server.dialects.chat.token_bias import resolve_logit_bias
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.edge.sampling import sampling_from
from server.dialects.llama.schemas import CompletionRequest, SinglePrompt
from server.dialects.media.media import check_media_count, media_from_base64

OPENAI = Dialect.OPENAI  # llama-server answers errors in OpenAI's shape
PROMPT_STRING_KEY = "prompt_string"
MULTIMODAL_KEY = "multimodal_data"


def prompt_list(prompt: SinglePrompt | list[SinglePrompt]) -> list[SinglePrompt] | None:
    """The prompts of a multi-prompt request, or None for a single prompt.

    A list holding a number is one prompt of mixed ids and text; a list of texts, id lists
    or objects is several prompts (llama-server's rule)."""
    if not isinstance(prompt, list) or not prompt:
        return None
    if any(isinstance(part, int) for part in prompt):
        return None
    return [part for part in prompt if not isinstance(part, int)]  # none are, by the rule


def _prompt(
    prompt: SinglePrompt | list[SinglePrompt], tokenizer: Tokenizer
) -> tuple[str, tuple[int, ...], tuple[MediaInput, ...]]:
    """(text, token ids, media): text is tokenized by the engine; ids (or mixed) go in
    verbatim; an object's `multimodal_data` stands where its text has llama.cpp's marker."""
    if isinstance(prompt, dict):
        text = prompt.get(PROMPT_STRING_KEY)
        if not isinstance(text, str):
            raise APIError(400, f"prompt: an object needs a {PROMPT_STRING_KEY!r}", dialect=OPENAI)
        return _with_media(text, prompt.get(MULTIMODAL_KEY))
    if isinstance(prompt, str):
        return prompt, (), ()
    ids: list[int] = []
    for part in prompt:
        if isinstance(part, str):
            ids += tokens_without_bos(tokenizer, part)
        elif isinstance(part, int) and not isinstance(part, bool):
            ids.append(part)
        else:
            raise APIError(400, "prompt: a list holds token ids and text", dialect=OPENAI)
    try:
        text = tokenizer.detokenize(ids)
    except ValueError as exc:
        raise APIError(400, f"prompt: {exc}", dialect=OPENAI) from None
    return text, tuple(ids), ()


# llama.cpp's own media marker, which llama-server's clients put in `prompt_string`.
LLAMA_MEDIA_MARKER = "<__media__>"


def _with_media(text: str, data: Any) -> tuple[str, tuple[int, ...], tuple[MediaInput, ...]]:
    """`prompt_string` with each llama.cpp marker standing for the next `multimodal_data`
    item (base64 images or sounds); a 400 when the counts differ."""
    if not data:
        return text, (), ()
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise APIError(400, f"prompt: {MULTIMODAL_KEY} is a list of base64 strings", dialect=OPENAI)
    media = tuple(
        media_from_base64(item, OPENAI, expect="any", where=f"{MULTIMODAL_KEY}[{index}]")
        for index, item in enumerate(data)
    )
    check_media_count(media, OPENAI)
    markers = text.count(LLAMA_MEDIA_MARKER)
    if markers != len(media):
        raise APIError(
            400,
            f"prompt: {markers} {LLAMA_MEDIA_MARKER} markers for {len(media)} "
            f"{MULTIMODAL_KEY} items: put one marker where each goes",
            dialect=OPENAI,
        )
    return text.replace(LLAMA_MEDIA_MARKER, MEDIA_MARKER), (), media


def completion_plan(
    body: CompletionRequest,
    prompt: SinglePrompt | list[SinglePrompt],
    request_id: str,
    tokenizer: Tokenizer,
    default_max_tokens: int,
) -> ChatPlan:
    text, ids, media = _prompt(prompt, tokenizer)
    sampling = replace(
        with_penalty_window(sampling_from(body), body.repeat_last_n),
        ban_eos=body.ignore_eos,
        logit_bias=resolve_logit_bias(body.logit_bias, tokenizer, OPENAI),
    )
    generation = GenerationRequest(
        request_id=request_id,
        prompt=text,
        prompt_tokens=ids,
        # -1: the server's default amount (--defaultgenamt), as llama-server's -1 is capped
        # by its own -n; 0 still decodes the prompt and samples once, at most one token
        max_tokens=default_max_tokens if body.n_predict < 0 else max(body.n_predict, 1),
        sampling=sampling,
        stop=stop_list(body.stop),
        json_schema=body.json_schema,
        grammar=None if body.json_schema is not None else body.grammar,
        logprobs=body.n_probs if body.n_probs > 0 else None,
        post_sampling_probs=body.post_sampling_probs,
        report_progress=body.stream and body.return_progress,
        reuse_cache=body.cache_prompt,
        media=media,
    )
    return text_plan(generation)
