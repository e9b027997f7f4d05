"""Hardening rows against `python -m server` on the bundled model, over real HTTP: shutdown
endings, oversized bodies, odd text, unusable schemas, the tokenizer under concurrent use."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.support.error_shapes import assert_error_shape
from tests.support.real_server import STREAM, perf, wait_for
from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
USER: list[openai.types.chat.ChatCompletionMessageParam] = [
    {"role": "user", "content": "Tell me a long story about a lighthouse."}
]


def rss_kib(server: RunningServer) -> int:
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])


def test_sigterm_ends_open_streams_properly_and_exits_cleanly(start_hearth: StartHearth) -> None:
    server = start_hearth([])
    assert server.process is not None
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    received: list[str] = []
    failure: list[BaseException] = []
    first_text = threading.Event()

    def chat() -> None:
        try:
            stream = client.chat.completions.create(
                model="m",
                messages=USER,
                max_tokens=2000,
                stream=True,
                extra_body={"ban_eos_token": True},
            )
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    received.append(chunk.choices[0].delta.content)
                    first_text.set()
        except BaseException as exc:  # what the client raised is what we check
            failure.append(exc)

    reader = threading.Thread(target=chat)
    reader.start()
    assert first_text.wait(60)
    printed = len(server.output)
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    code = server.process.wait(timeout=30)  # it exits by itself: nobody kills it
    exited_in = time.monotonic() - started
    reader.join(30)
    assert code == 0
    server.wait_for_output("Hearth stopped.", after=printed)
    assert received, "text arrived before the shutdown"
    assert failure and isinstance(failure[0], openai.APIError)
    assert "shutting down" in str(failure[0])
    print(f"SIGTERM with a running stream: exit 0 after {exited_in:.2f}s")


def test_64_mb_body_is_refused_before_it_is_read(hearth: RunningServer) -> None:
    port = int(hearth.base_url.rsplit(":", 1)[1])
    before = rss_kib(hearth)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {64 * 1024 * 1024}\r\n\r\n".encode()
            + b'{"prompt": "'
            + b"a" * 65536
        )
        answer = b""
        while b"}}" not in answer:
            answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413")
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert_error_shape("/v1/completions", body)
    assert "32 MB" in body["error"]["message"]
    assert rss_kib(hearth) - before < 50 * 1024  # nothing like the 64 MB was taken in


def test_lone_surrogates_are_served(hearth: RunningServer) -> None:
    raw = '{"prompt": "Hello \\ud800 world", "max_length": 3, "temperature": 0}'
    with hearth.client() as client:
        for path in ("/api/v1/generate", "/v1/completions"):
            response = client.post(
                path,
                content=raw.replace("max_length", "max_tokens") if path.startswith("/v1") else raw,
            )
            assert response.status_code == 200, (path, response.text)


def test_deep_json_is_a_400_not_a_500(hearth: RunningServer) -> None:
    nested = "[" * 5000 + "]" * 5000
    with hearth.client() as client:
        for path in ("/api/v1/generate", "/v1/chat/completions", "/v1/messages", "/api/chat"):
            response = client.post(path, content=f'{{"x": {nested}}}')
            assert response.status_code == 400, path
            assert_error_shape(path, response.json())


def test_unusable_json_schema_is_a_400_before_the_stream(hearth: RunningServer) -> None:
    unusable = {"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}}
    with hearth.client() as client:
        chat = client.post(
            "/v1/chat/completions",
            json={
                "messages": USER,
                "max_tokens": 5,
                "stream": True,
                "response_format": {"type": "json_schema", "json_schema": {"schema": unusable}},
            },
        )
        assert chat.status_code == 400, chat.text
        assert "JSON schema" in chat.json()["error"]["message"]
        ollama = client.post("/api/chat", json={"model": "m", "messages": USER, "format": unusable})
        assert ollama.status_code == 400 and "JSON schema" in ollama.json()["error"]
    assert perf(hearth)["idle"] == 1


def test_detokenize_during_a_generation_gives_both_their_own_results(
    hearth: RunningServer,
) -> None:
    """/api/extra/detokenize runs on the event loop while the worker thread generates; each
    must read token pieces through its own buffer."""
    body = {
        "prompt": "The history of the lighthouse",
        "max_length": 120,
        "temperature": 0,
        "ban_eos_token": True,
    }
    with hearth.client() as client:
        # The prompt into the cache first: the two generations compared then meet the same
        # cache state, so any difference is the detokenizer's, not the numerics of another cut.
        client.post("/api/v1/generate", json={**body, "max_length": 1})
        alone = client.post("/api/v1/generate", json=body).json()["results"][0]["text"]
        sample = "Lighthouses guided ships along dangerous coasts for centuries. " * 20
        ids = client.post("/api/extra/tokencount", json={"prompt": sample, "special": False})
        token_ids = ids.json()["ids"]
        expected = client.post("/api/extra/detokenize", json={"ids": token_ids}).json()["result"]
        results: dict[str, str] = {}

        def generate() -> None:
            with hearth.client() as other:
                response = other.post("/api/v1/generate", json=body)
                results["text"] = response.json()["results"][0]["text"]

        generating = threading.Thread(target=generate)
        generating.start()
        wait_for(lambda: perf(hearth)["idle"] == 0)
        mismatches = checks = 0
        while generating.is_alive():
            got = client.post("/api/extra/detokenize", json={"ids": token_ids}).json()["result"]
            checks += 1
            mismatches += got != expected
        generating.join()
    assert checks > 5
    assert mismatches == 0
    assert results["text"] == alone


def test_anthropic_message_start_reports_the_prompt_tokens(hearth: RunningServer) -> None:
    client = anthropic.Anthropic(base_url=hearth.base_url, api_key="x", max_retries=0)
    with client.messages.stream(
        model="m", max_tokens=3, messages=[{"role": "user", "content": "Hi there"}]
    ) as stream:
        events = list(stream)
    start = next(e for e in events if e.type == "message_start")
    final = stream.get_final_message()
    assert start.message.usage.input_tokens > 0
    assert start.message.usage.input_tokens == final.usage.input_tokens


def test_queue_stream_of_a_waiting_request_ends_on_shutdown(start_hearth: StartHearth) -> None:
    """A KoboldAI stream still waiting in line when SIGTERM comes gets its ending too."""
    server = start_hearth(["--multiuser", "3"])
    assert server.process is not None
    seen: dict[str, list[str]] = {"running": [], "waiting": []}
    started = threading.Event()

    def stream(name: str) -> None:
        body = {"prompt": "Once", "max_length": 3000, "ban_eos_token": True}
        with (
            httpx.Client(base_url=server.base_url, timeout=60) as client,
            client.stream("POST", STREAM, json=body) as response,
        ):
            for line in response.iter_lines():
                if line:
                    seen[name].append(line)
                    started.set()

    running = threading.Thread(target=stream, args=("running",))
    running.start()
    assert started.wait(60)
    waiting = threading.Thread(target=stream, args=("waiting",))
    waiting.start()
    wait_for(lambda: perf(server)["queue"] == 1)
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == 0
    running.join(30)
    waiting.join(30)
    for name in ("running", "waiting"):
        lines = seen[name]
        assert "event: error" in lines, name
        assert json.loads(lines[-1].removeprefix("data: "))["finish_reason"] == "error", name


@pytest.fixture(scope="module")
def crash_target(start_hearth: StartHearth) -> RunningServer:
    """One server for the requests that once ended the process (found by the fuzzer), shared
    by them: each test checks it still runs after its own request, so a crash fails the test
    that caused it (and those after it). Not `hearth`: a crash must not take the other
    modules' server down too. A server per request cost ~5 s of start each."""
    return start_hearth([])


def test_tool_call_with_penalties_does_not_crash_the_server(crash_target: RunningServer) -> None:
    """Found by the fuzzer: penalties look back over the prompt, and feeding the prompt to the
    whole sampler chain fed it to the tool-call grammar too, which threw a C++ exception that
    ended the process (`Unexpected empty grammar stack`)."""
    server = crash_target
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    messages = [{"role": "user", "content": "What is the weather in Oslo?"}]
    with server.client() as client:
        ollama = client.post(
            "/api/chat",
            json={
                "model": "m",
                "messages": messages,
                "tools": tools,
                "stream": False,
                "options": {"repeat_penalty": 1.3, "presence_penalty": 0.5, "num_predict": 40},
            },
        )
        assert ollama.status_code == 200, ollama.text
        chat = client.post(
            "/v1/chat/completions",
            json={
                "messages": messages,
                "tools": tools,
                "tool_choice": "required",
                "presence_penalty": 1.0,
                # Room for the whole call: one cut at the limit is no call (seen once in CI,
                # a sampled city name running long).
                "max_tokens": 120,
            },
        )
        assert chat.status_code == 200, chat.text
        assert chat.json()["choices"][0]["message"]["tool_calls"]
    assert server.process is not None and server.process.poll() is None


@pytest.mark.parametrize(
    "options",
    [
        {"repeat_penalty": 5e-324},  # 0 in float32: -inf * 0 is NaN
        {"repeat_penalty": 1e-40, "temperature": 0.8},
        {"repeat_penalty": 1e39},
        {"presence_penalty": 1e39},
        {"temperature": 1e-40},
    ],
)
def test_extreme_sampling_values_with_a_grammar_do_not_crash_the_server(
    crash_target: RunningServer, options: dict[str, float]
) -> None:
    """Found by the fuzzer: a repeat penalty of 5e-324 (0 as float32) turned the grammar's
    -inf logits into NaN, greedy picked a token the grammar forbids, and the grammar threw a
    C++ exception that ended the process. Values past float32's range did the same."""
    server = crash_target
    with server.client() as client:
        answer = client.post(
            "/api/generate",
            json={
                "model": "m",
                "prompt": "A JSON object:",
                "format": {},
                "stream": False,
                "options": {"num_predict": 4, **options},
            },
        )
        assert answer.status_code == 200, answer.text
    assert server.process is not None and server.process.poll() is None
