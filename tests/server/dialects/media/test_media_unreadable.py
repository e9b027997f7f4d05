"""Media the edge passed but the engine cannot read (llama.cpp refuses the bytes when the
request starts: server/core/llama/loading/media.py raises MediaError) is the client's fault: a
non-streamed request gets a 400 in its dialect's shape, never a 500; a stream, whose headers
are already sent, ends with the error in-band. Scripted engines that refuse every item stand
in for llama.cpp, on the serial path (one slot) and the batching one (start_sequence)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Callable, Iterator

import httpx

from server.core.scheduling.engine import MediaError
from server.core.scheduling.scheduler import Scheduler
from server.core.types import (
    MEDIA_MARKER,
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    MediaInput,
)
from tests.support import media_bytes as mb
from tests.support.error_shapes import shape_problem
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

REFUSAL = "media item 1 (audio/wav): failed to decode the audio"
WAV = base64.b64encode(mb.wav_bytes()).decode()
PNG = base64.b64encode(mb.png_bytes()).decode()


class UnreadableMediaEngine(ScriptedEngine):
    """Takes images and sounds at admission, then refuses every one when a request starts,
    as LlamaCppEngine does with bytes libmtmd cannot decode."""

    def __init__(self) -> None:
        super().__init__(modalities=frozenset({"audio", "vision"}))

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        if request.media:
            raise MediaError(REFUSAL)
        yield from super().generate(request, cancelled)


class UnreadableMediaBatchEngine(UnreadableMediaEngine):
    """The same with two slots: the batching worker starts its sequences."""

    @property
    def parallel_slots(self) -> int:
        return 2

    def start_sequence(self, request: GenerationRequest, cancelled: threading.Event) -> object:
        next(iter(self.generate(request, cancelled)))  # raises for a request with media
        raise AssertionError("only requests with media are sent here")

    def step(self) -> list[tuple[object, EngineReport]]:
        return []


def openai_audio(server: RunningServer, *, stream: bool = False) -> httpx.Response:
    part = {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hear"}, part]}],
        "max_tokens": 2,
        "stream": stream,
    }
    return httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=30)


def test_a_sound_the_engine_cannot_read_is_a_400_in_each_dialects_shape(
    serve_engine: Callable[..., RunningServer],
) -> None:
    server = serve_engine(UnreadableMediaEngine())
    answer = openai_audio(server)
    assert answer.status_code == 400, answer.text
    assert shape_problem("openai", answer.json()) is None
    assert answer.json()["error"]["message"] == REFUSAL
    ollama = httpx.post(
        f"{server.base_url}/api/chat",
        json={
            "model": "any",
            "messages": [{"role": "user", "content": "See", "images": [PNG]}],
            "stream": False,
        },
        timeout=30,
    )
    assert ollama.status_code == 400, ollama.text
    assert shape_problem("ollama", ollama.json()) is None
    # The server serves on: a request without media is answered.
    plain = {"model": "any", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert httpx.post(f"{server.base_url}/v1/chat/completions", json=plain).status_code == 200


def test_a_stream_already_begun_ends_with_the_refusal_in_band(
    serve_engine: Callable[..., RunningServer],
) -> None:
    server = serve_engine(UnreadableMediaEngine())
    answer = openai_audio(server, stream=True)
    assert answer.status_code == 200  # the headers went before the engine started
    events = [line[6:] for line in answer.text.splitlines() if line.startswith("data: {")]
    errors = [json.loads(event)["error"] for event in events if '"error"' in event]
    assert [error["message"] for error in errors] == [REFUSAL]


def test_the_batching_worker_marks_a_sequence_whose_media_cannot_be_read_as_rejected() -> None:
    wav = mb.wav_bytes()
    request = GenerationRequest(
        request_id="heard",
        prompt=f"Hear {MEDIA_MARKER} it",
        max_tokens=2,
        media=(MediaInput("audio", wav, "audio/wav"),),
    )

    async def run() -> tuple[str, GenerationOutcome]:
        scheduler = Scheduler(UnreadableMediaBatchEngine(), multiuser=10)
        try:
            job = scheduler.submit(request)
            scheduler.start()
            return await scheduler.collect(job)
        finally:
            scheduler.stop()

    _text, outcome = asyncio.run(run())
    assert outcome.finish_reason is FinishReason.ERROR
    assert outcome.input_rejected and outcome.error == REFUSAL
