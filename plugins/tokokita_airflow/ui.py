"""A read-only status page mounted on the Airflow api-server: one row per partition date."""

from __future__ import annotations

from html import escape

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

app = FastAPI(title="TokoKita orders ETL status")

_COLUMNS = ("date", "status", "attempt", "extracted", "karantina", "duplikat", "fact", "summary",
            "blocked", "updated_at", "gold")


def _rows() -> list[dict]:
    from tokokita_airflow.runtime import pipeline_settings
    from tokokita_etl.status import status_rows

    flat = []
    for row in reversed(status_rows(pipeline_settings())):
        counts = row.pop("rows") or {}
        flat.append({**row, **{k: counts.get(k, "") for k in
                               ("extracted", "karantina", "duplikat", "fact", "summary")}})
    return flat


@app.get("/status.json")
def status_json() -> list[dict]:
    """Per-date watermark status, newest first."""
    return _rows()


@app.get("/", response_class=HTMLResponse)
def status_page() -> str:
    """Per-date watermark status as an HTML table, newest first."""
    head = "".join(f"<th>{escape(c)}</th>" for c in _COLUMNS)
    body = "".join(
        "<tr class='{}'>{}</tr>".format(
            "blocked" if row["blocked"] else escape(str(row["status"])),
            "".join(f"<td>{escape(str(row.get(c, '')))}</td>" for c in _COLUMNS))
        for row in _rows())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>TokoKita status</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        ".success{background:#e8f5e9}.failed{background:#fff3e0}.blocked{background:#ffebee}"
        "</style></head><body><h1>TokoKita orders: per-date status</h1>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        "<p><a href='status.json'>JSON</a></p></body></html>"
    )
