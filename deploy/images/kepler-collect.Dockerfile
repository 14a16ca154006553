# syntax=docker/dockerfile:1
# kepler-collect image: Debian 12, built with the project's own CMake, runtime stage with only the shared
# libraries the binaries need. Build from the repository root (BuildKit reads the .dockerignore beside this
# file):
#   docker build -f deploy/images/kepler-collect.Dockerfile -t keplershm/kepler-collect:0.1.0 .
# The CO-RE eBPF program is compiled against a kernel BTF file at build time (any kernel's: relocations
# happen at load time on the node). By default the build host's /sys/kernel/btf/vmlinux; pass another with
#   --build-arg KEPLER_VMLINUX_BTF=/src/path/in/context/vmlinux
#
# Build arguments (defaults: Docker Hub's Debian 12 and a compile in the image):
#   BUILD_BASE, RUNTIME_BASE  the Debian 12 images to start from; deploy/containers/build.sh passes a base it
#                             made with debootstrap, where no container registry is reachable
#   BINARIES=source           compile in the "source" stage below
#   BINARIES=prebuilt         take the binaries already built on a Debian 12 host from the context's
#                             prebuilt/{bin,lib}/ (deploy/containers/build.sh): the same bookworm libraries as
#                             the runtime stage installs, without downloading a toolchain into a build image.
#                             Builders skip the stage they do not use (BuildKit, buildah).
#   podman/buildah 4.3/1.28 pick stages before applying ARG defaults ("short-name "source" did not resolve"):
#   there pass --build-arg BINARIES=source explicitly.
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim
ARG BINARIES=source

FROM ${BUILD_BASE} AS source
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config python3 \
      libbpf-dev libelf-dev zlib1g-dev clang llvm bpftool \
      libboost-dev libfmt-dev libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
ARG KEPLER_VMLINUX_BTF=/sys/kernel/btf/vmlinux
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DKEPLERSHM_COMPONENTS="bpf;kepler-collect;deploy" \
      -DKEPLERSHM_BUILD_TESTS=OFF -DKEPLERSHM_BUILD_BENCHMARKS=OFF \
      -DKEPLER_VMLINUX_BTF="${KEPLER_VMLINUX_BTF}" \
 && cmake --build build -j"$(nproc)" --target kepler-collect keplershm-probe keplershm-segment-size \
 && strip --strip-debug build/bin/kepler-collect build/bin/keplershm-probe build/bin/keplershm-segment-size \
 && mkdir -p /out/bin /out/lib \
 && cp build/bin/kepler-collect build/bin/keplershm-probe build/bin/keplershm-segment-size /out/bin/ \
 && cp build/lib/libkeplershm.so.1.5.0 /out/lib/

FROM scratch AS prebuilt
COPY prebuilt/ /out/

FROM ${BINARIES} AS build

FROM ${RUNTIME_BASE}
# libbpf1, libelf1, zlib1g: loading the eBPF program; libfmt9: logging; libcurl4 + ca-certificates: pod
# names from the API server (TLS); libssl3: libcrypto (SHA-256). libc6, libstdc++6 and libgcc-s1 are in every Debian image.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libbpf1 libelf1 zlib1g libfmt9 libcurl4 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bin/kepler-collect /out/bin/keplershm-probe /out/bin/keplershm-segment-size /usr/local/bin/
COPY --from=build /out/lib/libkeplershm.so.1.5.0 /usr/local/lib/
RUN ldconfig  # creates libkeplershm.so.1 from the library's SONAME
# Root, but the pod spec (deploy/kubernetes) drops every capability except CAP_BPF and CAP_PERFMON.
USER 0:65532
ENTRYPOINT ["/usr/local/bin/kepler-collect"]
CMD ["--shm-name=keplershm"]
