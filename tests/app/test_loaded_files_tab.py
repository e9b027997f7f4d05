"""The Loaded Files tab (issue 27): LoRA adapters and the draft model bound to KoboldCpp's keys
(`lora`, `loramult`, `draftmodel`, `draftamount`, `draftgpulayers`, `draftgpusplit`); the
Context tab's Custom RoPE Config (`ropeconfig`); a file that sets none of them saved back as it
was; GPU Layers' estimate counting the draft model; and the notes from key_fates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.tabs import settings_tabs
from app.tabs.gpu_fields import draft_device_bytes
from app.tabs.loaded_files import DRAFT_KEYS, LORA_KEYS, LoadedFilesTab, not_applied_note
from app.tabs.settings_tabs import ContextTab, QuickLaunchTab
from server.devices.listing import ListedDevice
from server.models.files import resolve_model_path
from server.models.gguf import gguf_summary
from server.models.memory import HEADROOM_BYTES, KvCacheLayout, estimate_memory
from server.settings import key_fates
from server.settings.config import HearthSettings
from tests.app.launching import launched_settings
from tests.support.servers import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
GIB = 2**30
RADEON = ListedDevice("Vulkan", 1, "AMD Radeon RX 7600", "discrete GPU", 7 * GIB, 8 * GIB)
KEYS = (*LORA_KEYS, *DRAFT_KEYS, "ropeconfig")


@pytest.fixture(scope="module")
def gguf() -> Path:
    """The bundled model: a real GGUF to stand for the model and its draft."""
    return resolve_model_path(None)


def saved_keys(window: MainWindow, loaded: Path, tmp_path: Path) -> dict[str, Any]:
    assert window.load_file(loaded)
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    return {key: data[key] for key in KEYS}


def test_a_koboldcpp_file_s_loaded_files_show_and_save_back(
    window: MainWindow, tmp_path: Path, gguf: Path
) -> None:
    written = {
        **json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text()),
        "lora": ["/models/style-lora.gguf", "/models/tone lora.gguf"],
        "loramult": 0.123456,  # more decimals than the field shows: saved back as it was
        "draftmodel": str(gguf),
        "draftamount": 6,
        "draftgpulayers": 20,
        "draftgpusplit": [3.0, 1.5],
        "ropeconfig": [0.5, 20000.0],
    }
    loaded = tmp_path / "koboldcpp.kcpps"
    loaded.write_text(json.dumps(written))
    assert saved_keys(window, loaded, tmp_path) == {key: written[key] for key in KEYS}
    tab = window.loaded
    assert tab.lora.text() == "/models/style-lora.gguf; /models/tone lora.gguf"
    assert tab.lora_mult.value() == 0.12  # shown rounded
    assert tab.draft_model.text() == str(gguf)
    assert (tab.draft_amount.value(), tab.draft_layers.value()) == (6, 20)
    assert tab.draft_split.text() == "3, 1.5"
    rope = window.context.rope
    assert rope.custom.isChecked() and (rope.scale.value(), rope.base.value()) == (0.5, 20000.0)


@pytest.mark.parametrize("rope", [[0.0, 10000.0], [0.0, 20000.0]])
def test_a_file_setting_none_of_them_saves_back_unchanged(
    window: MainWindow, tmp_path: Path, rope: list[float]
) -> None:
    """KoboldCpp's own defaults (and a base under a scale of 0, which KoboldCpp's launcher
    would reset) come back as the file had them; the keys it lacks, as the defaults."""
    original = json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text())
    loaded = tmp_path / "plain.kcpps"
    loaded.write_text(json.dumps({**original, "ropeconfig": rope}))
    data = saved_keys(window, loaded, tmp_path)
    defaults = HearthSettings().model_dump()
    assert data == {key: {**original, "ropeconfig": rope}.get(key, defaults[key]) for key in KEYS}
    assert (data["lora"], data["draftmodel"], data["draftgpusplit"]) == (None, None, None)
    assert not window.context.rope.custom.isChecked()
    assert not window.loaded.row_widget("draftamount").isEnabled()  # no draft model
    assert not window.loaded.lora_mult.isEnabled()  # no adapters
    assert window.read_settings() == window.settings  # nothing else moved either


def test_edited_fields_reach_the_launched_server(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gguf: Path
) -> None:
    adapters = [tmp_path / "a.gguf", tmp_path / "b c.gguf"]
    tab = window.loaded
    tab.lora.setText(f"{adapters[0]};{adapters[1]} ; ")  # however it is typed
    assert tab.lora_mult.isEnabled()
    tab.lora_mult.setValue(0.5)
    tab.draft_model.setText(str(gguf))
    assert tab.row_widget("draftgpusplit").isEnabled()
    tab.draft_amount.setValue(4)
    tab.draft_layers.setValue(-1)
    assert tab.draft_layers.text() == "Auto"
    tab.draft_split.setText("3 1")
    window.context.rope.custom.setChecked(True)
    window.context.rope.scale.setValue(0.25)
    served = launched_settings(window, monkeypatch)
    assert served.lora == [str(path) for path in adapters]
    assert (served.loramult, served.draftmodel) == (0.5, str(gguf))
    assert (served.draftamount, served.draftgpulayers) == (4, -1)
    assert served.draftgpusplit == [3.0, 1.0]
    assert served.ropeconfig == [0.25, 10000.0]


def test_a_split_the_settings_reject_is_shown_beside_its_field(window: MainWindow) -> None:
    window.loaded.draft_split.setText("3,x")
    assert window.read_settings() is None
    assert "valid number" in window.loaded.error_text("draftgpusplit")
    window.loaded.draft_split.setText("")
    settings = window.read_settings()
    assert settings is not None and settings.draftgpusplit is None


def test_the_rope_fields_map_to_ropeconfig(qtbot: QtBot) -> None:
    tab = ContextTab()
    qtbot.addWidget(tab)
    rope = tab.rope
    tab.load(HearthSettings())
    assert not rope.custom.isChecked() and not rope.scale.isEnabled()
    assert (rope.scale.value(), rope.base.value()) == (1.0, 10000.0)  # KoboldCpp's shown values
    assert tab.read()["ropeconfig"] == [0.0, 10000.0]
    rope.custom.setChecked(True)
    assert rope.scale.isEnabled() and rope.base.isEnabled()
    rope.scale.setValue(0.5)
    rope.base.setValue(0.0)  # "Model's own"
    assert rope.base.text() == "Model's own"
    custom = HearthSettings(ropeconfig=tab.read()["ropeconfig"])
    assert custom.ropeconfig == [0.5, 0.0]
    assert custom.rope_frequencies == (0.0, 0.5)  # the model's base, half the frequencies
    rope.custom.setChecked(False)
    assert HearthSettings(**tab.read()).rope_frequencies == (0.0, 0.0)
    # llama-server's flags win over the fields: the note says so, and only then.
    assert rope.note.isHidden()
    tab.load(HearthSettings(rope_freq_base=500000.0))
    assert not rope.note.isHidden()
    assert rope.note.text() == (
        "Also set: llama-server's --rope-freq-base 500000, which wins over these."
    )


def test_a_draft_model_s_device_memory(gguf: Path) -> None:
    """The pure part: offloaded layers, Auto as all, and its KV cache kept off with
    --lowvram, in the model's KV type."""
    summary = gguf_summary(gguf)
    f16 = estimate_memory(summary, 8192, 512)
    every = f16.device_bytes(f16.all_layers)
    assert draft_device_bytes(f16, 999) == draft_device_bytes(f16, -1) == every
    assert draft_device_bytes(f16, 0) == 0
    assert 0 < draft_device_bytes(f16, 4) < every
    q8 = estimate_memory(summary, 8192, 512, KvCacheLayout("q8_0", "q8_0"))
    off_device = estimate_memory(summary, 8192, 512, KvCacheLayout(on_device=False))
    assert every > draft_device_bytes(q8, 999) > draft_device_bytes(off_device, 999)


def _shown_mib(note: str) -> tuple[int, int]:
    """("About 1,589 MiB of 7,168 MiB free (draft model: 250 MiB)") → (1589, 250)."""
    words = note.replace("(", " ").replace(")", " ").split()
    needed = int(words[words.index("MiB") - 1].replace(",", ""))
    draft = int(words[-2].replace(",", "")) if "draft" in note else 0
    return needed, draft


def test_the_gpu_layers_estimate_counts_the_draft_model(qtbot: QtBot, gguf: Path) -> None:
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(gguf), contextsize=8192))
    tab.gpu.set_devices([RADEON])
    tab.gpu_layers.setValue(10)
    alone, no_draft = _shown_mib(tab.gpu_note.text())
    assert no_draft == 0
    with qtbot.waitSignal(tab.gpu.changed):
        tab.gpu.set_draft(gguf, 999)
    with_draft, draft = _shown_mib(tab.gpu_note.text())
    assert draft > 0 and abs(with_draft - alone - draft) <= 1  # MiB rounding
    tab.gpu.set_kv("f16", "auto", on_device=False)  # --lowvram: the draft's KV cache too
    assert 0 < _shown_mib(tab.gpu_note.text())[1] < draft
    tab.gpu.set_draft(gguf, 0)
    assert "draft" not in tab.gpu_note.text()
    tab.gpu.set_draft(gguf.with_name("no-such-draft.gguf"), 999)
    assert "draft" not in tab.gpu_note.text()


def test_auto_leaves_room_for_the_draft_model(qtbot: QtBot, gguf: Path) -> None:
    estimate = estimate_memory(gguf_summary(gguf), 4096, 512)
    every = estimate.device_bytes(estimate.all_layers)
    # Room for the whole model, not for its draft as well.
    free = every + HEADROOM_BYTES + every // 2
    tight = ListedDevice("Vulkan", 0, "Small GPU", "discrete GPU", free, 2 * free)
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(gguf), contextsize=4096))
    tab.gpu.set_devices([tight])
    assert tab.gpu_note.text().startswith(f"Auto: {estimate.all_layers} of ")
    tab.gpu.set_draft(gguf, 999)
    fitted = int(tab.gpu_note.text().split()[1])
    assert 0 < fitted < estimate.all_layers


def test_the_window_s_draft_fields_drive_the_estimate(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, gguf: Path
) -> None:
    monkeypatch.setattr(settings_tabs, "find_gpu_backends", lambda: ("Vulkan",))
    window = MainWindow(HearthSettings(model_param=str(gguf), gpulayers=10))
    qtbot.addWidget(window)
    window.quick.gpu.set_devices([RADEON])
    assert "draft" not in window.quick.gpu_note.text()
    with qtbot.waitSignal(window.quick.gpu.changed):
        window.loaded.draft_model.setText(str(gguf))
    assert "(draft model: " in window.quick.gpu_note.text()
    with qtbot.waitSignal(window.quick.gpu.changed):
        window.loaded.draft_layers.setValue(0)
    assert "draft" not in window.quick.gpu_note.text()
    # A loaded file's draft model counts at once too.
    window.show_settings(HearthSettings(model_param=str(gguf), gpulayers=10, draftmodel=str(gguf)))
    assert "(draft model: " in window.quick.gpu_note.text()


def test_the_notes_say_what_key_fates_says(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key Hearth does not apply yet is named under its group, in key_fates' words; once it
    is applied, the note is gone."""
    assert not_applied_note(["visionmaxres", "lora"]) == (
        f"Not applied by Hearth: {key_fates.reason_not_applied('visionmaxres')}."
    )
    tab = LoadedFilesTab()
    qtbot.addWidget(tab)
    tab.show()
    for note, keys in ((tab.lora_note, LORA_KEYS), (tab.draft_note, DRAFT_KEYS)):
        assert note.text() == not_applied_note(keys)
        assert note.isVisible() == any(not key_fates.is_applied(key) for key in keys)
    monkeypatch.setitem(key_fates.NOT_YET_APPLIED, "draftamount", "drafts are not sized yet")
    monkeypatch.setitem(key_fates.NOT_YET_APPLIED, "draftmodel", "drafts are not sized yet")
    tab = LoadedFilesTab()
    qtbot.addWidget(tab)
    tab.show()
    assert tab.draft_note.text() == "Not applied by Hearth: drafts are not sized yet."
    assert tab.draft_note.isVisible() and not tab.lora_note.isVisible()
