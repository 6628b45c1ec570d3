# errtriage: a small image, built in two stages, running as a non-root user.
FROM python:3.12-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/errtriage
COPY pyproject.toml README.md ./
COPY service ./service
RUN /opt/errtriage/bin/pip install ".[speed]"

FROM python:3.12-slim
ENV PATH=/opt/errtriage/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    ERRTRIAGE_HOST=0.0.0.0 \
    ERRTRIAGE_PORT=8080 \
    ERRTRIAGE_RULES_DIR=/etc/errtriage/rules \
    ERRTRIAGE_LOG_FORMAT=json
RUN useradd --system --uid 10001 --no-create-home errtriage
COPY --from=build /opt/errtriage /opt/errtriage
COPY rules /etc/errtriage/rules
VOLUME ["/etc/errtriage/rules"]
USER 10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["errtriage", "serve"]
