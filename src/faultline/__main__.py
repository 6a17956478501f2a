"""``python -m faultline``: the command line."""

import sys

from faultline.cli import main

sys.exit(main())
