"""What the end-to-end tests measure: wall times (s) and the stack's peak memory (bytes),
filled by the tests and printed at the end of the pytest run (`conftest.py`)."""

from __future__ import annotations

E2E_REPORT: dict[str, object] = {}
