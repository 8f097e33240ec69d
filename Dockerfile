# The Airflow image of the docker-compose stack: the official Airflow 3.3.2 image plus this
# project's runtime requirements, installed at build time (never at container start).
#   make image                  (or: docker compose build / docker-compose build)
# docker-compose.yaml builds it as tokokita-airflow:3.3.2. dags/, plugins/, include/, config/
# and data/ are mounted by docker-compose.yaml, so editing them needs no rebuild;
# requirements-runtime.txt, constraints.txt and stack/ do.
ARG AIRFLOW_BASE_IMAGE=apache/airflow:3.3.2-python3.11
FROM ${AIRFLOW_BASE_IMAGE}

# Runtime requirements only: requirements-runtime.txt is the one list of what runs; the test
# and lint tools are in requirements.txt, which this image never reads. constraints.txt is
# the project's full lock (`make lock`), so the image resolves the same versions as .venv.
# pip check runs before and after: a conflict the install causes (a pinned version breaking a
# package of the base image, e.g. one of its providers) fails the build; the base image's own
# conflicts are listed and left alone.
COPY --chown=airflow:0 requirements-runtime.txt constraints.txt stack/pip-check.sh /tmp/tokokita/
RUN sh /tmp/tokokita/pip-check.sh record /tmp/tokokita/base-conflicts.txt \
    && pip install --no-cache-dir -r /tmp/tokokita/requirements-runtime.txt \
        -c /tmp/tokokita/constraints.txt \
    && sh /tmp/tokokita/pip-check.sh compare /tmp/tokokita/base-conflicts.txt \
    && rm -rf /tmp/tokokita

# The airflow-init service's code (`python -m stack.init`, run from /opt/airflow).
COPY --chown=airflow:0 stack/ /opt/airflow/stack/

ENV PYTHONPATH=/opt/airflow/include
