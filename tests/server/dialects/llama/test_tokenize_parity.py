"""`/tokenize` without `add_special` on a vocabulary that adds EOS as well as BOS (the tiny
SentencePiece model of tests/support/fim_gguf.py, `add_eos_token` true): llama-server adds
neither, so neither may come back, whole ids or with pieces; with `add_special` both frame the
text. (unit/test_tokenize.py in llama.cpp's suite runs a vocabulary that adds BOS only.)"""

from __future__ import annotations

import httpx

from tests.support.fim_gguf import BOS, EOS, character_token
from tests.support.servers import RunningServer


def tokenize(server: RunningServer, **body: object) -> list[object]:
    answer = httpx.post(f"{server.base_url}/tokenize", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    tokens: list[object] = answer.json()["tokens"]
    return tokens


def test_without_add_special_neither_bos_nor_eos(fim_server: RunningServer) -> None:
    framed = tokenize(fim_server, content="ab", add_special=True)
    assert framed[0] == BOS and framed[-1] == EOS  # what this vocabulary adds
    plain = tokenize(fim_server, content="ab")
    assert plain == framed[1:-1]
    assert plain[-2:] == [character_token("a"), character_token("b")]


def test_pieces_without_add_special_are_the_text_s_own(fim_server: RunningServer) -> None:
    pieces = tokenize(fim_server, content="ab", with_pieces=True)
    ids = [piece["id"] for piece in pieces if isinstance(piece, dict)]
    assert ids == tokenize(fim_server, content="ab")
    assert BOS not in ids and EOS not in ids
