"""The MCP server configuration: llama-server's `mcpServers` JSON, inline or from a file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from server.server_tools.mcp.mcp_config import (
    DEFAULT_TIMEOUT_MS,
    McpConfigError,
    McpServerConfig,
    mcp_configs_from,
    parse_mcp_servers,
)


def _parse(document: object, log: list[str] | None = None) -> list[McpServerConfig]:
    lines = [] if log is None else log
    return parse_mcp_servers(json.dumps(document), "--mcp-servers-json", lines.append)


def test_every_field_of_a_server_is_read_in_order() -> None:
    configs = _parse(
        {
            "mcpServers": {
                "files": {
                    "command": "npx",
                    "args": ["-y", "server-files", "/data"],
                    "env": {"TOKEN": "t", "MODE": "ro"},
                    "cwd": "/srv",
                    "timeout_ms": 1500,
                },
                "echo": {"command": "python3"},
            }
        }
    )
    assert configs == [
        McpServerConfig(
            name="files",
            command="npx",
            args=("-y", "server-files", "/data"),
            env=(("TOKEN", "t"), ("MODE", "ro")),
            cwd="/srv",
            timeout_ms=1500,
        ),
        McpServerConfig(name="echo", command="python3"),
    ]
    assert configs[1].timeout_ms == DEFAULT_TIMEOUT_MS == 30_000


def test_a_server_without_a_command_is_left_out_and_logged() -> None:
    log: list[str] = []
    configs = _parse(
        {"mcpServers": {"remote": {"url": "https://example.com/mcp"}, "ok": {"command": "x"}}},
        log,
    )
    assert [config.name for config in configs] == ["ok"]
    assert any("'remote'" in line and "command" in line for line in log)


def test_a_document_without_mcp_servers_has_none_and_says_so() -> None:
    log: list[str] = []
    assert _parse({"servers": {}}, log) == []
    assert log and "mcpServers" in log[0]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not valid json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"mcpServers": []}', '"mcpServers" must be an object'),
        ('{"mcpServers": {"a": "python3"}}', "must be an object"),
        ('{"mcpServers": {"a": {"command": 7}}}', '"command" must be a string'),
        ('{"mcpServers": {"a": {"command": "x", "args": "-v"}}}', '"args" must be a list'),
        ('{"mcpServers": {"a": {"command": "x", "args": [1]}}}', '"args" must be a list'),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', '"env" must be an object'),
        ('{"mcpServers": {"a": {"command": "x", "cwd": 3}}}', '"cwd" must be a string'),
        ('{"mcpServers": {"a": {"command": "x", "timeout_ms": 0}}}', '"timeout_ms" must be'),
        ('{"mcpServers": {"a": {"command": "x", "timeout_ms": "5"}}}', '"timeout_ms" must be'),
        ('{"mcpServers": {"a": {"command": "x", "timeout_ms": true}}}', '"timeout_ms" must be'),
    ],
)
def test_a_config_that_cannot_be_used_is_an_error_naming_the_problem(text: str, words: str) -> None:
    with pytest.raises(McpConfigError, match=words) as raised:
        parse_mcp_servers(text, "--mcp-servers-json", lambda _line: None)
    assert "--mcp-servers-json" in str(raised.value)
    assert isinstance(raised.value, ValueError)  # what the server turns into a failed start


def test_the_file_is_read_before_the_inline_json_and_a_repeated_name_keeps_the_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "from-file"}}}))
    inline = json.dumps({"mcpServers": {"a": {"command": "inline"}, "b": {"command": "y"}}})
    log: list[str] = []
    configs = mcp_configs_from(inline, path, log.append)
    assert [(c.name, c.command) for c in configs] == [("a", "from-file"), ("b", "y")]
    assert any("duplicate" in line and "'a'" in line for line in log)


def test_a_missing_or_broken_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "path.json"
    with pytest.raises(McpConfigError, match="cannot read the MCP config file") as raised:
        mcp_configs_from(None, missing, lambda _line: None)
    assert str(missing) in str(raised.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(McpConfigError, match=re.escape(f"MCP config ({broken}) is not valid JSON")):
        mcp_configs_from(None, broken, lambda _line: None)


def test_no_configuration_means_no_servers() -> None:
    assert mcp_configs_from(None, None) == []
    assert mcp_configs_from("", "") == []


def test_what_is_left_out_goes_to_the_server_log_unless_told_otherwise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="hearth"):
        assert mcp_configs_from('{"mcpServers": {"remote": {"url": "https://x"}}}', None) == []
    assert "'remote'" in caplog.text
