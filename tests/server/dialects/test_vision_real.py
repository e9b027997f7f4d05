"""Images on every wire, through the official clients, on the real model with a projector
(`--mmproj`: a tiny Gemma 3 projector with random weights written by the test, so what the
model "sees" is noise, but it is the model reading the image): OpenAI chat `image_url` parts,
Anthropic `image` blocks (also inside a `tool_result`), Ollama `images` on chat and generate,
KoboldAI's `images`, llama-server's `multimodal_data`; streamed and not; the image's tokens
counted in `usage`; `/props` and `/api/show` saying "vision"; bad media a 400 in each
dialect's shape, and an image sent to a server without a projector too."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest

from tests.support.media_bytes import huge_png, jpeg_bytes, wav_bytes
from tests.support.projector_gguf import media_tokens_per_image, png_bytes
from tests.support.servers import RunningServer

RED, BLUE = (220, 30, 30), (20, 40, 230)
PER_IMAGE = media_tokens_per_image(32, 4)


def png64(color: tuple[int, int, int]) -> str:
    return base64.b64encode(png_bytes(16, 16, color)).decode()


# `seeing`, the server with the projector, is shared with the chat page's image tests
# (tests/server/conftest.py); a server without one is the session's `hearth`.


def gpt(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0)


def claude(server: RunningServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0)


def image_part(color: tuple[int, int, int]) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png64(color)}"}}


def openai_ask(server: RunningServer, *parts: dict[str, Any], **extra: Any) -> Any:
    content = [{"type": "text", "text": "What is in this picture?"}, *parts]
    return gpt(server).chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": content}],  # type: ignore[list-item]
        max_tokens=3,
        temperature=0,
        **extra,
    )


def first_top(answer: Any) -> dict[str, float]:
    return {t.token: t.logprob for t in answer.choices[0].logprobs.content[0].top_logprobs}


@pytest.mark.model
def test_openai_chat_reads_the_image_and_counts_its_tokens(seeing: RunningServer) -> None:
    red = openai_ask(seeing, image_part(RED), logprobs=True, top_logprobs=5)
    blue = openai_ask(seeing, image_part(BLUE), logprobs=True, top_logprobs=5)
    text = openai_ask(seeing)
    assert red.usage.prompt_tokens - text.usage.prompt_tokens >= PER_IMAGE
    assert first_top(red) != first_top(blue)  # another picture, another next token
    stream = gpt(seeing).chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": [image_part(RED)]}],  # type: ignore[list-item]
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens >= PER_IMAGE


@pytest.mark.model
def test_openai_responses_reads_input_image(seeing: RunningServer) -> None:
    url = f"data:image/png;base64,{png64(RED)}"
    content = [
        {"type": "input_text", "text": "What is it?"},
        {"type": "input_image", "image_url": url},
    ]
    answer = gpt(seeing).responses.create(
        model="any",
        input=[{"role": "user", "content": content}],  # type: ignore[list-item]
        max_output_tokens=3,
    )
    plain = gpt(seeing).responses.create(model="any", input="What is it?", max_output_tokens=3)
    assert answer.usage is not None and plain.usage is not None
    assert answer.usage.input_tokens - plain.usage.input_tokens >= PER_IMAGE


@pytest.mark.model
def test_anthropic_reads_image_blocks_also_in_a_tool_result(seeing: RunningServer) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png64(RED)},
    }
    message = claude(seeing).messages.create(
        model="any",
        max_tokens=3,
        messages=[{"role": "user", "content": [image, {"type": "text", "text": "What is it?"}]}],  # type: ignore[list-item]
    )
    assert message.usage.input_tokens >= PER_IMAGE
    in_result = claude(seeing).messages.create(
        model="any",
        max_tokens=3,
        messages=[
            {"role": "user", "content": "Take a photo."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "camera", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [image]}],
            },
        ],  # type: ignore[list-item]
    )
    assert in_result.usage.input_tokens >= PER_IMAGE
    with claude(seeing).messages.stream(
        model="any",
        max_tokens=3,
        messages=[{"role": "user", "content": [image]}],  # type: ignore[list-item]
    ) as stream:
        final = stream.get_final_message()
    assert final.usage.input_tokens >= PER_IMAGE


@pytest.mark.model
def test_ollama_images_on_chat_and_generate(seeing: RunningServer) -> None:
    client = ollama.Client(host=seeing.base_url)
    chat = client.chat(
        model="any",
        messages=[{"role": "user", "content": "What is it?", "images": [png64(RED)]}],
        options={"num_predict": 3, "temperature": 0},
    )
    plain = client.chat(
        model="any",
        messages=[{"role": "user", "content": "What is it?"}],
        options={"num_predict": 3, "temperature": 0},
    )
    assert chat.prompt_eval_count - plain.prompt_eval_count >= PER_IMAGE
    generated = client.generate(
        model="any", prompt="What is it?", images=[png64(BLUE)], options={"num_predict": 3}
    )
    assert generated.prompt_eval_count >= PER_IMAGE
    streamed = list(
        client.generate(
            model="any", prompt="Look", images=[png64(RED)], stream=True, options={"num_predict": 3}
        )
    )
    assert streamed[-1].done
    assert "vision" in client.show("any").capabilities


@pytest.mark.model
def test_koboldai_and_llama_server_take_images(seeing: RunningServer) -> None:
    kobold = httpx.post(
        f"{seeing.base_url}/api/v1/generate",
        json={"prompt": "What is it?", "max_length": 3, "images": [png64(RED)]},
        timeout=60,
    )
    assert kobold.status_code == 200, kobold.text
    assert "text" in kobold.json()["results"][0]
    native = httpx.post(
        f"{seeing.base_url}/completion",
        json={
            "prompt": {
                "prompt_string": "Look: <__media__> It is",
                "multimodal_data": [png64(BLUE)],
            },
            "n_predict": 3,
        },
        timeout=60,
    ).json()
    assert native["tokens_evaluated"] >= PER_IMAGE
    props = httpx.get(f"{seeing.base_url}/props", timeout=10).json()
    assert props["modalities"] == {"vision": True, "audio": False}


@pytest.mark.model
def test_bad_media_is_a_400_in_each_dialects_shape(seeing: RunningServer) -> None:
    broken = base64.b64encode(png_bytes(16, 16, RED)[:40]).decode()
    with pytest.raises(openai.BadRequestError) as refused:
        openai_ask(
            seeing, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{broken}"}}
        )
    assert "truncated" in str(refused.value)
    with pytest.raises(openai.BadRequestError, match="remote image URLs are not fetched"):
        openai_ask(seeing, {"type": "image_url", "image_url": {"url": "http://127.0.0.1:1/x.png"}})
    with pytest.raises(anthropic.BadRequestError) as bad:
        claude(seeing).messages.create(
            model="any",
            max_tokens=3,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "not base64!",
                            },
                        }
                    ],
                }
            ],  # type: ignore[list-item]
        )
    assert bad.value.body["type"] == "error"  # type: ignore[index]
    with pytest.raises(ollama.ResponseError) as not_image:
        ollama.Client(host=seeing.base_url).chat(
            model="any",
            messages=[
                {"role": "user", "content": "x", "images": [base64.b64encode(b"hello").decode()]}
            ],
        )
    assert not_image.value.status_code == 400
    too_many = httpx.post(
        f"{seeing.base_url}/api/v1/generate",
        json={"prompt": "x", "max_length": 1, "images": [png64(RED)] * 9},
        timeout=30,
    )
    assert too_many.status_code == 400
    # A whole WAV, refused because this projector only sees (not for its bytes).
    sound = base64.b64encode(wav_bytes()).decode()
    audio = gpt(seeing).chat.completions.with_raw_response.create
    with pytest.raises(openai.BadRequestError, match=r"audio input is not supported.*vision only"):
        audio(
            model="any",
            max_tokens=1,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"data": sound, "format": "wav"}}
                    ],
                }
            ],  # type: ignore[list-item]
        )
    assert gpt(seeing).models.list()  # the server serves on


@pytest.mark.model
def test_a_prompt_with_an_image_too_long_for_the_context_is_a_400(seeing: RunningServer) -> None:
    """A text prompt is cut to fit (KoboldCpp's way); one with an image cannot be cut through
    the image, so the client hears that it sent too much, as a 400 (it was a 500)."""
    words = {"type": "text", "text": "apple river stone cloud " * 700}  # ~2800 tokens of 2048
    with pytest.raises(openai.BadRequestError, match="more than the 2048 of the context"):
        openai_ask(seeing, words, image_part(RED))
    assert openai_ask(seeing, image_part(RED)).choices[0].message is not None


def peak_memory(server: RunningServer) -> int:
    """The server process's peak resident memory so far, in bytes (Linux's VmHWM)."""
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


@pytest.mark.model
def test_a_20000_pixel_square_image_is_scaled_down_in_bounded_memory(
    seeing: RunningServer,
) -> None:
    """1.2 MB of PNG that decode to 1.2 GB of RGB: scaled down a strip at a time, read as the
    same picture as a small one of its colour, and the server's peak memory grows by a small
    part of what decoding it whole would take. A 20000 x 20000 JPEG is taken too."""
    huge = base64.b64encode(huge_png(20000, 20000, RED)).decode()
    before = peak_memory(seeing)
    answer = openai_ask(
        seeing,
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{huge}"}},
        logprobs=True,
        top_logprobs=5,
    )
    grown = peak_memory(seeing) - before
    assert grown < 20000 * 20000 * 3 // 4, f"peak memory grew by {grown:,} bytes"
    small_red = first_top(openai_ask(seeing, image_part(RED), logprobs=True, top_logprobs=5))
    small_blue = first_top(openai_ask(seeing, image_part(BLUE), logprobs=True, top_logprobs=5))
    seen = first_top(answer)
    assert seen.keys() == small_red.keys() and seen != small_blue
    assert all(abs(seen[token] - small_red[token]) < 1e-2 for token in seen)
    jpeg = base64.b64encode(jpeg_bytes(20000, 20000)).decode()
    read = claude(seeing).messages.create(
        model="any",
        max_tokens=2,
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": jpeg},
                    }
                ],
            }
        ],  # type: ignore[list-item]
    )
    assert read.usage.input_tokens >= PER_IMAGE


@pytest.mark.model
def test_a_server_without_a_projector_refuses_images(hearth: RunningServer) -> None:
    with pytest.raises(openai.BadRequestError, match="image input is not supported"):
        openai_ask(hearth, image_part(RED))
    with pytest.raises(anthropic.BadRequestError, match="image input is not supported"):
        claude(hearth).messages.create(
            model="any",
            max_tokens=3,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": png64(RED),
                            },
                        }
                    ],
                }
            ],  # type: ignore[list-item]
        )
    props = httpx.get(f"{hearth.base_url}/props", timeout=10).json()
    assert props["modalities"] == {"vision": False, "audio": False}
    assert "vision" not in ollama.Client(host=hearth.base_url).show("any").capabilities
