"""The key file re-read by the real server without a restart: on SIGHUP, and by KoboldCpp's
admin reload. One real server for the module, short generations; every other key rule runs on
the scripted engine in tests/server/dialects/edge/test_api_keys.py."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.servers import RunningServer

ALICE, BOB, CAROL, DAVE = "alice-3f9e", "bob-77aa01", "carol-be11", "dave-0d0d"
ADMIN = "admin-pw-5151"
USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def keyed(
    start_hearth: Callable[[Sequence[str]], RunningServer], tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunningServer, Path]:
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text(f"# who may use it\nalice:{ALICE}\nbob:{BOB}\n", encoding="utf-8")
    server = start_hearth(["--api-key-file", str(path), "--admin", "--adminpassword", ADMIN])
    return server, path


def answers(server: RunningServer, key: str) -> bool:
    """True when a short chat with `key` is answered, False when it is refused as unknown."""
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=key, max_retries=0)
    try:
        reply = client.chat.completions.create(model="m", messages=USER, max_tokens=2)  # type: ignore[arg-type]
    except openai.AuthenticationError:
        return False
    return reply.choices[0].finish_reason in ("length", "stop")


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="Windows has no SIGHUP")
def test_sighup_rereads_the_key_file(keyed: tuple[RunningServer, Path]) -> None:
    server, path = keyed
    assert answers(server, BOB) and not answers(server, CAROL)
    path.write_text(f"alice:{ALICE}\ncarol:{CAROL}\n", encoding="utf-8")
    printed = len(server.output)
    assert server.process is not None
    server.process.send_signal(signal.SIGHUP)
    reloaded = server.wait_for_output("API keys reloaded", after=printed)
    assert "alice, carol" in reloaded and CAROL not in reloaded  # names, never keys
    assert answers(server, CAROL) and answers(server, ALICE) and not answers(server, BOB)


def test_the_admin_reload_rereads_the_key_file(keyed: tuple[RunningServer, Path]) -> None:
    server, path = keyed
    path.write_text(f"dave:{DAVE}\n", encoding="utf-8")
    assert not answers(server, DAVE)
    reload = httpx.post(
        f"{server.base_url}/api/admin/reload_config",
        json={"filename": "initial_model"},
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=120,
    )
    assert reload.status_code == 200, reload.text
    assert answers(server, DAVE) and not answers(server, ALICE)
