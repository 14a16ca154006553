#!/usr/bin/env bash
# Runs the DaemonSet's pod template (deploy/kubernetes/sidecar/daemonset.yaml) on this machine with
# `podman kube play`: kepler-collect and kepler-estimate sharing an in-memory /dev/shm, the estimator's
# /metrics published on the host. The images come from deploy/containers/build.sh.
#
#   bash deploy/containers/run.sh [--pod-name NAME] [--metrics-port PORT] [--timeout SECONDS]
#   bash deploy/containers/run.sh --down [--pod-name NAME]
#
# The Pod is the template as it is, with the few translations pod_from_daemonset.py lists (no API server,
# fields podman 4.3 reads differently, a published port). Then, as the kubelet would, this script runs the
# probes: the startup and readiness probes (`podman exec` of their commands: podman 4.3 ignores both), the
# liveness probes (podman's healthcheck made from the exec probe; the estimator's httpGet from the host),
# and stops with the failing probe's output if one does not pass within --timeout. Periodic probing is not
# done here: podman schedules healthchecks with systemd timers, and hosts without systemd have none.
# An existing pod of the same name is replaced. Needs root.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache_dir=${KEPLERSHM_CACHE_DIR:-/var/cache/keplershm}
pod=keplershm
port=9102
timeout=120
down=0
while (($#)); do
  case $1 in
    --pod-name) pod=$2; shift 2 ;;
    --metrics-port) port=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --down) down=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "run.sh: $*" >&2; }

[[ $(id -u) -eq 0 ]] || die "needs root (the collector container runs as uid 0 with CAP_BPF and CAP_PERFMON)"
command -v podman >/dev/null || die "podman is not installed; run: bash scripts/setup.sh"
. "$repo/deploy/containers/podman-env.sh"
keplershm_podman_env

state=$cache_dir/pods/$pod
mkdir -p "$state"

teardown() {
  if podman pod exists "$pod"; then
    # Without systemd podman logs that it cannot remove healthcheck timers it never had: keep that
    # out of the way, but show everything if the removal itself fails.
    podman pod rm --force --time 30 "$pod" >"$state/down.log" 2>&1 || die "podman pod rm $pod failed: $(cat "$state/down.log")"
  fi
  if [[ -f $state/volumes ]]; then
    while read -r volume _; do
      podman volume rm --force "$volume" >/dev/null
    done <"$state/volumes"
  fi
}

if ((down)); then
  teardown
  rm -rf "$state"
  log "pod $pod removed"
  exit 0
fi

for image in kepler-collect kepler-estimate; do
  podman image exists "keplershm/$image:0.1.0" || die "image keplershm/$image:0.1.0 is missing; run: bash deploy/containers/build.sh"
done
if podman pod exists "$pod"; then
  log "replacing the existing pod $pod"
fi
teardown

/usr/bin/python3 "$repo/deploy/containers/pod_from_daemonset.py" "$repo/deploy/kubernetes/sidecar/daemonset.yaml" \
  --pod-name "$pod" --metrics-port "$port" --volumes "$state/volumes" --probes "$state/probes" >"$state/pod.yaml"

# The pod's emptyDirs, as podman volumes of this pod alone (see pod_from_daemonset.py).
while read -r volume kind size gid; do
  if [[ $kind == tmpfs ]]; then
    mode=1777  # an emptyDir without fsGroup is world-writable, like /dev/shm
    ((gid)) && mode=2775
    # The size as nr_blocks (pages): podman 4.3 takes "size=" in o= for an XFS project quota and refuses it.
    page=$(getconf PAGESIZE)
    podman volume create --opt type=tmpfs --opt device=tmpfs \
      --opt "o=nr_blocks=$(((size + page - 1) / page)),gid=$gid,mode=$mode,nosuid,nodev" "$volume" >/dev/null
  else
    podman volume create "$volume" >/dev/null
  fi
done <"$state/volumes"

# The collector's Localhost profile is looked up, as by the kubelet, in a seccomp directory: the repository's.
if ! podman kube play --seccomp-profile-root "$repo/deploy/kubernetes/seccomp" "$state/pod.yaml" >"$state/play.log" 2>&1; then
  die "podman kube play failed: $(cat "$state/play.log")"
fi

# Probes, in the kubelet's order: startup, then readiness and liveness.
probe() {  # container kind method args...: one attempt; output in $state/probe.out
  local container=$1 kind=$2 method=$3; shift 3
  if [[ $method == httpGet ]]; then
    curl --silent --show-error --fail --max-time 10 -o /dev/null "http://127.0.0.1:$port$1" >"$state/probe.out" 2>&1
  elif [[ $kind == livenessProbe ]]; then
    podman healthcheck run "$pod-$container" >"$state/probe.out" 2>&1  # the healthcheck play made of it
  else
    podman exec "$pod-$container" "$@" >"$state/probe.out" 2>&1
  fi
}
deadline=$((SECONDS + timeout))
for kind in startupProbe readinessProbe livenessProbe; do
  while read -r -u 3 container probe_kind method rest; do  # fd 3: podman exec reads stdin
    [[ $probe_kind == "$kind" ]] || continue
    eval "command=($rest)"  # shell-quoted by pod_from_daemonset.py (shlex.join)
    until probe "$container" "$kind" "$method" "${command[@]}"; do
      if ((SECONDS >= deadline)); then
        podman logs --tail 20 "$pod-$container" >&2 || true
        die "$container: $kind ($method ${command[*]}) still fails after ${timeout}s: $(cat "$state/probe.out")"
      fi
      sleep 1
    done
    log "$container: $kind passed"
  done 3<"$state/probes"
done

log "pod $pod is up: metrics at http://127.0.0.1:$port/metrics (stop with: bash $0 --down --pod-name $pod)"
