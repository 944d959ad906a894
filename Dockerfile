# The io-engine image: the daemon (io-engine), its CLI (io-engine-ctl) and
# the perf tool (bdev-perf) on a slim Debian, running as an unprivileged
# user unless the deployment asks for more (VFIO needs root).
#
# From source, with any OCI builder:
#
#   docker build -t io-engine .
#   buildah bud --layers -t io-engine .
#
# From binaries built on the host (what scripts/build-image does, with a
# Debian base made by debootstrap; see docs/operations.md):
#
#   cargo build --release --bin io-engine --bin io-engine-ctl --bin bdev-perf
#   buildah bud --isolation chroot --build-arg BINARIES=prebuilt \
#     --build-arg RUNTIME_IMAGE=localhost/io-engine-base:bookworm -t io-engine .
#
# Build arguments:
#   BUILDER_IMAGE  the Rust image of the build stage (a registry mirror's copy works)
#   RUNTIME_IMAGE  the Debian image the engine runs on; its glibc must be at
#                  least as new as the one the binaries were built against
#   BINARIES       `builder` (compile in the build stage) or `prebuilt`
#                  (take target/release/ from the build context)
#   GIT_REVISION   the revision that --version and io_engine_build_info report
#                  (.git is not part of the build context)
#   VERSION        the version label

ARG BUILDER_IMAGE=rust:1.95.0-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG BINARIES=builder

# --- build stage: the release binaries from source -------------------------
FROM ${BUILDER_IMAGE} AS builder
ARG GIT_REVISION=unknown
WORKDIR /src
# The workspace: every member must be present for cargo to load it.
COPY Cargo.toml Cargo.lock rust-toolchain.toml rustfmt.toml ./
COPY proto proto
COPY io-engine io-engine
COPY ctl ctl
COPY tests tests
RUN IO_ENGINE_GIT_REVISION="${GIT_REVISION}" \
      cargo build --release --locked --bin io-engine --bin io-engine-ctl --bin bdev-perf \
 && mkdir /out \
 && cp target/release/io-engine target/release/io-engine-ctl target/release/bdev-perf /out/

# --- or: binaries built outside (cargo build --release on the host) --------
FROM scratch AS prebuilt
COPY target/release/io-engine target/release/io-engine-ctl target/release/bdev-perf /out/

# The stage chosen by BINARIES.
FROM ${BINARIES} AS binaries

# --- runtime stage ------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime
ARG GIT_REVISION=unknown
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="io-engine" \
      org.opencontainers.image.description="Userspace I/O engine: pinned reactors, block devices, NBD export, gRPC control plane, Prometheus metrics" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/io-engine/io-engine" \
      org.opencontainers.image.documentation="https://github.com/io-engine/io-engine/blob/main/docs/operations.md"
# The unprivileged user the engine runs as by default (malloc and null
# devices, hugepages from the pod's hugetlb limit, NBD and gRPC need no
# privilege). Deployments that bind devices to VFIO run it as root.
RUN groupadd --system --gid 10001 io-engine \
 && useradd --system --uid 10001 --gid io-engine --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin io-engine
COPY --from=binaries /out/ /usr/local/bin/
# The image's defaults: listen on every interface. It is the lowest layer
# of configuration: flags, IO_ENGINE_* variables and a --config file of
# one's own (or one mounted over this path) all take precedence.
COPY deploy/image/io-engine.toml /etc/io-engine/io-engine.toml
ENV IO_ENGINE_CONFIG=/etc/io-engine/io-engine.toml
# gRPC API, Prometheus metrics, NBD.
EXPOSE 10124 9502 10809
USER 10001:10001
# No HEALTHCHECK: Kubernetes probes the gRPC health service itself
# (deploy/kubernetes/base/daemonset.yaml); elsewhere, `io-engine-ctl engine info`.
ENTRYPOINT ["/usr/local/bin/io-engine"]
