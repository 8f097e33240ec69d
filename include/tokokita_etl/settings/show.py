"""The settings as `tokokita-etl config` shows them: each value, masked where it holds a secret,
with its source.
"""

from __future__ import annotations

from datetime import date

from tokokita_etl.masking import mask_url, masked_arguments
from tokokita_etl.settings.model import SharedSettings

# -- showing the settings ---------------------------------------------------------------------

def _mask_notifiers(text: str) -> str:
    import json

    try:
        specs = json.loads(text)
    except ValueError:
        return text
    if not isinstance(specs, list):
        return text
    return json.dumps([{**spec, "kwargs": masked_arguments(spec["kwargs"])}
                       if isinstance(spec, dict) and "kwargs" in spec else spec
                       for spec in specs])


def shown(settings: SharedSettings) -> list[tuple[str, str, str]]:
    """Every setting of its class (the shared ones, then its pipeline's) as (name, value as
    text with credentials masked, source)."""
    rows = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if name == "notifiers":
            text = _mask_notifiers(value)
        elif isinstance(value, str):
            text = mask_url(value)
        elif isinstance(value, date):
            text = value.isoformat()
        else:
            text = "" if value is None else str(value)
        rows.append((name, text, settings.source(name)))
    return rows
