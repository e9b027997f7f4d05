"""The speculative decoding settings of `HearthSettings`: llama-server's `--spec-type` and its
size flags, and KoboldCpp's draft model keys (`draftmodel`, `draftamount`, `draftgpulayers`,
`draftgpusplit`). Kept apart so the settings model stays readable; `HearthSettings` inherits
them, so they are ordinary settings everywhere.
"""

from __future__ import annotations

from pydantic import BaseModel


class SpeculationFields(BaseModel):
    pass
