"""Per-date status rows, for the command line's `status`, the status page and the local stack."""

from __future__ import annotations

from datetime import date
from typing import Any

from tokokita_etl.config import Settings
from tokokita_etl.policy import is_blocked
from tokokita_etl.state import state_store


def status_rows(settings: Settings) -> list[dict[str, Any]]:
    """One row per date in the watermark, oldest first: status, attempts, rows, blocked."""
    state = state_store(settings).read()
    rows = []
    for day, entry in state.runs.items():
        rows.append({
            "date": day,
            "status": entry.get("status", "never"),
            "attempt": state.attempts(day),
            "rows": entry.get("rows", {}),
            "blocked": is_blocked(state, date.fromisoformat(day), settings.max_attempts),
            "gold": entry.get("gold", ""),
            "updated_at": entry.get("updated_at", ""),
            "warnings": entry.get("warnings", []),
            "error": entry.get("error", ""),
        })
    return rows


def format_status(rows: list[dict[str, Any]]) -> str:
    """The status table as text."""
    header = f"{'date':<10}  {'status':<8} {'attempt':>7}  {'extracted':>9} {'karantina':>9} " \
             f"{'duplikat':>8} {'fact':>8} {'summary':>7}  blocked"
    lines = [header]
    for r in rows:
        n = r["rows"]
        line = (f"{r['date']:<10}  {r['status']:<8} {r['attempt']:>7}  "
                f"{n.get('extracted', '-'):>9} {n.get('karantina', '-'):>9} "
                f"{n.get('duplikat', '-'):>8} {n.get('fact', '-'):>8} {n.get('summary', '-'):>7}  "
                f"{'yes' if r['blocked'] else 'no'}")
        if r["warnings"]:
            line += f"  warning: {'; '.join(r['warnings'])}"
        lines.append(line)
    return "\n".join(lines)
