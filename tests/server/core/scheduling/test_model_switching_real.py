"""--modeldir with the real server (issue 12, in progress): the listed models, a request's
`model` loading another model through the official clients, an unknown name's 404."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import ollama
import openai
import pytest

from tests.support.model_folder import OTHER, SERVED
from tests.support.servers import RunningServer


@pytest.fixture(scope="module")
def folder_server(model_dir: Path, start_hearth: Callable[..., RunningServer]) -> RunningServer:
    """The model folder served with two slots: one request at a time for most tests, and a
    batch for the last (a server of its own cost ~4 s of start). Each test leaves the served
    model loaded, as it found it."""
    return start_hearth(
        ["--modeldir", str(model_dir), "--parallelrequests", "2", "--contextsize", "1024"]
    )


def test_the_model_dir_is_listed_and_a_broken_file_reported(folder_server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{folder_server.base_url}/v1", api_key="unused")
    assert [model.id for model in client.models.list().data] == [SERVED, OTHER]
    tags = ollama.Client(host=folder_server.base_url).list().models
    assert [tag.model for tag in tags] == [f"{SERVED}:latest", f"{OTHER}:latest"]
    assert all(tag.details and tag.details.family == "gemma3" for tag in tags)
    assert "Skipping" in folder_server.wait_for_output("broken.gguf")


def test_a_request_naming_another_model_loads_it(folder_server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{folder_server.base_url}/v1", api_key="unused")
    answer = client.completions.create(model=OTHER, prompt="Once upon a time", max_tokens=4)
    assert answer.model == OTHER and answer.choices[0].text
    folder_server.wait_for_output(f"Loaded {OTHER}.gguf")
    chat = ollama.Client(host=folder_server.base_url).chat(
        model=SERVED, messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 4}
    )
    assert chat.model == SERVED
    folder_server.wait_for_output(f"Unloading {OTHER}")
    kobold = httpx.post(
        f"{folder_server.base_url}/api/v1/generate", json={"prompt": "Hello", "max_length": 4}
    )
    assert kobold.status_code == 200  # no model named: the served model


def test_an_unknown_model_is_a_404_in_the_dialects_shape(folder_server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{folder_server.base_url}/v1", api_key="unused")
    with pytest.raises(openai.NotFoundError, match="model 'gpt-4o' not found"):
        client.completions.create(model="gpt-4o", prompt="Hi", max_tokens=2)
    with pytest.raises(ollama.ResponseError) as raised:
        ollama.Client(host=folder_server.base_url).generate(model="llama3", prompt="Hi")
    assert raised.value.status_code == 404 and raised.value.error == "model 'llama3' not found"


def test_batched_serving_switches_once_the_batch_drains(folder_server: RunningServer) -> None:
    batched = folder_server
    client = openai.AsyncOpenAI(base_url=f"{batched.base_url}/v1", api_key="unused")

    async def both() -> list[str]:
        answers = await asyncio.gather(
            client.completions.create(model=OTHER, prompt="One", max_tokens=6),
            client.completions.create(model=SERVED, prompt="Two", max_tokens=6),
            client.completions.create(model=OTHER, prompt="Three", max_tokens=6),
        )
        return [answer.model for answer in answers]

    assert asyncio.run(both()) == [OTHER, SERVED, OTHER]
