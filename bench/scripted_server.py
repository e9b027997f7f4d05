"""Hearth's real HTTP stack on a scripted engine (no model time), for bench/compare.py and
bench/dialects.py.

    python bench/scripted_server.py PORT [--root CHECKOUT] [--token-seconds S]

`--root` serves another checkout's code (bench/dialects.py's --baseline), whichever of the
layouts it has (server/process/app.py now, server/app.py before the layers moved).
`--token-seconds` paces the tokens: 0 produces them as fast as it can (the events then come in
bursts whose sizes vary from run to run); a pace the server keeps up with makes every token its
own event, so the server's CPU per stream is the framing's cost alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import uvicorn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--token-seconds", type=float, default=0.0)
    args = parser.parse_args()
    sys.path.insert(0, str(args.root))
    try:
        from server.process.app import create_app
        from server.settings.config import HearthSettings
        from tests.support.scripted_engine import ScriptedEngine
    except ImportError:  # a checkout from before the layers (issue 24)
        from server.app import create_app  # type: ignore[no-redef, import-not-found]
        from server.config import HearthSettings  # type: ignore[no-redef, import-not-found]
        from tests.scripted_engine import ScriptedEngine  # type: ignore[no-redef, import-not-found]
    engine = ScriptedEngine(
        pieces=[b" token"], context_size=1 << 20, token_seconds=args.token_seconds
    )
    app = create_app(HearthSettings(), engine)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
