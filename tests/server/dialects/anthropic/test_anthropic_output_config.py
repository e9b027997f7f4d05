"""Anthropic's structured output read from the body (server/dialects/anthropic/adapter.py):
`output_config.format`, the beta's top-level `output_format`, and neither."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from server.dialects.anthropic.adapter import output_schema
from server.dialects.anthropic.schemas import AnthropicMessagesRequest

CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
OTHER = {"type": "object", "properties": {"n": {"type": "integer"}}}
BODY = {"max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}


def request(**fields: Any) -> AnthropicMessagesRequest:
    return AnthropicMessagesRequest.model_validate({**BODY, **fields})


def test_output_config_format_binds_the_reply() -> None:
    body = request(output_config={"format": {"type": "json_schema", "schema": CITY}})
    assert output_schema(body) == CITY


def test_the_betas_output_format_binds_it_and_output_config_wins() -> None:
    beta = {"type": "json_schema", "schema": OTHER}
    assert output_schema(request(output_format=beta)) == OTHER
    both = request(
        output_format=beta, output_config={"format": {"type": "json_schema", "schema": CITY}}
    )
    assert output_schema(both) == CITY


@pytest.mark.parametrize(
    "fields", [{}, {"output_config": {"effort": "high"}}, {"output_config": {"format": None}}]
)
def test_without_a_format_nothing_binds_it(fields: dict[str, Any]) -> None:
    assert output_schema(request(**fields)) is None


@pytest.mark.parametrize(
    "format_",
    [
        {"type": "xml", "schema": CITY},
        {"type": "json_schema"},
        {"type": "json_schema", "schema": 3},
    ],
)
def test_a_malformed_format_is_refused_by_the_schema_model(format_: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        request(output_config={"format": format_})
