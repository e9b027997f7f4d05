"""Property-based fuzzing of the whole HTTP surface with schemathesis, against the real server
on the bundled model.

Requests are generated from Hearth's own OpenAPI schema (every route documents its request
model, see server/dialects/pipeline/openapi.py), both valid ones and ones that break the schema on
purpose. The properties: no response is a 5xx, every 4xx carries its dialect's error shape, and
every 2xx matches its schema: a JSON answer the schema the route documents (schemathesis's response
conformance check), each event of a stream its dialect's typed event (tests/stream_shapes.py).

Generated token counts are capped at a few tokens before sending: this fuzzes the handling of
input, not the model's speed. `make test` runs a short pass: 5 examples per endpoint and mode
(every endpoint in both modes, ~420 requests, ~40 s on 2 cores; 15 took ~105 s); `make fuzz` a
long one, 150 (HEARTH_FUZZ_EXAMPLES sets the examples per endpoint and mode).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import HypothesisException
from schemathesis.generation.modes import GenerationMode

from tests.support.error_shapes import dialect_of, shape_problem
from tests.support.hub_server import LocalHub
from tests.support.servers import RunningServer
from tests.support.stream_shapes import stream_problem

StartHearth = Callable[[Sequence[str]], RunningServer]
EXAMPLES = int(os.environ.get("HEARTH_FUZZ_EXAMPLES", "5"))
# Fields that ask for generated tokens, and the most the fuzzer lets a request ask for.
TOKEN_FIELDS = {
    "max_length",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "num_predict",
    "n_predict",
}
MAX_FUZZ_TOKENS = 4
# Routes whose valid requests this server answers with llama-server's 501 (`not_supported_error`)
# on purpose: /infill on a model without FIM tokens (the bundled one), reranking without
# --rerank. Their 501 must still have the OpenAI error shape.
NOT_SUPPORTED_HERE = {
    f"POST {path}" for path in ("/infill", "/rerank", "/reranking", "/v1/rerank", "/v1/reranking")
}


def cap_generation(value: Any) -> Any:
    """The same request, asking for at most MAX_FUZZ_TOKENS tokens wherever it asks at all."""
    if isinstance(value, dict):
        return {
            key: min(item, MAX_FUZZ_TOKENS)
            # floats too: 40460.0 is a valid integer to pydantic
            if key in TOKEN_FIELDS and isinstance(item, int | float) and not isinstance(item, bool)
            else cap_generation(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [cap_generation(item) for item in value]
    return value


@dataclass
class FuzzRun:
    """What the fuzzer saw: counts, server time per operation, and the first failure of each
    (operation, status)."""

    server: RunningServer
    counts: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    failures: dict[tuple[str, int], str] = field(default_factory=dict)

    def send(self, label: str, case: Any) -> None:
        if isinstance(case.body, dict | list):
            case.body = cap_generation(case.body)
        try:
            response = case.call(base_url=self.server.base_url, timeout=60)
        except requests.ConnectionError as exc:
            alive = self.server_alive()
            self.failures.setdefault(
                (label, 0),
                f"connection failed ({exc}); server alive: {alive}; it printed: "
                f"{''.join(self.server.output[-5:])}; request: {case.body!r:.300}",
            )
            return
        status = response.status_code
        self.seconds[label] += response.elapsed
        self.counts["requests"] += 1
        self.counts[f"{status // 100}xx"] += 1
        if status == 501 and label in NOT_SUPPORTED_HERE:
            problem = shape_problem(dialect_of(case.path), json.loads(response.content))
            if problem is not None:
                self.failures.setdefault((label, status), problem)
        elif status >= 500:
            self.failures.setdefault((label, status), response.content[:300].decode())
        elif 400 <= status < 500:
            try:
                body = json.loads(response.content)
            except ValueError:
                body = response.content[:300]
            problem = shape_problem(dialect_of(case.path), body)
            if problem is not None:
                self.failures.setdefault((label, status), problem)
        else:
            problem = success_problem(case, response)
            if problem is not None:
                self.failures.setdefault((label, status), problem)

    def server_alive(self) -> bool:
        return self.server.process is None or self.server.process.poll() is None

    def fuzz(self, operation: Any, mode: GenerationMode) -> None:
        if not self.server_alive():
            return  # it crashed: the failure that did it is recorded, the rest would be noise

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def send(case: Any) -> None:
            self.send(operation.label, case)

        try:
            send()
        except HypothesisException as exc:
            # e.g. no negative data exists for an operation without inputs
            self.counts[f"skipped ({type(exc).__name__})"] += 1


def success_problem(case: Any, response: Any) -> str | None:
    """What is wrong with a 2xx answer, or None: a stream event by event, JSON as documented."""
    content_type = response.headers.get("content-type", [""])[0]
    if content_type.startswith(("text/event-stream", "application/x-ndjson")):
        return stream_problem(case.path, content_type, response.content.decode())
    try:
        case.operation.validate_response(response, case=case)
    except Exception as exc:  # schemathesis reports each mismatch as its own exception type
        return f"answer does not match its documented schema: {exc}"[:1000]
    return None


@pytest.mark.timeout(3600)  # bounded by EXAMPLES; the long run (make fuzz) takes far longer
def test_no_input_makes_a_5xx_and_every_4xx_has_its_dialects_shape(
    start_hearth: StartHearth, tmp_path: Path
) -> None:
    # /api/pull asks the Hugging Face Hub: an empty local one (no internet here; a pull of a
    # name it lacks is a 404, never a download)
    hub = LocalHub().start()
    server = start_hearth(
        # A slot folder, so /slots/{id} actions run (without one they are a 501, on purpose).
        [
            "--contextsize",
            "256",
            "--defaultgenamt",
            str(MAX_FUZZ_TOKENS),
            "--slot-save-path",
            str(tmp_path),
        ],
        env={"HF_ENDPOINT": hub.url},
    )
    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    documented_bodies = {op.label for op in operations if op.method.upper() == "POST" and op.body}
    post_routes = {op.label for op in operations if op.method.upper() == "POST"}
    assert documented_bodies == post_routes, "every POST route documents its request body"

    run = FuzzRun(server)
    try:
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                run.fuzz(operation, mode)
    finally:
        hub.stop()

    report = f"{len(operations)} operations, {dict(run.counts)}"
    print(f"fuzz: {report}")
    slowest = ", ".join(f"{label} {total:.1f}s" for label, total in run.seconds.most_common(5))
    print(f"fuzz: slowest operations (server time): {slowest}")
    assert not run.failures, f"{report}\n" + "\n".join(
        f"{label} -> {status}: {detail}" for (label, status), detail in run.failures.items()
    )
    assert run.counts["requests"] >= len(operations) * EXAMPLES  # it really ran
