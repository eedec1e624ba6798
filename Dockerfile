# The terminus image: the installed package and nothing else, run as a non-root user.
#   docker build -t terminus .
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 terminus worker
# Entry point `terminus`: the command is a subcommand (worker, gateway --http 0.0.0.0:8080, ...).

FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service service
COPY events events
COPY statemachines statemachines
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
# Dependencies are installed at build time, from the wheels built above: a container starts
# without reaching a package index.
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --create-home --uid 10001 terminus
USER terminus
WORKDIR /home/terminus
ENV PYTHONUNBUFFERED=1 \
    REDIS_URL=redis://redis:6379/0
# Healthy while Redis answers this container (a worker has no port of its own; the gateway's
# service in docker-compose.yml checks /healthz instead).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, redis; redis.Redis.from_url(os.environ['REDIS_URL'], socket_timeout=2).ping()"]
ENTRYPOINT ["terminus"]
CMD ["worker"]
