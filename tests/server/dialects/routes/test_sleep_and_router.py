"""llama-server's --sleep-idle-seconds and its router endpoints for models (GET /models with
each model's state, POST /models/load and /models/unload) on Hearth's model switching.

Scripted engines behind a real switching pool show the rules (what sleeps, what wakes it, what
load and unload do, in line with the requests); one real-model server shows the bundled model
really leaving memory while asleep and serving again after."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from server.core.scheduling.engine import Engine
from server.core.scheduling.engine_pool import EnginePool
from server.core.types import EngineReport, GenerationRequest
from server.dialects.pipeline.model_choice import ModelChoice
from server.models.catalog import ModelCatalog
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from tests.support.gguf_files import write_tiny_gguf
from tests.support.scripted_engine import CachingScriptedEngine, ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
SLEEP = 0.2  # seconds of idleness before the scripted servers sleep
DEADLINE = SLEEP * 100  # waits are bounded relative to the setting, never slept through
NAMES = ("alpha", "beta", "gamma")


class Loader:
    """Loads a scripted engine per model file (answering with the model's name), recording
    loads; `open` holds the engines not closed yet. `gate` holds every generation until set."""

    def __init__(self) -> None:
        self.loads: list[str] = []
        self.open: dict[str, NamedEngine] = {}
        self.gate = threading.Event()
        self.gate.set()

    def load(self, path: Path) -> Engine:
        self.loads.append(path.stem)
        engine = NamedEngine(self, path)
        self.open[path.stem] = engine
        return engine


class NamedEngine(CachingScriptedEngine):  # with a prompt cache, as llama.cpp's engines
    def __init__(self, loader: Loader, path: Path) -> None:
        super().__init__(pieces=(path.stem.encode(),), end_after=1)
        self._loader, self._path = loader, path

    @property
    def model_name(self) -> str:
        return self._path.stem

    @property
    def model_path(self) -> Path | None:
        return self._path

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        assert self._loader.gate.wait(DEADLINE), "the test never opened the gate"
        return super().generate(request, cancelled)

    def close(self) -> None:
        self._loader.open.pop(self._path.stem, None)


def switching_server(
    serve_engine: Serve, folder: Path, **settings: Any
) -> tuple[RunningServer, Loader]:
    """A server of three models (alpha serving first) that loads, unloads and switches them
    as Hearth does with --modeldir, each model a scripted engine."""
    loader = Loader()
    catalog = ModelCatalog(has_model_dir=True)
    for name in NAMES:
        catalog.add(write_tiny_gguf(folder / f"{name}.gguf"))
    paths = {entry.name: entry.path for entry in catalog.entries}
    pool = EnginePool("alpha", loader.load(paths["alpha"]), paths, loader.load, max_loaded=2)
    choice = ModelChoice(catalog, lambda _path: ScriptedEngine(), 4096)
    server = serve_engine(pool, HearthSettings(**settings), model_choice=choice)
    return server, loader


def props(server: RunningServer) -> dict[str, Any]:
    answer = httpx.get(f"{server.base_url}/props")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


def states(server: RunningServer, **headers: str) -> dict[str, str]:
    answer = httpx.get(f"{server.base_url}/models", headers=headers)
    assert answer.status_code == 200
    assert answer.json()["object"] == "list"
    return {entry["id"]: entry["status"]["value"] for entry in answer.json()["data"]}


def wait_until(condition: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    give_up = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < give_up, f"never {what}"
        time.sleep(SLEEP / 10)  # a poll's pace, not a wait for time to pass


def running_now(server: RunningServer) -> int:
    running: int = httpx.get(f"{server.base_url}/api/extra/perf").json()["running"]
    return running


def asleep(server: RunningServer) -> bool:
    return bool(props(server)["is_sleeping"])


# -- sleeping -----------------------------------------------------------------------------------


def test_an_idle_server_sleeps_and_the_read_only_routes_leave_it_asleep(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server, loader = switching_server(
        serve_engine, tmp_path, sleep_idle_seconds=SLEEP, metrics=True
    )
    assert loader.open.keys() == {"alpha"}
    wait_until(lambda: asleep(server), "fell asleep")
    assert loader.open == {}  # the engine was closed, its memory given back
    for path in ("/health", "/props", "/v1/models", "/metrics", "/api/tags", "/api/extra/perf"):
        assert httpx.get(f"{server.base_url}{path}").status_code == 200, path
    assert states(server) == {"alpha": "sleeping", "beta": "unloaded", "gamma": "unloaded"}
    assert asleep(server)
    assert loader.loads == ["alpha"]  # nothing read-only loaded it again


def test_metrics_while_asleep_are_those_of_the_last_scrape_awake(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server, _loader = switching_server(
        serve_engine, tmp_path, sleep_idle_seconds=SLEEP, metrics=True
    )
    url = server.base_url
    assert httpx.post(f"{url}/completion", json={"prompt": "Hi"}).status_code == 200
    httpx.get(f"{url}/metrics")  # the first scrape ends the throughput window
    awake = httpx.get(f"{url}/metrics").text
    assert "hearth_prompt_cache_max_bytes 6.7108864e+07" in awake
    wait_until(lambda: asleep(server), "fell asleep")
    # Nothing ran since, and the cache's bound is the one the model loads with again.
    assert httpx.get(f"{url}/metrics").text == awake
    assert asleep(server)


def test_a_generation_wakes_the_model_the_server_slept_on_and_is_served(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server, loader = switching_server(serve_engine, tmp_path, sleep_idle_seconds=SLEEP)
    wait_until(lambda: asleep(server), "fell asleep")
    answer = httpx.post(f"{server.base_url}/completion", json={"prompt": "Hi", "n_predict": 4})
    assert answer.status_code == 200
    assert answer.json()["content"] == "alpha"
    assert loader.loads == ["alpha", "alpha"]
    wait_until(lambda: asleep(server), "fell asleep again")  # the clock restarted after it


def test_a_server_stays_awake_while_it_works(serve_engine: Serve, tmp_path: Path) -> None:
    server, loader = switching_server(serve_engine, tmp_path, sleep_idle_seconds=SLEEP)
    loader.gate.clear()  # the generation runs until the test lets it end
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            httpx.post, f"{server.base_url}/completion", json={"prompt": "Hi"}, timeout=DEADLINE
        )
        wait_until(lambda: running_now(server) == 1, "started generating")
        # (The server may have slept once before the request came, on a busy machine.)
        loads_before = list(loader.loads)
        # Many sleep periods pass with the generation running: the model stays.
        deadline = time.monotonic() + SLEEP * 5
        while time.monotonic() < deadline:
            assert not asleep(server)
            assert states(server)["alpha"] == "loaded"
            time.sleep(SLEEP / 10)
        loader.gate.set()
        assert running.result().json()["content"] == "alpha"
    assert loader.loads == loads_before


def test_tokenizing_wakes_the_model_and_a_refused_request_does_not(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server, loader = switching_server(serve_engine, tmp_path, sleep_idle_seconds=SLEEP)
    wait_until(lambda: asleep(server), "fell asleep")
    refused = httpx.post(f"{server.base_url}/tokenize", json={"content": 5})
    assert refused.status_code == 400
    assert asleep(server) and loader.loads == ["alpha"]
    answer = httpx.post(f"{server.base_url}/tokenize", json={"content": "Hi"})
    assert answer.json() == {"tokens": [72, 105]}
    assert loader.loads == ["alpha", "alpha"]  # loaded again before the answer went out
    assert "alpha" in loader.open


def test_the_flag_is_llama_servers_and_off_by_default() -> None:
    assert parse_command_line(["--sleep-idle-seconds", "30"]).settings.sleep_idle_seconds == 30
    assert parse_command_line([]).settings.sleep_idle_seconds == -1  # never
    with pytest.raises(ValidationError):
        parse_command_line(["--sleep-idle-seconds", "-5"])


# -- router endpoints ---------------------------------------------------------------------------


def test_models_are_loaded_and_unloaded_by_name_least_recently_used_going_first(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server, loader = switching_server(serve_engine, tmp_path)
    url = server.base_url
    assert states(server) == {"alpha": "loaded", "beta": "unloaded", "gamma": "unloaded"}

    assert httpx.post(f"{url}/models/load", json={"model": "beta"}).json() == {"success": True}
    assert states(server) == {"alpha": "loaded", "beta": "loaded", "gamma": "unloaded"}
    again = httpx.post(f"{url}/models/load", json={"model": "beta"})
    assert again.status_code == 400
    assert again.json()["error"]["message"] == "model is already running"

    # Two at most (--maxloadedmodels 2): gamma takes the place of alpha, used longest ago.
    assert httpx.post(f"{url}/models/load", json={"model": "gamma"}).status_code == 200
    assert states(server) == {"alpha": "unloaded", "beta": "loaded", "gamma": "loaded"}
    assert loader.open.keys() == {"beta", "gamma"}

    assert httpx.post(f"{url}/models/unload", json={"model": "gamma"}).json()["success"] is True
    assert states(server)["gamma"] == "unloaded" and "gamma" not in loader.open
    not_running = httpx.post(f"{url}/models/unload", json={"model": "gamma"})
    assert not_running.status_code == 400
    assert not_running.json()["error"]["message"] == "model is not running"

    unknown = httpx.post(f"{url}/models/load", json={"model": "delta"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "invalid_request_error"
    # A request naming an unloaded model still loads it, as before.
    chat = {"model": "alpha", "messages": [{"role": "user", "content": "Hi"}]}
    assert httpx.post(f"{url}/v1/chat/completions", json=chat).status_code == 200
    assert states(server)["alpha"] == "loaded"


def test_an_unload_waits_for_the_answer_running_on_its_model(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server, loader = switching_server(serve_engine, tmp_path)
    url = server.base_url
    loader.gate.clear()
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(httpx.post, f"{url}/completion", json={"prompt": "Hi"}, timeout=60)
        wait_until(lambda: running_now(server) == 1, "started generating")
        unloading = pool.submit(
            httpx.post, f"{url}/models/unload", json={"model": "alpha"}, timeout=60
        )
        wait_until(lambda: httpx.get(f"{url}/api/extra/perf").json()["queue"] == 1, "queued")
        assert states(server)["alpha"] == "loaded"  # never evicted mid-answer
        loader.gate.set()
        assert running.result().json()["content"] == "alpha"
        assert unloading.result().json() == {"success": True}
    assert states(server)["alpha"] == "unloaded" and loader.open == {}


def test_loading_and_unloading_need_the_key_listing_does_not(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server, _loader = switching_server(serve_engine, tmp_path, api_key="sk-router")
    refused = httpx.post(f"{server.base_url}/models/load", json={"model": "beta"})
    assert refused.status_code == 401
    assert states(server)["beta"] == "unloaded"
    answer = httpx.post(
        f"{server.base_url}/models/load",
        json={"model": "beta"},
        headers={"Authorization": "Bearer sk-router"},
    )
    assert answer.json() == {"success": True}
    assert states(server)["beta"] == "loaded"


def test_a_server_of_one_engine_lists_it_loaded_and_keeps_it(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    assert states(server) == {"scripted": "loaded"}
    kept = httpx.post(f"{server.base_url}/models/unload", json={"model": "scripted"})
    assert kept.status_code == 400
    assert states(server) == {"scripted": "loaded"}


# -- the real model -----------------------------------------------------------------------------

REAL_SLEEP = 1  # llama-server's setting is whole seconds


@pytest.fixture(scope="module")
def sleepy(start_hearth: Callable[..., RunningServer]) -> RunningServer:
    return start_hearth(["--sleep-idle-seconds", str(REAL_SLEEP)])


def resident_bytes(server: RunningServer) -> int:
    """The server process's resident memory (the model's weights are mapped into it)."""
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def test_the_real_model_leaves_memory_while_asleep_and_serves_after(
    sleepy: RunningServer,
) -> None:
    url = sleepy.base_url
    first = httpx.post(f"{url}/completion", json={"prompt": "Hello", "n_predict": 2}, timeout=60)
    assert first.status_code == 200
    awake = resident_bytes(sleepy)
    wait_until(lambda: asleep(sleepy), "fell asleep", deadline=REAL_SLEEP * 60)
    asleep_bytes = resident_bytes(sleepy)
    assert asleep_bytes < awake - 100 * 2**20  # the weights (~250 MB) are gone
    assert states(sleepy) == {"gemma-3-270m-q4_k_m": "sleeping"}

    after = httpx.post(f"{url}/completion", json={"prompt": "Hello", "n_predict": 2}, timeout=60)
    assert after.status_code == 200
    assert after.json()["tokens_predicted"] >= 1
    assert resident_bytes(sleepy) > asleep_bytes + 100 * 2**20  # loaded again
