# The redislock image: one static binary with every mode (controller, agent).
# Its version is the chart's appVersion, which the binary embeds too:
#   v=$(sed -n 's/^appVersion: //p' charts/redislock/Chart.yaml)
#   docker build --build-arg VERSION=$v -t ghcr.io/redislock/redislock:$v .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# The main package's sources (test/e2e/dockerfile_test.go checks this list).
COPY main.go ./
COPY charts/redislock/Chart.yaml charts/redislock/
COPY api/ api/
COPY internal/ internal/
COPY pkg/ pkg/
# Set by BuildKit from --platform; the build stage cross-compiles.
ARG TARGETOS TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/redislock .

# distroless/static: no shell, no libc; nonroot runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION
LABEL org.opencontainers.image.title=redislock \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.source=https://github.com/redislock/redislock \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /out/redislock /redislock
USER 65532:65532
ENTRYPOINT ["/redislock"]
