"""`logit_bias` in the shapes clients send it, as (token id, bias) pairs for the sampler.

OpenAI sends `{"<token id>": bias}`; llama-server also takes text keys and a list of
`[token id or text, bias]` pairs, where a bias of `false` bans the token; KoboldAI sends
`{"<token id>": bias}` clamped to ±100. A text key biases every token of that text, as
llama-server does. A key that is neither a token id of this model nor text is a 400, where
llama-server ignores it: a typo should not silently do nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from server.core.scheduling.engine import Tokenizer
from server.dialects.chat.request_fields import tokens_without_bos
from server.dialects.edge.errors import APIError, Dialect

_TOKEN_ID = re.compile(r"-?[0-9]+")  # ASCII digits only: "²" or "١٢" are text
LogitBias = tuple[tuple[int, float], ...]
# What clients send: a mapping, or llama-server's list of pairs.
RawLogitBias = Mapping[str, Any] | Sequence[Any]


def resolve_logit_bias(
    raw: RawLogitBias | None,
    tokenizer: Tokenizer,
    dialect: Dialect,
    *,
    limit: float | None = None,
) -> LogitBias:
    """(token id, bias) pairs for `raw`; `limit` clamps biases (KoboldCpp's ±100)."""
    if not raw:
        return ()
    if isinstance(raw, Mapping):
        entries: list[tuple[Any, Any]] = list(raw.items())
    else:
        entries = []
        for pair in raw:
            if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
                raise APIError(
                    400, "logit_bias: each entry must be [token id or text, bias]", dialect=dialect
                )
            entries.append((pair[0], pair[1]))
    resolved: list[tuple[int, float]] = []
    for key, value in entries:
        bias = _bias(value, dialect)
        if limit is not None and math.isfinite(bias):
            bias = min(max(bias, -limit), limit)
        resolved += [(token, bias) for token in _tokens(key, tokenizer, dialect)]
    return tuple(resolved)


def _bias(value: Any, dialect: Dialect) -> float:
    if value is False:
        return -math.inf  # llama-server's "never this token"
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise APIError(400, f"logit_bias: {value!r} is not a number", dialect=dialect)
    return float(value)


def _tokens(key: Any, tokenizer: Tokenizer, dialect: Dialect) -> list[int]:
    if isinstance(key, int) and not isinstance(key, bool):
        return [_checked_id(key, tokenizer, dialect)]
    if not isinstance(key, str) or not key:
        raise APIError(400, f"logit_bias: {key!r} is not a token id or text", dialect=dialect)
    if _TOKEN_ID.fullmatch(key):
        return [_checked_id(int(key), tokenizer, dialect)]
    return tokens_without_bos(tokenizer, key, special=False)


def _checked_id(token: int, tokenizer: Tokenizer, dialect: Dialect) -> int:
    try:
        tokenizer.detokenize([token])
    except ValueError:
        raise APIError(
            400, f"logit_bias: {token} is not a token id of this model", dialect=dialect
        ) from None
    return token
