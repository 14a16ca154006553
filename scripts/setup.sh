#!/usr/bin/env bash
# Installs every Debian package that keplershm needs to build, test and benchmark.
# Idempotent: packages already present are left alone; needs root (apt-get).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake pkg-config git
  # eBPF: libbpf, BTF-driven skeletons
  libbpf-dev libelf-dev zlib1g-dev clang llvm bpftool
  # libraries named in DESIGN.md
  # xgboost (the CLI): its file is named by xgboost-config.cmake, which fails without it
  # prometheus-cpp: the transport benchmark's Prometheus peer and the tests' reading of /metrics;
  # civetweb: kepler-estimate's /metrics server (the one prometheus-cpp embeds)
  libboost-dev prometheus-cpp-dev libcivetweb-dev libxgboost-dev xgboost libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # JSON, CLI parsing, HTTP client (kubelet, model server), SHA-256 (OpenSSL), zip archives (Kepler's model DB)
  nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libssl-dev libzip-dev
  # benchmark baselines (unix-socket JSON path)
  rapidjson-dev libsimdjson-dev
  # kepler-feed: gRPC and protobuf (C++ code and Python stubs generated at build time), the Python client,
  # openssl for the TLS tests' throwaway certificates
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf openssl
  # Python research clients
  python3 python3-numpy python3-xgboost python3-pytest python3-matplotlib python3-yaml
  # tests only: Kepler's own stack as the parity reference (scaler.pkl is loaded by joblib in tests, never in the product)
  python3-sklearn python3-joblib
  # test and check tools: Prometheus server + promtool, ABI checks, fuzzers, perf
  prometheus abigail-tools libclang-rt-14-dev linux-perf iproute2 procps
  # containers (deploy/containers, deploy.containers): rootful podman 4.3 with netavark, base images from
  # debootstrap; runc where crun refuses cgroup hybrid mode (deploy/containers/podman-env.sh)
  podman crun runc conmon catatonit netavark aardvark-dns iptables uidmap slirp4netns fuse-overlayfs
  containernetworking-plugins golang-github-containers-common debootstrap curl
  # VMs as hosts run them: a real QEMU guest (TCG, no KVM needed) in the VM end-to-end test
  qemu-system-x86
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # libboost1.81-dev conflicts with Debian's python3-xgboost; libboost-dev (1.74) is the one we use.
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup.sh: all ${#packages[@]} packages present"
