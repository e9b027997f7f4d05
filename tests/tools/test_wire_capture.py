"""tools/wire_capture.py, the before-and-after check of a restructuring: two captures of the
same code are the same bytes, and a changed answer or route is reported."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _wire_capture() -> ModuleType:
    # tools/ is a folder of scripts, not a package: load the script by its path.
    spec = importlib.util.spec_from_file_location(
        "wire_capture", ROOT / "tools" / "wire_capture.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_captures_are_the_same_bytes_and_a_change_is_reported() -> None:
    tool = _wire_capture()
    first, second = tool.capture(), tool.capture()
    assert len(first["answers"]) == len(tool.REQUESTS) and len(first["routes"]) > 50
    assert tool.compare(first, second) == []
    changed = copy.deepcopy(second)
    changed["answers"][0]["body"] = changed["answers"][0]["body"].replace("Hello", "Hullo")
    changed["routes"] = changed["routes"][1:]
    differences = tool.compare(first, changed)
    assert len(differences) == 2
    assert differences[0].startswith("POST /api/v1/generate")
    assert differences[1] == f"route gone: {first['routes'][0]}"
