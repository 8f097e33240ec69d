"""The status page on the Airflow api-server (`/tokokita/`): each date's state, and actions.

A thin adapter, one module per concern:

- `auth`: who may read and who may act is Airflow's auth manager's answer
  (`requires_access_dag`, as Airflow's own API asks it), and the form token of the actions;
- `data`: the rows, `tokokita_etl.runner.status.date_states` with the DAG's runs of each date;
- `actions`: Reprocess and Unblock create a DAG run in this process through the function of
  Airflow's REST trigger, with its audit log entry (no HTTP call back to this server);
- `render`: Jinja2 templates (`templates/`, autoescaped), the chart's geometry and the
  Content-Security-Policy that allows the page's one script by its hash;
- `routes`: the FastAPI app the plugin mounts.

Which actions a date allows is its state's (`tokokita_etl.runner.status.DateState.actions`).
"""

from __future__ import annotations

from tokokita_airflow.status_page.routes import app

__all__ = ["app"]
