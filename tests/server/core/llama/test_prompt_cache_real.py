"""The prompt cache on the real model: users taking turns on one slot find their own
conversation restored, not read again; a restored state's logits are those of reading the
prompt afresh; the memory bound holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from server.base.defaults import DEFAULT_CACHE_DISK_MIB
from tests.support.logits import assert_agree, native
from tests.support.model_folder import OTHER, SERVED
from tests.support.servers import RunningServer, stop_process

StartHearth = Callable[[Sequence[str]], RunningServer]

TOPICS = {"A": "a lighthouse keeper", "B": "a desert caravan", "C": "a clockmaker's shop"}


def opening(user: str) -> str:
    """A conversation of some 300 tokens, its own from the first line on."""
    line = f"Chapter notes on {TOPICS[user]}, written by user {user}, line "
    return "".join(f"{line}{number}.\n" for number in range(20))


def turn(server: RunningServer, prompt: str, **extra: Any) -> dict[str, Any]:
    body = {"prompt": prompt, "n_predict": 4, "temperature": 0, **extra}
    return native(server, body)


def turn_as(server: RunningServer, key: str, prompt: str) -> dict[str, Any]:
    body = {"prompt": prompt, "n_predict": 4, "temperature": 0}
    headers = {"Authorization": f"Bearer {key}"}
    answer = httpx.post(f"{server.base_url}/completion", json=body, headers=headers, timeout=120)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


@pytest.fixture(scope="module")
def cached(start_hearth: StartHearth) -> RunningServer:
    return start_hearth(["--contextsize", "2048"])


# `uncached` (--contextsize 2048 --cacheram 0) is shared with the slot tests
# (tests/server/conftest.py).


def perf(server: RunningServer) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{server.base_url}/api/extra/perf").json()
    return answer


def test_users_taking_turns_find_their_conversation_cached(cached: RunningServer) -> None:
    history = {user: opening(user) for user in "ABC"}
    first = {user: turn(cached, history[user]) for user in "ABC"}  # each pushes out the last
    for user in "ABC":
        history[user] += first[user]["content"] + f"\nUser {user} adds one more line.\n"
        again = turn(cached, history[user])
        read_before = first[user]["timings"]["prompt_n"]
        assert again["timings"]["cache_n"] >= read_before - 8, user  # all but a boundary
        assert again["timings"]["prompt_n"] < 40, user  # only the new line was read
    # OpenAI's client sees it too, as usage.prompt_tokens_details.cached_tokens.
    client = openai.OpenAI(base_url=f"{cached.base_url}/v1", api_key="none")
    turn(cached, opening("A"))  # another conversation takes the slot
    reply = client.completions.create(model="m", prompt=history["B"], max_tokens=2)
    assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens is not None
    assert reply.usage.prompt_tokens_details.cached_tokens > 0.8 * reply.usage.prompt_tokens


def test_a_restored_state_gives_the_logits_of_reading_afresh(
    cached: RunningServer, uncached: RunningServer
) -> None:
    """The same turns on a server with the cache and one without: the returning user's next
    tokens, restored on one and read afresh on the other, agree within the tolerance."""
    a, b = opening("A") + "Coda.\n", opening("B") + "Coda.\n"
    answers = []
    for server in (cached, uncached):
        turn(server, a)
        turn(server, b)  # A's state leaves the slot
        answers.append(turn(server, a + "The keeper", n_predict=12, n_probs=5))
    restored, fresh = answers
    assert restored["timings"]["cache_n"] > 250  # restored from the cache
    assert fresh["timings"]["cache_n"] < 64  # read again: no cache there
    assert_agree(fresh, restored)


def test_the_memory_bound_evicts_the_least_recently_used(start_hearth: StartHearth) -> None:
    # One conversation's state, measured; then a bound that holds two of them.
    probe = start_hearth(["--contextsize", "2048"])
    turn(probe, opening("A"))
    turn(probe, opening("B"))
    one_state = perf(probe)["prompt_cache"]["bytes"]
    stop_process(probe)  # a model's memory, not needed past here
    assert one_state > 0
    # Room for two and a half: the users' states differ by a few tokens, so two always fit
    # and three never do.
    bound_mib = int(2.5 * one_state / (1 << 20))
    assert 2.2 * one_state < bound_mib * (1 << 20) < 2.8 * one_state, "states too small here"
    bounded = start_hearth(["--contextsize", "2048", "--cacheram", str(bound_mib)])
    for user in "ABC":
        turn(bounded, opening(user))  # A and B are saved as each leaves the slot
    # A returns: restored, it is the most recent; C, saved as it leaves, pushes out B.
    assert turn(bounded, opening("A") + "More.\n")["timings"]["cache_n"] > 250
    cache = perf(bounded)["prompt_cache"]
    assert cache["bytes"] <= bound_mib * (1 << 20)
    assert cache["evicted"] >= 1 and cache["states"] == 2
    assert turn(bounded, opening("C") + "More.\n")["timings"]["cache_n"] > 250  # kept
    assert turn(bounded, opening("B") + "More.\n")["timings"]["cache_n"] < 64  # read again
    stop_process(bounded)


def test_a_private_cache_serves_a_prompt_only_to_its_owner(start_hearth: StartHearth) -> None:
    """--privatecache: Bob's prompt that starts as Alice's conversation is read afresh, from
    the slot and from the saved states alike; Alice's own next turn is restored."""
    server = start_hearth(["--contextsize", "2048", "--privatecache"])
    alice = opening("A")
    turn_as(server, "alice", alice)
    assert turn_as(server, "bob", alice + "Bob's line.\n")["timings"]["cache_n"] == 0  # slot
    turn_as(server, "carol", opening("B"))  # Alice's and Bob's states are saved now
    assert turn_as(server, "dave", alice + "Dave's line.\n")["timings"]["cache_n"] == 0
    assert turn_as(server, "alice", alice + "Alice's line.\n")["timings"]["cache_n"] > 250
    stop_process(server)


def test_cachedir_keeps_conversations_warm_across_a_restart_and_skips_a_damaged_file(
    start_hearth: StartHearth, tmp_path: Path
) -> None:
    flags = ["--contextsize", "2048", "--cachedir", str(tmp_path), "--metrics"]
    first = start_hearth(flags)
    turn(first, opening("A"))
    turn(first, opening("B"))  # A is saved as B takes the slot; B as the server stops
    stop_process(first)
    files = {path.name: path for path in tmp_path.glob("*.hkv")}
    assert len(files) == 2
    # Damage B's file (the newer one): a payload byte, which only the checksum can tell.
    damaged_file = max(files.values(), key=lambda path: path.stat().st_mtime_ns)
    damaged = bytearray(damaged_file.read_bytes())
    damaged[-100] ^= 0xFF
    damaged_file.write_bytes(bytes(damaged))

    again = start_hearth(flags)
    assert turn(again, opening("A") + "Later.\n")["timings"]["cache_n"] > 250  # warm
    start = len(again.output)
    assert turn(again, opening("B") + "Later.\n")["timings"]["cache_n"] < 64  # read afresh
    line = again.wait_for_output(damaged_file.name, after=start)
    assert "damaged" in line and "checksum" in line
    assert sum(damaged_file.name in printed for printed in again.output) == 1  # one line
    assert not damaged_file.exists()
    # What the folder holds shows in perf and /metrics (the launcher's running view reads perf).
    cache = perf(again)["prompt_cache"]
    assert cache["disk_states"] >= 1 and cache["disk_bytes"] > 0
    assert cache["disk_max_bytes"] == DEFAULT_CACHE_DISK_MIB << 20
    metrics = httpx.get(f"{again.base_url}/metrics").text
    assert "\nhearth_prompt_cache_disk_bytes " in metrics
    stop_process(again)


def test_a_switch_to_another_model_and_back_finds_the_first_models_states(
    model_dir: Path, start_hearth: StartHearth, tmp_path: Path
) -> None:
    server = start_hearth(
        ["--modeldir", str(model_dir), "--contextsize", "2048", "--cachedir", str(tmp_path)]
    )
    turn(server, opening("A"))  # on the served model
    other = native(server, {"model": OTHER, "prompt": opening("B"), "n_predict": 2})
    assert other["model"] == OTHER  # the switch unloaded the served model, saving its slot
    server.wait_for_output(f"Unloading {SERVED}")
    back = native(server, {"model": SERVED, "prompt": opening("A") + "Later.\n", "n_predict": 2})
    assert back["timings"]["cache_n"] > 250
    stop_process(server)
