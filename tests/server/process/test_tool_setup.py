"""The tools /tools serves, as built at start from the settings (server/process/tool_setup.py):
none without the flags; the built-in tools --tools names, then each MCP server's; a setting
the user must fix stops the start (as llama-server's does) before any model is looked for."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from server.process import serve as serve_command
from server.process.exit_codes import EXIT_USAGE
from server.process.tool_setup import ToolSetupFailed, tool_box_for
from server.server_tools.registry import ToolCall
from server.settings.config import HearthSettings
from tests.support.mcp_servers import STDIO_SERVER
from tests.support.servers import free_port


def mcp_json(**servers: list[str]) -> str:
    """{"mcpServers": {name: this interpreter running the test server with options}}."""
    entries = {
        name: {"command": sys.executable, "args": [str(STDIO_SERVER), *options]}
        for name, options in servers.items()
    }
    return json.dumps({"mcpServers": entries})


def test_no_flags_no_tools() -> None:
    assert tool_box_for(HearthSettings()) is None


def test_the_named_builtin_tools_then_the_mcp_servers_tools() -> None:
    settings = HearthSettings(
        server_tools="read_file,grep_search", mcp_servers_json=mcp_json(echo=[])
    )
    box = tool_box_for(settings)
    assert box is not None
    try:
        names = [tool.name for tool in box.tools]
        assert names[:2] == ["read_file", "grep_search"]
        assert "echo_echo" in names and all(n.startswith("echo_") for n in names[2:])
        echo = box.find("echo_echo")
        answer = echo.invoke(ToolCall({"message": "hello"}))
        assert "hello" in json.dumps(answer)
    finally:
        box.close()


def test_all_names_every_builtin_tool() -> None:
    box = tool_box_for(HearthSettings(server_tools="all"))
    assert box is not None
    assert {tool.name for tool in box.tools} == {
        "read_file",
        "file_glob_search",
        "grep_search",
        "exec_shell_command",
        "write_file",
        "edit_file",
        "get_info",
    }


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"server_tools": "read_file,format_disk"}, "format_disk"),
        ({"mcp_servers_json": "not valid json"}, "JSON"),
        ({"mcp_servers_config": "/nonexistent/mcp.json"}, "/nonexistent/mcp.json"),
        ({"server_tools": "all", "tools_runtime": "ssh:-oProxyCommand=touch x"}, "ssh target"),
        ({"server_tools": "all", "tools_runtime": "chroot:/"}, "unknown tool runtime"),
    ],
)
def test_a_setting_to_fix_stops_the_start(settings: dict[str, str], said: str) -> None:
    with pytest.raises(ToolSetupFailed, match=said):
        tool_box_for(HearthSettings.model_validate(settings))


def test_an_mcp_server_that_does_not_start_only_loses_its_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = json.dumps({"mcpServers": {"gone": {"command": "no-such-program-4711"}}})
    box = tool_box_for(HearthSettings(mcp_servers_json=broken))
    assert box is not None and box.tools == []
    assert any("gone" in record.getMessage() for record in caplog.records)
    box.close()


def test_hearth_stops_with_a_usage_error_before_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """unit/test_mcp_servers.py::test_mcp_config_file_errors, through `hearth` itself: the
    model named does not exist, and the tools' error comes first."""
    monkeypatch.setattr(serve_command, "setup_console_logging", lambda: None)
    caplog.set_level(logging.INFO, logger="hearth")
    argv = ["--skiplauncher", "--port", str(free_port()), "--model", str(tmp_path / "x.gguf")]
    assert serve_command.main([*argv, "--mcp-servers-json", "not valid json"]) == EXIT_USAGE
    assert "x.gguf" not in caplog.text and "JSON" in caplog.text


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1,192.168.1.20", "::"])
def test_tools_reachable_from_the_network_need_a_key(host: str) -> None:
    """llama-server only warns; Hearth will not open its shell tool to a network keyless."""
    with pytest.raises(ToolSetupFailed, match="need an API key"):
        tool_box_for(HearthSettings(host=host, server_tools="all"))
    for key in ({"api_key": "k"}, {"password": "pw"}):
        box = tool_box_for(
            HearthSettings.model_validate({"host": host, "server_tools": "all", **key})
        )
        assert box is not None and box.tools


@pytest.mark.parametrize("host", ["", "localhost", "127.0.0.1", "::1"])
def test_tools_on_this_machine_alone_need_no_key(host: str) -> None:
    assert tool_box_for(HearthSettings(host=host, server_tools="read_file")) is not None
