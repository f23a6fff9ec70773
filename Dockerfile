# svcnet's container image, the same as `make image` builds without Docker
# (hack/mkimage, internal/image): the static svcnet binary at
# /usr/local/bin/svcnet (on $PATH, as the deploy/ manifests' commands expect)
# over a distroless-like base: /etc/passwd and /etc/group (root, nobody,
# nonroot) and /etc/nsswitch.conf from internal/image/rootfs, a sticky /tmp,
# nonroot's home. svcnet's components run no other program.
#
#   docker build -t ghcr.io/svcnet/svcnet:$(git describe --tags --always --dirty) \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#
# The image digests differ from `make image`'s (builders stamp time stamps
# and layer boundaries their own way); the files and configuration do not.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# The ldflags of `make build`; static, as `make image` builds it.
RUN CGO_ENABLED=0 go build \
      -ldflags "-X github.com/svcnet/svcnet/internal/version.Version=${VERSION} -X github.com/svcnet/svcnet/internal/version.Commit=${COMMIT}" \
      -o /rootfs/usr/local/bin/svcnet ./cmd/svcnet \
 && mkdir -p /rootfs/etc \
 && install -m 0644 internal/image/rootfs/etc/* /rootfs/etc/ \
 && mkdir -m 1777 /rootfs/tmp \
 && mkdir -p /rootfs/home && mkdir -m 0700 /rootfs/home/nonroot && chown 65532:65532 /rootfs/home/nonroot

FROM scratch
COPY --from=build /rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["/usr/local/bin/svcnet"]
