"""The Loaded Files tab's multimodal projector (issue 28): Vision/Audio Projector (`mmproj`),
Projector on CPU (`mmprojcpu`) and Min/Max Image Tokens (`visionmintokens`,
`visionmaxtokens`) under KoboldCpp's keys; a file setting none of them saved back as it was;
what the projector takes ("vision", "audio") among Quick Launch's model facts, read from its
header, or a warning under the field; and GPU Layers' estimate counting its weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.model_info import describe_model, describe_projector
from app.tabs import settings_tabs
from app.tabs.loaded_files import PROJECTOR_KEYS, LoadedFilesTab
from app.tabs.settings_tabs import QuickLaunchTab
from server.devices.listing import ListedDevice
from server.models.gguf import gguf_summary
from server.models.memory import HEADROOM_BYTES, MIB, estimate_memory
from server.settings.config import HearthSettings
from tests.app.launching import launched_settings
from tests.support.projector_gguf import write_projector
from tests.support.servers import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
GIB = 2**30
RADEON = ListedDevice("Vulkan", 1, "AMD Radeon RX 7600", "discrete GPU", 7 * GIB, 8 * GIB)


@pytest.fixture(scope="module")
def big_projector(bundled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One large enough (about 9 MiB) for the estimate's MiB to show it."""
    folder = tmp_path_factory.mktemp("big-projector")
    return write_projector(folder / "mmproj-big.gguf", bundled, width=256, layers=4)


def clip_header(path: Path, **flags: bool) -> Path:
    """A GGUF holding only clip keys: a projector's header with no weights (what the launcher
    reads of it is the header alone)."""
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_string("clip.projector_type", "qwen2.5o")
    for key, value in flags.items():
        writer.add_bool(f"clip.{key}", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def saved(window: MainWindow, loaded: Path, tmp_path: Path) -> dict[str, Any]:
    assert window.load_file(loaded)
    written = window.save_file(tmp_path / "saved.kcpps")
    assert written is not None
    data: dict[str, Any] = json.loads(written.read_text())
    return data


# -- settings both ways ------------------------------------------------------------------------


def test_a_koboldcpp_file_s_projector_shows_and_saves_back(
    window: MainWindow, tmp_path: Path, tiny_projector: Path
) -> None:
    written = {
        **json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text()),
        "mmproj": str(tiny_projector),
        "mmprojcpu": True,
        "visionmintokens": 256,
        "visionmaxtokens": 1024,
    }
    loaded = tmp_path / "vision.kcpps"
    loaded.write_text(json.dumps(written))
    data = saved(window, loaded, tmp_path)
    assert {key: data[key] for key in PROJECTOR_KEYS} == {
        key: written[key] for key in PROJECTOR_KEYS
    }
    tab = window.loaded
    assert tab.projector.text() == str(tiny_projector)
    assert tab.projector_cpu.isChecked()
    assert (tab.vision_min_tokens.value(), tab.vision_max_tokens.value()) == (256, 1024)
    assert tab.projector_info.text().startswith("vision · gemma3 projector · ")


def test_a_file_setting_none_of_them_saves_back_unchanged(
    window: MainWindow, tmp_path: Path
) -> None:
    """KoboldCpp's own file: `"mmproj": null` and no other of the keys. Every key the file has
    comes back as it was, the missing ones as the defaults, and nothing moves."""
    original = json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text())
    assert original["mmproj"] is None and not set(PROJECTOR_KEYS[1:]) & original.keys()
    loaded = tmp_path / "plain.kcpps"
    loaded.write_text(json.dumps(original))
    data = saved(window, loaded, tmp_path)
    defaults = HearthSettings().model_dump()
    assert {key: data[key] for key in PROJECTOR_KEYS} == {
        key: original.get(key, defaults[key]) for key in PROJECTOR_KEYS
    }
    assert (data["mmproj"], data["mmprojcpu"], data["visionmaxtokens"]) == (None, False, -1)
    tab = window.loaded
    assert tab.vision_min_tokens.text() == tab.vision_max_tokens.text() == "Auto"  # -1
    assert tab.projector_info.text() == ""  # nothing to say without a projector
    for key in PROJECTOR_KEYS[1:]:
        assert not tab.row_widget(key).isEnabled()  # greyed without a projector
    assert window.read_settings() == window.settings


def test_edited_fields_reach_the_launched_server(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch, tiny_projector: Path
) -> None:
    tab = window.loaded
    tab.projector.setText(f"  {tiny_projector} ")
    assert tab.row_widget("mmprojcpu").isEnabled() and tab.vision_max_tokens.isEnabled()
    tab.projector_cpu.setChecked(True)
    tab.vision_min_tokens.setValue(64)
    tab.vision_max_tokens.setValue(512)
    served = launched_settings(window, monkeypatch)
    assert (served.mmproj, served.mmprojcpu) == (str(tiny_projector), True)
    assert (served.visionmintokens, served.visionmaxtokens) == (64, 512)


# -- what it takes -----------------------------------------------------------------------------


def test_the_model_s_facts_say_vision_for_a_real_projector(
    qtbot: QtBot, bundled: Path, tiny_projector: Path
) -> None:
    window = MainWindow(HearthSettings(model_param=str(bundled)))
    qtbot.addWidget(window)
    facts = window.quick.model_info
    assert "vision" not in facts.text()
    with qtbot.waitSignal(window.loaded.projector_changed) as changed:
        window.loaded.projector.setText(str(tiny_projector))
    assert changed.args == [tiny_projector, False]
    assert " · vision · " in facts.text().split("\n")[0]
    assert "audio" not in facts.text()
    note = window.loaded.projector_info
    assert note.text() == "vision · gemma3 projector · 130 KiB"
    assert "b3261e" not in note.styleSheet()  # grey, not the warning's red
    with qtbot.waitSignal(window.loaded.projector_changed):
        window.loaded.projector.setText("")
    assert "vision" not in facts.text()
    # A loaded file's projector shows at once too.
    window.show_settings(HearthSettings(model_param=str(bundled), mmproj=str(tiny_projector)))
    assert " · vision · " in facts.text()


def test_audio_and_vision_as_the_header_says(bundled: Path, tmp_path: Path) -> None:
    both = clip_header(tmp_path / "omni.gguf", has_vision_encoder=True, has_audio_encoder=True)
    hears = clip_header(tmp_path / "voxtral.gguf", has_audio_encoder=True)
    assert describe_projector(both).modalities == ("vision", "audio")
    assert describe_projector(hears).text.startswith("audio · qwen2.5o projector · ")
    assert " · vision · audio · " in describe_model(bundled, 4096, both).text
    facts = describe_model(bundled, 4096, hears).text.split("\n")[0]
    assert " · audio · " in facts and "vision" not in facts
    neither = describe_projector(clip_header(tmp_path / "none.gguf"))
    assert neither.problem and neither.modalities == ()


@pytest.mark.parametrize(
    ("name", "warning"),
    [
        ("model", "Not a projector (no clip.* keys): choose the model's mmproj file."),
        ("text", "Not a usable GGUF: not a GGUF file"),
        ("missing", "No such file."),
    ],
)
def test_a_file_that_is_no_projector_is_a_warning_under_the_field(
    qtbot: QtBot, bundled: Path, tmp_path: Path, name: str, warning: str
) -> None:
    files = {"model": bundled, "text": tmp_path / "notes.gguf", "missing": tmp_path / "gone.gguf"}
    files["text"].write_text("not a projector\n")
    window = MainWindow(HearthSettings(model_param=str(bundled)))
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.loaded.projector_changed):
        window.loaded.projector.setText(str(files[name]))
    note = window.loaded.projector_info
    assert note.text().startswith(warning)
    assert "b3261e" in note.styleSheet()  # the warning's red
    window.tabs.setCurrentWidget(window.loaded)
    assert note.isVisible()
    facts = window.quick.model_info.text()
    assert facts.startswith("gemma3 · ") and "vision" not in facts and "audio" not in facts


# -- the GPU Layers estimate -------------------------------------------------------------------


def _shown(note: str) -> tuple[int, int]:
    """("About 1,589 MiB of 7,168 MiB free (projector: 9 MiB)") → (1589, 9)."""
    words = note.replace("(", " ").replace(")", " ").split()
    assert words[0] == "About", note

    def number(index: int) -> int:
        return int(words[index].replace(",", ""))

    return number(1), number(words.index("projector:") + 1) if "projector:" in words else 0


def test_the_estimate_counts_the_projector_on_the_gpu_only(
    qtbot: QtBot, bundled: Path, big_projector: Path
) -> None:
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(bundled), contextsize=8192))
    tab.gpu.set_devices([RADEON])
    tab.gpu_layers.setValue(10)
    alone, none = _shown(tab.gpu_note.text())
    assert none == 0 and "projector" not in tab.gpu_note.text()
    size = big_projector.stat().st_size
    with qtbot.waitSignal(tab.gpu.changed):
        tab.set_projector(big_projector, False)
    assert tab.gpu.projector_bytes() == size
    with_projector, shown = _shown(tab.gpu_note.text())
    assert shown == round(size / MIB) > 0
    assert abs(with_projector - alone - size / MIB) <= 1  # MiB rounding
    with qtbot.waitSignal(tab.gpu.changed):
        tab.set_projector(big_projector, True)  # Projector on CPU
    assert "projector" not in tab.gpu_note.text() and _shown(tab.gpu_note.text())[0] == alone
    tab.set_projector(big_projector, False)
    tab.gpu_layers.setValue(0)  # no layers on the GPU: llama.cpp keeps the projector off it
    assert "projector" not in tab.gpu_note.text()
    tab.gpu_layers.setValue(10)
    tab.set_projector(bundled, False)  # not a projector: the Loaded Files tab says so
    assert "projector" not in tab.gpu_note.text()


def test_the_window_s_projector_fields_drive_the_estimate(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, bundled: Path, big_projector: Path
) -> None:
    monkeypatch.setattr(settings_tabs, "find_gpu_backends", lambda: ("Vulkan",))
    window = MainWindow(HearthSettings(model_param=str(bundled), gpulayers=10))
    qtbot.addWidget(window)
    window.quick.gpu.set_devices([RADEON])
    note = window.quick.gpu_note
    with qtbot.waitSignal(window.quick.gpu.changed):
        window.loaded.projector.setText(str(big_projector))
    assert "(projector: 9 MiB)" in note.text()
    with qtbot.waitSignal(window.quick.gpu.changed):
        window.loaded.projector_cpu.setChecked(True)
    assert "projector" not in note.text()
    # A loaded file's projector counts at once, beside a draft model.
    window.show_settings(
        HearthSettings(
            model_param=str(bundled),
            gpulayers=10,
            mmproj=str(big_projector),
            draftmodel=str(bundled),
        )
    )
    assert note.text().endswith(", projector: 9 MiB)") and "(draft model: " in note.text()


def test_auto_leaves_room_for_the_projector(
    qtbot: QtBot, bundled: Path, big_projector: Path
) -> None:
    estimate = estimate_memory(gguf_summary(bundled), 4096, 512)
    every = estimate.device_bytes(estimate.all_layers)
    # Room for the whole model and a little more, not for the projector as well.
    free = every + HEADROOM_BYTES + big_projector.stat().st_size // 2
    tight = ListedDevice("Vulkan", 0, "Small GPU", "discrete GPU", free, 2 * free)
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(bundled), contextsize=4096))
    tab.gpu.set_devices([tight])
    assert tab.gpu_note.text().startswith(f"Auto: {estimate.all_layers} of ")
    tab.set_projector(big_projector, False)
    fitted = int(tab.gpu_note.text().split()[1])
    assert 0 < fitted < estimate.all_layers
    assert tab.gpu_note.text().endswith("(projector: 9 MiB)")
    tab.set_projector(big_projector, True)
    assert tab.gpu_note.text().startswith(f"Auto: {estimate.all_layers} of ")


def test_the_tab_alone_greys_what_needs_a_projector(qtbot: QtBot, tiny_projector: Path) -> None:
    tab = LoadedFilesTab()
    qtbot.addWidget(tab)
    tab.show()
    assert not tab.projector_info.isVisible()  # no empty row under the field
    assert not tab.projector_note.isVisible()  # every projector key is applied
    with qtbot.waitSignal(tab.projector_changed):
        tab.projector.setText(str(tiny_projector))
    assert tab.projector_info.isVisible()
    assert all(tab.row_widget(key).isEnabled() for key in PROJECTOR_KEYS[1:])
