#!/usr/bin/python3
"""Prints the Pod that the DaemonSet in deploy/kubernetes/sidecar/daemonset.yaml would create on a node,
as YAML for `podman kube play` (podman 4.3, no Kubernetes, no API server).

The pod template is taken as it is. Only what needs a cluster, or what podman 4.3's kube play reads
differently, is translated, each for the reason given below (deploy/README.md, "Running the pod with
podman", lists the same):

- spec.nodeName is set to this host's name: a DaemonSet pod has it, and $(NODE_NAME) comes from it.
  podman 4.3 resolves `fieldRef` only for metadata fields, so NODE_NAME gets the value itself.
- `--kube=api` becomes `--kube=off` and the kube-api-access volume (a projected ServiceAccount token and
  the cluster CA) is left out: there is no API server, and the collector refuses `--kube=api` without
  one. Container names come from pod metadata only, so plain containers here carry none.
- `seccompProfile` becomes the annotation podman 4.3 reads instead of the field
  (container.seccomp.security.alpha.kubernetes.io/<container>: localhost/<file> or runtime/default);
  run.sh passes `--seccomp-profile-root deploy/kubernetes/seccomp`, the kubelet's seccomp directory here.
- the metrics port gets `hostPort` (--metrics-port): in a cluster the Service reaches the pod network;
  here the host reaches the pod only through a published port.
- `$(VAR)` references in args are expanded from the container's env, as the kubelet does; podman 4.3
  passes them on literally (the collector would call its node "$(NODE_NAME)").
- every emptyDir becomes a claim of a podman volume `<pod>-<volume>` that run.sh creates first (the
  `--volumes` lines): podman 4.3 turns an emptyDir into a disk volume named after the volume alone
  (`shm`), shared by every pod of that name and never removed. `medium: Memory` becomes a tmpfs of
  `sizeLimit` bytes; the pod's fsGroup becomes its group with the setgid bit (mode 2775), as the kubelet
  does; other emptyDirs are podman volumes, which podman fills from the image's directory, owner included.
- httpGet probes are left out: the kubelet sends them from the node, podman 4.3 would run
  `curl -f http://localhost:<port>/...` inside the container, with a named port resolved to 0, in an
  image that has no curl. run.sh sends the GET from the host instead (the published port).
Anything else in the template that podman does not support is ignored by podman, not edited here.
"""
import argparse
import re
import shlex
import socket
import sys

import yaml


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("daemonset", help="deploy/kubernetes/sidecar/daemonset.yaml")
    parser.add_argument("--pod-name", default="keplershm")
    parser.add_argument("--metrics-port", type=int, default=9102, help="host port for the estimator's /metrics")
    parser.add_argument("--node-name", default=socket.gethostname())
    parser.add_argument("--probes", help="write the probes run.sh runs here, one per line: CONTAINER KIND "
                        "exec <shell-quoted command>, or CONTAINER KIND httpGet PATH (KIND: startupProbe, ...)")
    parser.add_argument("--volumes", help="write the volumes run.sh creates here, one per line: "
                        "NAME tmpfs SIZE_BYTES GID, or NAME disk")
    args = parser.parse_args()

    with open(args.daemonset) as f:
        documents = [d for d in yaml.safe_load_all(f) if d]
    daemonsets = [d for d in documents if d.get("kind") == "DaemonSet"]
    if len(daemonsets) != 1:
        sys.exit(f"pod_from_daemonset: expected one DaemonSet in {args.daemonset}, found {len(daemonsets)}")
    template = daemonsets[0]["spec"]["template"]
    spec = template["spec"]
    metadata = dict(template.get("metadata", {}))
    annotations = dict(metadata.get("annotations", {}))

    spec["nodeName"] = args.node_name
    dropped_volumes = set()
    for volume in spec.get("volumes", []):
        if "projected" in volume and any("serviceAccountToken" in s for s in volume["projected"]["sources"]):
            dropped_volumes.add(volume["name"])
    spec["volumes"] = [v for v in spec.get("volumes", []) if v["name"] not in dropped_volumes]
    fs_group = spec.get("securityContext", {}).get("fsGroup", 0)
    volume_lines = []
    for volume in spec["volumes"]:
        empty_dir = volume.pop("emptyDir", None)
        if empty_dir is None:
            continue
        claim = f"{args.pod_name}-{volume['name']}"
        volume["persistentVolumeClaim"] = {"claimName": claim}
        if empty_dir.get("medium") == "Memory":
            if "sizeLimit" not in empty_dir:
                sys.exit(f"pod_from_daemonset: emptyDir {volume['name']} in memory without a sizeLimit")
            volume_lines.append(f"{claim} tmpfs {quantity_bytes(empty_dir['sizeLimit'])} {fs_group}")
        else:
            volume_lines.append(f"{claim} disk")

    published = False
    probe_lines = []
    for container in spec["containers"]:
        name = container["name"]
        values = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        values.update({e["name"]: args.node_name for e in container.get("env", [])
                       if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName"})
        container["args"] = [re.sub(r"\$\((\w+)\)", lambda m: values.get(m.group(1), m.group(0)), a)
                             for a in container.get("args", [])]
        container["args"] = ["--kube=off" if a == "--kube=api" else a for a in container["args"]]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if "exec" in container.get(probe, {}):
                probe_lines.append(f"{name} {probe} exec {shlex.join(container[probe]['exec']['command'])}")
            if "httpGet" in container.get(probe, {}):
                probe_lines.append(f"{name} {probe} httpGet {container[probe]['httpGet'].get('path', '/')}")
                del container[probe]
        container["volumeMounts"] = [m for m in container.get("volumeMounts", []) if m["name"] not in dropped_volumes]
        for env in container.get("env", []):
            if env.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                env.pop("valueFrom")
                env["value"] = args.node_name
        seccomp = container.get("securityContext", {}).pop("seccompProfile", None)
        if seccomp is not None:
            if seccomp["type"] == "Localhost":
                value = "localhost/" + seccomp["localhostProfile"]
            elif seccomp["type"] == "RuntimeDefault":
                value = "runtime/default"
            else:
                value = "unconfined"
            annotations[f"container.seccomp.security.alpha.kubernetes.io/{name}"] = value
        for port in container.get("ports", []):
            if str(annotations.get("prometheus.io/port")) == str(port["containerPort"]):
                port["hostPort"] = args.metrics_port
                published = True
    if not published:
        sys.exit("pod_from_daemonset: no container port matches the prometheus.io/port annotation")

    metadata["name"] = args.pod_name
    metadata["annotations"] = annotations
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    yaml.safe_dump(pod, sys.stdout, sort_keys=False)
    if args.probes:
        with open(args.probes, "w") as f:
            f.write("".join(line + "\n" for line in probe_lines))
    if args.volumes:
        with open(args.volumes, "w") as f:
            f.write("".join(line + "\n" for line in volume_lines))


def quantity_bytes(quantity):
    """A Kubernetes quantity ("192Mi", "1G", "1048576") in bytes."""
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(quantity))
    if match is None:
        sys.exit(f"pod_from_daemonset: unsupported quantity {quantity!r}")
    factor = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
              "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[match.group(2)]
    return int(match.group(1)) * factor


if __name__ == "__main__":
    main()
