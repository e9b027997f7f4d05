"""The edge between the settings model and the core: the fields loading a model reads, and
the chat template the user chose (read from its file or found by name, and compiled once here
so a broken one stops the start with a clear line instead of failing every request)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TypeVar

from server.core.load_settings import (
    LoadSettings,
    LoraSettings,
    MediaSettings,
    ModelOptions,
    SpeculationSettings,
    TemplateChoice,
)
from server.core.templates.named_templates import NAMED_TEMPLATES, named_template
from server.core.templates.template_jinja import ChatTemplateError, compile_template
from server.settings.config import HearthSettings

T = TypeVar("T")


def _frozen(values: Sequence[T] | None) -> tuple[T, ...] | None:
    return None if values is None else tuple(values)


class Projector(Enum):
    MMPROJ = "--mmproj"  # the settings' own: --mmproj, for the model it is loaded with


def load_settings(
    settings: HearthSettings,
    model: Path | None = None,
    projector: Path | Projector | None = Projector.MMPROJ,
) -> LoadSettings:
    """The core's load settings; `model`: the model file the projector is for; `projector`:
    that model's (None: text only), by default --mmproj."""
    chosen = settings.mmproj if projector is Projector.MMPROJ else projector
    return LoadSettings(
        contextsize=settings.contextsize,
        batch_size=settings.batch_size,
        thread_count=settings.thread_count,
        parallelrequests=settings.parallelrequests,
        gpulayers=settings.gpulayers,
        usecpu=settings.usecpu,
        usevulkan=_frozen(settings.usevulkan),
        usecuda=_frozen(settings.usecuda),
        cuda_device=settings.cuda_device,
        rpc=settings.rpc,
        tensor_split=_frozen(settings.tensor_split),
        noshift=settings.noshift,
        nofastforward=settings.nofastforward,
        cacheram_mib=settings.cacheram,
        smartcache=settings.smartcache,
        privatecache=settings.privatecache,
        cachedir=settings.cachedir,
        cachedisk_mib=settings.cachedisk,
        template=template_choice(settings),
        options=model_options(settings),
        speculation=speculation_settings(settings),
        media=MediaSettings(
            projector=None if chosen is None else str(chosen),
            for_model=None if model is None else str(model),
            on_cpu=settings.mmprojcpu,
            image_tokens=(settings.visionmintokens, settings.visionmaxtokens),
        ),
        pooling=settings.pooling,
    )


def for_model(loading: LoadSettings, model: Path, projector: Path | None) -> LoadSettings:
    """The load settings built once at start (`load_settings`), for one model file and its
    projector (None: text only): nothing is read or compiled again."""
    media = replace(
        loading.media,
        projector=None if projector is None else str(projector),
        for_model=str(model),
    )
    return replace(loading, media=media)


def model_options(settings: HearthSettings) -> ModelOptions:
    """KV cache type, flash attention, mmap/mlock, RoPE, overrides, MoE, BOS, LoRA."""
    type_k, type_v = settings.kv_cache_types
    rope_base, rope_scale = settings.rope_frequencies
    return ModelOptions(
        flash_attention=settings.flash_attention,
        cache_type_k=type_k,
        cache_type_v=type_v,
        load_mode=settings.model_load_mode,
        offload_kv=not settings.kv_in_system_memory,
        rope_freq_base=rope_base,
        rope_freq_scale=rope_scale,
        kv_overrides=tuple(settings.kv_override_list),
        tensor_overrides=tuple(settings.tensor_override_list),
        moe_cpu_layers=settings.moecpu,
        moe_experts=settings.moeexperts,
        add_bos=not settings.nobostoken,
        gen_limit=settings.genlimit,
        lora=LoraSettings(
            tuple(path for path, _scale in settings.lora_adapters()), settings.lora_scales_now()
        ),
    )


def speculation_settings(settings: HearthSettings) -> SpeculationSettings:
    """Which drafter speculative decoding uses, and its sizes."""
    return SpeculationSettings(
        kind=settings.spec_type,
        ngram_size_n=settings.spec_ngram_simple_size_n,
        ngram_size_m=settings.spec_ngram_simple_size_m,
        mod_n_match=settings.spec_ngram_mod_n_match,
        mod_n_min=settings.spec_ngram_mod_n_min,
        mod_n_max=settings.spec_ngram_mod_n_max,
        draft_max=settings.draftamount,
        draft_min=settings.spec_draft_n_min,
        draft_p_min=settings.spec_draft_p_min,
        draft_model=settings.draftmodel,
        draft_gpu_layers=settings.draftgpulayers,
        draft_gpu_split=_frozen(settings.draftgpusplit),
    )


class TemplateSettingError(ValueError):
    """The chosen chat template cannot be used; the message names it and says why."""


def template_choice(settings: HearthSettings) -> TemplateChoice:
    """The chat template the settings choose over the model's own (a file, a built-in name or
    Jinja text), compiled to check it, and the server's template variables; raises
    TemplateSettingError for a missing or unreadable file, an unknown name or bad Jinja."""
    kwargs = settings.template_kwargs
    if settings.jinjatemplate and settings.chat_template:
        raise TemplateSettingError(
            "give either a chat template file (--chat-template-file, --jinjatemplate) or "
            "--chat-template, not both"
        )
    if settings.jinjatemplate:
        path = Path(settings.jinjatemplate).expanduser()
        flag = f"--chat-template-file {path}"
        try:
            source = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise TemplateSettingError(f"{flag}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateSettingError(f"{flag}: cannot be read ({exc})") from None
        return _checked(TemplateChoice(source, f"the file {path}", kwargs), flag)
    given = settings.chat_template
    if not given:
        return TemplateChoice(kwargs=kwargs)
    named = named_template(given)
    if named is not None:
        name = given.strip().lower()
        return _checked(TemplateChoice(named, f"the built-in {name}", kwargs), "--chat-template")
    if "{{" in given or "{%" in given:
        choice = TemplateChoice(given, "the Jinja text of --chat-template", kwargs)
        return _checked(choice, "--chat-template")
    raise TemplateSettingError(
        f"--chat-template {given!r}: neither Jinja text nor a built-in template name "
        f"({', '.join(NAMED_TEMPLATES)})"
    )


def _checked(choice: TemplateChoice, flag: str) -> TemplateChoice:
    assert choice.source is not None
    try:
        compile_template(choice.source)
    except ChatTemplateError as exc:
        raise TemplateSettingError(f"{flag}: the template does not compile: {exc}") from None
    return choice
