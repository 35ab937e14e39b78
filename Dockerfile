# Multi-stage build of svc with the pinned OPA binary beside it.
# Build:  docker build -t svc .
# Run:    docker run -p 8080:8080 -e SVC_HOST=0.0.0.0 svc
FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=1
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags "-s -w" -o /out/svc . \
 && GOBIN=/out go install github.com/open-policy-agent/opa@v1.22.0

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/svc --create-home svc
COPY --from=build /out/svc /out/opa /usr/local/bin/
USER svc
WORKDIR /var/lib/svc
ENV SVC_HOST=0.0.0.0 \
    SVC_PORT=8080 \
    SVC_HOLDS_PATH=/var/lib/svc/svc.db \
    SVC_AUDIT_LOG=/var/lib/svc/audit.jsonl
VOLUME ["/var/lib/svc"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD ["/bin/sh", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080"]
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["serve"]
