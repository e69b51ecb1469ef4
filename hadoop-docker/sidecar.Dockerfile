# The sidecar image for hadoop-docker/docker-compose.yaml (build context: the repository root).
# Installed editable so app/db/migrate.py finds ../migrations next to the package.
FROM python:3.11-slim
WORKDIR /srv/sidecar
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
RUN pip install --no-cache-dir -e .
ENV YARN_SIDECAR_API_HOST=0.0.0.0 \
    YARN_SIDECAR_DATA_DIR=/var/lib/yarn-sidecar
EXPOSE 8000
CMD ["yarn-sidecar", "serve"]
