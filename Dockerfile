# svc, with the pinned OPA binary beside it (docs/deploy.md).
# Build:  docker build --build-arg VERSION=0.3.0 --build-arg COMMIT=$(git rev-parse HEAD) -t svc .
# Run:    docker compose up (docker-compose.yml), or
#         docker run -p 127.0.0.1:8080:8080 -e SVC_AUTH_TOKEN=... svc
# Every base image is pinned to an exact release tag (deploy/deploy_test.go
# checks it); pin by digest too (image:tag@sha256:...) where your registry
# policy asks for it.

# OPA is copied from its release image, not compiled here: the static build
# runs on any base.
FROM openpolicyagent/opa:1.22.0-static AS opa

FROM golang:1.26.8-bookworm AS build
ARG VERSION=0.3.0
ARG COMMIT=unknown
WORKDIR /src
ENV CGO_ENABLED=1
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/svc-dev/svc/cmd.Version=${VERSION} -X github.com/svc-dev/svc/cmd.Commit=${COMMIT}" \
      -o /out/svc .

FROM debian:12.12-slim
# The user's uid and gid are fixed (10001) so that a host file bind-mounted
# as a compose secret can be chowned to it (docs/deploy.md, "Secrets").
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 svc \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/svc --create-home --shell /usr/sbin/nologin svc
COPY --from=build /out/svc /usr/local/bin/svc
COPY --from=opa /opa /usr/local/bin/opa
USER 10001:10001
WORKDIR /var/lib/svc
ENV SVC_HOST=0.0.0.0 \
    SVC_PORT=8080 \
    SVC_OPA_BIN=/usr/local/bin/opa \
    SVC_HOLDS_PATH=/var/lib/svc/svc.db \
    SVC_AUDIT_LOG=/var/lib/svc/audit.jsonl
VOLUME ["/var/lib/svc"]
EXPOSE 8080
# The image has no curl: svc probes itself. (The connector, on another
# port, gets its own check in docker-compose.yml.)
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s CMD ["/usr/local/bin/svc", "healthcheck", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["serve"]
