"""llama-server's slot actions and KoboldCpp's save states on the real model: a slot saved to
a file and restored (into another slot) is reused as if just read, with the logits of reading
afresh; erase empties a slot; bad file names and foreign files are refused; KoboldCpp's save
states rewind the context. The prompt cache is off here (--cacheram 0), so any reuse seen
comes from the action under test."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.dialects.routes.slot_actions import SLOT_FILE_MAGIC
from tests.support.logits import assert_agree, native
from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]


def story(topic: str) -> str:
    """Some 300 tokens of a text of its own from the first line on."""
    return "".join(f"Notes on {topic}, line {number}.\n" for number in range(24))


def turn(server: RunningServer, prompt: str, **extra: Any) -> dict[str, Any]:
    return native(server, {"prompt": prompt, "n_predict": 4, "temperature": 0, **extra})


def slot_tokens(server: RunningServer) -> list[int]:
    answer = httpx.get(f"{server.base_url}/slots", timeout=30)
    assert answer.status_code == 200, answer.text
    return [slot["n_prompt_tokens"] for slot in answer.json()]


def act(server: RunningServer, slot: int, action: str, **body: Any) -> httpx.Response:
    url = f"{server.base_url}/slots/{slot}?action={action}"
    return httpx.post(url, json=body or None, timeout=120)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def slot_saving(start_hearth: StartHearth, folder: Path) -> RunningServer:
    args = ["--contextsize", "2048", "--parallelrequests", "2", "--cacheram", "0"]
    return start_hearth([*args, "--slot-save-path", str(folder)])


def test_a_slot_saved_and_restored_into_another_is_reused(
    slot_saving: RunningServer, folder: Path
) -> None:
    prompt = story("a lighthouse")
    fresh = turn(slot_saving, prompt, n_predict=8, n_probs=5)
    held = slot_tokens(slot_saving)
    saved_slot = max(range(2), key=held.__getitem__)
    assert held[saved_slot] >= fresh["timings"]["prompt_n"]

    saved = act(slot_saving, saved_slot, "save", filename="lighthouse.bin")
    assert saved.status_code == 200, saved.text
    assert saved.json()["n_saved"] == held[saved_slot] and saved.json()["n_written"] > 0
    assert (folder / "lighthouse.bin").read_bytes()[:4] == SLOT_FILE_MAGIC
    assert [p.name for p in folder.iterdir()] == ["lighthouse.bin"]  # no partial file left

    erased = act(slot_saving, saved_slot, "erase")
    assert erased.status_code == 200 and erased.json()["n_erased"] == held[saved_slot]
    turn(slot_saving, story("a caravan"))  # takes a slot: neither holds the lighthouse now
    empty = slot_tokens(slot_saving).index(0)
    restored = act(slot_saving, empty, "restore", filename="lighthouse.bin")
    assert restored.status_code == 200, restored.text
    assert restored.json()["n_restored"] == held[saved_slot]
    assert restored.json()["n_read"] == saved.json()["n_written"]
    assert slot_tokens(slot_saving)[empty] == held[saved_slot]

    again = turn(slot_saving, prompt, n_predict=8, n_probs=5)
    assert again["timings"]["cache_n"] >= fresh["timings"]["prompt_n"] - 1
    assert again["timings"]["prompt_n"] <= 1
    assert_agree(fresh, again)  # the restored state's logits are those of reading afresh


def test_an_erased_slot_is_read_again(slot_saving: RunningServer) -> None:
    prompt = story("a clockmaker")
    first = turn(slot_saving, prompt)
    held = slot_tokens(slot_saving)
    slot = next(i for i, count in enumerate(held) if count >= first["timings"]["prompt_n"])
    # ...unless the other slot still holds it (from the test before): erase both.
    for other in range(2):
        assert act(slot_saving, other, "erase").status_code == 200
    assert slot_tokens(slot_saving) == [0, 0]
    assert turn(slot_saving, prompt)["timings"]["cache_n"] <= 1, slot


@pytest.mark.parametrize(
    "name",
    [
        "",
        "../escape.bin",
        "sub/dir.bin",
        "back\\slash",
        ".hidden",
        "trailing.",
        " lead",
        "con",
        "LPT1.txt",
        "colon:name",
        "nul\x00byte",
        "x" * 256,
        "ctrl\x07",
    ],
)
def test_bad_file_names_are_refused(slot_saving: RunningServer, folder: Path, name: str) -> None:
    before = sorted(p.name for p in folder.parent.iterdir())
    for action in ("save", "restore"):
        answer = act(slot_saving, 0, action, filename=name)
        assert answer.status_code == 400, (action, name, answer.text)
        assert "Invalid filename" in answer.json()["error"]["message"]
    assert sorted(p.name for p in folder.parent.iterdir()) == before  # nothing written


def test_a_file_that_is_not_a_slot_file_is_never_overwritten_nor_loaded(
    slot_saving: RunningServer, folder: Path, tmp_path: Path
) -> None:
    notes = folder / "notes.txt"
    notes.write_text("my own notes, not a slot\n")
    answer = act(slot_saving, 0, "save", filename="notes.txt")
    assert answer.status_code == 400 and "not a slot file" in answer.text
    assert notes.read_text() == "my own notes, not a slot\n"

    damaged = folder / "damaged.bin"
    damaged.write_bytes(SLOT_FILE_MAGIC + b"\x03\x00\x00\x00" + b"\xff" * 64)
    answer = act(slot_saving, 1, "restore", filename="damaged.bin")
    assert answer.status_code == 400 and "Unable to restore slot" in answer.text
    assert slot_tokens(slot_saving)[1] == 0  # left empty, never half-restored

    outside = tmp_path / "outside.bin"
    outside.write_bytes(SLOT_FILE_MAGIC)
    (folder / "link.bin").symlink_to(outside)
    for action in ("save", "restore"):
        answer = act(slot_saving, 0, action, filename="link.bin")
        assert answer.status_code == 400, answer.text
    assert outside.read_bytes() == SLOT_FILE_MAGIC
    missing = act(slot_saving, 0, "restore", filename="never-saved.bin")
    assert missing.status_code == 400 and "no slot file" in missing.text
    assert turn(slot_saving, "Still serving:")["content"] is not None


def test_bad_slots_and_actions_are_refused(slot_saving: RunningServer) -> None:
    assert act(slot_saving, 7, "erase").json()["error"]["message"] == "Invalid slot ID"
    answer = httpx.post(f"{slot_saving.base_url}/slots/x?action=erase", timeout=30)
    assert answer.status_code == 400 and "Invalid slot ID" in answer.text
    answer = act(slot_saving, 0, "wipe")
    assert answer.status_code == 400 and "Invalid action" in answer.text


def test_without_a_slot_save_path_the_actions_are_not_supported(hearth: RunningServer) -> None:
    answer = act(hearth, 0, "save", filename="a.bin")
    assert answer.status_code == 501
    error = answer.json()["error"]
    assert error["type"] == "not_supported_error" and "--slot-save-path" in error["message"]
    assert [set(slot) for slot in httpx.get(f"{hearth.base_url}/slots").json()] == [
        {"id", "n_ctx", "is_processing", "n_prompt_tokens"}
    ]


def kobold(server: RunningServer, name: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}/api/admin/{name}", json=body, timeout=120)


def test_koboldcpp_save_states_rewind_the_context(uncached: RunningServer) -> None:
    server = uncached  # --cacheram 0: only the save states keep a prompt (tests/server/conftest.py)
    prompt = story("a harbour")
    first = turn(server, prompt)
    checked = kobold(server, "check_state").json()
    assert checked["success"] and checked["old_states"] == [{"tokens": 0, "size": 0}] * 5
    assert checked["new_tokens"] == slot_tokens(server)[0] and checked["new_state_size"] > 0

    saved = kobold(server, "save_state", slot=1).json()
    assert saved == {
        "success": True,
        "new_state_size": checked["new_state_size"],
        "new_tokens": checked["new_tokens"],
    }
    turn(server, story("a mountain pass"))  # the one slot moves on
    assert turn(server, prompt)["timings"]["cache_n"] < 16  # nothing kept it (cache off)
    turn(server, story("a mountain pass"))
    loaded = kobold(server, "load_state", slot=1).json()
    assert loaded["success"] and loaded["new_tokens"] == saved["new_tokens"]
    assert turn(server, prompt)["timings"]["cache_n"] >= first["timings"]["prompt_n"] - 1

    empty = kobold(server, "load_state", slot=3)
    assert empty.status_code == 400 and empty.json()["success"] is False
    assert kobold(server, "save_state", slot=5).status_code == 400  # 0 to 4
    assert kobold(server, "clear_state").json() == {"success": True}
    assert kobold(server, "check_state").json()["old_states"][1] == {"tokens": 0, "size": 0}
