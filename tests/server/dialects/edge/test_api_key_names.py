"""The name of the API key a request used, on the request: the launcher's live rows and the
console's request lines show it, never the key (issue 29). A scripted engine over real HTTP;
the key rules themselves are in tests/server/dialects/edge/test_api_keys.py."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.core.types import EngineReport, GenerationRequest
from server.dialects.routes.admin_live import ADMIN_TOKEN_ENV
from server.settings.config import HearthSettings
from tests.support.real_server import wait_for
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
ALICE = "alice-5e7d2b"
TOKEN = "launcher-token-for-tests"


class HeldEngine(ScriptedEngine):
    """Scripted, but each generation waits for `release` (or its cancel) before it starts:
    a request the test can see in the live view."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        while not self.release.wait(0.01) and not cancelled.is_set():
            pass
        yield from super().generate(request, cancelled)


def test_live_rows_and_console_lines_show_the_name_never_the_key(
    serve_engine: Serve,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)
    keys = tmp_path / "keys.txt"
    keys.write_text(f"alice:{ALICE}\nbob:bob-c0ffee\n", encoding="utf-8")
    engine = HeldEngine()
    server = serve_engine(engine, HearthSettings(api_key_file=str(keys)))
    answered: list[httpx.Response] = []

    def send() -> None:
        with server.client(headers={"Authorization": f"Bearer {ALICE}"}) as client:
            answered.append(client.post("/api/v1/generate", json={"prompt": "x", "max_length": 2}))

    sender = threading.Thread(target=send)
    rows: list[Any] = []
    with (
        caplog.at_level(logging.INFO, logger="hearth"),
        server.client(headers={"Authorization": f"Bearer {TOKEN}"}) as admin,
    ):
        sender.start()

        def row_shown() -> bool:
            live = admin.get("/api/admin/requests")
            assert ALICE not in live.text
            rows[:] = live.json()["requests"]
            return bool(rows)

        wait_for(row_shown)
        engine.release.set()
        sender.join()
    assert answered[0].status_code == 200
    assert rows[0]["key"] == "alice" and rows[0]["client"].startswith("127.0.0.1:")
    assert engine.requests[-1].key_name == "alice"
    lines = [record.getMessage() for record in caplog.records]
    assert any("] key alice, prompt " in line for line in lines), lines
    assert not any(ALICE in line for line in lines)


def test_without_keys_rows_and_lines_name_no_key(serve_engine: Serve) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine, HearthSettings())
    with server.client() as client:
        assert client.post("/api/v1/generate", json={"prompt": "x", "max_length": 2}).is_success
    assert engine.requests[-1].key_name == ""
