"""KoboldAI Lite's server features over real HTTP (a scripted engine: none of these generate):
the shared multiplayer story, save slots on the server, the preloaded story, the version
flags and the password, as KoboldCpp answers them (server/dialects/kobold/lite.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.dialects.kobold.save_slots import JSON_BACKUP_SUFFIX, MAX_DATA_BYTES, SLOT_COUNT
from server.dialects.kobold.shared_story import MAX_STORY_CHARS
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
STATUS = "/api/extra/multiplayer/status"
GET_STORY = "/api/extra/multiplayer/getstory"
SET_STORY = "/api/extra/multiplayer/setstory"
LIST, LOAD, SAVE = "/api/extra/data/list", "/api/extra/data/load", "/api/extra/data/save"


def serve_lite(serve_engine: Serve, **settings: Any) -> RunningServer:
    return serve_engine(ScriptedEngine(), HearthSettings(**settings))


def refusal(response: httpx.Response, status: int, koboldcpp: Any) -> str:
    """KoboldCpp's body for a refusal, with its reason in the Kobold error shape beside it
    (as every Hearth error has); the reason."""
    body = response.json()
    assert response.status_code == status, body
    detail = body.pop("detail")
    assert body == koboldcpp
    assert isinstance(detail["msg"], str) and detail["type"]
    return str(detail["msg"])


# -- multiplayer -----------------------------------------------------------------------------


def test_two_players_see_each_other_s_story_and_the_turn_moves(serve_engine: Serve) -> None:
    server = serve_lite(serve_engine, multiplayer=True)
    with server.client() as ana, server.client() as ben:
        first = ana.post(STATUS, json={"sender": "ana"}).json()
        assert first == {"turn_major": 1, "turn_minor": 1, "idle": True, "data_format": ""}
        assert ana.post(GET_STORY).text == ""
        written = ana.post(
            SET_STORY,
            json={
                "full_update": True,
                "data_format": "kcpp_lzma_b64",
                "sender": "ana",
                "data": "A1",
            },
        )
        assert written.status_code == 200
        assert written.json() == {
            "success": True,
            "turn_major": 2,
            "turn_minor": 1,
            "idle": True,  # nobody but ana was active
            "data_format": "kcpp_lzma_b64",
        }
        # ben polls, sees the turn moved, and fetches ana's story
        assert ben.post(STATUS, json={"sender": "ben"}).json()["turn_major"] == 2
        fetched = ben.post(GET_STORY)
        assert fetched.text == "A1" and fetched.headers["content-type"].startswith("text/plain")
        assert (fetched.headers["x-hearth-turn-major"], fetched.headers["x-hearth-turn-minor"]) == (
            "2",
            "1",
        )
        # ben adds to it (not a full update: the minor turn moves), and ana sees it
        added = ben.post(SET_STORY, json={"sender": "ben", "data": "A1B1"}).json()
        assert (added["turn_major"], added["turn_minor"]) == (2, 2)
        assert added["idle"] is False  # ana wrote moments ago
        assert ana.post(GET_STORY).text == "A1B1"
        status = ana.post(STATUS, json={"sender": "ana"}).json()
        assert (status["turn_major"], status["turn_minor"], status["idle"]) == (2, 2, False)


def test_a_write_based_on_an_old_turn_is_refused(serve_engine: Serve) -> None:
    server = serve_lite(serve_engine, multiplayer=True)
    with server.client() as ana, server.client() as ben:
        ana.post(SET_STORY, json={"sender": "ana", "data": "base", "full_update": True})
        seen = ben.post(GET_STORY)
        turn = {
            "turn_major": int(seen.headers["x-hearth-turn-major"]),
            "turn_minor": int(seen.headers["x-hearth-turn-minor"]),
        }
        # both edit the story they saw at turn 2.1; ana writes first
        assert ana.post(SET_STORY, json={"sender": "ana", "data": "base+ana", **turn}).is_success
        stale = ben.post(SET_STORY, json={"sender": "ben", "data": "base+ben", **turn})
        assert stale.status_code == 409
        assert stale.json()["success"] is False
        assert "turn 2.1" in stale.json()["error"] and "2.2" in stale.json()["error"]
        assert (stale.json()["turn_major"], stale.json()["turn_minor"]) == (2, 2)
        assert ben.post(GET_STORY).text == "base+ana"  # ben's write changed nothing
        # fetched again, ben's write on the current turn goes through
        again = ben.post(SET_STORY, json={"sender": "ben", "data": "base+ana+ben", **_turn(2, 2)})
        assert again.json()["turn_minor"] == 3
        # Lite sends no turn: KoboldCpp's rule, the last write wins
        assert ana.post(SET_STORY, json={"sender": "ana", "data": "lite"}).is_success
        assert ben.post(GET_STORY).text == "lite"


def _turn(major: int, minor: int) -> dict[str, int]:
    return {"turn_major": major, "turn_minor": minor}


def test_writes_koboldcpp_refuses(serve_engine: Serve) -> None:
    server = serve_lite(serve_engine, multiplayer=True)
    with server.client() as client:
        empty = client.post(SET_STORY, json={"sender": "ana", "data": ""})
        refusal(empty, 400, {"success": False, "error": "No story submitted!"})
        long = client.post(SET_STORY, json={"data": "x" * (MAX_STORY_CHARS + 1)})
        assert long.status_code == 400 and long.json()["error"].startswith("Story is too long!")
        assert client.post(STATUS).json()["turn_minor"] == 1  # neither counted


def test_a_busy_player_keeps_the_others_waiting(serve_engine: Serve) -> None:
    server = serve_lite(serve_engine, multiplayer=True)
    with server.client() as client:
        assert client.post(STATUS, json={"sender": "ben"}).json()["idle"] is True
        client.post(STATUS, json={"sender": "ana", "senderbusy": True})
        assert client.post(STATUS, json={"sender": "ben"}).json()["idle"] is False
        assert client.post(STATUS, json={"sender": "ana"}).json()["idle"] is True


def test_a_generation_running_means_not_idle(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(token_seconds=0.05), HearthSettings(multiplayer=True))
    started = threading.Event()

    def generate() -> None:
        with (
            server.client() as client,
            client.stream(
                "POST", "/api/extra/generate/stream", json={"prompt": "x", "max_length": 40}
            ) as response,
        ):
            for _ in response.iter_lines():
                started.set()

    writer = threading.Thread(target=generate)
    writer.start()
    try:
        assert started.wait(10)
        with server.client() as client:
            assert client.post(STATUS, json={"sender": "ana"}).json()["idle"] is False
    finally:
        writer.join(30)
    with server.client() as client:
        assert client.post(STATUS, json={"sender": "ana"}).json()["idle"] is True


def test_multiplayer_off_answers_koboldcpp_s_bodies(serve_engine: Serve) -> None:
    server = serve_lite(serve_engine)
    with server.client() as client:
        status = client.post(STATUS, json={})
        assert refusal(status, 400, {"error": "Multiplayer not enabled!"}) == (
            "Multiplayer not enabled!"
        )
        written = client.post(SET_STORY, json={"data": "x"})
        refusal(written, 400, {"success": False, "error": "Multiplayer not enabled!"})
        refusal(client.post(GET_STORY), 400, {})


# -- save slots ------------------------------------------------------------------------------


def test_a_saved_slot_loads_back_from_a_fresh_server_over_the_same_file(
    serve_engine: Serve, tmp_path: Path
) -> None:
    path = tmp_path / "lite" / "saves.sqlite"  # its folder is made too
    first = serve_lite(serve_engine, savedatafile=str(path))
    story = {"slot": "3", "format": "kcpp_lzma_b64", "title": "The Kobold", "data": "XQAAAAI…"}
    with first.client() as client:
        assert client.post(LIST).json() == [""] * SLOT_COUNT
        saved = client.post(SAVE, json=story)
        assert (saved.status_code, saved.json()) == (200, {"success": True, "error": ""})
        client.post(SAVE, json={"slot": 0, "data": "untitled story"})
    first.shut_down()

    second = serve_lite(serve_engine, savedatafile=str(path))
    with second.client() as client:
        titles = client.post(LIST).json()
        assert len(titles) == SLOT_COUNT
        assert titles[:4] == ["Untitled Save", "", "", "The Kobold"]
        loaded = client.post(LOAD, json={"slot": 3})
        assert loaded.json() == {
            "success": True,
            "data": {"title": "The Kobold", "format": "kcpp_lzma_b64", "data": "XQAAAAI…"},
        }
        # saving nothing into a slot empties it
        assert client.post(SAVE, json={"slot": 3, "data": ""}).json()["success"] is True
        empty = client.post(LOAD, json={"slot": "3"})
        assert refusal(empty, 404, {"success": False, "data": None}) == "That save slot is empty."
        assert client.post(LIST).json()[3] == ""


def test_save_slot_bounds_are_refused_with_the_reason(serve_engine: Serve, tmp_path: Path) -> None:
    server = serve_lite(serve_engine, savedatafile=str(tmp_path / "saves.sqlite"))
    with server.client() as client:
        for slot in (-1, SLOT_COUNT, "twelve", None):
            refused = client.post(SAVE, json={"slot": slot, "data": "story"})
            assert refused.status_code == 400, slot
            assert refused.json()["success"] is False
            assert refused.json()["error"].startswith("No story submitted or invalid slot!")
            assert refused.json()["detail"]["msg"] == refused.json()["error"]
        too_long = client.post(SAVE, json={"slot": 1, "data": "é" * (MAX_DATA_BYTES // 2 + 1)})
        assert too_long.status_code == 400
        assert too_long.json()["error"].startswith("Story is too long!")
        assert f"a slot holds {MAX_DATA_BYTES:,}" in too_long.json()["error"]
        long_title = client.post(SAVE, json={"slot": 1, "title": "t" * 5000, "data": "story"})
        assert long_title.status_code == 400 and "title" in long_title.json()["error"]
        # exactly at the bound is taken
        fits = client.post(SAVE, json={"slot": 1, "data": "x" * MAX_DATA_BYTES})
        assert fits.json() == {"success": True, "error": ""}
        assert client.post(LIST).json()[1] == "Untitled Save"
        refusal(client.post(LOAD, json={"slot": SLOT_COUNT}), 404, {"success": False, "data": None})


def test_concurrent_saves_all_land(serve_engine: Serve, tmp_path: Path) -> None:
    server = serve_lite(serve_engine, savedatafile=str(tmp_path / "saves.sqlite"))

    def save(slot: int) -> int:
        with server.client() as client:
            body = {"slot": slot, "title": f"story {slot}", "data": f"data {slot}" * 1000}
            return client.post(SAVE, json=body).status_code

    threads = [threading.Thread(target=save, args=(slot,)) for slot in range(SLOT_COUNT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    with server.client() as client:
        assert client.post(LIST).json() == [f"story {slot}" for slot in range(SLOT_COUNT)]


def test_a_koboldcpp_jsondb_file_is_imported(serve_engine: Serve, tmp_path: Path) -> None:
    path = tmp_path / "savedata.jsondb"
    koboldcpp = {"2": {"title": "Old story", "format": "kcpp_lzma_b64", "data": "old data"}}
    path.write_text(json.dumps(koboldcpp))
    server = serve_lite(serve_engine, savedatafile=str(path))
    with server.client() as client:
        assert client.post(LIST).json()[2] == "Old story"
        assert client.post(LOAD, json={"slot": 2}).json()["data"] == koboldcpp["2"]
    backup = path.with_name(path.name + JSON_BACKUP_SUFFIX)
    assert json.loads(backup.read_text()) == koboldcpp


def test_save_slots_off_answer_koboldcpp_s_bodies(serve_engine: Serve) -> None:
    server = serve_lite(serve_engine)
    with server.client() as client:
        assert refusal(client.post(LIST), 400, {}) == "SaveDataFile not enabled!"
        saved = client.post(SAVE, json={"slot": 1, "data": "x"})
        refusal(saved, 400, {"success": False, "error": "SaveDataFile not enabled!"})
        refusal(client.post(LOAD, json={"slot": 1}), 400, {"success": False, "data": None})


# -- the preloaded story, the version flags, the password ------------------------------------


def test_the_preloaded_story_is_the_file_s_json(serve_engine: Serve, tmp_path: Path) -> None:
    story_file = tmp_path / "story.json"
    story_file.write_bytes(b'{"gamestarted": true, "prompt": "Once upon a time"}')
    with serve_lite(serve_engine, preloadstory=str(story_file)).client() as client:
        answer = client.get("/api/extra/preloadstory")
        assert answer.headers["content-type"] == "application/json"
        assert answer.content == story_file.read_bytes()
    embedded = {"prompt": "from a .kcppt"}  # a launch template embeds the story itself
    with serve_lite(serve_engine, preloadstory=embedded).client() as client:
        assert client.get("/api/extra/preloadstory").json() == embedded


def test_no_preloaded_story_is_an_empty_object(serve_engine: Serve) -> None:
    with serve_lite(serve_engine).client() as client:
        answer = client.get("/api/extra/preloadstory")
        assert (answer.status_code, answer.json()) == (200, {})


@pytest.mark.parametrize("on", [False, True])
def test_version_says_which_features_are_on(serve_engine: Serve, tmp_path: Path, on: bool) -> None:
    savedata = str(tmp_path / "saves.sqlite") if on else None
    server = serve_lite(serve_engine, multiplayer=on, websearch=on, savedatafile=savedata)
    with server.client() as client:
        version = client.get("/api/extra/version").json()
    assert (version["multiplayer"], version["websearch"], version["savedata"]) == (on, on, on)


def test_the_password_guards_every_post_but_not_the_preloaded_story(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server = serve_lite(
        serve_engine,
        password="sesame",
        multiplayer=True,
        websearch=True,
        savedatafile=str(tmp_path / "saves.sqlite"),
    )
    bodies = {
        STATUS: {},
        GET_STORY: {},
        SET_STORY: {"data": "x"},
        LIST: {},
        SAVE: {"slot": 0, "data": "x"},
        LOAD: {"slot": 0},
        "/api/extra/websearch": {"q": ""},
    }
    key = {"Authorization": "Bearer sesame"}
    with server.client() as client:
        for path, body in bodies.items():
            refused = client.post(path, json=body)
            assert refused.status_code == 401, path
            assert refused.json()["detail"]["type"] == "unauthorized"
            assert client.post(path, json=body, headers=key).status_code < 400, path
        assert client.get("/api/extra/preloadstory").status_code == 200
    # the feature flags stay readable, as KoboldCpp's version route is open
    assert httpx.get(f"{server.base_url}/api/extra/version").json()["multiplayer"] is True
