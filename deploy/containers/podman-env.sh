# Sourced by build.sh, run.sh and tests/deploy/containers_test.sh: points podman at a containers.conf
# (CONTAINERS_CONF) written for this host, because podman 4.3's defaults fail on hosts like the CI machines:
#
# - Rootful podman gives every container RLIMIT_NOFILE 1048576 and a large RLIMIT_NPROC. Raising a hard
#   limit needs CAP_SYS_RESOURCE, which a root that is itself confined (a CI sandbox) may lack: crun/runc
#   then fail with "setrlimit `RLIMIT_NOFILE`: Operation not permitted". The limits below never exceed
#   what this shell has (nofile), resp. the 32768 processes podman's conmon gets (nproc, observed).
# - crun refuses cgroup "hybrid mode" ("drop all controllers from cgroupv2") when a cgroup v1 host also
#   has a cgroup2 mount with controllers in it (/sys/fs/cgroup/unified with hugetlb, here); runc runs
#   there, so it is used on such hosts only.
#
# Needs: $cache_dir (where the file is written).
keplershm_podman_env() {
  local conf=$cache_dir/containers.conf nofile nproc runtime=
  nofile=$(ulimit -Hn)
  [[ $nofile == unlimited || $nofile -gt 1048576 ]] && nofile=1048576
  nproc=$(ulimit -Hu)
  [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
  # (cgroupfs files report size 0: read it rather than test -s)
  if [[ -n $(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null) ]]; then
    command -v runc >/dev/null || { echo "podman-env: this host has cgroup v1 plus a cgroup2 mount with controllers, which crun refuses; install runc (scripts/setup.sh)" >&2; return 1; }
    runtime='runtime = "runc"'
    export KEPLERSHM_OCI_RUNTIME=runc  # podman build's RUN steps ignore [engine] runtime: pass --runtime
  fi
  mkdir -p "$cache_dir"
  cat >"$conf.tmp" <<EOF
# Written by deploy/containers/podman-env.sh for this host; see the comments there.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
$runtime
EOF
  mv "$conf.tmp" "$conf"
  export CONTAINERS_CONF=$conf
}
