"""A thinking budget (llama-server's --reasoning-budget, Anthropic's budget_tokens): once a
thought has taken its tokens, the engine writes the thought's end tag itself and the model,
seeing its thought closed, answers.

`ThoughtBudget` watches a sequence's tokens as they are generated (their text with special
tokens shown, so control-token tags such as harmony's are seen too): inside a thought from the
start when the prompt opened it (`thinking_open`), or from the moment the model writes the
opening tag. Each thought gets the whole budget (a model may think more than once, as
llama.cpp's budget sampler allows). When a thought has used it, the end tag's tokens are queued
and fed one per step in place of sampling: accepted by the sampler chain (so a grammar and the
penalties see them), decoded into the KV cache, and sent as ordinary text, so a reader of the
stream sees the thought end exactly as if the model had ended it. A forced tag never splits a
character (it waits for the character's last byte), and is never fed where the request's
grammar forbids it: then the thought simply runs on.
"""

from __future__ import annotations

import ctypes
import logging
import math
from collections.abc import Callable

import llama_cpp as llama
import numpy as np

from server.core.types import GenerationRequest, TokenChoice, TokenLogprob

logger = logging.getLogger(__name__)


class ThoughtBudget:
    """One sequence's thought budget; `close_tokens` is the end tag tokenized, `allowed` says
    whether the request's grammar lets those tokens come next."""

    def __init__(
        self,
        request: GenerationRequest,
        budget: int,
        close_tokens: list[int],
        allowed: Callable[[list[int]], bool],
    ) -> None:
        self._open = request.thinking_tags[0].encode()
        self._close = request.thinking_tags[1].encode()
        self._budget = budget
        self._close_tokens = close_tokens
        self._allowed = allowed
        self._request_id = request.request_id
        self.inside = request.thinking_open
        self._used = 0  # tokens of the current thought
        self._due = False  # the budget is spent: close as soon as a character is complete
        self._tail = b""  # the last bytes seen, for tags split across tokens
        self._pending: list[int] = []  # end tag tokens still to feed
        self._unseen = 0  # forced tokens fed but not yet seen back
        self._refused = False  # the grammar refused the tag once (said once in the log)
        if self.inside and budget <= 0:
            self._due = True
            self._schedule()

    def next_forced(self) -> int | None:
        """The token to feed instead of sampling, while the end tag is being written."""
        return self._pending.pop(0) if self._pending else None

    def saw(self, piece: bytes) -> None:
        """A token just generated (sampled or forced), as its bytes with special tokens."""
        was_inside = self.inside
        self._scan(piece)
        if self._unseen:  # a token of the forced end tag
            self._unseen -= 1
            if not self._unseen:
                self.inside = False  # closed, even if the tag's text came out otherwise
            return
        if self.inside and was_inside and not self._due:
            self._used += 1
        if self.inside and self._used >= self._budget:
            self._due = True
        self._schedule()

    def _scan(self, piece: bytes) -> None:
        """Follow the tags through `piece` (open, close, open again…). A whole tag left in
        the kept tail is never the one sought: it would have been found when it came."""
        window = self._tail + piece
        while (at := window.find(self._close if self.inside else self._open)) >= 0:
            tag = self._close if self.inside else self._open
            self.inside = not self.inside
            self._used, self._due = 0, False
            window = window[at + len(tag) :]
        keep = max(len(self._open), len(self._close)) - 1
        self._tail = window[max(0, len(window) - keep) :]

    def _schedule(self) -> None:
        """Queue the end tag once the budget is spent, the last character is whole and the
        grammar (if any) allows the tag here; otherwise ask again after the next token."""
        if not self._due or self._pending or not self.inside or not self._close_tokens:
            return
        if _ends_mid_character(self._tail):
            return
        if not self._allowed(self._close_tokens):
            if not self._refused:
                self._refused = True
                logger.info(
                    "[%s] thinking budget spent, but the request's grammar does not allow %s "
                    "here yet: the thought goes on until it does",
                    self._request_id,
                    self._close.decode(errors="replace"),
                )
            return
        self._due = False
        self._pending = list(self._close_tokens)
        self._unseen = len(self._pending)


def _ends_mid_character(data: bytes) -> bool:
    """Whether `data` ends inside a multi-byte UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back for the lead
            continue
        if byte & 0x80 == 0:
            return False
        needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return back < needed
    return False


def thought_budget(
    request: GenerationRequest, tokenize: Callable[[str], list[int]], sampler: object
) -> ThoughtBudget | None:
    """The budget a request asks for, or None (no budget: nothing to watch)."""
    if request.reasoning_budget is None or request.reasoning_budget < 0:
        return None
    close = tokenize(request.thinking_tags[1])
    return ThoughtBudget(
        request, request.reasoning_budget, close, lambda tokens: grammar_allows(sampler, tokens)
    )


def grammar_allows(chain: object, tokens: list[int]) -> bool:
    """Whether the grammar in the sampler `chain` (if it has one) accepts `tokens` next. Asked
    of a copy of the grammar: feeding a grammar a token it forbids throws in C++, which would
    end the process."""
    grammar = next(
        (
            llama.llama_sampler_chain_get(chain, i)
            for i in range(llama.llama_sampler_chain_n(chain))
            if llama.llama_sampler_name(llama.llama_sampler_chain_get(chain, i)) == b"grammar"
        ),
        None,
    )
    if grammar is None:
        return True
    probe = llama.llama_sampler_clone(grammar)
    try:
        for token in tokens:
            candidate = (llama.llama_token_data * 1)(llama.llama_token_data(token, 0.0, 0.0))
            array = llama.llama_token_data_array(candidate, 1, -1, False)
            llama.llama_sampler_apply(probe, ctypes.byref(array))
            if math.isinf(candidate[0].logit):
                return False
            llama.llama_sampler_accept(probe, token)
        return True
    finally:
        llama.llama_sampler_free(probe)


def forced_logprob(
    logits: object, n_vocab: int, token: int, top_n: int, piece: Callable[[int], bytes]
) -> TokenLogprob:
    """A forced token's log-probability under the model (what it would have given it), with
    the `top_n` most likely tokens, as `sample_with_logprobs` reports a sampled one."""
    values = np.ctypeslib.as_array(logits, shape=(n_vocab,)).astype(np.float64)
    values -= values.max()
    values -= math.log(float(np.exp(values).sum()))
    best = np.argsort(-values, kind="stable")[: max(top_n, 0)]
    choices = tuple(TokenChoice(int(i), piece(int(i)), float(values[i])) for i in best)
    return TokenLogprob(TokenChoice(token, piece(token), float(values[token])), choices)
