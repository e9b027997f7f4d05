"""The prompt cache's two places (server/core/caching/state_store.py): memory first, the disk when
it holds a longer match, private states never written; and owners kept apart in memory."""

from __future__ import annotations

from pathlib import Path

from server.core.caching.prompt_cache import PromptCache, SavedState
from server.core.caching.prompt_disk import DiskStates
from server.core.caching.state_store import StateStore

MIB = 1 << 20


def state(tokens: range | list[int], owner: str = "") -> SavedState:
    data = bytearray(bytes(len(tokens)) + b"state")
    return SavedState(tuple(tokens), data, len(data), owner)


def store_on(folder: Path, fingerprint: str = "model-1") -> StateStore:
    return StateStore(PromptCache(64 * MIB), DiskStates(folder, fingerprint, 64 * MIB))


def test_kept_states_reach_the_disk_and_a_new_store_finds_them(tmp_path: Path) -> None:
    first = store_on(tmp_path)
    first.keep(state(range(100)))
    first.close()  # waits for the writer
    again = store_on(tmp_path)
    found, length = again.best(list(range(120)))
    assert found is not None and length == 100 and found.tokens == tuple(range(100))
    assert bytes(found.data) == bytes(100) + b"state"
    assert again.memory.stats().states == 1  # held in memory from now on


def test_memory_wins_unless_the_disk_spares_more(tmp_path: Path) -> None:
    disk = store_on(tmp_path)
    disk.keep(state(range(100)))
    disk.close()
    store = store_on(tmp_path)
    store.memory.put(state(range(50)))
    found, length = store.best(list(range(80)))  # the disk's 100-token state spares more
    assert found is not None and found.tokens == tuple(range(100)) and length == 80
    store.memory.clear()
    store.memory.put(longer := state(range(200)))
    assert store.best(list(range(150)))[0] is longer


def test_private_states_never_reach_the_disk(tmp_path: Path) -> None:
    store = store_on(tmp_path)
    store.keep(state(range(100), owner="alice"))
    store.close()
    assert list(tmp_path.glob("*.hkv")) == []


def test_another_fingerprint_finds_nothing(tmp_path: Path) -> None:
    first = store_on(tmp_path, "model-1")
    first.keep(state(range(100)))
    first.close()
    assert store_on(tmp_path, "model-2").best(list(range(100))) == (None, 0)


def test_a_damaged_file_falls_back_to_memory(tmp_path: Path) -> None:
    first = store_on(tmp_path)
    first.keep(state(range(100)))
    first.close()
    (saved,) = tmp_path.glob("*.hkv")
    damaged = bytearray(saved.read_bytes())
    damaged[-1] ^= 0xFF
    saved.write_bytes(bytes(damaged))
    store = store_on(tmp_path)
    store.memory.put(kept := state(range(40)))
    assert store.best(list(range(100))) == (kept, 40)
    assert not saved.exists()


def test_owners_are_kept_apart_in_memory() -> None:
    cache = PromptCache(64 * MIB)
    cache.put(alice := state(range(100), owner="alice"))
    assert cache.best(list(range(100)), "bob") == (None, 0)
    assert cache.best(list(range(100)), "alice") == (alice, 100)
    assert not cache.covers(list(range(50)), "bob") and cache.covers(list(range(50)), "alice")
    cache.put(state(range(120), owner="bob"))  # contains Alice's tokens, but is Bob's
    assert cache.best(list(range(100)), "alice") == (alice, 100)
