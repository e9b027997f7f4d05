"""One SSL context for every HTTP client the tests build.

Each httpx client (`httpx.get`, and the clients inside the openai, anthropic and ollama SDKs)
builds an SSL context from the system's or certifi's bundle: ~30-50 ms of CPU to parse a few
hundred certificates, a fifth of the fast suite's time, for tests that speak plain HTTP to
loopback. A context built from one of those bundles is built once and shared; any other (a
test's own trust store) is built as asked.
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import Any

import certifi

_build_context = ssl.create_default_context


def _bundles() -> set[tuple[str | None, str | None]]:
    """(cafile, capath) pairs naming the machine's trust: what httpx builds from."""
    return {
        (certifi.where(), None),
        (os.environ.get("SSL_CERT_FILE"), None),
        (None, os.environ.get("SSL_CERT_DIR")),
    }


@functools.cache
def _bundle_context(purpose: ssl.Purpose, cafile: str | None, capath: str | None) -> ssl.SSLContext:
    return _build_context(purpose, cafile=cafile, capath=capath)


def _create_default_context(
    purpose: ssl.Purpose = ssl.Purpose.SERVER_AUTH,
    *,
    cafile: str | None = None,
    capath: str | None = None,
    cadata: Any = None,
) -> ssl.SSLContext:
    if cadata is None and (cafile or capath) and (cafile, capath) in _bundles():
        return _bundle_context(purpose, cafile, capath)
    return _build_context(purpose, cafile=cafile, capath=capath, cadata=cadata)


def share_bundle_contexts() -> None:
    """From now on, a context asked of the machine's bundle is the one built the first time."""
    ssl.create_default_context = _create_default_context  # type: ignore[assignment]
