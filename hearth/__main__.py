"""`hearth` / `python -m hearth` / the packaged binary: KoboldCpp's rule for what opens.

The server's command line decides (server/process/serve.py): with no model and no settings
file, or with --showgui, the launcher opens, prefilled with what was given; otherwise the server
runs. The launcher is handed in from here, so the server's entry never imports Qt or the
launcher (an import-linter contract keeps it so), and a headless `hearth --skiplauncher` never
pays for them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from server.process.serve import main as serve_main
from server.settings.config import HearthSettings


def open_launcher(settings: HearthSettings | None) -> int:
    from app.__main__ import run_launcher  # only when it opens: Qt costs a second to import

    return run_launcher(settings)


def main(argv: Sequence[str] | None = None) -> int:
    return serve_main(argv, open_launcher)


if __name__ == "__main__":
    sys.exit(main())
