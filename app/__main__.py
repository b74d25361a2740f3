"""python -m app: the envhub command line (app.cli)."""

import sys

from app.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
