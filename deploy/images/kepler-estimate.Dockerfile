# syntax=docker/dockerfile:1
# kepler-estimate image: Debian 12, built with the project's own CMake, runtime stage with only the shared
# libraries the binaries need. It also carries kepler-feed (the optional gRPC feed, deploy/kubernetes/feed):
# both are unprivileged readers of the segment, so they share an image and its user; runs as uid/gid 65532 (the group the collector's segment belongs to, see
# deploy/README.md). Build from the repository root:
#   docker build -f deploy/images/kepler-estimate.Dockerfile -t keplershm/kepler-estimate:0.1.0 .
# Build arguments BUILD_BASE, RUNTIME_BASE and BINARIES=source|prebuilt: as in kepler-collect.Dockerfile.
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim
ARG BINARIES=source

FROM ${BUILD_BASE} AS source
# xgboost (the command-line package): Debian's xgboost-config.cmake names a file it installs.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config python3 \
      libboost-dev libfmt-dev libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev \
      libcivetweb-dev zlib1g-dev libxgboost-dev xgboost libzip-dev \
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DKEPLERSHM_COMPONENTS="kepler-estimate;kepler-feed;deploy" \
      -DKEPLERSHM_BUILD_TESTS=OFF -DKEPLERSHM_BUILD_BENCHMARKS=OFF \
 && cmake --build build -j"$(nproc)" --target kepler-estimate kepler-feed keplershm-probe \
 && strip --strip-debug build/bin/kepler-estimate build/bin/kepler-feed build/bin/keplershm-probe \
 && mkdir -p /out/bin /out/lib \
 && cp build/bin/kepler-estimate build/bin/kepler-feed build/bin/keplershm-probe /out/bin/ \
 && cp build/lib/libkeplershm.so.1.5.0 /out/lib/

FROM scratch AS prebuilt
COPY prebuilt/ /out/

FROM ${BINARIES} AS build

FROM ${RUNTIME_BASE}
# libcivetweb1 + zlib1g: /metrics (gzip); libxgboost0: XGBoost models; libfmt9; libcurl4 + ca-certificates:
# the model server; libssl3: libcrypto (the models' SHA-256 digests); libgrpc++1.51, libgrpc29,
# libprotobuf32, libabsl20220623: kepler-feed. libc6, libstdc++6 and libgcc-s1 are in every Debian image.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcivetweb1 zlib1g libxgboost0 libzip4 libfmt9 libcurl4 libssl3 ca-certificates \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bin/kepler-estimate /out/bin/kepler-feed /out/bin/keplershm-probe /usr/local/bin/
COPY --from=build /out/lib/libkeplershm.so.1.5.0 /usr/local/lib/
RUN ldconfig && mkdir -p /var/lib/kepler-estimate/models && chown 65532:65532 /var/lib/kepler-estimate/models
USER 65532:65532
EXPOSE 9102 9106
ENTRYPOINT ["/usr/local/bin/kepler-estimate"]
CMD ["--shm-name=keplershm"]
