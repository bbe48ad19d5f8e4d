"""``python -m composer``: the same command line as the ``composer`` script."""

import sys

from composer.cli.main import main

sys.exit(main())
