"""`python -m tokokita_etl`."""

from __future__ import annotations

import sys

from tokokita_etl.cli import main

sys.exit(main())
