# bootimage-webhook container image.
#
#   docker build -t quay.io/example/bootimage-webhook:latest .
#   buildah build -t quay.io/example/bootimage-webhook:latest .
#
# Runtime base: distroless static-debian12, not UBI 9 micro. The binary links
# Debian 12's glibc statically (crt-static; TLS is rustls with ring, no OpenSSL),
# so the base needs no C library: CA certificates, tzdata, /etc/passwd and
# nothing else: no shell, no package manager. cc-debian12 (glibc with its iconv
# modules, libgcc_s, libssl, libstdc++), none of which the binary uses, would be
# most of the image, on arm64 more than the binary (docs/image.md). A FIPS build (system OpenSSL)
# would need a UBI build stage and runtime instead.
# Pin both bases by digest for release builds.
#
# Both bases are build arguments whose defaults are the public images; a machine
# that reaches no image registry passes local stand-ins (scripts/image-bases,
# scripts/build-image). Behind a TLS-intercepting proxy, mount the proxy's CA
# bundle over the build image's for the build only, never into a layer:
#   podman build --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro .
#
# Targets: the default (last) stage builds the binary in the Rust stage; the
# target runtime-prebuilt wraps a static binary already built (scripts/build-static),
# taken from the build context (build argument BINARY), for any architecture:
#   buildah build --platform linux/arm64 --target runtime-prebuilt --build-arg BINARY=bootimage-webhook CONTEXT
# scripts/build-multiarch makes the amd64 and arm64 images and their manifest list.

ARG RUST_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
# The cache mounts keep the crate registry and target/ between builds (BuildKit
# and buildah); the binary is copied out of target/ in the same step, because a
# cache mount is not part of the layer. The image profile is the release build
# without symbols; --target keeps crt-static off the build scripts and proc macros.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    triple=$(rustc --print host-tuple) \
    && RUSTFLAGS="-C target-feature=+crt-static" \
       cargo build --profile image --locked --target "$triple" --bin bootimage-webhook \
    && install -D -m 0755 "target/$triple/image/bootimage-webhook" /out/bootimage-webhook

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
