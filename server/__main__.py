"""`hearth` / `python -m server`: the entry point; the work is in `server/process/serve.py`."""

import sys

from server.process.serve import main

if __name__ == "__main__":
    sys.exit(main())
