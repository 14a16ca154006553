#!/usr/bin/env bash
# Builds the two images of deploy/images/*.Dockerfile with podman, without any container registry:
#   1. a Debian 12 base rootfs made with `debootstrap --variant=minbase bookworm` (Debian's package
#      registry only), cached under $KEPLERSHM_CACHE_DIR (default /var/cache/keplershm), imported as
#      localhost/keplershm/debian:bookworm;
#   2. kepler-collect, kepler-estimate, keplershm-probe and keplershm-segment-size built on this host with the
#      project's CMake (this host must be Debian 12: the runtime stages install bookworm's libraries);
#   3. `podman build` of both Dockerfiles with BINARIES=prebuilt on that base:
#        keplershm/kepler-collect:0.1.0, keplershm/kepler-estimate:0.1.0 (the names the manifests use).
# Idempotent: a second run reuses the cached rootfs, the imported base, the build directory and podman's
# layer cache. Needs root (debootstrap, rootful podman). Documented in deploy/README.md.
#
# Environment:
#   KEPLERSHM_BUILD_DIR   CMake build directory (default: <repo>/build; configured here if it is not yet)
#   KEPLERSHM_CACHE_DIR   where the base rootfs is kept (default: /var/cache/keplershm)
#   KEPLERSHM_JOBS        parallel compile jobs (default: nproc)
#   KEPLERSHM_DEBIAN_MIRROR  (default: http://deb.debian.org/debian)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=${KEPLERSHM_BUILD_DIR:-$repo/build}
cache_dir=${KEPLERSHM_CACHE_DIR:-/var/cache/keplershm}
jobs=${KEPLERSHM_JOBS:-$(nproc)}
mirror=${KEPLERSHM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
base_image=localhost/keplershm/debian:bookworm
version=0.1.0

die() { echo "build.sh: $*" >&2; exit 1; }
log() { echo "build.sh: $*" >&2; }

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap and rootful podman); run: sudo bash $0"
for tool in podman debootstrap cmake; do
  command -v "$tool" >/dev/null || die "'$tool' is not installed; run: bash scripts/setup.sh"
done
. "$repo/deploy/containers/podman-env.sh"
keplershm_podman_env

# The prebuilt binaries link this host's libraries; the images install bookworm's. Any other host would
# produce binaries the runtime stage cannot satisfy (different sonames), so refuse rather than build them.
. /etc/os-release
[[ ${ID:-} == debian && ${VERSION_ID:-} == 12 ]] ||
  die "this host is ${PRETTY_NAME:-unknown}, not Debian 12: binaries built here would not match the images' bookworm libraries"

# One build at a time per cache directory (two would debootstrap into the same directory).
mkdir -p "$cache_dir"
exec 9>"$cache_dir/build.lock"
flock 9

# 1. Base rootfs, cached. A rootfs is only used once debootstrap finished (the .complete marker), so an
#    interrupted run starts over instead of importing half a system.
rootfs=$cache_dir/bookworm-minbase
if [[ ! -f $rootfs/.complete ]]; then
  log "debootstrap --variant=minbase bookworm into $rootfs (once; cached afterwards)"
  mkdir -p "$cache_dir"
  rm -rf "$rootfs.tmp"
  debootstrap --variant=minbase bookworm "$rootfs.tmp" "$mirror" >"$cache_dir/debootstrap.log" 2>&1 ||
    die "debootstrap failed (is $mirror reachable?); last lines of $cache_dir/debootstrap.log:
$(tail -n 5 "$cache_dir/debootstrap.log")"
  # Security and point-release updates, as in Debian's own images.
  cat >"$rootfs.tmp/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
EOF
  # What debian:bookworm-slim leaves out of packages installed later (documentation, man pages, locales):
  # the runtime images stay small without a cleanup step in every Dockerfile.
  cat >"$rootfs.tmp/etc/dpkg/dpkg.cfg.d/keplershm-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  # ... and, as Debian's own container images do, no downloaded .deb files or apt caches left in layers.
  cat >"$rootfs.tmp/etc/apt/apt.conf.d/keplershm-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Install-Recommends "false";
EOF
  rm -rf "$rootfs.tmp"/var/cache/apt/archives/*.deb "$rootfs.tmp"/var/cache/apt/*.bin "$rootfs.tmp"/var/lib/apt/lists/* \
         "$rootfs.tmp"/usr/share/doc/* "$rootfs.tmp"/usr/share/man/* "$rootfs.tmp"/usr/share/locale/*
  touch "$rootfs.tmp/.complete"
  rm -rf "$rootfs"
  mv "$rootfs.tmp" "$rootfs"
  podman image rm --force "$base_image" >/dev/null 2>&1 || true  # a new rootfs replaces the old import
fi

# Re-import when the rootfs is newer than the image (e.g. the cache was rebuilt by hand).
stamp=$(stat -c %Y "$rootfs/.complete")
if [[ $(podman image inspect --format '{{index .Labels "keplershm.rootfs-stamp"}}' "$base_image" 2>/dev/null) != "$stamp" ]]; then
  log "importing $rootfs as $base_image"
  tar --exclude=./.complete -C "$rootfs" -c . |
    podman import --change "LABEL keplershm.rootfs-stamp=$stamp" --change 'CMD ["/bin/bash"]' - "$base_image" >/dev/null
fi

# 2. The binaries, built here with the project's CMake (only the five targets the images ship).
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  log "configuring $build_dir"
  cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEPLERSHM_BUILD_BENCHMARKS=OFF >/dev/null
fi
log "building kepler-collect kepler-estimate kepler-feed keplershm-probe keplershm-segment-size in $build_dir (-j$jobs)"
nice -n 10 cmake --build "$build_dir" -j"$jobs" \
  --target kepler-collect kepler-estimate kepler-feed keplershm-probe keplershm-segment-size >/dev/null ||
  die "the CMake build failed; rerun: cmake --build $build_dir --target kepler-collect kepler-estimate kepler-feed keplershm-probe keplershm-segment-size"

# 3. The images. The context holds only prebuilt/{bin,lib}: debug info stripped (as the source stage does).
context=$(mktemp -d /tmp/keplershm-image-context.XXXXXX)
trap 'rm -rf "$context"' EXIT
build_image() {
  local image=$1; shift
  rm -rf "${context:?}/prebuilt"
  mkdir -p "$context/prebuilt/bin" "$context/prebuilt/lib"
  for binary in "$@"; do
    strip --strip-debug -o "$context/prebuilt/bin/$binary" "$build_dir/bin/$binary"
  done
  local library
  for library in "$build_dir"/lib/libkeplershm.so.*.*.*; do  # the real file, whatever the ABI version
    strip --strip-debug -o "$context/prebuilt/lib/${library##*/}" "$library"
  done
  log "podman build keplershm/$image:$version"
  podman ${KEPLERSHM_OCI_RUNTIME:+--runtime "$KEPLERSHM_OCI_RUNTIME"} build --layers \
    --build-arg BUILD_BASE="$base_image" --build-arg RUNTIME_BASE="$base_image" --build-arg BINARIES=prebuilt \
    -f "$repo/deploy/images/$image.Dockerfile" -t "keplershm/$image:$version" "$context" \
    >"$cache_dir/podman-build-$image.log" 2>&1 ||
    die "podman build of $image failed; last lines of $cache_dir/podman-build-$image.log:
$(tail -n 15 "$cache_dir/podman-build-$image.log")"
}
build_image kepler-collect kepler-collect keplershm-probe keplershm-segment-size
build_image kepler-estimate kepler-estimate kepler-feed keplershm-probe

podman image ls --filter reference='keplershm/*' --format '{{.Repository}}:{{.Tag}} {{.Size}}'
