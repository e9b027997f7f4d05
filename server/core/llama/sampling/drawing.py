"""Drawing a sequence's next token from one row of a decode's logits: sampled by its request's
sampler chain, or forced (a thought over its budget closed), with its log-probability when the
request asks. Each row of a speculative decode's draft is drawn here too, one after another."""

from __future__ import annotations

from typing import Any

import llama_cpp as llama

from server.core.llama.loading.model import LoadedModel
from server.core.llama.sampling.sampler import greedy_token, sample_with_logprobs
from server.core.llama.sequences.sequence import Sequence
from server.core.llama.sequences.thinking import forced_logprob
from server.core.types import TokenLogprob


def draw(
    loaded: LoadedModel, sequence: Sequence, row: int, piece_buffer: Any
) -> tuple[int, TokenLogprob | None]:
    """The next token, sampled or (closing a thought over budget) forced, and its
    log-probability when the request asks. A forced token is accepted by the sampler
    chain like a sampled one, so the grammar and the penalties follow the text.
    `piece_buffer`: the worker's own buffer for token pieces (the event loop detokenizes
    with others meanwhile)."""
    wanted = sequence.request.logprobs
    logits = llama.llama_get_logits_ith(loaded.context, row)

    def piece(token: int) -> bytes:
        return loaded.token_bytes(token, special=True, buffer=piece_buffer)

    forced = None if sequence.thought is None else sequence.thought.next_forced()
    if forced is not None:
        llama.llama_sampler_accept(sequence.sampler, forced)
        if wanted is None:
            return forced, None
        return forced, forced_logprob(logits, loaded.n_vocab, forced, wanted, piece)
    if wanted is None and sequence.greedy:
        return greedy_token(logits, loaded.n_vocab), None
    if wanted is None:
        return llama.llama_sampler_sample(sequence.sampler, loaded.context, row), None
    post_sampling = sequence.request.post_sampling_probs
    return sample_with_logprobs(
        sequence.sampler, logits, loaded.n_vocab, wanted, post_sampling, piece
    )
