"""`/tokenize` without `add_special` on a vocabulary that adds EOS as well as BOS (the tiny
SentencePiece model of tests/support/fim_gguf.py, `add_eos_token` true): llama-server adds
neither, so neither may come back, whole ids or with pieces; with `add_special` both frame the
text. (unit/test_tokenize.py in llama.cpp's suite runs a vocabulary that adds BOS only.)"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.support.fim_gguf import BOS, EOS, character_token, write_fim_gguf
from tests.support.servers import RunningServer

StartHearth = Callable[..., RunningServer]


@pytest.fixture(scope="module")
def eos_adding_server(
    start_hearth: StartHearth, tmp_path_factory: pytest.TempPathFactory
) -> RunningServer:
    model = write_fim_gguf(tmp_path_factory.mktemp("eos") / "tiny-adds-eos.gguf")
    return start_hearth(["--model", str(model), "--threads", "1"])


def tokenize(server: RunningServer, **body: object) -> list[object]:
    answer = httpx.post(f"{server.base_url}/tokenize", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    tokens: list[object] = answer.json()["tokens"]
    return tokens


def test_without_add_special_neither_bos_nor_eos(eos_adding_server: RunningServer) -> None:
    framed = tokenize(eos_adding_server, content="ab", add_special=True)
    assert framed[0] == BOS and framed[-1] == EOS  # what this vocabulary adds
    plain = tokenize(eos_adding_server, content="ab")
    assert plain == framed[1:-1]
    assert plain[-2:] == [character_token("a"), character_token("b")]


def test_pieces_without_add_special_are_the_text_s_own(eos_adding_server: RunningServer) -> None:
    pieces = tokenize(eos_adding_server, content="ab", with_pieces=True)
    ids = [piece["id"] for piece in pieces if isinstance(piece, dict)]
    assert ids == tokenize(eos_adding_server, content="ab")
    assert BOS not in ids and EOS not in ids
