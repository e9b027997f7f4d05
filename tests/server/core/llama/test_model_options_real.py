"""The model-loading options on the real model, loaded in this process (a few loads of about a
second each): the KV cache's type measured in its saved bytes, flash attention off with a
quantized V cache, the KV cache kept in RAM, RoPE and metadata overrides changing what llama.cpp
computes; and the overrides llama.cpp would take badly refused before anything loads."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import llama_cpp as llama
import numpy as np
import pytest

from server.core.llama.loading.load_options import model_overrides
from server.core.llama.loading.model import LoadedModel, Vocabulary
from server.core.load_settings import ModelOptions
from server.core.scheduling.engine import EngineError
from server.core.types import GenerationRequest
from server.models.files import resolve_model_path
from server.models.gguf import gguf_summary
from server.process.load_settings import load_settings
from server.settings.config import HearthSettings
from tests.support.logits import LIKELY, SHAPE_TOLERANCE

TEXT = "The lighthouse keeper wrote in his log every night about the ships and the sea. " * 4
Q8_0_SHARE = 34 / 64  # q8_0: 34 bytes per 32 values, f16: 64


@dataclass(frozen=True)
class Reading:
    """What reading TEXT left: the KV state's bytes and the next token's log-probabilities."""

    state_bytes: int
    logprobs: Any  # numpy array, one per vocabulary entry


def loaded_with(**values: Any) -> LoadedModel:
    """The bundled model loaded with these settings (by their .kcpps names)."""
    settings = HearthSettings(contextsize=1024, threads=2, **values)
    return LoadedModel.load(resolve_model_path(None), load_settings(settings))


def read_text(loaded: LoadedModel) -> Reading:
    ids = loaded.tokenize(TEXT, add_bos=loaded.add_bos, parse_special=True)
    tokens = (llama.llama_token * len(ids))(*ids)
    assert llama.llama_decode(loaded.context, llama.llama_batch_get_one(tokens, len(ids))) == 0
    logits = np.ctypeslib.as_array(
        llama.llama_get_logits_ith(loaded.context, -1), (loaded.n_vocab,)
    )
    shifted = logits - logits.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())
    return Reading(int(llama.llama_state_seq_get_size(loaded.context, 0)), logprobs.copy())


def read_with(**values: Any) -> Reading:
    loaded = loaded_with(**values)
    try:
        return read_text(loaded)
    finally:
        loaded.close()


def likely_difference(one: Reading, other: Reading) -> float:
    """The largest change in log-probability among the tokens `one` finds likely."""
    likely = one.logprobs > LIKELY
    return float(np.abs(one.logprobs[likely] - other.logprobs[likely]).max())


@pytest.fixture(scope="module")
def f16() -> Iterator[Reading]:
    yield read_with()


@pytest.mark.model
def test_a_q8_0_kv_cache_holds_the_text_in_0_53_of_the_bytes(f16: Reading) -> None:
    q8 = read_with(quantkv="q8_0")
    assert q8.state_bytes / f16.state_bytes == pytest.approx(Q8_0_SHARE, abs=0.01)
    assert likely_difference(f16, q8) < SHAPE_TOLERANCE  # the same model, a little coarser


@pytest.mark.model
def test_flash_attention_off_keeps_a_quantized_v_in_f16_and_says_so(
    f16: Reading, caplog: pytest.LogCaptureFixture
) -> None:
    # KoboldCpp's way of asking: q8_0 for both halves, no flash attention, KV cache in RAM.
    reading = read_with(quantkv=1, noflashattention=True, lowvram=True)
    # K in q8_0, V in f16: (34/32 + 2) bytes per value pair against f16's 4.
    assert reading.state_bytes / f16.state_bytes == pytest.approx((Q8_0_SHARE + 1) / 2, abs=0.01)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("q8_0 V cache needs flash attention" in line for line in said), said
    assert likely_difference(f16, reading) < SHAPE_TOLERANCE  # generates as with it on


@pytest.mark.model
def test_ropeconfig_changes_the_logits(f16: Reading) -> None:
    # A base of 100 instead of the model's million, in KoboldCpp's spelling (scale, base).
    stretched = read_with(ropeconfig=[1.0, 100.0])
    assert likely_difference(f16, stretched) > 2 * SHAPE_TOLERANCE


@pytest.mark.model
def test_metadata_overrides_change_what_llama_cpp_reads(bundled: Path) -> None:
    assert gguf_summary(bundled).context_length == 32768
    loaded = loaded_with(
        overridekv="gemma3.context_length=int:4096,tokenizer.ggml.add_bos_token=bool:false"
    )
    try:
        assert llama.llama_model_n_ctx_train(loaded.model) == 4096
        assert loaded.add_bos is False
        assert loaded.tokenize("Hello", add_bos=loaded.add_bos, parse_special=True)[0] != 2
        # llama.cpp's metadata strings stay the file's own: the override is in what it reads.
        assert loaded.metadata("gemma3.context_length") == "32768"
    finally:
        loaded.close()


def test_an_override_of_another_type_than_the_model_s_is_refused(bundled: Path) -> None:
    float_for_int = ModelOptions(kv_overrides=(("gemma3.context_length", "float", "4096"),))
    with pytest.raises(EngineError, match=r"stores gemma3\.context_length as int \(32768\)"):
        model_overrides(bundled, float_for_int)
    # A key the file lacks is taken as given: llama.cpp reads it where it looks for it.
    options = ModelOptions(kv_overrides=(("gemma3.rope.scaling.factor", "float", "2"),))
    overrides = model_overrides(bundled, options)
    assert overrides.kv[0].key == b"gemma3.rope.scaling.factor"
    assert overrides.kv[0].value.val_f64 == 2.0 and overrides.kv[1].key == b""


def test_a_buffer_type_or_pattern_llama_cpp_cannot_use_is_refused(bundled: Path) -> None:
    nowhere = ModelOptions(tensor_overrides=(("token_embd", "Vulkan7"),))
    with pytest.raises(EngineError, match=r"Vulkan7: no such buffer type here .*CPU"):
        model_overrides(bundled, nowhere)
    with pytest.raises(EngineError, match="not a valid regex"):
        model_overrides(bundled, ModelOptions(tensor_overrides=(("blk.(", "CPU"),)))


def test_what_does_not_apply_to_a_dense_model_is_said(bundled: Path) -> None:
    options = ModelOptions(
        moe_experts=2, moe_cpu_layers=4, tensor_overrides=(("no_such_tensor", "CPU"),)
    )
    overrides = model_overrides(bundled, options)
    assert overrides.notes == [
        "--moeexperts 2: not applied, this model has no experts",
        "--overridetensors no_such_tensor=CPU: no tensor of this model",
        "--moecpu 4: this model has no expert tensors",
    ]
    assert overrides.kv is None
    assert (
        overrides.tensors[0].pattern == b"no_such_tensor" and overrides.tensors[1].pattern is None
    )
    placed = model_overrides(bundled, ModelOptions(tensor_overrides=((r"blk\.1\.", "CPU"),)))
    assert placed.notes == [] and placed.tensors[0].buft


def write_moe_header(path: Path) -> Path:
    """A GGUF header of a mixture-of-experts model (four experts, two layers)."""
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_uint32("qwen3moe.expert_count", 4)
    writer.add_uint32("qwen3moe.expert_used_count", 2)
    for name in ("blk.0.ffn_up_exps.weight", "blk.1.ffn_gate_exps.weight", "blk.0.attn_q.weight"):
        writer.add_tensor(name, np.ones((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_moe_options_become_an_override_and_cpu_placements(tmp_path: Path) -> None:
    moe = write_moe_header(tmp_path / "moe.gguf")
    with pytest.raises(EngineError, match="--moeexperts 8: this model has only 4 experts"):
        model_overrides(moe, ModelOptions(moe_experts=8))
    overrides = model_overrides(moe, ModelOptions(moe_experts=3, moe_cpu_layers=1))
    assert overrides.notes == []
    assert overrides.kv[0].key == b"qwen3moe.expert_used_count"
    assert overrides.kv[0].value.val_i64 == 3
    pattern = overrides.tensors[0].pattern.decode()
    names = ["blk.0.ffn_up_exps.weight", "blk.1.ffn_gate_exps.weight", "blk.0.attn_q.weight"]
    assert [name for name in names if re.search(pattern, name)] == names[:1]
    assert overrides.tensors[1].pattern is None
    # The user's own override of the same key wins over --moeexperts.
    own = ModelOptions(moe_experts=3, kv_overrides=(("qwen3moe.expert_used_count", "int", "1"),))
    kv = model_overrides(moe, own).kv
    assert (kv[0].value.val_i64, kv[1].key) == (1, b"")


@pytest.mark.model
def test_a_vocab_only_card_plans_with_the_same_options(bundled: Path) -> None:
    """Planning (token counts, /tokenize) must see --nobostoken, --genlimit and the metadata
    overrides as the loaded model does."""
    plain = Vocabulary.load_vocab_only(bundled)
    no_bos = Vocabulary.load_vocab_only(bundled, options=ModelOptions(add_bos=False, gen_limit=5))
    overridden = Vocabulary.load_vocab_only(
        bundled,
        options=ModelOptions(kv_overrides=(("tokenizer.ggml.add_bos_token", "bool", "false"),)),
    )
    try:
        plain.slot_context = no_bos.slot_context = 4096  # as ModelCard.load sets it
        request = GenerationRequest(request_id="r", prompt="Hello there", max_tokens=100)
        max_tokens, tokens = plain.fit_to_context(request)
        assert plain.add_bos and tokens[0] == plain.bos and max_tokens == 100
        assert no_bos.fit_to_context(request) == (5, tokens[1:])
        assert overridden.add_bos is False
    finally:
        for vocabulary in (plain, no_bos, overridden):
            vocabulary.free_vocabulary()
