#!/usr/bin/env python3
"""Standalone DMMA inspector: ``python tools/inspect_dmma.py BUILD_DIR|CUBIN [--expect SHAPE]``.

The same report as ``composer inspect`` (it runs that command), usable from a checkout without
installing the package: it puts the checkout on ``sys.path`` first.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["inspect", *sys.argv[1:]]))
