"""Bounds every dialect's schemas share: what the engine (C ints, float32) can take.

Values outside them are refused as invalid input (400/422) instead of failing inside
llama.cpp, where they could only become a 500. NaN and infinities are refused by each
schema's `allow_inf_nan=False`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

C_INT_MAX = 2**31 - 1

# Counts of tokens (max tokens, top-k, penalty windows): a C int in llama.cpp.
TokenCount = Annotated[int, Field(ge=1, le=C_INT_MAX)]
OptionalTopK = Annotated[int | None, Field(default=None, ge=0, le=C_INT_MAX)]
