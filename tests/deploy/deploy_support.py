"""Helpers for the deploy/ tests: where things are, YAML and quantities, the binaries' real options, and
short-lived collector/estimator processes. Paths come from the environment CTest sets
(tests/deploy/CMakeLists.txt), so the tests check the binaries of this very build."""
import contextlib
import os
import re
import socket
import subprocess
import time
import urllib.request

import yaml

SOURCE_DIR = os.environ.get("KEPLERSHM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY_DIR = os.path.join(SOURCE_DIR, "deploy")
KUBE_DIR = os.path.join(DEPLOY_DIR, "kubernetes")
COLLECT = os.environ.get("KEPLERSHM_COLLECT", "")
ESTIMATE = os.environ.get("KEPLERSHM_ESTIMATE", "")
PROBE = os.environ.get("KEPLERSHM_PROBE", "")
SEGMENT_SIZE = os.environ.get("KEPLERSHM_SEGMENT_SIZE", "")
LIBRARY = os.environ.get("KEPLERSHM_LIBRARY", "")

_QUANTITY_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 10**3, "M": 10**6, "G": 10**9}


def load_documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def kube_documents(*relative_paths):
    docs = []
    for relative in relative_paths:
        docs.extend(load_documents(os.path.join(KUBE_DIR, relative)))
    return docs


def parse_quantity(text):
    """Kubernetes quantities and the collector's sizes: 192Mi, 64Mi, 1Gi, 4096."""
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|k|M|G|)", str(text))
    if not match:
        raise ValueError(f"not a byte quantity: {text!r}")
    return int(match.group(1)) * _QUANTITY_UNITS[match.group(2)]


def split_flag(arg):
    """'--name=value' -> ('--name', 'value'); '--flag' -> ('--flag', None)."""
    name, sep, value = arg.partition("=")
    return name, (value if sep else None)


def flag_value(args, name):
    for arg in args:
        flag, value = split_flag(arg)
        if flag == name:
            return value
    return None


def help_options(binary):
    """Every --option the binary's --help lists (CLI11 and the probe print them the same way)."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", out))


def container(pod_spec, name):
    for c in pod_spec.get("containers", []):
        if c["name"] == name:
            return c
    raise KeyError(f"no container {name!r}")


def pod_spec(daemonset):
    return daemonset["spec"]["template"]["spec"]


def volume(pod_spec_, name):
    for v in pod_spec_.get("volumes", []):
        if v["name"] == name:
            return v
    raise KeyError(f"no volume {name!r}")


def mount_at(container_, path):
    for m in container_.get("volumeMounts", []):
        if m["mountPath"] == path:
            return m
    return None


def probe_commands(container_):
    return {kind: container_[kind]["exec"]["command"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")
            if kind in container_ and "exec" in container_[kind]}


def unique_name(stem):
    return f"kshm-deploy-{stem}-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def segment_size(capacities_args, cpus):
    """Bytes of a segment for the collector options in capacities_args, from the real library."""
    argv = [SEGMENT_SIZE, "--cpus", str(cpus)]
    for name in ("--process-capacity", "--workload-capacity", "--string-capacity", "--slots"):
        value = flag_value(capacities_args, name)
        if value is not None:
            argv += [name, value]
    return int(subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout)


def wait_for(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


@contextlib.contextmanager
def running(argv, log_path):
    """A child process for the duration of a with-block, stopped with SIGTERM (then SIGKILL)."""
    with open(log_path, "wb") as log:
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def scrape(port, timeout=5):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        return r.read().decode()


def metric_names(exposition):
    names = set()
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return names
