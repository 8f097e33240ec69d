"""`python -m tokokita_etl`."""

from __future__ import annotations

from tokokita_etl.cli import console_main

console_main()
