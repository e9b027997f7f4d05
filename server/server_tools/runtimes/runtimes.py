"""Runtime specs: which machine a tool call acts on, as `--tools-runtime` or `x-tool-runtime` say.

    (none)                      this machine
    docker-container:<id>       a running container, through `docker exec`
    podman-container:<id>       the same, through `podman exec`
    ssh:<[user@]host>           a host reached over ssh
    docker:<image>, podman:<image>
                                a container the server starts at launch (`--tools-runtime`
                                only; a call names the running one: runtime_spawn)

A spec can come from a client header and ends up on a command line, so an id or a target that
could read as an option (`--privileged`, `-oProxyCommand=...`) or holds any unusual character is
refused, and so is a spec Hearth does not know: a client that asked for a container must never
get this machine instead. The refusals are `ToolRefused`, with llama-server's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from server.server_tools.registry import ToolRefused
from server.server_tools.runtimes.runtime_host import HostRuntime
from server.server_tools.runtimes.runtime_io import Runtime
from server.server_tools.runtimes.runtime_isolate import ContainerRuntime, SshRuntime

ENGINES = ("docker", "podman")
# a container id or name: starts with a letter or digit (never '-')
_CONTAINER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# [user@]host: no leading '-', no spaces, quotes or shell characters
_SSH_TARGET = re.compile(r"[A-Za-z0-9._@][A-Za-z0-9._@-]*")


@dataclass(frozen=True)
class ContainerSpec:
    """`<engine>-container:<id>` (attach to a running one) or `<engine>:<image>` (start one)."""

    engine: str
    name: str  # the container id when attaching, the image when starting
    attach: bool

    @classmethod
    def parse(cls, spec: str) -> ContainerSpec | None:
        for engine in ENGINES:
            if spec.startswith(f"{engine}-container:"):
                return cls(engine, spec.removeprefix(f"{engine}-container:"), attach=True)
            if spec.startswith(f"{engine}:"):
                return cls(engine, spec.removeprefix(f"{engine}:"), attach=False)
        return None


def valid_container_id(container_id: str) -> bool:
    return _CONTAINER_ID.fullmatch(container_id) is not None


def valid_ssh_target(target: str) -> bool:
    return _SSH_TARGET.fullmatch(target) is not None


def runtime_for(spec: str | None, cwd: Path | str | None = None) -> Runtime:
    """The runtime one call acts on; `cwd` is the call's working directory (x-tool-cwd).

    Raises ToolRefused for a spec that is unknown, malformed, or names a container to start
    (a call only attaches to a running one).
    """
    where = str(cwd) if cwd is not None and str(cwd) else None
    if not spec:
        return HostRuntime(where)
    container = ContainerSpec.parse(spec)
    if container is not None:
        if not container.attach:
            raise ToolRefused(f"tool runtime must name a running container: {spec}")
        if not valid_container_id(container.name):
            raise ToolRefused(f"invalid container id: {container.name}")
        return ContainerRuntime(container.engine, container.name, where)
    if spec.startswith("ssh:"):
        target = spec.removeprefix("ssh:")
        if not valid_ssh_target(target):
            raise ToolRefused(f"invalid ssh target: {target}")
        return SshRuntime(target, where)
    raise ToolRefused(f"unknown tool runtime: {spec}")


def check_runtime_spec(spec: str | None) -> ContainerSpec | None:
    """Check `--tools-runtime` at startup; a spec that starts a container is returned.

    Raises ToolRefused as `runtime_for` would, and for `<engine>:` without an image.
    """
    if not spec:
        return None
    container = ContainerSpec.parse(spec)
    if container is not None and not container.attach:
        if not valid_image(container.name):
            raise ToolRefused(f"--tools-runtime {container.engine}:<image> needs an image name")
        return container
    runtime_for(spec)
    return None


def valid_image(image: str) -> bool:
    """An image reference (`busybox`, `ghcr.io/o/n:tag`, `n@sha256:...`), never an option."""
    return re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*", image) is not None
