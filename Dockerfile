# syntax=docker/dockerfile:1
# The exporter's image, in two variants from this one file:
#   docker build -t llm-bottleneck-exporter:0.1.0 .
#       python slim image; GPU counters from NVML (with GPM profiling metrics on Hopper and newer)
#   docker build --build-arg VARIANT=dcgm -t llm-bottleneck-exporter:0.1.0-dcgm .
#       NVIDIA's DCGM image, its pydcgm bindings on PYTHONPATH, for `--gpu dcgm` (profiling metrics
#       on GPUs before Hopper); deploy it with deploy/overlays/dcgm-profiling
# Dependencies are the exact versions in deploy/image-requirements.txt: the daemon's and theirs,
# none of the tools' extras (pip check fails the build when one is missing). The image runs as
# UID 65532; the Kubernetes DaemonSet chooses its own user (docs/deployment.md).
ARG VARIANT=slim
# checkov:skip=CKV_DOCKER_7:DCGM_IMAGE defaults to a pinned tag; checkov cannot see through a build argument
ARG DCGM_IMAGE=nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04

# ---- slim: a virtual environment built on the same Python image it runs on
FROM python:3.11.9-slim-bookworm AS build-slim
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY deploy/image-requirements.txt ./
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --no-deps -r image-requirements.txt
COPY pyproject.toml README.md ./
COPY exporter ./exporter
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps . \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/llm-bottleneck-exporter --version

FROM python:3.11.9-slim-bookworm AS runtime-slim
COPY --from=build-slim /opt/venv /opt/venv

# ---- dcgm: NVIDIA's DCGM image (Ubuntu 24.04) with its Python 3.12, and DCGM's own bindings
FROM ${DCGM_IMAGE} AS build-dcgm
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12=3.12.3-* python3.12-venv=3.12.3-* \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY deploy/image-requirements.txt ./
RUN python3.12 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --no-deps -r image-requirements.txt
COPY pyproject.toml README.md ./
COPY exporter ./exporter
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps . \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/llm-bottleneck-exporter --version

FROM ${DCGM_IMAGE} AS runtime-dcgm
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12=3.12.3-* \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build-dcgm /opt/venv /opt/venv
# Where the DCGM 4 packages install pydcgm, dcgm_structs, dcgm_fields, ...; they are not on PyPI.
ENV PYTHONPATH=/usr/share/datacenter-gpu-manager-4/bindings/python3

# ---- the image: the chosen variant, non-root, with a health check on /healthz
# DL3006 (untagged image): runtime-${VARIANT} is one of the stages above, not an image.
# hadolint ignore=DL3006
FROM runtime-${VARIANT}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="llm-bottleneck-exporter" \
      org.opencontainers.image.description="Per-node Prometheus exporter that diagnoses the bottleneck stage of LLM serving" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# MALLOC_ARENA_MAX=2: glibc gives threads up to eight malloc arenas per core, and the HTTP server's
# thread per connection spreads the exporter's short-lived allocations over them; with two, RSS
# grows less after warm-up (docs/performance.md, the soak).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2
USER 65532:65532
EXPOSE 9477
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9477/healthz', timeout=4)"]
ENTRYPOINT ["llm-bottleneck-exporter"]
CMD ["serve"]
