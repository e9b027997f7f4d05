"""Slot actions at the edge, on the scripted engine: which file names pass, what an engine
without slot states answers, and the password on KoboldCpp's save-state routes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from server.dialects.routes.slot_actions import check_file_name
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]


@pytest.mark.parametrize("name", ["slot1.bin", "my story (2).state", "日本語.bin", "a" * 255])
def test_plain_file_names_pass(name: str) -> None:
    assert check_file_name(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("../up", "separators"),
        ("a/b", "separators"),
        ("a\\b", "separators"),
        ("tab\there", "control"),
        ("\ufeffbom", "separators"),
        (".hidden", "dot"),
        ("end.", "dot"),
        ("end ", "space"),
        ("AUX", "device"),
        ("com1.bin", "device"),
        ("é" * 128, "255 bytes"),
        ("lone\ud800", "UTF-8"),
    ],
)
def test_other_names_are_refused_saying_why(name: str, why: str) -> None:
    problem = check_file_name(name)
    assert problem is not None and why in problem


def test_an_engine_without_slot_states_says_so_and_writes_nothing(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(slot_save_path=str(tmp_path)))
    answer = httpx.post(f"{server.base_url}/slots/0?action=save", json={"filename": "a.bin"})
    assert answer.status_code == 500
    assert answer.json()["error"]["message"] == "this engine keeps no slot states"
    assert list(tmp_path.iterdir()) == []
    slots = httpx.get(f"{server.base_url}/slots").json()
    assert slots == [
        {"id": 0, "n_ctx": slots[0]["n_ctx"], "is_processing": False, "n_prompt_tokens": 0}
    ]


def test_koboldcpp_save_states_ask_for_the_password(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(password="secret"))
    url = f"{server.base_url}/api/admin/save_state"
    refused = httpx.post(url, json={"slot": 0})
    assert refused.status_code == 401 and refused.json()["detail"]["error"] == "Unauthorized"
    failed = httpx.post(url, json={"slot": 0}, headers={"Authorization": "Bearer secret"})
    assert failed.status_code == 500
    assert failed.json()["success"] is False and "no slot states" in failed.json()["detail"]["msg"]
    bad = httpx.post(url, json={"slot": -1}, headers={"Authorization": "Bearer secret"})
    assert bad.status_code == 422 and "slot" in bad.text  # the body's check, as elsewhere


def test_errors_before_a_slot_route_runs_are_in_openai_shape(serve_engine: Serve) -> None:
    """llama-server's `/slots/{id}` is an OpenAI-shaped route even when FastAPI answers
    first (a wrong method): `{"error": {"message", "type"}}`, not KoboldCpp's `detail`."""
    server = serve_engine(ScriptedEngine())
    answer = httpx.get(f"{server.base_url}/slots/0")
    assert answer.status_code == 405 and "message" in answer.json()["error"]
