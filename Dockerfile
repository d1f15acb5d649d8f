# One image for the operator, the embedded coordinator and the example consumer and producer:
#   docker build -t staticfleet:0.1.0 .
# The chart runs `staticfleet operator` and `staticfleet coordinator`; examples/embedded.yaml and the
# demo run `python /app/consumer.py` and `python /app/producer.py`.
# BASE_IMAGE: any image with Python 3.11 whose `python` and `pip` are on PATH (where no registry is
# reachable, `make images` builds a Debian-based one; see docs/local-cluster.md).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/staticfleet operator/staticfleet
# The package and the examples' client (confluent-kafka); no test or analytics dependencies.
RUN pip install '.[examples]' && rm -rf /src

COPY examples/consumer/consumer.py examples/producer/producer.py /app/

RUN groupadd --gid 65532 staticfleet \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin staticfleet
USER 65532:65532
WORKDIR /app
CMD ["staticfleet", "--help"]
