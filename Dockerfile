# The Airflow image of the docker-compose stack: the official Airflow 3.3.2 image plus this
# project's pinned requirements, installed at build time (never at container start).
#   docker compose build        (docker-compose.yaml builds it as tokokita-airflow:3.3.2)
# dags/, plugins/, include/, config/ and data/ are mounted by docker-compose.yaml, so editing
# them needs no rebuild; requirements.txt, constraints.txt and stack/ do.
ARG AIRFLOW_BASE_IMAGE=apache/airflow:3.3.2-python3.11
FROM ${AIRFLOW_BASE_IMAGE}

# Runtime requirements only: the test and lint tools of requirements.txt stay out of the
# image. constraints.txt is the project's full lock (`make lock`), so the image resolves the
# same versions as .venv; apache-airflow is pinned to the base image's version.
COPY --chown=airflow:0 requirements.txt constraints.txt /tmp/tokokita/
RUN grep -v -E '^(pytest|hypothesis|cronsim|ruff)==' /tmp/tokokita/requirements.txt \
        > /tmp/tokokita/runtime.txt \
    && pip install --no-cache-dir -r /tmp/tokokita/runtime.txt -c /tmp/tokokita/constraints.txt \
    && rm -rf /tmp/tokokita

# The airflow-init service's code (`python -m stack.init`, run from /opt/airflow).
COPY --chown=airflow:0 stack/ /opt/airflow/stack/

ENV PYTHONPATH=/opt/airflow/include
