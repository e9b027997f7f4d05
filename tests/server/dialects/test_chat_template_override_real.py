"""Templates under the user's control on the real server (SmolLM2-135M-Instruct, which has a
ChatML template of its own): --chat-template-file replaces it for every chat API, the server's
template variables and a request's `chat_template_kwargs` reach it (the request's win), the
console and /props say which template is in use, and a template that fails is a 400 naming
its error in each dialect, never a 500. A template that does not compile stops the start."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import anthropic
import httpx
import ollama
import openai
import pytest

from server.process.exit_codes import EXIT_USAGE
from tests.support.servers import ROOT, RunningServer, free_port

StartHearth = Callable[[Sequence[str]], RunningServer]
TEMPLATES = Path(__file__).resolve().parents[2] / "fixtures" / "chat_templates"
MARKED = TEMPLATES / "marked.jinja"
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def override_server(start_hearth: StartHearth, smollm2: Path) -> RunningServer:
    return start_hearth(
        [
            "--model",
            str(smollm2),
            "--chat-template-file",
            str(MARKED),
            "--chat-template-kwargs",
            json.dumps({"greeting": "HELLO", "enable_thinking": True}),
            "--jinjathink",
            "false",  # wins over the kwargs' enable_thinking
        ]
    )


def prompt_of(override_server: RunningServer, body: dict[str, object]) -> str:
    answer = httpx.post(f"{override_server.base_url}/apply-template", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    prompt = answer.json()["prompt"]
    assert isinstance(prompt, str)
    return prompt


def test_the_file_s_template_renders_with_the_server_s_variables(
    override_server: RunningServer,
) -> None:
    assert prompt_of(override_server, {"messages": HI}) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n[NOTHINK HELLO]\n"
    )
    asked = {"messages": HI, "chat_template_kwargs": {"enable_thinking": True, "greeting": "YO"}}
    assert prompt_of(override_server, asked).endswith(
        "assistant\n[THINK YO]\n"
    )  # the request's win


def test_generation_reads_the_prompt_the_template_made(override_server: RunningServer) -> None:
    client = openai.OpenAI(
        base_url=f"{override_server.base_url}/v1", api_key="unused", max_retries=0
    )
    chat = client.chat.completions.create(model="any", messages=HI, max_tokens=2)  # type: ignore[arg-type]
    counted = httpx.post(
        f"{override_server.base_url}/tokenize",
        json={"content": prompt_of(override_server, {"messages": HI})},
    ).json()["tokens"]
    assert chat.usage is not None and chat.usage.prompt_tokens == len(counted)


def test_the_console_and_props_say_which_template_is_in_use(override_server: RunningServer) -> None:
    line = override_server.wait_for_output("Chat template:")
    assert f"Chat template: the file {MARKED} (Jinja), for every chat API" in line
    assert 'greeting="HELLO"' in line
    assert "enable_thinking=false" in line
    props = httpx.get(f"{override_server.base_url}/props").json()
    assert props["chat_template"] == MARKED.read_text()
    assert props["chat_template_source"] == f"the file {MARKED}"


def test_a_failing_template_is_a_400_naming_its_error_in_every_dialect(
    override_server: RunningServer,
) -> None:
    refuse = [{"role": "user", "content": "refuse me"}]
    client = openai.OpenAI(
        base_url=f"{override_server.base_url}/v1", api_key="unused", max_retries=0
    )
    with pytest.raises(openai.BadRequestError, match="this template refuses: refuse me"):
        client.chat.completions.create(model="any", messages=refuse, max_tokens=2)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match=r"failed: unsupported operand") as failed:
        client.chat.completions.create(
            model="any",
            messages=HI,  # type: ignore[arg-type]
            max_tokens=2,
            extra_body={"chat_template_kwargs": {"explode": True}},
        )
    assert f"the file {MARKED}" in str(failed.value)
    with pytest.raises(openai.BadRequestError, match="this template refuses"):
        client.chat.completions.create(
            model="any",
            messages=refuse,  # type: ignore[arg-type]
            max_tokens=2,
            stream=True,
        )
    claude = anthropic.Anthropic(base_url=override_server.base_url, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="this template refuses"):
        claude.messages.create(model="any", max_tokens=2, messages=refuse)  # type: ignore[arg-type]
    with pytest.raises(ollama.ResponseError, match="this template refuses") as refused:
        ollama.Client(host=override_server.base_url).chat(
            model="any", messages=refuse, stream=False
        )
    assert refused.value.status_code == 400


def test_a_template_that_does_not_compile_stops_the_start(smollm2: Path) -> None:
    broken = TEMPLATES / "broken.jinja"
    command = [sys.executable, "-m", "server", "--skiplauncher", "--port", str(free_port())]
    finished = subprocess.run(
        [*command, "--model", str(smollm2), "--chat-template-file", str(broken)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == EXIT_USAGE, finished.stderr
    said = finished.stdout + finished.stderr
    assert f"--chat-template-file {broken}: the template does not compile: line 1:" in said
    assert "Traceback" not in said
