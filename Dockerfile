# The sidecar's container image: a wheel built in one stage, installed into a slim runtime that
# runs as an unprivileged user. Build: `podman build -t yarn-sidecar .` (or docker/buildah).
# Settings come from YARN_SIDECAR_* variables (README, "Configuration reference"); the SQLite
# default lives in the /var/lib/yarn-sidecar volume, PostgreSQL via YARN_SIDECAR_DATABASE_URL.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
# A virtualenv, so the same steps work on python:slim and on a distribution's python3 (PEP 668).
RUN python3 -m venv /opt/build && /opt/build/bin/pip wheel --no-cache-dir --no-deps \
    --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    YARN_SIDECAR_API_HOST=0.0.0.0 \
    YARN_SIDECAR_API_PORT=8000 \
    YARN_SIDECAR_DATA_DIR=/var/lib/yarn-sidecar \
    YARN_SIDECAR_LOG_FORMAT=json \
    PATH=/opt/yarn-sidecar/bin:$PATH
COPY --from=build /wheels /wheels
RUN python3 -m venv /opt/yarn-sidecar && /opt/yarn-sidecar/bin/pip install /wheels/*.whl \
    && rm -rf /wheels \
    && groupadd --gid 10001 sidecar \
    && useradd --uid 10001 --gid sidecar --no-create-home --no-log-init \
       --home-dir /var/lib/yarn-sidecar --shell /usr/sbin/nologin sidecar \
    && install -d -o sidecar -g sidecar -m 0750 /var/lib/yarn-sidecar
USER 10001:10001
WORKDIR /var/lib/yarn-sidecar
VOLUME ["/var/lib/yarn-sidecar"]
EXPOSE 8000
# /ready is 200 only when the database answers and the last poll of the RM succeeded.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/opt/yarn-sidecar/bin/python", "-c", "import os,sys,urllib.request as u; p=os.environ.get('YARN_SIDECAR_API_PORT','8000'); sys.exit(0 if u.urlopen(f'http://127.0.0.1:{p}/ready', timeout=4).status == 200 else 1)"]
# serve migrates the database first (--no-migrate to leave that to a separate job).
ENTRYPOINT ["yarn-sidecar"]
CMD ["serve"]
