"""Hostile and unlucky inputs over real HTTP with a scripted engine: every bad request is a 4xx
in its dialect's shape, oversized bodies are refused before they are read, a shutdown gives
every open stream its ending, and a client that stops reading cannot hold the server.
(The same rows against the real model are in tests/server/dialects/test_hardening_real_model.py.)"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from server.core.scheduling.job import Job
from server.core.templates.chat import ChatTemplate
from server.process.console import RequestLog
from server.settings.config import HearthSettings
from tests.support.error_shapes import TEXT_ENDPOINTS, assert_error_shape
from tests.support.real_server import wait_for
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]
USER = [{"role": "user", "content": "Hi"}]

# A minimal valid body for each text endpoint, with a prompt field to put text into.
VALID_BODIES: dict[str, dict[str, Any]] = {
    "/api/v1/generate": {"prompt": "x", "max_length": 2},
    "/api/extra/generate/stream": {"prompt": "x", "max_length": 2},
    "/v1/completions": {"prompt": "x", "max_tokens": 2},
    "/v1/chat/completions": {"messages": USER, "max_tokens": 2},
    "/v1/responses": {"input": "x", "max_output_tokens": 2},
    "/v1/messages": {"messages": USER, "max_tokens": 2},
    "/api/generate": {"model": "m", "prompt": "x", "stream": False},
    "/api/chat": {"model": "m", "messages": USER, "stream": False},
}


def test_deeply_nested_json_is_a_400_in_every_dialect(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    for depth in (5000, 100):  # past the JSON decoder's own limit, and past Hearth's
        nested = "[" * depth + "]" * depth
        with server.client() as client:
            for path in TEXT_ENDPOINTS:
                body = json.dumps(VALID_BODIES[path])[:-1] + f', "extra": {nested}}}'
                response = client.post(
                    path, content=body, headers={"content-type": "application/json"}
                )
                assert response.status_code == 400, (path, depth, response.text[:200])
                assert_error_shape(path, response.json())
                assert "nested too deeply" in response.text
    # Real requests nest a few levels (tool schemas); those still work.
    assert server.client().post("/v1/completions", json=VALID_BODIES["/v1/completions"])


def test_lone_surrogate_is_served_with_the_replacement_character(serve_engine: Serve) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine)
    with server.client() as client:
        for path, field in (("/api/v1/generate", "prompt"), ("/v1/completions", "prompt")):
            raw = json.dumps({**VALID_BODIES[path], field: "PLACEHOLDER"})
            raw = raw.replace("PLACEHOLDER", "a\\ud800b")  # a lone high surrogate, as JSON
            response = client.post(path, content=raw, headers={"content-type": "application/json"})
            assert response.status_code == 200, response.text
            assert engine.requests[-1].prompt == "a\ufffdb"
        pair = json.dumps({**VALID_BODIES["/api/v1/generate"], "prompt": "\U0001f600"})
        assert client.post("/api/v1/generate", content=pair).status_code == 200
        assert engine.requests[-1].prompt == "\U0001f600"  # a proper pair stays itself


def _raw_post_headers(port: int, path: str, declared: int, sent: bytes) -> tuple[int, bytes]:
    """POST with a Content-Length of `declared` bytes but only `sent` on the wire; return the
    status and body of whatever answer comes back."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n"
        )
        sock.sendall(head.encode() + sent)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head_bytes, _, body = answer.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head_bytes.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        while len(body) < length:
            body += sock.recv(65536)
        return int(head_bytes.split()[1]), body


def test_body_over_maxrequestsize_is_413_before_it_is_read(serve_engine: Serve) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine, HearthSettings(maxrequestsize=1))
    port = int(server.base_url.rsplit(":", 1)[1])
    for path in TEXT_ENDPOINTS:
        # 64 MB announced, 1 KB sent: the answer comes without the rest ever being sent.
        status, body = _raw_post_headers(port, path, 64 * 1024 * 1024, b"{" + b" " * 1023)
        assert status == 413, (path, body[:200])
        assert_error_shape(path, json.loads(body))
        assert b"1 MB" in body
    # A chunked body (no Content-Length) is counted as it arrives.
    chunks = (b" " * 65536 for _ in range(40))  # 2.5 MB
    with server.client() as client:
        response = client.post("/v1/chat/completions", content=chunks)
        assert response.status_code == 413
        assert response.json()["error"]["type"] == "invalid_request_error"
        # Under the limit is fine.
        assert client.post("/v1/completions", json=VALID_BODIES["/v1/completions"]).is_success
    assert not engine.requests[:-1]  # nothing oversized reached the engine


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [], "max_tokens": 2}),
        ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}),
        ("/api/chat", {"model": "m", "messages": USER, "keep_alive": "5 minutes"}),
        ("/api/generate", {"model": "m", "prompt": "x", "keep_alive": "nan"}),
        ("/api/chat", {"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
        ("/v1/messages", {"messages": [], "max_tokens": 2}),
        ("/v1/messages", {"messages": [{"role": "wizard", "content": "x"}], "max_tokens": 2}),
        ("/v1/completions", {"prompt": "x", "top_k": 2**40}),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}),
        ("/api/generate", {"model": "m", "prompt": "x", "options": {"top_k": 2**40}}),
    ],
)
def test_invalid_requests_are_400_in_the_dialects_shape(
    serve_engine: Serve, path: str, body: dict[str, Any]
) -> None:
    server = serve_engine(ScriptedEngine())
    response = server.client().post(path, json=body)
    assert response.status_code == 400, response.text
    assert_error_shape(path, response.json())


def test_nan_and_out_of_range_numbers_are_refused(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    with server.client() as client:
        for path, raw in (
            ("/api/v1/generate", '{"prompt": "x", "temperature": NaN}'),
            ("/api/v1/generate", '{"prompt": "x", "presence_penalty": Infinity}'),
            ("/api/v1/generate", '{"prompt": "x", "top_k": 99999999999}'),
            ("/v1/completions", '{"prompt": "x", "temperature": NaN}'),
            ("/v1/messages", '{"messages": [], "max_tokens": 1, "temperature": -Infinity}'),
        ):
            response = client.post(path, content=raw)
            assert 400 <= response.status_code < 500, (path, raw, response.text)
            assert_error_shape(path, response.json())


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/nothing-here", 404),
        ("GET", "/v1/chat/completions", 405),
        ("GET", "/v1/messages", 405),
        ("GET", "/api/nothing-here", 404),
        ("GET", "/api/extra/nothing-here", 404),
    ],
)
def test_unknown_paths_and_methods_answer_in_the_dialects_shape(
    serve_engine: Serve, method: str, path: str, status: int
) -> None:
    server = serve_engine(ScriptedEngine())
    response = server.client().request(method, path)
    assert response.status_code == status
    assert_error_shape(path, response.json())


def test_version_says_whether_the_models_own_template_is_used(serve_engine: Serve) -> None:
    plain = serve_engine(ScriptedEngine())
    assert plain.client().get("/api/extra/version").json()["jinja"] is False
    template = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}", "llama")
    own = serve_engine(ScriptedEngine(chat_template=template))
    assert own.client().get("/api/extra/version").json()["jinja"] is True


def test_anthropic_message_start_carries_the_prompt_size(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    body = {"messages": USER, "max_tokens": 3, "stream": True}
    with server.client() as client, client.stream("POST", "/v1/messages", json=body) as response:
        events = [event.json() for event in iter_sse(response) if event.data]
    start = events[0]["message"]["usage"]["input_tokens"]
    delta = next(e for e in events if e["type"] == "message_delta")["usage"]["input_tokens"]
    assert start > 0 and start == delta


# -- shutdown ------------------------------------------------------------------------------


def _lines(response: httpx.Response) -> Iterator[str]:
    return (line for line in response.iter_lines() if line)


def test_shutdown_gives_every_open_request_its_ending(serve_engine: Serve) -> None:
    """One stream generating, three streams and a non-streamed request waiting in line (their
    headers already sent): a shutdown ends each one properly, in its own dialect."""
    server = serve_engine(ScriptedEngine(pieces=[b"tok "], token_seconds=0.05))
    requests = {
        "kobold": ("/api/extra/generate/stream", {"prompt": "x", "max_length": 10_000}),
        "openai": (
            "/v1/chat/completions",
            {"messages": USER, "max_tokens": 50, "stream": True},
        ),
        "anthropic": ("/v1/messages", {"messages": USER, "max_tokens": 50, "stream": True}),
        "ollama": ("/api/chat", {"model": "m", "messages": USER}),
        "plain": ("/v1/completions", {"prompt": "x", "max_tokens": 50}),
    }
    results: dict[str, Any] = {}
    first_token = threading.Event()

    def run(name: str) -> None:
        path, body = requests[name]
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            if name == "plain":
                response = client.post(path, json=body)
                results[name] = (response.status_code, response.json())
                return
            with client.stream("POST", path, json=body) as response:
                lines = []
                for line in _lines(response):
                    lines.append(line)
                    if name == "kobold":
                        first_token.set()
                results[name] = lines

    kobold = threading.Thread(target=run, args=("kobold",))
    kobold.start()
    assert first_token.wait(30)
    others = [threading.Thread(target=run, args=(name,)) for name in list(requests)[1:]]
    for thread in others:
        thread.start()
    with server.client() as client:
        while client.get("/api/extra/perf").json()["queue"] < len(others):
            time.sleep(0.02)  # waiting for the requests to be queued, not for a result
    started = time.monotonic()
    server.shut_down()
    stopped_in = time.monotonic() - started
    for thread in [kobold, *others]:
        thread.join(30)

    # The endings, read without their SSE ids (every event has one).
    kobold_lines = _without_ids(results["kobold"])
    assert kobold_lines[-4:-2] == ["event: error", kobold_lines[-3]]
    assert "shutting down" in kobold_lines[-3]
    assert json.loads(kobold_lines[-1].removeprefix("data: "))["finish_reason"] == "error"

    openai_lines = _without_ids(results["openai"])
    assert openai_lines[-1] == "data: [DONE]"
    assert (
        "shutting down" in json.loads(openai_lines[-2].removeprefix("data: "))["error"]["message"]
    )

    anthropic_lines = _without_ids(results["anthropic"])
    assert anthropic_lines[-4] == "event: error" and "shutting down" in anthropic_lines[-3]
    assert anthropic_lines[-2:] == ["event: message_stop", 'data: {"type": "message_stop"}']

    ollama_lines = [json.loads(line) for line in results["ollama"]]
    assert "shutting down" in ollama_lines[-2]["error"]
    assert ollama_lines[-1]["done"] is True and ollama_lines[-1]["done_reason"] == "unload"

    status, body = results["plain"]
    assert status == 503 and body["detail"]["type"] == "service_unavailable"
    print(f"in-process shutdown with 5 open requests took {stopped_in:.2f}s")


# -- a client that stops reading -----------------------------------------------------------


class _RecordingLog(RequestLog):
    def __init__(self) -> None:
        super().__init__(quiet=True)
        self.jobs: list[Job] = []

    def finished(self, job: Job) -> None:
        self.jobs.append(job)


def test_a_client_that_stops_reading_is_dropped_and_others_are_served(
    serve_engine: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    log = _RecordingLog()
    engine = ScriptedEngine(pieces=[b"x" * 1000], token_seconds=0.0002)
    server = serve_engine(engine, request_log=log, max_pending_events=64)
    port = int(server.base_url.rsplit(":", 1)[1])
    body = json.dumps({"prompt": "x", "max_length": 1_000_000}).encode()
    caplog.set_level(logging.WARNING, logger="server.core.scheduling.job")
    with socket.socket() as slow:
        # A small receive window, and never a read: the server's buffers fill and stay full.
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", port))
        slow.sendall(
            b"POST /api/extra/generate/stream HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        # Another user is served although the slow stream's generation would take 1000 s.
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            other = client.post("/api/v1/generate", json={"prompt": "y", "max_length": 3})
        assert other.status_code == 200
        assert other.json()["results"][0]["text"] == "x" * 3000
        # The other request may end first: the slow one is dropped once its unread events pile up.
        wait_for(lambda: len(log.jobs) == 2, timeout=60)
        (dropped,) = [job for job in log.jobs if job.outcome and job.outcome.completion_tokens != 3]
        assert dropped.outcome is not None and dropped.outcome.completion_tokens < 1_000_000
        assert "the client stopped reading" in caplog.text
        # Its connection was closed: what the slow client finally reads ends.
        slow.settimeout(30)
        received = 0
        while chunk := slow.recv(1 << 20):
            received += len(chunk)
        assert received > 0


def test_unused_request_fields_are_logged_once_each(
    serve_engine: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve_engine(ScriptedEngine())
    caplog.set_level(logging.INFO, logger="hearth")
    body = {
        "messages": [{"role": "user", "content": "Hi", "cache_control": {}}],
        "max_tokens": 2,
        "future_knob": 1,
    }
    with server.client() as client:
        for _ in range(3):
            assert client.post("/v1/chat/completions", json=body).is_success
        ollama = {"model": "m", "prompt": "x", "stream": False, "options": {"mirostat": 2}}
        assert client.post("/api/generate", json=ollama).is_success
    lines = [r.getMessage() for r in caplog.records if "Ignoring request field" in r.message]
    assert sorted(lines) == sorted(
        [
            "Ignoring request field 'future_knob' on /v1/chat/completions "
            "(Hearth does not use it).",
            "Ignoring request field 'messages[].cache_control' on /v1/chat/completions "
            "(Hearth does not use it).",
            "Ignoring request field 'options.mirostat' on /api/generate (Hearth does not use it).",
        ]
    )


def test_only_declared_sampling_fields_reach_the_engine(serve_engine: Serve) -> None:
    """Schemas accept unknown fields unchecked: a dialect that does not declare a sampling
    field must not pass a same-named unknown one to the engine."""
    engine = ScriptedEngine()
    server = serve_engine(engine)
    with server.client() as client:
        body = {"input": "x", "max_output_tokens": 2, "min_p": "junk", "temperature": 0.3}
        assert client.post("/v1/responses", json=body).is_success
        sampling = engine.requests[-1].sampling
        assert (sampling.min_p, sampling.temperature) == (0.0, 0.3)
        chat = {"messages": USER, "max_tokens": 2, "min_p": 0.2, "repetition_penalty": 1.2}
        assert client.post("/v1/chat/completions", json=chat).is_success
        sampling = engine.requests[-1].sampling
        assert (sampling.min_p, sampling.rep_pen) == (0.2, 1.2)
        kobold = {"prompt": "x", "max_length": 2, "sampler_seed": 5, "rep_pen_range": 64}
        assert client.post("/api/v1/generate", json=kobold).is_success
        sampling = engine.requests[-1].sampling
        assert (sampling.seed, sampling.rep_pen_range) == (5, 64)


def _without_ids(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("id: ")]
