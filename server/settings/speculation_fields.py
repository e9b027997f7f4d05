"""The speculative decoding settings of `HearthSettings`: llama-server's `--spec-type` and its
size flags, and KoboldCpp's draft model keys (`draftmodel`, `draftamount`, `draftgpulayers`,
`draftgpusplit`). Kept apart so the settings model stays readable; `HearthSettings` inherits
them, so they are ordinary settings everywhere (command line, .kcpps, launcher).

Speculation only changes the speed: drafted tokens are checked by the model and kept only when
they are what it samples anyway (server/core/llama/speculation/speculation.py, engine.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from server.settings.flags import flags

SpecType = Literal["none", "ngram-simple", "ngram-mod"]


class SpeculationFields(BaseModel):
    # llama-server's --spec-type (not a KoboldCpp key: a .kcpps file without it means none).
    # A draft model (draftmodel) drafts instead when set; ngram-map-k and ngram-cache are not
    # here yet.
    spec_type: SpecType = Field(
        default="none",
        description="Speculative decoding without a draft model: ngram-simple or ngram-mod "
        "draft tokens from repeats of the text so far (fast on copied code, JSON, quotes).",
        json_schema_extra=flags("--spec-type", metavar="none|ngram-simple|ngram-mod"),
    )
    # llama-server's --spec-ngram-simple-size-n / -size-m (its defaults and ranges).
    spec_ngram_simple_size_n: int = Field(
        default=12,
        ge=1,
        le=1024,
        description="ngram-simple: tokens looked up earlier.",
        json_schema_extra=flags("--spec-ngram-simple-size-n"),
    )
    spec_ngram_simple_size_m: int = Field(
        default=48,
        ge=1,
        le=1024,
        description="ngram-simple: the longest draft in tokens.",
        json_schema_extra=flags("--spec-ngram-simple-size-m"),
    )
    # llama-server's --spec-ngram-mod-n-match / -n-min / -n-max.
    spec_ngram_mod_n_match: int = Field(
        default=24,
        ge=1,
        le=1024,
        description="ngram-mod: tokens looked up earlier.",
        json_schema_extra=flags("--spec-ngram-mod-n-match"),
    )
    spec_ngram_mod_n_min: int = Field(
        default=48,
        ge=0,
        le=1024,
        description="ngram-mod: the shortest draft; a shorter repeat drafts nothing.",
        json_schema_extra=flags("--spec-ngram-mod-n-min"),
    )
    spec_ngram_mod_n_max: int = Field(
        default=64,
        ge=0,
        le=1024,
        description="ngram-mod: the longest draft in tokens.",
        json_schema_extra=flags("--spec-ngram-mod-n-max"),
    )
    # KoboldCpp's Draft Model (its Loaded Files tab) and llama-server's --spec-draft-model.
    draftmodel: str | None = Field(
        default=None,
        description="GGUF draft model for speculative decoding: a smaller model on the same "
        "vocabulary.",
        json_schema_extra=flags(
            "--draftmodel", "--spec-draft-model", "--model-draft", "-md", metavar="FILE"
        ),
    )
    # KoboldCpp's --draftamount (default 8) and llama-server's --spec-draft-n-max: one knob.
    # As in both, it sizes a draft model's drafts; the n-gram kinds have their own sizes.
    draftamount: int = Field(
        default=8,
        ge=0,
        le=1024,
        description="Tokens a draft model drafts per step.",
        json_schema_extra=flags("--draftamount", "--spec-draft-n-max", "--draft-max"),
    )
    # llama-server's --spec-draft-n-min (a draft model's shorter drafts are dropped).
    spec_draft_n_min: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="A draft model's shortest draft in tokens.",
        json_schema_extra=flags("--spec-draft-n-min", "--draft-min"),
    )
    # llama-server's --spec-draft-p-min: a draft stops at a guess the draft model is less sure
    # of (its top token's probability among its ten likeliest). llama-server's default is now
    # 0 (draft the whole amount); Hearth keeps its former 0.75, which spares the rows of
    # guesses that are mostly rejected.
    spec_draft_p_min: float = Field(
        default=0.75,
        ge=0.0,
        le=1.0,
        description="A draft model's least confidence to go on drafting (0: never stop).",
        json_schema_extra=flags("--spec-draft-p-min", "--draft-p-min", metavar="P"),
    )
    # KoboldCpp's --draftgpulayers (default 999: all) and llama-server's --spec-draft-ngl.
    draftgpulayers: int = Field(
        default=999,
        ge=-1,
        le=999,
        description="Draft model layers on the GPU; -1: auto.",
        json_schema_extra=flags(
            "--draftgpulayers", "--spec-draft-ngl", "--gpu-layers-draft", "-ngld"
        ),
    )
    # KoboldCpp's --draftgpusplit: the draft model's share per GPU, like tensor_split.
    draftgpusplit: list[Annotated[float, Field(ge=0.0)]] | None = Field(
        default=None,
        description="Draft model's share of the layers per GPU; none: by memory.",
        json_schema_extra=flags("--draftgpusplit", nargs="+", metavar="SHARE"),
    )

    # (Named apart from HearthSettings' own validators: a subclass method of the same name
    # would replace this one.)
    @field_validator("spec_type", mode="before")
    @classmethod
    def _spec_type_word(cls, value: Any) -> Any:
        if value is None:
            return "none"
        if isinstance(value, str):
            word = value.strip().lower().replace("_", "-")
            return word or "none"
        return value

    @field_validator("draftmodel", mode="before")
    @classmethod
    def _blank_draft_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("draftgpusplit", mode="before")
    @classmethod
    def _draft_split_list(cls, value: Any) -> Any:
        # KoboldCpp writes a list ([3, 1]) or null; llama-server style "3,1" too. [] or all
        # zeros: not set.
        if isinstance(value, str):
            value = value.replace(",", " ").split()
        if isinstance(value, list):
            parts = [p for item in value for p in (str(item).replace(",", " ").split())]
            if not parts or all(float(part) == 0 for part in parts):
                return None
            return parts
        return value
