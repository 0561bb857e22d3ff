"""``python -m driver ...`` is ``dgrad-driver ...``."""

import sys

from driver.entry import main

sys.exit(main())
