"""KoboldAI protocol details over real HTTP, with a scripted engine for speed and failure
injection. The same behaviours on the real model are in tests/server/process/test_real_model.py."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]
STREAM = "/api/extra/generate/stream"


def test_stream_framing_and_headers(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(pieces=[b"Hi", b" there"]))
    with (
        server.client() as client,
        client.stream("POST", STREAM, json={"prompt": "x", "max_length": 4}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        events = list(iter_sse(response))
    assert all(e.event == "message" for e in events)
    assert [e.json() for e in events] == [
        {"token": "Hi", "finish_reason": None},
        {"token": " there", "finish_reason": None},
        {"token": "Hi", "finish_reason": None},
        {"token": " there", "finish_reason": None},
        {"token": "", "finish_reason": "length"},
    ]
    assert "[DONE]" not in "".join(e.data for e in events)


def test_end_of_sequence_reports_stop(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(end_after=2))
    with server.client() as client:
        result = client.post("/api/v1/generate", json={"prompt": "x"}).json()["results"][0]
    assert result["finish_reason"] == "stop"
    assert result["completion_tokens"] == 2


def test_failure_mid_stream_is_reported_in_band_and_server_keeps_serving(
    serve_engine: Serve,
) -> None:
    server = serve_engine(ScriptedEngine(pieces=[b"ok"], fail_after=2))
    with server.client() as client:
        with client.stream("POST", STREAM, json={"prompt": "x", "max_length": 10}) as response:
            events = list(iter_sse(response))
        assert [e.event for e in events] == ["message", "message", "error", "message"]
        assert events[2].json()["detail"]["type"] == "server_error"
        assert events[-1].json() == {"token": "", "finish_reason": "error"}

        failed = client.post("/api/v1/generate", json={"prompt": "x", "max_length": 10})
        assert failed.status_code == 500
        assert failed.json()["detail"]["msg"] == "scripted failure"
        ok = client.post("/api/v1/generate", json={"prompt": "x", "max_length": 2})
        assert ok.status_code == 200 and ok.json()["results"][0]["text"] == "okok"


def test_keepalive_comments_while_waiting_in_line(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(pieces=[b"a"], token_seconds=0.05), keepalive_seconds=0.1)
    first_started = threading.Event()

    def occupy() -> None:
        with (
            httpx.Client(base_url=server.base_url, timeout=30) as c,
            c.stream("POST", STREAM, json={"prompt": "x", "max_length": 20}) as r,
        ):
            for _ in iter_sse(r):
                first_started.set()

    occupant = threading.Thread(target=occupy)
    occupant.start()
    assert first_started.wait(10)
    with (
        server.client() as client,
        client.stream("POST", STREAM, json={"prompt": "y", "max_length": 1}) as response,
    ):
        events = list(iter_sse(response))
    occupant.join()
    # Comment lines only (no blank line: server/dialects/streams/streaming.py), so they come with
    # the next event.
    keepalives = [c for e in events for c in e.comments if "keep-alive" in c]
    assert keepalives, "a queued stream should receive keep-alive comments"
    assert events[-1].json()["finish_reason"] == "length"


def test_bad_input_gets_real_4xx_in_koboldcpp_shape(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    with server.client() as client:
        for path in ("/api/v1/generate", STREAM):
            broken = client.post(
                path, content=b"{not json", headers={"content-type": "application/json"}
            )
            assert broken.status_code == 400
            assert broken.json()["detail"]["type"] == "bad_input"
            wrong_type = client.post(path, json={"prompt": "x", "max_length": "many"})
            assert wrong_type.status_code == 422
            assert "max_length" in wrong_type.json()["detail"]["msg"]
            not_object = client.post(path, json=["prompt"])
            assert not_object.status_code == 400
        assert client.post("/api/extra/tokencount", json={"prompt": 5}).status_code == 422
        assert client.post("/api/extra/detokenize", json={"ids": [999]}).status_code == 400
        # The server is still fine afterwards.
        assert client.post("/api/v1/generate", json={"prompt": "x", "max_length": 1}).is_success


def test_password_protects_text_endpoints_only(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(password="s3cret"))
    protected = [
        ("POST", "/api/v1/generate", {"prompt": "x", "max_length": 1}),
        ("POST", STREAM, {"prompt": "x", "max_length": 1}),
        ("POST", "/api/extra/generate/check", {}),
        ("GET", "/api/extra/generate/check", None),
        ("POST", "/api/extra/abort", {}),
        ("POST", "/api/extra/tokencount", {"prompt": "x"}),
        ("POST", "/api/extra/detokenize", {"ids": [65]}),
    ]
    with server.client() as client:
        for method, path, body in protected:
            refused = client.request(method, path, json=body)
            assert refused.status_code == 401, path
            assert refused.json() == {
                "detail": {
                    "error": "Unauthorized",
                    "msg": "Authentication key is missing or invalid.",
                    "type": "unauthorized",
                }
            }
            wrong = client.request(
                method, path, json=body, headers={"Authorization": "Bearer nope"}
            )
            assert wrong.status_code == 401, path
            allowed = client.request(
                method, path, json=body, headers={"Authorization": "Bearer s3cret"}
            )
            assert allowed.status_code == 200, path
        assert client.get("/api/extra/perf").status_code == 200
        assert client.get("/api/v1/model").json() == {"result": "koboldcpp/protected-model"}
        named = client.get("/api/v1/model", headers={"Authorization": "Bearer s3cret"})
        assert named.json() == {"result": "koboldcpp/scripted"}
        assert client.get("/api/extra/version").json()["protected"] is True


def test_home_page_is_the_bundled_chat_page(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    page = httpx.get(server.base_url + "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "<title>Hearth chat</title>" in page.text and "/v1/chat/completions" in page.text
    assert "http" not in page.text.split("<script>")[0].replace("http-equiv", "")  # no CDN
