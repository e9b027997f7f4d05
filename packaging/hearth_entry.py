"""Entry point of the packaged binary: the same `hearth` command (launcher by default)."""

import sys

from hearth.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
