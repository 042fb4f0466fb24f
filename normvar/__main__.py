"""``python -m normvar ...`` = ``normvar ...``."""

import sys

from normvar_core.service.cli import main

sys.exit(main())
