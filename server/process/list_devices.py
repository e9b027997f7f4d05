"""`hearth list-devices [--json]`: the devices a user can choose, with their memory.

The launcher runs this as a child process (a broken GPU driver can crash the process that
probes it; the launcher must survive that) and fills its Backend choice from the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict

from server.devices.backends import gpu_backends
from server.devices.listing import ListedDevice, listed_devices
from server.devices.vulkan import vulkan_devices


def list_devices() -> list[ListedDevice]:
    backends = gpu_backends()
    loader_devices = vulkan_devices() if "Vulkan" in backends else []
    # Before ggml's registry exists: show it every device, software ones included.
    os.environ["GGML_VK_VISIBLE_DEVICES"] = ",".join(str(d.index) for d in loader_devices)
    from server.core.llama.loading.ggml_devices import ggml_devices  # loads llama.cpp's libraries

    return listed_devices(loader_devices, ggml_devices())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hearth list-devices",
        description="The devices --device/--usevulkan/--usecuda can choose, with their memory.",
    )
    parser.add_argument("--json", action="store_true", help="one JSON list, for programs")
    return parser


def main(arguments: Sequence[str]) -> int:
    options = build_parser().parse_args(arguments)  # --help and bad options exit here
    devices = list_devices()
    if options.json:
        sys.stdout.write(json.dumps([asdict(device) for device in devices]) + "\n")
    else:
        for device in devices:
            sys.stdout.write(device.line() + "\n")
    sys.stdout.flush()
    return 0
