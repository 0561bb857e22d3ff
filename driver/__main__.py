"""``python -m driver ...`` is ``dgrad-driver ...``."""

import sys

from driver.cli import main

sys.exit(main())
