"""Several API keys with names (--password, --api-key, --api-key-file): the key file's rules,
each key opening every dialect and a wrong or missing one refused in that dialect's own shape
(through the official clients), the file re-read without a restart, and the names (never the
keys) in /metrics and the request's record. A scripted engine over real HTTP; SIGHUP on the
real server is in tests/server/dialects/edge/test_api_keys_real.py."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import ollama
import openai
import pytest
from fastapi import FastAPI

from server.dialects.edge.api_keys import (
    KeyFileError,
    KeyRing,
    key_name,
    parse_key_file,
    reload_on_hangup,
)
from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import Dialect
from server.process.exit_codes import EXIT_USAGE
from server.settings.config import HearthSettings
from tests.support.error_shapes import assert_error_shape
from tests.support.metrics_reader import scrape
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import ROOT, RunningServer, free_port

Serve = Callable[..., RunningServer]
USER: list[Any] = [{"role": "user", "content": "Hi"}]
PASSWORD = "pw-4d1c"
LISTED = ("list-7f0a", "list-91bc")
ALICE, BOB, CAROL = "alice-5e7d2b", "bob-c0ffee", "carol-8a8a8a"
KEY_FILE = f"""# the team's keys
alice:{ALICE}

bob : {BOB}
"""
EVERY_KEY = (PASSWORD, *LISTED, ALICE, BOB)


# -- the key file's rules ---------------------------------------------------------------------


def test_key_file_lines_comments_names_and_blanks() -> None:
    text = "\ufeff# a comment\n\nplain-key\r\n  team : named:key:with:colons  \n   # indented\nz\n"
    assert parse_key_file(text, "keys.txt") == [
        ("key-file-line-3", "plain-key"),  # unnamed: its line, never the key
        ("team", "named:key:with:colons"),  # split at the first colon
        ("key-file-line-6", "z"),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("ok\nname:\n", "keys.txt, line 2: a name without a key"),
        ("two words\n", "keys.txt, line 1: a key must be visible ASCII"),
        ("name:clé\n", "keys.txt, line 1: a key must be visible ASCII"),
        ("na\tme:key\n", "keys.txt, line 1: the name has control characters"),
        ("# only comments\n\n", "keys.txt: no keys in it"),
        ("", "keys.txt: no keys in it"),
    ],
)
def test_a_key_file_that_cannot_be_used_says_where_never_the_key(text: str, problem: str) -> None:
    with pytest.raises(KeyFileError) as refused:
        parse_key_file(text, "keys.txt")
    assert str(refused.value).startswith(problem)
    assert "clé" not in str(refused.value) and "words" not in str(refused.value)


def key_file(tmp_path: Path, text: str = KEY_FILE) -> Path:
    path = tmp_path / "keys.txt"
    path.write_text(text, encoding="utf-8")
    return path


def ring_settings(path: Path, **more: Any) -> HearthSettings:
    listed = " , ".join(LISTED)
    return HearthSettings(password=PASSWORD, api_key=listed, api_key_file=str(path), **more)


def test_the_ring_names_every_key_and_a_duplicate_keeps_its_first_name(tmp_path: Path) -> None:
    path = key_file(tmp_path, f"{KEY_FILE}dup:{ALICE}\n{PASSWORD}\ncarol:{CAROL}\nalice:{BOB}2\n")
    ring = KeyRing.from_settings(ring_settings(path))
    assert ring.required
    assert ring.names() == ["password", "api-key-1", "api-key-2", "alice", "bob", "carol"]
    assert [ring.match(key) for key in EVERY_KEY] == [
        "password", "api-key-1", "api-key-2", "alice", "bob"
    ]  # fmt: skip
    assert ring.match(CAROL) == "carol"
    assert ring.match(f"{BOB}2") == "alice"  # two keys may share a name (a key being rotated)
    for wrong in ("", "alice", f"{ALICE}x", ALICE[:-1], ALICE.upper()):
        assert ring.match(wrong) is None


def test_no_settings_no_keys_and_a_missing_file_stops_the_ring(tmp_path: Path) -> None:
    assert not KeyRing.from_settings(HearthSettings()).required
    missing = tmp_path / "nope.txt"
    with pytest.raises(KeyFileError, match=r"nope\.txt: No such file"):
        KeyRing.from_settings(HearthSettings(api_key_file=str(missing)))


def test_reload_takes_the_edited_file_and_keeps_the_keys_when_it_is_unusable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = key_file(tmp_path)
    ring = KeyRing.from_settings(ring_settings(path))
    path.write_text(f"alice:{ALICE}\ncarol:{CAROL}\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="hearth"):
        assert ring.reload()
    assert caplog.messages == [
        f"API keys reloaded from {path}: password, api-key-1, api-key-2, alice, carol"
    ]
    assert (ring.match(CAROL), ring.match(BOB), ring.match(PASSWORD)) == ("carol", None, "password")
    for broken in ("carol:\n", "# nothing\n", None):  # a bad line, no keys, the file gone
        if broken is None:
            path.unlink()
        else:
            path.write_text(broken, encoding="utf-8")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hearth"):
            assert not ring.reload()
        assert ring.match(CAROL) == "carol" and ring.match(ALICE) == "alice"
        assert len(caplog.records) == 1 and "keys in use stay" in caplog.text
        assert not any(key in caplog.text for key in (ALICE, CAROL, PASSWORD))


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="Windows has no SIGHUP")
def test_sighup_reloads_on_the_event_loop_and_only_with_a_key_file(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGHUP)
    try:
        reload_on_hangup(KeyRing.from_settings(HearthSettings(password=PASSWORD)))
        assert signal.getsignal(signal.SIGHUP) is before  # no file: a closed terminal still ends
        path = key_file(tmp_path)
        ring = KeyRing.from_settings(ring_settings(path))
        reload_on_hangup(ring)
        path.write_text(f"carol:{CAROL}\n", encoding="utf-8")
        os.kill(os.getpid(), signal.SIGHUP)  # no loop runs: ignored (and the process lives)
        assert ring.match(CAROL) is None

        async def hang_up() -> None:
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(1000):  # loop turns, until the scheduled reload has run
                if ring.match(CAROL) is not None:
                    return
                await asyncio.sleep(0)

        asyncio.run(hang_up())
        assert (ring.match(CAROL), ring.match(ALICE)) == ("carol", None)
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_missing_key_file_stops_the_start_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "keys.txt"
    flags = ["--skiplauncher", "--port", str(free_port()), "--api-key-file", str(missing)]
    finished = subprocess.run(
        [sys.executable, "-m", "server", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    printed = (finished.stdout + finished.stderr).splitlines()
    assert finished.returncode == EXIT_USAGE, printed
    assert printed == [f"hearth: --api-key-file {missing}: No such file or directory"]


# -- every dialect, over real HTTP --------------------------------------------------------------


def app_of(server: RunningServer) -> FastAPI:
    """The app an in-process server serves (to reach its key ring, or add a route)."""
    assert server.http is not None and isinstance(server.http.config.app, FastAPI)
    return server.http.config.app


def serve_keys(serve_engine: Serve, path: Path, **settings: Any) -> RunningServer:
    return serve_engine(ScriptedEngine(), ring_settings(path, metrics=True, **settings))


# One generation per dialect, each an endpoint that needs a key: (path, body).
GENERATIONS = (
    ("/api/v1/generate", {"prompt": "x", "max_length": 2}),  # KoboldAI
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2}),  # OpenAI
    ("/v1/messages", {"messages": USER, "max_tokens": 2, "model": "m"}),  # Anthropic
    ("/api/chat", {"model": "m", "messages": USER, "stream": False}),  # Ollama
    ("/completion", {"prompt": "x", "n_predict": 2}),  # llama-server
)


def test_each_key_opens_every_dialect_and_others_are_refused_in_its_shape(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server = serve_keys(serve_engine, key_file(tmp_path))
    with server.client() as client:
        for path, body in GENERATIONS:
            for key in EVERY_KEY:
                answer = client.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
                assert answer.status_code == 200, (path, answer.text)
            for headers in ({}, {"Authorization": "Bearer nope"}, {"x-api-key": "nope"}):
                refused = client.post(path, json=body, headers=headers)
                assert refused.status_code == 401, (path, headers)
                assert_error_shape(path, refused.json())
        # Anthropic's own header, as its SDK sends it, and the others honour it too.
        for path, body in GENERATIONS:
            assert client.post(path, json=body, headers={"x-api-key": BOB}).status_code == 200


def test_official_clients_with_each_key_and_a_wrong_one(
    serve_engine: Serve, tmp_path: Path
) -> None:
    base = serve_keys(serve_engine, key_file(tmp_path)).base_url
    for key in (ALICE, LISTED[1], PASSWORD):
        gpt = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
        assert gpt.chat.completions.create(model="m", messages=USER, max_tokens=2).choices
        claude = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)  # x-api-key
        assert claude.messages.create(model="m", max_tokens=2, messages=USER).content
        llama = ollama.Client(host=base, headers={"Authorization": f"Bearer {key}"})
        assert llama.chat(model="m", messages=USER).message.content
    with pytest.raises(openai.AuthenticationError) as wrong:
        openai.OpenAI(base_url=f"{base}/v1", api_key="nope", max_retries=0).completions.create(
            model="m", prompt="x", max_tokens=2
        )
    assert wrong.value.code == "invalid_api_key"
    with pytest.raises(anthropic.AuthenticationError) as refused:
        anthropic.Anthropic(base_url=base, api_key=BOB + "x", max_retries=0).messages.create(
            model="m", max_tokens=2, messages=USER
        )
    assert refused.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    for headers in ({"Authorization": "Bearer nope"}, {}):
        with pytest.raises(ollama.ResponseError) as answered:
            ollama.Client(host=base, headers=headers).chat(model="m", messages=USER)
        assert answered.value.status_code == 401


def test_the_edited_file_is_used_after_a_reload_without_a_restart(
    serve_engine: Serve, tmp_path: Path
) -> None:
    path = key_file(tmp_path)
    server = serve_keys(serve_engine, path)
    app = app_of(server)
    path.write_text(f"alice:{ALICE}\ncarol:{CAROL}\n", encoding="utf-8")
    path_body = GENERATIONS[1]
    with server.client() as client:

        def status(key: str) -> int:
            headers = {"Authorization": f"Bearer {key}"}
            return client.post(path_body[0], json=path_body[1], headers=headers).status_code

        assert (status(BOB), status(CAROL)) == (200, 401)  # not read yet
        app.state.key_ring.reload()  # what SIGHUP and the admin reload call
        assert (status(BOB), status(CAROL), status(ALICE), status(PASSWORD)) == (401, 200, 200, 200)


def test_metrics_count_by_name_and_never_show_a_key(serve_engine: Serve, tmp_path: Path) -> None:
    server = serve_keys(serve_engine, key_file(tmp_path))
    path, body = GENERATIONS[0]
    with server.client() as client:
        for key, times in ((ALICE, 3), (BOB, 1)):
            for _ in range(times):
                headers = {"Authorization": f"Bearer {key}"}
                assert client.post(path, json=body, headers=headers).status_code == 200
        assert client.post(path, json=body).status_code == 401
        assert client.post(path, json=body, headers={"x-api-key": "nope"}).status_code == 401
    reading = scrape(server.base_url, {"x-api-key": PASSWORD})
    assert reading.value("hearth_key_requests_total", key="alice") == 3
    assert reading.value("hearth_key_requests_total", key="bob") == 1
    assert reading.value("hearth_key_requests_total", key="api-key-2") == 0  # named, unused
    assert reading.value("hearth_key_refusals_total", reason="missing") == 1
    assert reading.value("hearth_key_refusals_total", reason="wrong") == 1
    assert not any(key in reading.text for key in EVERY_KEY)


def test_the_handler_knows_the_name_of_the_key_its_request_used(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server = serve_keys(serve_engine, key_file(tmp_path))
    app = app_of(server)

    async def who() -> dict[str, str]:
        return {"key": key_name()}

    # A route of the test's own, guarded as every route is: the name reaches the handler.
    app.add_api_route("/test/who", who, dependencies=[key_required(Dialect.OPENAI)])
    with server.client() as client:
        named = [
            client.get("/test/who", headers={"Authorization": f"Bearer {key}"}).json()["key"]
            for key in (ALICE, LISTED[0], PASSWORD)
        ]
        assert client.get("/test/who", headers={"x-api-key": BOB}).json() == {"key": "bob"}
    assert named == ["alice", "api-key-1", "password"]


def test_admin_routes_ask_for_a_key_without_an_admin_password(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server = serve_keys(serve_engine, key_file(tmp_path), admin=True)
    with server.client() as client:
        assert client.get("/api/admin/list_options").status_code == 401
        bob = client.get("/api/admin/list_options", headers={"Authorization": f"Bearer {BOB}"})
        assert bob.status_code == 403  # let in: a scripted engine has no models to switch
