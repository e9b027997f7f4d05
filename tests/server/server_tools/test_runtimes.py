"""Runtime specs and the runtimes that are not this machine.

The refusals are llama.cpp's cases (an unknown scheme, an option smuggled in as an ssh target
or a container id). The container and ssh runtimes run against stand-ins for `docker` and `ssh`
put first on PATH: scripts that check the command line they are given and then run the command
here, so every tool goes through the real `<engine> exec ...` / `ssh ... -- <target> '<cmd>'`
path without a container engine or an ssh server.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from server.server_tools.builtin.builtin import BUILTIN_TOOL_NAMES, builtin_tools
from server.server_tools.builtin.builtin_files import EditFile, ReadFile, WriteFile
from server.server_tools.builtin.file_search import FileGlobSearch, GrepSearch
from server.server_tools.builtin.shell import ExecShellCommand, GetInfo
from server.server_tools.registry import ToolCall, ToolError, ToolRefused
from server.server_tools.runtimes.runtime_spawn import SpawnedContainer
from server.server_tools.runtimes.runtimes import ContainerSpec, check_runtime_spec, runtime_for

FAKE_DOCKER = """#!/bin/sh
# docker exec [-i] <id> cmd...: runs cmd here. docker run --rm -i --cidfile F <image> sh:
# writes an id to F and holds on while stdin stays open.
if [ "$1" = run ]; then
    [ "$6" = busybox ] || { echo "Unable to find image '$6'" >&2; exit 125; }
    echo "cid$$" > "$5"
    exec cat > /dev/null
fi
[ "$1" = exec ] || exit 99
shift
[ "$1" = -i ] && shift
[ "$1" = abc123 ] || { echo "Error: No such container: $1" >&2; exit 1; }
shift
exec "$@"
"""

FAKE_SSH = """#!/bin/sh
# ssh <options> -- <target> '<command>': runs the command here, as the remote shell would.
while [ "$1" != "--" ]; do shift; done
shift
[ "$1" = "me@box" ] || exit 255
exec sh -c "$2"
"""


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, script in (("docker", FAKE_DOCKER), ("ssh", FAKE_SSH)):
        (folder / name).write_text(script)
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fake:does-not-exist", "unknown tool runtime: fake:does-not-exist"),
        ("ssh:-oProxyCommand=touch /tmp/pwned", "invalid ssh target: -oProxyCommand"),
        ("ssh:box;reboot", "invalid ssh target"),
        ("ssh:", "invalid ssh target"),
        ("docker-container:--privileged", "invalid container id: --privileged"),
        ("podman-container:--privileged", "invalid container id: --privileged"),
        ("docker-container:$(id)", "invalid container id"),
        ("docker:busybox", "tool runtime must name a running container: docker:busybox"),
    ],
)
def test_bad_specs_are_refused_before_anything_runs(
    spec: str, message: str, tmp_path: Path
) -> None:
    call = ToolCall({"command": "touch ran"}, cwd=tmp_path, runtime=spec)
    with pytest.raises(ToolRefused, match=message.replace("$", "\\$").replace("(", "\\(")):
        ExecShellCommand().invoke(call)
    assert not (tmp_path / "ran").exists()  # never this machine instead


def test_good_specs_name_their_runtime() -> None:
    assert runtime_for(None).is_host
    assert not runtime_for("podman-container:my_box.1").is_host
    assert not runtime_for("ssh:deploy@build-01.example.org").is_host


def test_startup_check_of_the_runtime_spec() -> None:
    assert check_runtime_spec(None) is None
    assert check_runtime_spec("ssh:box") is None
    assert check_runtime_spec("podman:ghcr.io/o/img:1") == ContainerSpec(
        "podman", "ghcr.io/o/img:1", attach=False
    )
    for bad in ("docker:", "docker:--rm", "ssh:-x", "nope:1"):
        with pytest.raises(ToolRefused):
            check_runtime_spec(bad)


def test_builtin_tools_by_name() -> None:
    every = builtin_tools(["all"])
    assert [tool.name for tool in every] == list(BUILTIN_TOOL_NAMES)
    assert len(every) == 7
    some = builtin_tools(["grep_search", "read_file"])
    assert [tool.name for tool in some] == ["read_file", "grep_search"]
    listed = {entry["tool"]: entry for entry in (tool.describe() for tool in every)}
    assert listed["write_file"]["permissions"] == {"write": True}
    assert listed["read_file"]["permissions"] == {"write": False}
    assert listed["read_file"]["definition"]["function"]["parameters"]["required"] == ["path"]
    assert all(entry["uses_cwd"] and entry["type"] == "server" for entry in listed.values())
    assert [tool.name for tool in every if tool.support_stream] == ["exec_shell_command"]


def test_builtin_tools_refuse_unknown_names_and_bad_runtimes() -> None:
    with pytest.raises(ValueError, match=r"unknown tool 'web_search'\. available tools: read_file"):
        builtin_tools(["read_file", "web_search"])
    with pytest.raises(ValueError, match="invalid ssh target"):
        builtin_tools(["all"], "ssh:-oProxyCommand=x")
    assert builtin_tools(["all"], "docker:busybox")  # started by runtime_spawn, not here


@pytest.mark.parametrize("spec", ["docker-container:abc123", "ssh:me@box"])
def test_every_tool_works_through_an_isolate(spec: str, fake_bin: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()

    def call(tool: type, **params: object) -> dict[str, object]:
        answer: dict[str, object] = tool().invoke(ToolCall(params, cwd=work, runtime=spec))
        return answer

    written = call(WriteFile, path="sub/test.log", content="hello container\n")
    assert written["result"] == "file written successfully"
    assert (work / "sub" / "test.log").read_text() == "hello container\n"
    assert call(ReadFile, path="sub/test.log")["plain_text_response"] == "hello container\n"
    ran = call(ExecShellCommand, command="cat sub/test.log")
    assert ran["plain_text_response"] == "hello container\n\n[exit code: 0]"
    assert (
        call(EditFile, path="sub/test.log", edits=[{"old_text": "hello", "new_text": "bye"}])[
            "edits_applied"
        ]
        == 1
    )
    assert (work / "sub" / "test.log").read_text() == "bye container\n"
    (work / "node_modules").mkdir()
    (work / "node_modules" / "x.log").write_text("bye")
    found = call(FileGlobSearch, path=".", type="all")
    assert found["entries"] == [
        {"path": "node_modules", "type": "dir"},
        {"path": "sub", "type": "dir"},
        {"path": "sub/test.log", "type": "file"},
    ]
    assert "sub/test.log:bye container" in str(call(GrepSearch, path=".", pattern="bye"))
    assert call(GetInfo)["cwd"] == str(work)
    with pytest.raises(ToolError, match="cannot stat file: nope"):
        call(ReadFile, path="nope")


def test_an_isolate_that_fails_is_a_tool_error(fake_bin: Path) -> None:
    call = ToolCall({"path": "/etc/hostname"}, runtime="docker-container:gone1")
    with pytest.raises(ToolError, match="No such container: gone1"):
        ReadFile().invoke(call)


def test_a_spawned_container_lives_until_closed_and_is_restarted_if_it_dies(
    fake_bin: Path,
) -> None:
    spawned = SpawnedContainer.start(ContainerSpec("docker", "busybox", attach=False))
    try:
        first = spawned.spec()
        assert first.startswith("docker-container:cid")
        assert spawned.spec() == first  # the same container while it runs
        proc = spawned._proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert spawned.spec() != first  # died: started again
        again = spawned._proc
        assert again is not None and again.poll() is None
    finally:
        spawned.close()
    assert again.poll() is not None  # closing its stdin ended it
    with pytest.raises(ToolRefused, match="stopped"):
        spawned.spec()


def test_a_container_that_does_not_start_is_refused(fake_bin: Path) -> None:
    with pytest.raises(ToolRefused, match=r"failed to start docker container .* Unable to find"):
        SpawnedContainer.start(ContainerSpec("docker", "nope", attach=False))
