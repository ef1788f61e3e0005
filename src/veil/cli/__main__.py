"""``python -m veil.cli ARGS``: the same as ``veil ARGS``."""

import sys

from veil.cli.entry import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
