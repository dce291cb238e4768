# Guardian as a sidecar container: non-root, healthchecked, with the Docker socket mounted.
#   docker build -t guardian .
#   docker run -d --name guardian -v /var/run/docker.sock:/var/run/docker.sock \
#     --group-add "$(stat -c %g /var/run/docker.sock)" -v guardian-state:/var/lib/guardian guardian
# Any Debian-based image with python3 (>= 3.11) and its venv module works as the base.
ARG BASE_IMAGE=python:3.12-slim-bookworm

FROM ${BASE_IMAGE} AS build
# pip honours these when given, e.g. a mirror or a directory of wheels for offline builds.
ARG PIP_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_NO_INDEX
WORKDIR /src
COPY pyproject.toml README.md ./
COPY guardian ./guardian
RUN python3 -m venv /opt/guardian \
    && /opt/guardian/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && /opt/guardian/bin/pip uninstall --yes --disable-pip-version-check pip setuptools

FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="container-guardian" \
      org.opencontainers.image.description="Keeps the containers of a Docker host healthy: detect, decide, restart, verify, record." \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      guardian.self="true"
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/guardian --no-create-home \
        --shell /usr/sbin/nologin guardian \
    && install -d -o guardian -g guardian -m 0750 /var/lib/guardian
COPY --from=build /opt/guardian /opt/guardian
ENV PATH=/opt/guardian/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    GUARDIAN_HTTP_LISTEN=0.0.0.0:9321 \
    GUARDIAN_STORE_PATH=/var/lib/guardian/guardian.db
USER 10001:10001
WORKDIR /var/lib/guardian
VOLUME /var/lib/guardian
EXPOSE 9321
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["guardian", "healthcheck"]
ENTRYPOINT ["guardian"]
CMD ["run"]
