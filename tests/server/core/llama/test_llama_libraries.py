"""llama.cpp's shared libraries are each mapped once, the thread pool's ggml-cpu included, and
the hand-copied ctypes struct matches the loaded ggml."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from collections import defaultdict

import pytest

from server.core.llama.loading.native import GgmlThreadpoolParams, check_struct_layouts
from tests.support.servers import ROOT

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps"),
]

# Loads the engine (which attaches the persistent thread pool through ggml-cpu), then lists the
# ggml/llama files mapped into the process.
_PROBE = """
from pathlib import Path
from server.core.load_settings import LoadSettings
from server.core.llama import LlamaCppEngine
from server.models.files import bundled_model_path

engine = LlamaCppEngine.load(bundled_model_path(), LoadSettings(contextsize=512))
print("threadpool", engine._loaded.threadpool is not None)
for line in Path("/proc/self/maps").read_text().splitlines():
    fields = line.split(maxsplit=5)
    if len(fields) == 6 and Path(fields[5]).name.startswith(("libggml", "libllama")):
        print("mapped", fields[5])
engine.close()
"""


@pytest.mark.model  # loads the real model in a subprocess
def test_each_ggml_library_is_mapped_once() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert "threadpool True" in lines
    files_by_library: defaultdict[str, set[str]] = defaultdict(set)
    for line in lines:
        if line.startswith("mapped "):
            path = line.removeprefix("mapped ")
            files_by_library[path.rsplit("/", 1)[-1].split(".so")[0]].add(path)
    assert "libggml-cpu" in files_by_library
    doubled = {name: files for name, files in files_by_library.items() if len(files) > 1}
    assert not doubled, doubled


def test_the_pinned_ggml_matches_the_threadpool_struct() -> None:
    assert check_struct_layouts() is None


class _WithoutLastField(ctypes.Structure):
    """The struct as an older ggml.h had it, one field short."""

    _fields_ = GgmlThreadpoolParams._fields_[:-1]


class _FieldsSwapped(ctypes.Structure):
    _fields_ = [GgmlThreadpoolParams._fields_[i] for i in (0, 1, 3, 2, 4, 5)]


@pytest.mark.parametrize("layout", [_WithoutLastField, _FieldsSwapped])
def test_a_struct_that_differs_from_ggml_is_caught(layout: type[ctypes.Structure]) -> None:
    problem = check_struct_layouts(layout)
    assert problem is not None and "ggml_threadpool_params" in problem
