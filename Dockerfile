# kubespot image, run by the Helm chart (deploy/helm/kubespot) as `kubespot agent` (and, with the
# [controller] extra's AWS SDK, as `kubespot controller`; the agent never imports it).
#
# Built for linux/amd64 and linux/arm64 and pushed as ghcr.io/kubespot/kubespot:<appVersion> by
# .github/workflows/release.yml (the chart's default image). Not built on the development machines,
# which have no Docker engine: keep it simple. By hand: docker build -t <registry>/kubespot:0.1.0 .
#
# Runs as a non-root user (1000, the chart's runAsUser) and works with a read-only root filesystem:
# nothing is written at run time (no bytecode caches); the chart mounts an emptyDir at /tmp.
# Only the product's runtime dependencies are installed: the simulators' extras ([sim]) stay out.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m venv /opt/kubespot \
 && /opt/kubespot/bin/pip install '.[controller]' \
 && /opt/kubespot/bin/python -m compileall -q /opt/kubespot

FROM python:3.11-slim
# MALLOC_ARENA_MAX=2: glibc gives each thread that allocates its own malloc arena; the controller's
# AWS SDK worker threads made its peak RSS 35-50 MiB higher for no speed (docs/PERFORMANCE.md).
ENV PATH=/opt/kubespot/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2
RUN groupadd --gid 1000 kubespot \
 && useradd --uid 1000 --gid 1000 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kubespot
COPY --from=build /opt/kubespot /opt/kubespot
USER 1000:1000
ENTRYPOINT ["kubespot"]
CMD ["agent"]
