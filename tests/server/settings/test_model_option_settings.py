"""The model-loading settings (issue 27): KoboldCpp's keys and llama-server's flags for each,
what they mean together, .kcpps files both ways, bad values refused naming the setting, and the
memory estimate following the KV cache's type and place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.core.load_settings import ModelOptions
from server.models.gguf import gguf_summary
from server.models.memory import KvCacheLayout, estimate_memory, kv_cache_layout
from server.process.load_settings import model_options
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from server.settings.kcpps import SettingsFileError, load_kcpps, save_kcpps

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FULL_PRESET = FIXTURES / "koboldcpp-1.116-full.kcpps"


def settings_of(*argv: str) -> HearthSettings:
    return parse_command_line(list(argv)).settings


def test_koboldcpp_s_flags_and_llama_server_s_load_the_model_alike() -> None:
    kobold = settings_of(
        "--quantkv", "1", "--noflashattention", "--usemmap", "--usemlock", "--lowvram",
        "--ropeconfig", "0.5,20000", "--overridekv", "general.name=str:x",
        "--overridetensors", "exps=CPU", "--moecpu", "3",
    )  # fmt: skip
    llama = settings_of(
        "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "off", "--mmap", "--mlock", "-nkvo",
        "--rope-scale", "2", "--rope-freq-base", "20000", "--override-kv", "general.name=str:x",
        "-ot", "exps=CPU", "--n-cpu-moe", "3",
    )  # fmt: skip
    for settings in (kobold, llama):
        options = model_options(settings)
        assert (options.cache_type_k, options.cache_type_v) == ("q8_0", "q8_0")
        assert (options.flash_attention, options.load_mode) == ("off", "mmap+mlock")
        assert options.offload_kv is False
        assert (options.rope_freq_base, options.rope_freq_scale) == (20000.0, 0.5)
        assert options.kv_overrides == (("general.name", "str", "x"),)
        assert options.tensor_overrides == (("exps", "CPU"),)
        assert options.moe_cpu_layers == 3
    assert settings_of("--load-mode", "none").model_load_mode == "none"  # llama-server's no-mmap
    assert settings_of("-lm", "mmap", "--usemlock").model_load_mode == "mmap"  # -lm wins


def test_defaults_leave_everything_to_the_model_and_llama_cpp() -> None:
    assert model_options(HearthSettings()) == ModelOptions()
    options = ModelOptions()
    assert (options.flash_attention, options.cache_type_k, options.cache_type_v) == (
        "auto",
        "f16",
        "f16",
    )
    assert (options.load_mode, options.offload_kv, options.add_bos) == ("auto", True, True)
    assert (options.rope_freq_base, options.rope_freq_scale, options.gen_limit) == (0, 0, 0)


@pytest.mark.parametrize(
    ("written", "k", "v"),
    [(0, "f16", "f16"), (1, "q8_0", "q8_0"), (2, "q4_0", "q4_0"), ("2", "q4_0", "q4_0"),
     ("Q8_0", "q8_0", "q8_0"), ("bf16", "bf16", "bf16"), ("q5_1", "q5_1", "q5_1"),
     (None, "f16", "f16")],
)  # fmt: skip
def test_quantkv_reads_koboldcpp_s_numbers_and_names(written: object, k: str, v: str) -> None:
    assert HearthSettings.model_validate({"quantkv": written}).kv_cache_types == (k, v)


def test_llama_server_s_cache_types_set_one_half_each() -> None:
    assert settings_of("--quantkv", "q8_0", "-ctv", "q4_0").kv_cache_types == ("q8_0", "q4_0")
    assert settings_of("--cache-type-k", "Q5_1").kv_cache_types == ("q5_1", "f16")


@pytest.mark.parametrize(
    ("values", "meant"),
    [
        ({}, "auto"),
        ({"noflashattention": True}, "off"),
        ({"noflashattention": True, "flash_attn": "on"}, "on"),  # -fa on, typed over a file
        ({"flash_attn": "enabled"}, "on"),
        ({"flash_attn": "0"}, "off"),
        ({"flash_attn": False}, "off"),
        ({"flashattention": True}, "auto"),  # KoboldCpp's old key: on where it can be
        ({"flashattention": False}, "off"),
        ({"flashattention": True, "noflashattention": True}, "off"),  # the new key wins
    ],
)
def test_flash_attention_in_every_spelling(values: dict[str, object], meant: str) -> None:
    assert HearthSettings.model_validate(values).flash_attention == meant


@pytest.mark.parametrize(
    ("ropeconfig", "frequencies"),
    [
        ([0.0, 10000.0], (0.0, 0.0)),  # KoboldCpp's default: the model's own, base and all
        ([0.0, 500000.0], (0.0, 0.0)),  # as in KoboldCpp, a base counts only with a scale
        ([0.5, 20000.0], (20000.0, 0.5)),
        ([0.5], (10000.0, 0.5)),  # KoboldCpp's base when only a scale is given
        ("1 100", (100.0, 1.0)),
        ([], (0.0, 0.0)),
        (None, (0.0, 0.0)),
    ],
)
def test_ropeconfig_as_koboldcpp_reads_it(
    ropeconfig: object, frequencies: tuple[float, float]
) -> None:
    settings = HearthSettings.model_validate({"ropeconfig": ropeconfig})
    assert settings.rope_frequencies == frequencies


def test_llama_server_s_rope_flags_win_over_ropeconfig() -> None:
    assert settings_of("--rope-freq-base", "50000").rope_frequencies == (50000.0, 0.0)
    settings = settings_of("--ropeconfig", "0.5,20000", "--rope-scale", "4")
    assert settings.rope_frequencies == (20000.0, 0.25)


def test_lowvram_in_koboldcpp_s_usecuda_words_keeps_the_kv_cache_in_ram() -> None:
    assert settings_of("--usecuda", "lowvram", "0").kv_in_system_memory is True
    assert settings_of("--usecuda", "normal", "0").kv_in_system_memory is False
    assert model_options(settings_of("--no-kv-offload")).offload_kv is False


def test_overrides_are_read_in_both_tools_spellings() -> None:
    settings = settings_of(
        "--override-kv",
        "tokenizer.ggml.add_bos_token=bool:false, gemma3.context_length=int:4096,"
        "gemma3.rope.freq_base=float:1e4",
        "--override-tensor",
        r"blk\.(1|2)\.ffn_.*=CPU,token_embd=Vulkan0",
    )
    assert settings.kv_override_list == [
        ("tokenizer.ggml.add_bos_token", "bool", "false"),
        ("gemma3.context_length", "int", "4096"),
        ("gemma3.rope.freq_base", "float", "1e4"),
    ]
    assert settings.tensor_override_list == [
        (r"blk\.(1|2)\.ffn_.*", "CPU"),
        ("token_embd", "Vulkan0"),
    ]
    assert HearthSettings.model_validate({"overridekv": None}).overridekv == ""


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("quantkv", 3, "0 (f16), 1 (q8_0) and 2 (q4_0)"),
        ("quantkv", "q3_k", "quantkv"),
        ("cache_type_v", "fp8", "cache_type_v"),
        ("flash_attn", "sometimes", "flash_attn"),
        ("load_mode", "lazy", "load_mode"),
        ("ropeconfig", [1.0, 2.0, 3.0], "a scale and a base"),
        ("ropeconfig", "-1,10000", "cannot be negative"),
        ("ropeconfig", "fast", "ropeconfig"),
        ("rope_scale", -2, "rope_scale"),
        ("overridekv", "general.name", "KEY=TYPE:VALUE"),
        ("overridekv", "a=long:1", "int, float, bool or str, not 'long'"),
        ("overridekv", "a=int:1.5", "'1.5' is not an integer"),
        ("overridekv", "a=float:much", "'much' is not a number"),
        ("overridekv", "a=bool:yes", "a bool is true or false"),
        ("overridekv", "a=str:" + "x" * 128, "at most 127 bytes"),
        ("overridekv", "k" * 128 + "=int:1", "a key has at most 127 bytes"),
        ("overridetensors", "exps", "PATTERN=BUFFER_TYPE"),
        ("overridetensors", "blk.(=CPU", "not a valid regex"),
        ("moecpu", -1, "moecpu"),
        ("moeexperts", -2, "moeexperts"),
        ("genlimit", -1, "genlimit"),
        ("gendefaults", "{temperature: 1}", "not valid JSON"),
        ("gendefaults", "[1, 2]", "must be a JSON object"),
    ],
)
def test_bad_values_are_refused_naming_the_setting(key: str, value: object, said: str) -> None:
    with pytest.raises(ValidationError, match=key) as refused:
        HearthSettings.model_validate({key: value})
    assert said in str(refused.value)


def test_a_bad_value_in_a_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.kcpps"
    path.write_text(json.dumps({"overridekv": "a=int:x"}))
    with pytest.raises(SettingsFileError, match=r"bad\.kcpps: overridekv: .*not an integer"):
        load_kcpps(path)


def test_gendefaults_as_json_text_or_an_object() -> None:
    typed = settings_of("--gendefaults", '{"temperature": 0.5, "max_length": 40}')
    assert typed.gendefaults == {"temperature": 0.5, "max_length": 40}
    assert HearthSettings.model_validate({"gendefaults": ""}).gendefaults == {}  # KoboldCpp's
    assert settings_of("--gendefaultsoverwrite", "--genlimit", "64").genlimit == 64


def test_a_koboldcpp_file_round_trips_as_written(tmp_path: Path) -> None:
    written = {
        "quantkv": 1,  # an older KoboldCpp's number stays a number
        "flashattention": True,  # the old key, kept beside the one it is read as
        "usemmap": True,
        "usemlock": False,
        "lowvram": True,
        "ropeconfig": [0.5, 20000.0],
        "overridekv": "tokenizer.ggml.add_bos_token=bool:false",
        "overridetensors": r"blk\.([0-9]*[02468])\.ffn_.*_exps\.=CPU",
        "moecpu": 8,
        "moeexperts": 4,
        "nobostoken": True,
        "genlimit": 1024,
        "gendefaults": {"temperature": 0.7, "top_p": 0.9},
        "gendefaultsoverwrite": True,
    }
    path = tmp_path / "kobold.kcpps"
    path.write_text(json.dumps(written))
    loaded = load_kcpps(path)
    assert loaded.kv_cache_types == ("q8_0", "q8_0") and loaded.flash_attention == "auto"
    saved = json.loads(save_kcpps(loaded, tmp_path / "again.kcpps").read_text())
    assert {key: saved[key] for key in written} == written
    assert saved["noflashattention"] is False  # and the key KoboldCpp 1.116 reads
    again = load_kcpps(tmp_path / "again.kcpps")
    assert model_options(again) == model_options(loaded)


def test_hearth_s_own_keys_round_trip(tmp_path: Path) -> None:
    settings = settings_of(
        "-ctk", "q5_1", "-ctv", "q4_0", "-fa", "on", "-lm", "dio",
        "--rope-freq-base", "8000", "--rope-scale", "2",
    )  # fmt: skip
    reread = load_kcpps(save_kcpps(settings, tmp_path / "hearth.kcpps"))
    assert model_options(reread) == model_options(settings)
    assert model_options(reread).load_mode == "dio"


def test_the_full_koboldcpp_preset_is_applied_as_it_says() -> None:
    options = model_options(load_kcpps(FULL_PRESET))
    assert (options.cache_type_k, options.cache_type_v) == ("q8_0", "q8_0")
    assert options.flash_attention == "off"  # noflashattention: true
    assert (options.load_mode, options.offload_kv) == ("mmap+mlock", False)
    assert (options.rope_freq_base, options.rope_freq_scale) == (20000.0, 0.5)
    assert options.kv_overrides == (("tokenizer.ggml.add_bos_token", "bool", "false"),)
    assert options.tensor_overrides == ((r"blk\.([0-9]*[02468])\.ffn_.*_exps\.", "CPU"),)
    assert (options.moe_cpu_layers, options.moe_experts) == (8, 4)
    assert (options.add_bos, options.gen_limit) == (False, 1024)


# -- the memory estimate ---------------------------------------------------------------------


def test_a_quantized_v_cache_needs_flash_attention_and_says_so() -> None:
    layout, note = kv_cache_layout("q8_0", "q8_0", "off")
    assert layout == KvCacheLayout("q8_0", "f16")
    assert note is not None and "needs flash attention" in note and "stays f16" in note
    assert kv_cache_layout("q8_0", "q8_0", "auto") == (KvCacheLayout("q8_0", "q8_0"), None)
    assert kv_cache_layout("q8_0", "bf16", "off") == (KvCacheLayout("q8_0", "bf16"), None)


def test_the_estimate_follows_the_kv_cache_type_and_place(bundled: Path) -> None:
    summary = gguf_summary(bundled)
    f16 = estimate_memory(summary, context=8192, batch=512)
    q8 = estimate_memory(summary, context=8192, batch=512, kv=KvCacheLayout("q8_0", "q8_0"))
    q4 = estimate_memory(summary, context=8192, batch=512, kv=KvCacheLayout("q4_0", "q4_0"))
    assert q8.kv_layer_bytes == f16.kv_layer_bytes * 34 // 64  # 34 bytes per 32 values
    assert q4.kv_layer_bytes == f16.kv_layer_bytes * 18 // 64
    mixed = estimate_memory(summary, 8192, 512, KvCacheLayout("q8_0", "f16"))
    assert mixed.kv_layer_bytes == (f16.kv_layer_bytes + q8.kv_layer_bytes) // 2
    every = f16.all_layers
    assert q8.device_bytes(every) < f16.device_bytes(every)
    assert q8.cpu_bytes < f16.cpu_bytes
    in_ram = estimate_memory(summary, 8192, 512, KvCacheLayout(on_device=False))
    # --lowvram: the device holds no KV cache, the machine still does.
    kv_total = f16.layers * f16.kv_layer_bytes
    assert in_ram.device_bytes(every) == f16.device_bytes(every) - kv_total
    assert in_ram.cpu_bytes == f16.cpu_bytes


@pytest.mark.parametrize(
    "argv, rope",
    [
        (["--ropeconfig", "0.5", "10000"], [0.5, 10000.0]),  # KoboldCpp's two words
        (["--ropeconfig", "0.5,20000"], [0.5, 20000.0]),
        (["--ropeconfig", "0.25"], [0.25, 10000.0]),
    ],
)
def test_ropeconfig_takes_koboldcpp_s_two_words_without_eating_the_model(
    argv: list[str], rope: list[float]
) -> None:
    settings = parse_command_line(argv).settings
    assert settings.ropeconfig == rope and settings.model_param is None


def test_a_bare_moecpu_keeps_every_layer_s_experts_on_the_cpu() -> None:
    assert parse_command_line(["--moecpu"]).settings.moecpu == 999
    assert parse_command_line(["--moecpu", "3"]).settings.moecpu == 3
