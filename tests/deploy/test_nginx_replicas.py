"""Two real Hearths behind a real nginx running deploy/nginx/hearth.conf, on loopback ports:
streams pass through token by token, both instances work, a busy instance's 503 sends the
request on (and when every instance is busy the client gets KoboldCpp's busy body, never a
502), and KoboldAI's genkey polling and abort reach the instance that runs the request."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support.nginx import start_nginx, stop_nginx
from tests.support.servers import RunningServer, free_port, wait_until_ready

StartHearth = Callable[[Sequence[str]], RunningServer]
BUSY_BODY = {
    "detail": {"msg": "Server is busy; please try again later.", "type": "service_unavailable"}
}


@dataclass
class Replicas:
    proxy_url: str
    instances: list[RunningServer]


@pytest.fixture(scope="module")
def replicas(
    start_hearth: StartHearth, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    """Two Hearths (`--multiuser 3`: one running and two waiting each) behind nginx. One
    thread each: two instances of 2 threads on 2 cores spin at ggml's barriers against each
    other and fall to about a token per second."""
    instances = [start_hearth(["--multiuser", "3", "--threads", "1"]) for _ in range(2)]
    folder = tmp_path_factory.mktemp("nginx")
    port = free_port()
    addresses = [server.base_url.removeprefix("http://") for server in instances]
    nginx = start_nginx(folder, addresses, port)
    proxy_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proxy_url)
        yield Replicas(proxy_url, instances)
    finally:
        stop_nginx(nginx)


@pytest.fixture(autouse=True)
def idle_instances(replicas: Replicas) -> None:
    """Each test starts with every place free: the streams an earlier test left are cancelled
    as each instance notices its client is gone, which takes a moment."""
    for server in replicas.instances:
        deadline = time.monotonic() + 60
        while True:
            perf = httpx.get(f"{server.base_url}/api/extra/perf", timeout=10).json()
            if perf["idle"] == 1 and perf["queue"] == 0:
                break
            assert time.monotonic() < deadline, f"{server.base_url} stayed busy: {perf}"
            time.sleep(0.05)  # a poll interval, not a wait for something to happen


@dataclass
class StreamRecord:
    """What one client saw of a streamed /completion through the proxy."""

    status: int = 0
    upstream: str = ""
    body: bytes = b""
    reads_with_text: set[int] = field(default_factory=set)  # which network reads had tokens
    tokens_predicted: int = -1  # from the last event


def stream_completion(
    url: str,
    body: dict[str, object],
    record: StreamRecord,
    once_answered: Callable[[], object] | None = None,
) -> None:
    """Stream llama-server's /completion, noting in which network read each token came; with
    `once_answered`, call it as soon as the status (and a refusal's body) is in, then leave."""
    with (
        httpx.Client(timeout=300) as client,
        client.stream("POST", f"{url}/completion", json={**body, "stream": True}) as response,
    ):
        record.status = response.status_code
        record.upstream = response.headers.get("x-hearth-upstream", "")
        if once_answered is not None:
            if response.status_code != 200:
                record.body = response.read()
            once_answered()
            return
        pending = b""
        for read, chunk in enumerate(response.iter_raw()):
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            for event in events:
                data = [line for line in event.splitlines() if line.startswith(b"data: ")]
                if not data:
                    continue  # a keep-alive comment while waiting in line
                parsed = json.loads(data[0].removeprefix(b"data: "))
                if parsed.get("content"):
                    record.reads_with_text.add(read)
                if parsed.get("stop"):
                    record.tokens_predicted = parsed["tokens_predicted"]


def run_together(count: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
        assert not thread.is_alive()


def test_six_streams_are_served_token_by_token_by_both_instances(replicas: Replicas) -> None:
    """Six concurrent streams, room for three on each instance: all served in full, their
    tokens arriving in many network reads (not held back by the proxy), on both instances."""
    records = [StreamRecord() for _ in range(6)]
    body = {"prompt": "The river", "n_predict": 24, "ignore_eos": True, "temperature": 0}
    run_together(6, lambda i: stream_completion(replicas.proxy_url, body, records[i]))
    assert [r.status for r in records] == [200] * 6
    assert [r.tokens_predicted for r in records] == [24] * 6
    for record in records:  # one write per token batch reaches the client as it is sent
        assert len(record.reads_with_text) >= 4, record
    addresses = {server.base_url.removeprefix("http://") for server in replicas.instances}
    assert {record.upstream for record in records} == addresses


LONG_STREAM = {"prompt": "The river", "n_predict": 4000, "ignore_eos": True}


@contextmanager
def held_streams(url: str, count: int) -> Iterator[list[StreamRecord]]:
    """`count` long streams opened at once, each holding its place (running or waiting) until
    the block ends; inside it, every one has its status (and a refusal its body)."""
    records = [StreamRecord() for _ in range(count)]
    answered = threading.Barrier(count + 1)
    leave = threading.Event()

    def client(record: StreamRecord) -> None:
        stream_completion(url, LONG_STREAM, record, lambda: (answered.wait(), leave.wait()))

    threads = [threading.Thread(target=client, args=(record,)) for record in records]
    for thread in threads:
        thread.start()
    try:
        answered.wait(timeout=300)
        yield records
    finally:
        leave.set()
        for thread in threads:
            thread.join(timeout=60)


def test_eight_at_once_are_six_served_and_two_busy_answers(replicas: Replicas) -> None:
    """Eight long streams at once where six fit: the two that find every instance full get
    KoboldCpp's 503 busy body (nginx tried each instance once), never a 502."""
    with held_streams(replicas.proxy_url, 8) as records:
        pass  # all eight have their answer while the six are still running
    statuses = sorted(record.status for record in records)
    assert statuses == [200] * 6 + [503] * 2
    for record in records:
        if record.status == 503:
            assert json.loads(record.body) == BUSY_BODY


def test_a_busy_instance_passes_the_request_on(replicas: Replicas) -> None:
    """With one instance full (three long streams sent to it directly, which nginx does not
    count), requests through the proxy are all served: those nginx first sends to the full
    instance get its 503 and move on to the other one."""
    full, other = replicas.instances
    with held_streams(full.base_url, 3) as records:
        assert [record.status for record in records] == [200] * 3
        tried = []
        for _ in range(4):
            answer = httpx.post(
                f"{replicas.proxy_url}/v1/completions",
                json={"prompt": "Hi", "max_tokens": 2},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            tried.append(answer.headers["x-hearth-upstream"])
    other_address = other.base_url.removeprefix("http://")
    assert all(upstreams.endswith(other_address) for upstreams in tried), tried
    full_address = full.base_url.removeprefix("http://")
    assert any(upstreams.startswith(full_address + ",") for upstreams in tried), tried


@dataclass
class KoboldStream:
    """A KoboldAI generate stream with a genkey, read in a thread."""

    proxy_url: str
    genkey: str
    started: threading.Event = field(default_factory=threading.Event)
    events: list[dict[str, object]] = field(default_factory=list)
    upstream: str = ""

    def run(self) -> None:
        body = {"prompt": "The river", "max_length": 4000, "genkey": self.genkey}
        url = f"{self.proxy_url}/api/extra/generate/stream"
        with httpx.Client(timeout=300) as client, client.stream("POST", url, json=body) as answer:
            self.upstream = answer.headers.get("x-hearth-upstream", "")
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    self.events.append(json.loads(line.removeprefix("data: ")))
                    self.started.set()


def test_genkey_polling_and_abort_reach_the_instance_that_runs_it(replicas: Replicas) -> None:
    """KoboldAI's generate with a genkey, then its check and abort by genkey, all through the
    proxy: the check sees that generation's text, and the abort ends it, for keys whichever
    instance their hash picks."""
    proxy = replicas.proxy_url
    for key in ("alpha", "bravo", "charlie", "delta"):
        stream = KoboldStream(proxy, key)
        runner = threading.Thread(target=stream.run)
        runner.start()
        assert stream.started.wait(timeout=120), "no token came back"
        check = httpx.post(f"{proxy}/api/extra/generate/check", json={"genkey": key}, timeout=30)
        assert check.headers["x-hearth-upstream"] == stream.upstream
        assert check.json()["results"][0]["text"], f"the check for {key} found nothing"
        abort = httpx.post(f"{proxy}/api/extra/abort", json={"genkey": key}, timeout=30)
        assert abort.json()["success"] == "true", abort.text
        runner.join(timeout=120)
        assert not runner.is_alive(), "the abort did not reach the generation"
        assert stream.events[-1].get("finish_reason") == "abort"


def test_an_instance_that_is_down_is_skipped(replicas: Replicas, tmp_path: Path) -> None:
    """With one instance's address refusing connections, every request is served by the
    other (nginx moves on after a connection error)."""
    live = replicas.instances[0].base_url.removeprefix("http://")
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    port = free_port()
    nginx = start_nginx(tmp_path, [dead, live], port)
    try:
        proxy = f"http://127.0.0.1:{port}"
        wait_until_ready(proxy)
        for _ in range(4):
            answer = httpx.post(
                f"{proxy}/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=60
            )
            assert answer.status_code == 200
            assert answer.headers["x-hearth-upstream"].endswith(live)
    finally:
        stop_nginx(nginx)
