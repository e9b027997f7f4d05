"""DiskStates on its own (server/core/caching/prompt_disk.py): saved states survive a new instance
(a restart), are found by token prefix, stay within their byte bound, and a damaged, foreign or
half-written file is never returned. No model: the payloads are plain bytes."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from server.core.caching.prompt_disk import SUFFIX, TEMP_PREFIX, TEMP_SUFFIX, DiskEntry, DiskStates

FINGERPRINT = "model=abc123;build=b1;kv=f16x4096;swa=full;rope=1e4"
REPO = Path(__file__).resolve().parents[4]


def payload(tokens: tuple[int, ...], size: int = 1000) -> bytes:
    """A payload that depends on its tokens, so a mixed-up file shows in its content."""
    seed = sum(tokens) * 31 + len(tokens)
    cycle = bytes((seed + index * 7) % 251 for index in range(251))
    return (cycle * (size // 251 + 1))[:size]


def files(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{SUFFIX}"))


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


def test_a_state_written_is_found_and_read_back_after_a_restart(tmp_path: Path) -> None:
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    tokens = (1, 2, 3, 4, 5)
    buffer = (ctypes.c_uint8 * 1000).from_buffer_copy(payload(tokens))  # as the engine has it
    assert disk.write(tokens, memoryview(buffer))
    assert disk.write([7, 8, 9], payload((7, 8, 9), 500))

    restarted = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    entry, shared = restarted.best([1, 2, 3, 9])
    assert entry is not None and entry.tokens == tokens and shared == 3
    assert restarted.read(entry) == payload(tokens)
    assert restarted.best([7, 8, 9, 10])[1] == 3
    assert restarted.best([4, 4]) == (None, 0)
    stats = restarted.stats()
    assert (stats.files, stats.bytes) == (2, sum(path.stat().st_size for path in files(tmp_path)))


def test_the_longest_prefix_wins_and_equal_ones_give_the_smallest_file(tmp_path: Path) -> None:
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    disk.write((1, 2, 3, 4), payload((1, 2, 3, 4), 900))
    disk.write((1, 2, 3, 5), payload((1, 2, 3, 5), 300))
    disk.write((1, 2), payload((1, 2), 100))
    found, shared = disk.best([1, 2, 3, 4, 6])
    assert found is not None and (found.tokens, shared) == ((1, 2, 3, 4), 4)
    found, shared = disk.best([1, 2, 3, 7])
    assert found is not None and (found.tokens, shared) == ((1, 2, 3, 5), 3)


def test_the_same_state_written_twice_is_one_file(tmp_path: Path) -> None:
    first = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    second = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    assert first.write((5, 6), payload((5, 6)))
    assert first.write((5, 6), payload((5, 6)))
    assert second.write([5, 6], payload((5, 6)))
    assert len(files(tmp_path)) == 1
    assert first.stats().files == second.stats().files == 1


def test_a_state_bigger_than_the_bound_is_not_written(tmp_path: Path) -> None:
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=500)
    assert not disk.write((1,), payload((1,), 600))
    assert files(tmp_path) == [] and disk.stats().files == 0


def test_another_fingerprint_is_invisible_and_left_alone(tmp_path: Path) -> None:
    other = DiskStates(tmp_path, "another model", max_bytes=1 << 20)
    assert other.write((1, 2, 3), payload((1, 2, 3)))
    (theirs,) = files(tmp_path)
    content = theirs.read_bytes()

    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=2500)
    assert disk.best([1, 2, 3]) == (None, 0) and disk.stats().files == 0
    for index in range(5):  # evicting its own beyond the bound, never the other model's
        assert disk.write((1, 2, 3, index), payload((1, 2, 3, index)))
    assert disk.stats().files == 2
    assert theirs.read_bytes() == content
    assert other.rescan()[0].tokens == (1, 2, 3)


def test_a_newer_format_version_is_left_alone(tmp_path: Path) -> None:
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    disk.write((1, 2), payload((1, 2)))
    (path,) = files(tmp_path)
    data = bytearray(path.read_bytes())
    data[8] += 1  # the version field, right after the magic
    path.write_bytes(bytes(data))
    assert disk.rescan() == []
    assert path.read_bytes() == bytes(data)


def cut(data: bytes) -> bytes:
    return data[:-10]


def flip_payload(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x40])


def flip_token(data: bytes) -> bytes:
    # The first token's low byte: magic 8, version 4, fingerprint length 4 and text, count 4.
    at = 20 + len(FINGERPRINT.encode())
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


def garbage(data: bytes) -> bytes:
    return b"this is not a prompt state at all " * 40


def empty(data: bytes) -> bytes:
    return b""


@pytest.mark.parametrize("damage", [cut, flip_payload, flip_token, garbage, empty])
def test_a_damaged_file_is_skipped_with_a_warning_removed_and_never_returned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Callable[[bytes], bytes]
) -> None:
    caplog.set_level(logging.WARNING)
    tokens = (10, 11, 12)
    assert DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20).write(tokens, payload(tokens))
    (path,) = files(tmp_path)
    path.write_bytes(damage(path.read_bytes()))

    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    read = [disk.read(entry) for entry in disk.index()]  # only a checksum finds some damage
    assert all(data is None for data in read)
    assert not path.exists()
    assert disk.index() == [] and disk.best(tokens) == (None, 0)
    (line,) = warnings(caplog)
    assert path.name in line


def test_a_file_gone_since_the_index_reads_as_none_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    disk.write((1,), payload((1,)))
    (entry,) = disk.index()
    entry.path.unlink()  # another process evicted it
    assert disk.read(entry) is None and disk.index() == []
    assert warnings(caplog) == []


def age(entry_tokens: tuple[int, ...], disk: DiskStates, seconds_ago: float) -> None:
    stamp = time.time() - seconds_ago
    os.utime(disk.path_for(entry_tokens), (stamp, stamp))


def test_the_least_recently_used_are_evicted_and_a_read_renews_a_file(tmp_path: Path) -> None:
    one_file = len(payload((0,))) + 200  # header and checksum are well under 200 bytes
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=3 * one_file)
    first, second, third, fourth = (1,), (2,), (3,), (4,)
    for tokens in (first, second, third):
        assert disk.write(tokens, payload(tokens))
    assert disk.stats().files == 3
    age(first, disk, 300)
    age(second, disk, 200)
    age(third, disk, 100)
    entry, _ = disk.best(first)
    assert entry is not None and disk.read(entry) == payload(first)  # now the most recent

    assert disk.write(fourth, payload(fourth))
    assert sorted(entry.tokens for entry in disk.index()) == [first, third, fourth]
    assert not disk.path_for(second).exists()
    assert disk.stats().bytes <= disk.max_bytes

    age(first, disk, 400)  # the oldest again: the next write evicts it
    assert disk.write((5,), payload((5,)))
    assert sorted(entry.tokens for entry in disk.rescan()) == [third, fourth, (5,)]


def test_a_file_written_again_is_renewed_rather_than_evicted(tmp_path: Path) -> None:
    one_file = len(payload((0,))) + 200
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=2 * one_file)
    disk.write((1,), payload((1,)))
    disk.write((2,), payload((2,)))
    age((1,), disk, 200)
    age((2,), disk, 100)
    disk.write((1,), payload((1,)))  # already there: used now
    disk.write((3,), payload((3,)))
    assert sorted(entry.tokens for entry in disk.index()) == [(1,), (3,)]


def shared_state(index: int, writer: int) -> tuple[tuple[int, ...], bytes]:
    """The index-th state a writer saves: every other one is the other writer's too (the same
    name, renamed over each other), and their sizes differ (a mixed-up file shows)."""
    tokens = (7, index, writer if index % 2 else 0)
    # Big enough to take several writes: a reader must still never see part of one.
    return tokens, payload(tokens, size=20_000 + 1000 * index)


def verify_all(folder: Path) -> list[DiskEntry]:
    """Every state file in `folder` reads back whole, with the payload of its own tokens."""
    assert list(folder.glob(f"{TEMP_PREFIX}*")) == []
    disk = DiskStates(folder, FINGERPRINT, max_bytes=1 << 30)
    entries = disk.index()
    assert len(entries) == len(files(folder))
    for entry in entries:
        assert disk.read(entry) == shared_state(entry.tokens[1], writer=entry.tokens[2])[1]
    return entries


def write_many(disk: DiskStates, rounds: int, writer: int) -> None:
    for index in range(rounds):
        assert disk.write(*shared_state(index, writer))
        if index % 5 == 0:
            disk.rescan()  # the other writer's files count against the bound too


def test_two_instances_on_one_folder_leave_only_whole_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    first = DiskStates(tmp_path, FINGERPRINT, max_bytes=600_000)
    second = DiskStates(tmp_path, FINGERPRINT, max_bytes=600_000)
    for index in range(40):
        assert first.write(*shared_state(index, writer=1))
        assert second.write(*shared_state(index, writer=2))
        if index % 7 == 0:
            first.rescan()
    entries = verify_all(tmp_path)
    assert {entry.tokens[2] for entry in entries} == {0, 1, 2}
    assert sum(path.stat().st_size for path in files(tmp_path)) <= 2 * 600_000
    assert warnings(caplog) == []


WRITER = """
import sys
from pathlib import Path
from tests.server.core.caching.test_prompt_disk import FINGERPRINT, write_many
from server.core.caching.prompt_disk import DiskStates
disk = DiskStates(Path(sys.argv[1]), FINGERPRINT, max_bytes=int(sys.argv[2]))
write_many(disk, 1, writer=2)
print("started", flush=True)
stop = Path(sys.argv[3])
while not stop.exists():
    write_many(disk, 60, writer=2)
"""


def test_another_process_writing_at_once_leaves_only_whole_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    folder, stop, bound = tmp_path / "cache", tmp_path / "stop", 1_500_000
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), str(bound), str(stop)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "started\n"
        # The other process writes (and evicts) the whole time this one does.
        disk = DiskStates(folder, FINGERPRINT, max_bytes=bound)
        for index in range(60):
            assert disk.write(*shared_state(index, writer=1))
            for entry in disk.rescan():
                disk.read(entry)  # while the other writes and evicts: whole or gone, never half
    finally:
        stop.touch()
        _, errors = writer.communicate(timeout=60)
    assert writer.returncode == 0, errors
    assert "Prompt cache" not in errors
    assert warnings(caplog) == []
    assert verify_all(folder)


def test_a_failed_write_returns_false_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING)
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)

    def full(source: object, target: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    assert not disk.write((1,), payload((1,)))
    assert not disk.write((2,), payload((2,)))  # still full: the console already knows
    (line,) = warnings(caplog)
    assert "No space left on device" in line and str(tmp_path) in line
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
    assert disk.stats().files == 0

    monkeypatch.undo()
    assert disk.write((3,), payload((3,)))
    assert not disk.write((4,), payload((4,), size=2 << 20))  # too big: not a disk failure
    assert len(warnings(caplog)) == 1


def test_an_unusable_folder_fails_the_write_without_raising(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the folder should be")
    disk = DiskStates(not_a_folder, FINGERPRINT, max_bytes=1 << 20)
    assert disk.index() == []
    assert not disk.write((1,), payload((1,)))
    assert len(warnings(caplog)) == 1
    assert not_a_folder.read_text() == "a file where the folder should be"


def test_an_interrupted_writers_old_temporary_file_is_removed(tmp_path: Path) -> None:
    disk = DiskStates(tmp_path, FINGERPRINT, max_bytes=1 << 20)
    disk.write((1,), payload((1,)))
    crashed = tmp_path / f"{TEMP_PREFIX}crashed{TEMP_SUFFIX}"
    writing = tmp_path / f"{TEMP_PREFIX}writing{TEMP_SUFFIX}"  # another process, at work now
    unrelated = tmp_path / "notes.tmp"
    for path in (crashed, writing, unrelated):
        path.write_bytes(b"half a state")
    two_hours_ago = time.time() - 7200
    for path in (crashed, unrelated):
        os.utime(path, (two_hours_ago, two_hours_ago))
    assert [entry.tokens for entry in disk.rescan()] == [(1,)]
    assert not crashed.exists()
    assert writing.exists() and unrelated.exists()


def test_states_saved_under_another_kv_layout_are_never_restored() -> None:
    """The disk store's fingerprint names the KV layout: a state saved with a q8_0 cache,
    another RoPE base or a metadata override is another layout (issue 27's options)."""
    from server.core.llama.sequences.slots import kv_layout
    from server.core.load_settings import LoadSettings, ModelOptions

    plain = kv_layout(4096, LoadSettings())
    assert plain == kv_layout(4096, LoadSettings())
    changed = [
        ModelOptions(cache_type_k="q8_0", cache_type_v="q8_0"),
        ModelOptions(rope_freq_base=20000.0),
        ModelOptions(kv_overrides=(("llama.context_length", "int", "2048"),)),
        ModelOptions(flash_attention="off"),
    ]
    layouts = {kv_layout(4096, LoadSettings(options=options)) for options in changed}
    assert plain not in layouts and len(layouts) == len(changed)
    assert kv_layout(2048, LoadSettings()) != plain
    assert kv_layout(4096, LoadSettings(parallelrequests=2)) != plain
