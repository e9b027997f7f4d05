"""A pytest plugin for `make compat`: the suite's vision cases download their test picture
from Hugging Face (`.../tinygemma3-GGUF/resolve/main/test/11_truck.png`), and no machine here
reaches the network. This plugin answers those downloads with a picture from the llama.cpp
sources the suite comes from (`tools/mtmd/test-1.jpeg`), the same bytes for both servers.

Loaded with `-p offline_media` (compat/ is put on PYTHONPATH). Standard library and requests
only: it runs in the suite's own virtualenv.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import requests

_TEST_PICTURES = "https://huggingface.co/ggml-org/tinygemma3-GGUF/resolve/main/test/"


def pytest_configure(config: Any) -> None:
    picture = Path(os.environ["HEARTH_COMPAT_PICTURE"]).read_bytes()
    real_get = requests.get

    def get(url: str, *args: Any, **kwargs: Any) -> Any:
        if isinstance(url, str) and url.startswith(_TEST_PICTURES):
            response = requests.Response()
            response.status_code = 200
            response._content = picture
            response.url = url
            return response
        return real_get(url, *args, **kwargs)

    requests.get = get  # type: ignore[assignment]
