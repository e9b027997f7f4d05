"""/v1/rerank over real HTTP on a tiny model with a rank head (tests/support/fim_gguf.py):
each score is the one llama.cpp's rank pooling gives the document's prompt as llama-server
builds it ([BOS] query [EOS] [SEP] document [EOS] on this vocabulary), recomputed here with
llama.cpp directly; Jina's and TEI's answer shapes, `top_n`, the usage; and the 501 of a
server started without --rerank. The rerank template's prompt: test_rerank_prompt.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import llama_cpp as llama
import pytest

from tests.support.fim_gguf import BOS, EOS, SEP, write_fim_gguf
from tests.support.servers import RunningServer

StartHearth = Callable[..., RunningServer]
QUERY = "machine learning"
DOCUMENTS = ["a cat sat", "learning machines learn", "paris", "ml"]
# The server decodes several documents together; the reference, one at a time.
ACROSS_BATCHES = 1e-4


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fim_gguf(tmp_path_factory.mktemp("rank") / "tiny-reranker.gguf")


@pytest.fixture(scope="module")
def rank_server(start_hearth: StartHearth, model_path: Path) -> RunningServer:
    return start_hearth(["--model", str(model_path), "--rerank", "--threads", "1"])


class Reference:
    """The model loaded here, scoring one token sequence per decode with rank pooling."""

    def __init__(self, path: Path) -> None:
        llama.llama_backend_init()
        self.model = llama.llama_model_load_from_file(
            str(path).encode(), llama.llama_model_default_params()
        )
        self.vocab = llama.llama_model_get_vocab(self.model)
        params = llama.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = 256
        params.embeddings = True
        params.pooling_type = llama.LLAMA_POOLING_TYPE_RANK
        self.context = llama.llama_init_from_model(self.model, params)

    def tokens(self, text: str) -> list[int]:
        buffer = (llama.llama_token * 256)()
        data = text.encode()
        count = llama.llama_tokenize(self.vocab, data, len(data), buffer, 256, False, False)
        return list(buffer[:count])

    def prompt(self, query: str, document: str) -> list[int]:
        return [BOS, *self.tokens(query), EOS, SEP, *self.tokens(document), EOS]

    def score(self, tokens: list[int]) -> float:
        llama.llama_memory_clear(llama.llama_get_memory(self.context), True)
        ids = (llama.llama_token * len(tokens))(*tokens)  # alive until the decode is done
        batch = llama.llama_batch_get_one(ids, len(tokens))
        assert llama.llama_decode(self.context, batch) == 0
        return float(llama.llama_get_embeddings_seq(self.context, 0)[0])

    def close(self) -> None:
        llama.llama_free(self.context)
        llama.llama_model_free(self.model)


@pytest.fixture(scope="module")
def reference(model_path: Path) -> Iterator[Reference]:
    loaded = Reference(model_path)
    yield loaded
    loaded.close()


def rerank(
    server: RunningServer, body: dict[str, object], path: str = "/v1/rerank"
) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=60)


def test_each_score_is_the_rank_head_s_on_llama_server_s_prompt(
    rank_server: RunningServer, reference: Reference
) -> None:
    response = rerank(rank_server, {"query": QUERY, "documents": DOCUMENTS})
    assert response.status_code == 200, response.text
    answer = response.json()
    prompts = [reference.prompt(QUERY, document) for document in DOCUMENTS]
    expected = [reference.score(prompt) for prompt in prompts]
    assert len(set(expected)) == len(expected)  # the documents really score apart
    scores = {result["index"]: result["relevance_score"] for result in answer["results"]}
    assert sorted(scores) == list(range(len(DOCUMENTS)))
    for index, score in scores.items():
        assert score == pytest.approx(expected[index], abs=ACROSS_BATCHES)
    ranked = [result["relevance_score"] for result in answer["results"]]
    assert ranked == sorted(ranked, reverse=True)  # best first
    tokens = sum(len(prompt) for prompt in prompts)
    assert answer["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    assert answer["object"] == "list"


@pytest.mark.parametrize("path", ["/rerank", "/reranking", "/v1/reranking"])
def test_llama_server_s_other_paths_and_top_n(rank_server: RunningServer, path: str) -> None:
    answer = rerank(rank_server, {"query": QUERY, "documents": DOCUMENTS, "top_n": 2}, path)
    best = rerank(rank_server, {"query": QUERY, "documents": DOCUMENTS}).json()["results"]
    assert [result["index"] for result in answer.json()["results"]] == [
        result["index"] for result in best[:2]
    ]


def test_texts_get_tei_s_bare_list_with_text_when_asked(rank_server: RunningServer) -> None:
    body = {"query": QUERY, "texts": DOCUMENTS, "return_text": True, "top_n": 3}
    answer = rerank(rank_server, body).json()
    assert isinstance(answer, list) and len(answer) == 3
    for entry in answer:
        assert set(entry) == {"index", "score", "text"}
        assert entry["text"] == DOCUMENTS[entry["index"]]


@pytest.mark.parametrize("documents", [[], None, 123, [1, 2, 3]])
def test_no_usable_documents_is_a_400(rank_server: RunningServer, documents: object) -> None:
    response = rerank(rank_server, {"query": QUERY, "documents": documents})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_without_rerank_the_server_answers_llama_server_s_501(hearth: RunningServer) -> None:
    response = rerank(hearth, {"query": QUERY, "documents": DOCUMENTS})
    assert response.status_code == 501
    error = response.json()["error"]
    assert error["type"] == "not_supported_error"
    assert error["message"] == (
        "This server does not support reranking. Start it with `--reranking`"
    )
