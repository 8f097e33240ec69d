"""TokoKita nightly orders ETL: a plain Python package with no Airflow import."""

from __future__ import annotations

__version__ = "0.1.0"
