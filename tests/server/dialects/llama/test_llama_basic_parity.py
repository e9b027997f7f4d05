"""llama-server parity for the cases of llama.cpp's unit/test_basic.py (issue 30): /props'
per-slot context and seed, --no-slots, --alias and --tags on /models, /v1/models and /props,
and --host with several addresses.

Scripted engines show the routes; one real-model server shows the process listening on two
addresses at once (the start path binds them)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.dialects.edge.errors import APIError, Dialect
from server.dialects.pipeline.model_choice import ModelChoice
from server.models.catalog import ModelCatalog
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from tests.server.core.scheduling.test_worker import ScriptedBatchEngine
from tests.support.gguf_files import write_tiny_gguf
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
ALIASES = "tinyllama-2, fim,code"  # llama-server's test: the id is "code", sorted first
NO_SLOTS = "This server does not support slots endpoint. Start it with `--slots`"  # its words


def get(server: RunningServer, path: str) -> Any:
    answer = httpx.get(f"{server.base_url}{path}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_props_n_ctx_is_one_slots_share_and_params_carry_the_seed(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedBatchEngine(slots=2), HearthSettings(seed=42))
    props = get(server, "/props")
    assert props["total_slots"] == 2
    assert props["default_generation_settings"]["n_ctx"] == 4096 // 2  # as /slots says
    assert get(server, "/slots")[0]["n_ctx"] == 4096 // 2
    assert props["default_generation_settings"]["params"]["seed"] == 42
    assert props["endpoint_slots"] is True


def test_no_slots_turns_the_slots_endpoint_off_with_llama_servers_answer(
    serve_engine: Serve,
) -> None:
    settings = parse_command_line(["--no-slots"]).settings
    assert settings.no_slots and not HearthSettings().no_slots
    server = serve_engine(ScriptedEngine(), settings)
    answer = httpx.get(f"{server.base_url}/slots")
    assert answer.status_code == 501
    error = answer.json()["error"]
    assert (error["code"], error["type"]) == (501, "not_supported_error")
    assert error["message"] == NO_SLOTS
    assert get(server, "/props")["endpoint_slots"] is False


def test_alias_and_tags_name_the_model_in_every_listing(serve_engine: Serve) -> None:
    settings = parse_command_line(["--alias", ALIASES, "--tags", "chat,fim,small"]).settings
    server = serve_engine(ScriptedEngine(), settings)
    (model,) = get(server, "/models")["data"]
    assert model["id"] == "code"
    assert model["aliases"] == ["code", "fim", "tinyllama-2"]
    assert model["tags"] == ["chat", "fim", "small"]
    assert model["status"] == {"value": "loaded"}  # its state is still found by its own name
    assert [entry["id"] for entry in get(server, "/v1/models")["data"]] == ["code"]
    assert get(server, "/props")["model_alias"] == "code"


def test_without_alias_the_model_keeps_its_name_and_lists_no_labels(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    (model,) = get(server, "/models")["data"]
    assert (model["id"], model["aliases"], model["tags"]) == ("scripted", [], [])
    assert get(server, "/props")["model_alias"] == "scripted"


def test_with_a_model_folder_any_alias_names_the_served_model(tmp_path: Path) -> None:
    catalog = ModelCatalog(has_model_dir=True)
    for name in ("alpha", "beta"):
        catalog.add(write_tiny_gguf(tmp_path / f"{name}.gguf"))
    choice = ModelChoice(catalog, lambda _path: ScriptedEngine(), 4096)
    with pytest.raises(APIError):  # before: an unknown name in a folder is a 404
        choice.named("fim", Dialect.OPENAI)
    choice.label_served(["code", "fim"], ["small"])
    assert choice.named("FIM", Dialect.OPENAI)[0] == "alpha"
    assert choice.named("beta", Dialect.OPENAI)[0] == "beta"
    assert [choice.public_name(name) for name in catalog.names] == ["code", "beta"]
    assert choice.labels("beta") == ([], [])


def test_host_takes_several_addresses() -> None:
    settings = HearthSettings(host=" 127.0.0.1, ::1,")
    assert settings.listen_hosts == ["127.0.0.1", "::1"] and settings.listen_host == "127.0.0.1"
    assert HearthSettings().listen_hosts == ["127.0.0.1"]
    assert not settings.exposed_without_password  # both are loopback
    assert HearthSettings(host="127.0.0.1,0.0.0.0").exposed_without_password


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="IPv6 loopback is unavailable")
def test_the_server_listens_on_every_address_given(
    start_hearth: Callable[..., RunningServer],
) -> None:
    server = start_hearth(["--host", "127.0.0.1,::1"])
    port = server.base_url.rsplit(":", 1)[1]
    for host in ("127.0.0.1", "[::1]"):  # one server: the same model behind both
        assert httpx.get(f"http://{host}:{port}/health").json() == {"status": "ok"}
        props = httpx.get(f"http://{host}:{port}/props").json()
        assert props["model_path"].endswith(".gguf")
