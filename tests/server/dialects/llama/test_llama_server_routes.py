"""llama-server's native routes on the real server (issue 13, in progress): /health, /props,
/tokenize (with pieces), /detokenize, /apply-template, and the OpenAI routes without /v1."""

from __future__ import annotations

import httpx
import openai

from server.dialects.edge.errors import LLAMA_SERVER_PATHS
from tests.support.servers import RunningServer


def test_health_and_props(hearth: RunningServer) -> None:
    assert httpx.get(f"{hearth.base_url}/health").json() == {"status": "ok"}
    props = httpx.get(f"{hearth.base_url}/props").json()
    assert props["default_generation_settings"]["n_ctx"] == 4096
    assert props["total_slots"] == 1 and props["model_path"].endswith(".gguf")
    assert props["model_alias"] == "gemma-3-270m-q4_k_m"
    assert props["modalities"] == {"vision": False, "audio": False}
    assert props["backend"] == "CPU" and props["chat_template"] == ""  # a base model


def test_tokenize_with_pieces_and_detokenize_round_trip(hearth: RunningServer) -> None:
    base = hearth.base_url
    plain = httpx.post(f"{base}/tokenize", json={"content": "Hello world"}).json()["tokens"]
    with_bos = httpx.post(
        f"{base}/tokenize", json={"content": "Hello world", "add_special": True}
    ).json()["tokens"]
    assert with_bos[1:] == plain and len(with_bos) == len(plain) + 1  # llama-server: no BOS
    pieces = httpx.post(
        f"{base}/tokenize", json={"content": "Hello world", "with_pieces": True}
    ).json()["tokens"]
    assert [piece["id"] for piece in pieces] == plain
    assert "".join(piece["piece"] for piece in pieces) == "Hello world"
    text = httpx.post(f"{base}/detokenize", json={"tokens": plain}).json()
    assert text == {"content": "Hello world"}
    bad = httpx.post(f"{base}/detokenize", json={"tokens": [10**9]})
    assert bad.status_code == 400 and bad.json()["error"]["message"]


def test_apply_template_renders_what_chat_would_send(hearth: RunningServer) -> None:
    answer = httpx.post(
        f"{hearth.base_url}/apply-template",
        json={"messages": [{"role": "user", "content": "Where is the lighthouse?"}]},
    )
    assert answer.status_code == 200
    assert "Where is the lighthouse?" in answer.json()["prompt"]
    missing = httpx.post(f"{hearth.base_url}/apply-template", json={})
    assert missing.status_code == 400 and "messages" in missing.json()["error"]["message"]


def test_openai_routes_without_the_v1_prefix(hearth: RunningServer) -> None:
    client = openai.OpenAI(base_url=hearth.base_url, api_key="unused")  # no /v1
    chat = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=3
    )
    assert chat.choices[0].message.content is not None
    # llama-server's /completions is its native completion, not OpenAI's (as /completion).
    native = httpx.post(f"{hearth.base_url}/completions", json={"prompt": "Once", "n_predict": 3})
    assert native.status_code == 200 and "content" in native.json()
    assert {"/completions", "/chat/completions", "/tokenize", "/props"} <= LLAMA_SERVER_PATHS
