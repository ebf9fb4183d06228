# The backend and the edge, one Dockerfile with two targets:
#   docker build --target backend -t vouchergate-backend .
#   docker build --target edge    -t vouchergate-edge .
# Both are static Go binaries (CGO_ENABLED=0; the Lua scripts and migrations are embedded) on
# distroless static: CA certificates, /etc/passwd with the nonroot user, no shell. The one extra
# file is busybox's wget (static, ~1 MB), so that docker-compose can health-check /readyz.
#
# It needs no BuildKit (no syntax line, no heredoc, no RUN --mount nor other BuildKit-only flag),
# which Debian's docker.io 20.10 with docker-compose 1.29 leave off: written for the classic
# builder, checked by reading it (go test ./configs/), not by a build with that pair.
# The modules are downloaded in a layer of their own, so a change to the code rebuilds from
# there; the compile cache is not kept between builds.
#
# Images are pinned to a release; distroless has no release tags, only the rolling nonroot
# tag (pin it by digest for a reproducible build: crane digest gcr.io/distroless/static-debian12:nonroot).

# The Go release go.mod names (a test holds them equal).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first: their layer survives a change to the code.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-s -w" -o /out/backend ./backend && \
    go build -trimpath -ldflags "-s -w" -o /out/edge ./edge

# busybox's musl build is statically linked; called as "wget" it is wget.
FROM busybox:1.36.1-musl AS wget

FROM gcr.io/distroless/static-debian12:nonroot AS base
COPY --from=wget /bin/busybox /usr/local/bin/wget
USER nonroot:nonroot

FROM base AS backend
COPY --from=build /out/backend /usr/local/bin/backend
ENV VG_BACKEND_ADDR=0.0.0.0:8080 VG_BACKEND_OPS_ADDR=0.0.0.0:9080
EXPOSE 8080 9080
ENTRYPOINT ["/usr/local/bin/backend"]

FROM base AS edge
COPY --from=build /out/edge /usr/local/bin/edge
ENV VG_EDGE_ADDR=0.0.0.0:8081 VG_EDGE_OPS_ADDR=0.0.0.0:9081
EXPOSE 8081 9081
ENTRYPOINT ["/usr/local/bin/edge"]
