"""Hearth's real HTTP stack on a scripted engine (no model time), for bench/compare.py."""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.process.app import create_app
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine

if __name__ == "__main__":
    port = int(sys.argv[1])
    app = create_app(HearthSettings(), ScriptedEngine(pieces=[b" token"], context_size=1 << 20))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
