# bootimage-webhook container image.
#
#   docker build -t quay.io/example/bootimage-webhook:latest .
#   buildah build -t quay.io/example/bootimage-webhook:latest .
#
# Runtime base: distroless cc-debian12, not UBI 9 micro. The build stage is
# Debian 12 (glibc 2.36) and the binary links glibc dynamically; distroless
# cc-debian12 ships exactly that glibc (plus libgcc_s and CA certificates) and
# nothing else: no shell, no package manager. UBI 9 has glibc 2.34, older than
# the build's, so a bookworm-built binary may not start there. A FIPS build
# (system OpenSSL) would need a UBI build stage and runtime instead.
# Pin both bases by digest for release builds.
#
# Both bases are build arguments whose defaults are the public images; a machine
# that reaches no image registry passes local stand-ins (scripts/image-bases,
# scripts/build-image). Behind a TLS-intercepting proxy, mount the proxy's CA
# bundle over the build image's for the build only, never into a layer:
#   podman build --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro .
#
# Targets: the default (last) stage builds the binary in the Rust stage; the
# target runtime-prebuilt wraps a binary already built on a Debian 12 (glibc
# 2.36) machine, taken from the build context (build argument BINARY):
#   buildah build --target runtime-prebuilt --build-arg BINARY=bootimage-webhook CONTEXT

ARG RUST_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
# The cache mounts keep the crate registry and target/ between builds (BuildKit
# and buildah); the binary is copied out of target/ in the same step, because a
# cache mount is not part of the layer, and stripped on the way (the release
# profile keeps the symbols for the profilers; the image needs none).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin bootimage-webhook \
    && install -D -s -m 0755 target/release/bootimage-webhook /out/bootimage-webhook

FROM ${RUNTIME_IMAGE} AS runtime-base
ARG RUNTIME_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="bootimage-webhook" \
      org.opencontainers.image.description="Mutating admission webhook that keeps OpenShift MachineSets on the current RHCOS boot image" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${RUNTIME_IMAGE}"
# Numeric, so that runAsNonRoot can check it. OpenShift's restricted-v2 SCC
# replaces it with a UID from the namespace's range; the binary needs no
# particular UID and writes nothing outside /tmp.
USER 65532:65532
# 9443: HTTPS webhook (/mutate-machinesets); 8080: plain-HTTP admin
# (/healthz, /readyz, /metrics).
EXPOSE 9443 8080
ENTRYPOINT ["/usr/local/bin/bootimage-webhook"]
CMD ["serve"]

FROM runtime-base AS runtime-prebuilt
ARG BINARY=bootimage-webhook
COPY --chmod=0755 ${BINARY} /usr/local/bin/bootimage-webhook

FROM runtime-base AS runtime
COPY --from=build /out/bootimage-webhook /usr/local/bin/bootimage-webhook
