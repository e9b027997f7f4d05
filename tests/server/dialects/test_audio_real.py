"""Sounds through a real audio projector (`--mmproj`: a tiny Ultravox projector with random
weights written by the test, tests/support/audio_projector_gguf.py), on the real model: `/props`
and `/api/show` saying "audio" and not "vision"; OpenAI `input_audio` parts through the official
client, streamed, the sound's tokens counted; llama-server's `multimodal_data`; two sounds
moving the next token's logits apart and one sound read twice the same; an image sent to this
server, a cut or unreadable sound, and one only the decoder finds unreadable, a 400 in the
dialect's shape."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import ollama
import openai
import pytest

from app.model_info import describe_projector
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.media.media import check_media
from tests.support.audio_projector_gguf import (
    media_tokens_per_sound,
    session_audio_projector,
    tone_wav,
    wav_data_size,
)
from tests.support.logits import LIKELY, SHAPE_TOLERANCE, native
from tests.support.media_bytes import flac_bytes, mp3_bytes, png_bytes
from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
PER_SOUND = media_tokens_per_sound(1.0)
TONE = tone_wav(440)  # one second of A4
HISS = tone_wav(0, noise=0.8)  # one second of white noise


@pytest.fixture(scope="module")
def audio_projector(tmp_path_factory: pytest.TempPathFactory, bundled: Path) -> Path:
    return session_audio_projector(tmp_path_factory, bundled)


@pytest.fixture(scope="module")
def hearing(start_hearth: StartHearth, audio_projector: Path) -> RunningServer:
    return start_hearth(["--mmproj", str(audio_projector), "--contextsize", "2048"])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def gpt(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0)


def audio_part(sound: bytes, fmt: str = "wav") -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": b64(sound), "format": fmt}}


def openai_ask(server: RunningServer, *parts: dict[str, Any], **extra: Any) -> Any:
    content = [{"type": "text", "text": "What do you hear?"}, *parts]
    return gpt(server).chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": content}],  # type: ignore[list-item]
        max_tokens=3,
        temperature=0,
        **extra,
    )


def first_token(server: RunningServer, sound: bytes, **extra: Any) -> dict[str, Any]:
    """llama-server's /completion answer (greedy, one token, the top 20 log-probabilities)
    to a prompt with `sound` in it."""
    body = {
        "prompt": {
            "prompt_string": "Listen: <__media__> It sounds like",
            "multimodal_data": [b64(sound)],
        },
        "n_predict": 1,
        "n_probs": 20,
        "temperature": 0,
        **extra,
    }
    answer = native(server, body)
    assert answer["tokens_evaluated"] >= PER_SOUND
    return answer


def top_logprobs(answer: dict[str, Any]) -> dict[int, float]:
    [first] = answer["completion_probabilities"]
    return {token["id"]: token["logprob"] for token in first["top_logprobs"]}


def largest_move(one: dict[int, float], other: dict[int, float]) -> float:
    """How far the likely tokens' log-probabilities (in either answer) moved between them; a
    likely token missing from the other's top counts as moved by more than any tolerance."""
    moves = [
        abs(logprob - theirs[token]) if token in theirs else float("inf")
        for mine, theirs in ((one, other), (other, one))
        for token, logprob in mine.items()
        if logprob > LIKELY
    ]
    return max(moves, default=0.0)


@pytest.mark.model
def test_the_server_and_the_launcher_say_it_hears_and_does_not_see(
    hearing: RunningServer, audio_projector: Path
) -> None:
    props = httpx.get(f"{hearing.base_url}/props", timeout=10).json()
    assert props["modalities"] == {"vision": False, "audio": True}
    capabilities = ollama.Client(host=hearing.base_url).show("any").capabilities or []
    assert "audio" in capabilities and "vision" not in capabilities
    # The launcher's line under its projector field, from the header alone.
    facts = describe_projector(audio_projector)
    assert facts.modalities == ("audio",) and not facts.problem
    assert facts.text.startswith("audio · ultravox projector · ")


@pytest.mark.model
def test_openai_input_audio_streams_a_reply_and_counts_the_sounds_tokens(
    hearing: RunningServer,
) -> None:
    stream = gpt(hearing).chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": [audio_part(TONE)]}],  # type: ignore[list-item]
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta]
    assert any(deltas)  # the reply streamed, token by token
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    heard = openai_ask(hearing, audio_part(TONE))
    text = openai_ask(hearing)
    assert heard.usage.prompt_tokens - text.usage.prompt_tokens >= PER_SOUND
    assert chunks[-1].usage.prompt_tokens >= PER_SOUND
    # MP3 too (two silent frames after an ID3 tag: 52 ms, one window like any short sound).
    mp3 = openai_ask(hearing, audio_part(mp3_bytes(id3=True), "mp3"))
    assert mp3.usage.prompt_tokens == heard.usage.prompt_tokens
    flac = openai_ask(hearing, audio_part(flac_bytes(), "flac"))  # one frame: 4 ms
    assert flac.usage.prompt_tokens == heard.usage.prompt_tokens


@pytest.mark.model
def test_two_sounds_give_two_next_tokens_and_one_sound_twice_the_same(
    hearing: RunningServer,
) -> None:
    tone = top_logprobs(first_token(hearing, TONE))
    hiss = top_logprobs(first_token(hearing, HISS))
    # Read afresh (not from the prompt cache): the same sound encodes to the same tokens.
    again = top_logprobs(first_token(hearing, TONE, cache_prompt=False))
    assert largest_move(tone, again) < SHAPE_TOLERANCE
    assert largest_move(tone, hiss) > SHAPE_TOLERANCE  # another sound, another next token
    # Sent again, the sound comes from the slot's cache (known by its hash), whole.
    cached = first_token(hearing, TONE)
    assert cached["timings"]["cache_n"] >= PER_SOUND
    assert largest_move(tone, top_logprobs(cached)) < SHAPE_TOLERANCE


@pytest.mark.model
def test_llama_server_multimodal_data_takes_a_wav(hearing: RunningServer) -> None:
    answer = native(
        hearing,
        {
            "prompt": {"prompt_string": "Hear <__media__> now:", "multimodal_data": [b64(HISS)]},
            "n_predict": 2,
        },
    )
    assert answer["tokens_evaluated"] >= PER_SOUND
    assert answer["tokens_predicted"] == 2
    # Two sounds in one prompt: each its own tokens.
    both = native(
        hearing,
        {
            "prompt": {
                "prompt_string": "First <__media__> then <__media__> and",
                "multimodal_data": [b64(TONE), b64(HISS)],
            },
            "n_predict": 1,
        },
    )
    assert both["tokens_evaluated"] >= 2 * PER_SOUND


@pytest.mark.model
def test_an_image_for_a_server_that_only_hears_is_a_400_in_each_dialects_shape(
    hearing: RunningServer,
) -> None:
    image = {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{b64(png_bytes(16, 16))}"},
    }
    with pytest.raises(openai.BadRequestError) as refused:
        openai_ask(hearing, image)
    assert "image input is not supported" in str(refused.value)
    assert "takes audio only" in str(refused.value)
    with pytest.raises(ollama.ResponseError) as not_seen:
        ollama.Client(host=hearing.base_url).chat(
            model="any",
            messages=[{"role": "user", "content": "x", "images": [b64(png_bytes(16, 16))]}],
        )
    assert not_seen.value.status_code == 400
    assert "image input is not supported" in str(not_seen.value.error)


@pytest.mark.model
def test_a_cut_or_unreadable_sound_is_a_400(hearing: RunningServer) -> None:
    # A WAV whose data chunk promises a second of samples and holds a tenth of it.
    cut = TONE[: len(TONE) - wav_data_size(TONE) * 9 // 10]
    with pytest.raises(openai.BadRequestError) as truncated:
        openai_ask(hearing, audio_part(cut))
    assert "truncated" in str(truncated.value)
    with pytest.raises(openai.BadRequestError) as not_audio:
        openai_ask(hearing, audio_part(b"hello, this is text, not a sound"))
    assert "not audio" in str(not_audio.value)
    with pytest.raises(openai.BadRequestError) as mislabelled:
        openai_ask(hearing, audio_part(png_bytes(16, 16), "wav"))
    assert "declared as 'wav'" in str(mislabelled.value)
    # The server serves on, and a whole sound still reads.
    assert openai_ask(hearing, audio_part(TONE)).usage.prompt_tokens >= PER_SOUND


@pytest.mark.model
def test_a_sound_the_edge_passes_but_the_decoder_cannot_read_is_a_400(
    hearing: RunningServer,
) -> None:
    """A FLAC whose frame header's checksum is damaged: whole by its structure (the edge takes
    it), but llama.cpp's decoder finds no frame to read once the request starts. The engine's
    refusal is the client's 400, as the edge's would be, not the server's 500."""
    flac = flac_bytes()
    damaged = flac[:47] + bytes([flac[47] ^ 1]) + flac[48:]  # the CRC-8 after the header
    assert check_media(damaged, Dialect.OPENAI, expect="audio").mime == "audio/flac"
    with pytest.raises(openai.BadRequestError) as refused:
        openai_ask(hearing, audio_part(damaged, "flac"))
    assert "media item 1 (audio/flac)" in str(refused.value)
    body = {
        "prompt": {"prompt_string": "Hear <__media__> now:", "multimodal_data": [b64(damaged)]},
        "n_predict": 1,
    }
    native_refusal = httpx.post(f"{hearing.base_url}/completion", json=body, timeout=120)
    assert native_refusal.status_code == 400, native_refusal.text
    assert openai_ask(hearing, audio_part(TONE)).usage.prompt_tokens >= PER_SOUND


def with_data_size(wav: bytes, size: int) -> bytes:
    """The WAV with its data chunk header claiming `size` bytes."""
    at = wav.index(b"data") + 4
    return wav[:at] + size.to_bytes(4, "little") + wav[at + 4 :]


def test_a_wav_cut_short_or_without_samples_is_refused_before_decoding() -> None:
    """llama.cpp's decoder reads what a cut WAV holds; the edge says it was cut (as it does
    for images), and refuses a WAV llama.cpp would fail on later, as the 500 of a request."""

    def refusal(raw: bytes) -> str:
        with pytest.raises(APIError) as refused:
            check_media(raw, Dialect.OPENAI, expect="audio", where="m[0]")
        assert refused.value.status == 400
        return refused.value.message

    size = wav_data_size(TONE)
    cut = TONE[: len(TONE) - size * 9 // 10]
    assert refusal(cut) == (
        f"m[0]: audio is truncated ({len(cut)} bytes of a WAV whose data chunk says {size} bytes)"
    )
    assert "no samples" in refusal(tone_wav(440, 0))
    assert "without its data chunk" in refusal(TONE[: TONE.index(b"data")])
    fmt = TONE.index(b"fmt ")
    assert "no format" in refusal(TONE[:fmt] + b"junk" + TONE[fmt + 4 :])
    # A writer that streamed its samples leaves the length unknown (0 or 0xFFFFFFFF): the
    # samples run to the end of the file.
    for unknown in (0, 0xFFFFFFFF):
        assert check_media(with_data_size(TONE, unknown), Dialect.OPENAI, expect="audio").kind
    # Padding after the samples, and chunks after them (LIST), are fine.
    assert check_media(TONE + b"LIST\x04\x00\x00\x00INFO", Dialect.OPENAI, expect="audio")
