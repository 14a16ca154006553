"""deploy/images: Docker cannot run on the build machines (no engine), so the Dockerfiles are checked
statically against what this build really is: its packages, CMake options and targets, the shared
libraries its binaries need, their options, and the users the manifests expect. The build stage's
CMake configuration is run for real (configure only)."""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import deploy_support as ds  # noqa: E402

IMAGES_DIR = os.path.join(ds.DEPLOY_DIR, "images")
BIN_DIR = os.path.dirname(ds.PROBE)
# Present in every Debian image (apt itself needs them), so a runtime stage need not install them.
DEBIAN_BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}
IMAGES = {
    "kepler-collect": {"binaries": ["kepler-collect", "keplershm-probe", "keplershm-segment-size"],
                       "entrypoint": "kepler-collect"},
    # kepler-feed (deploy/kubernetes/feed) runs from the estimator's image.
    "kepler-estimate": {"binaries": ["kepler-estimate", "kepler-feed", "keplershm-probe"], "entrypoint": "kepler-estimate"},
}


def parse_dockerfile(path):
    """[(stage_from, [(instruction, text), ...]), ...] with continuations joined and comments dropped."""
    with open(path) as f:
        text = re.sub(r"\\\n", " ", "\n".join(line for line in f.read().splitlines()
                                                 if not line.lstrip().startswith("#")))
    stages = []
    global_args = {}  # ARG NAME=default before the first FROM, substituted into FROM lines
    for line in text.splitlines():
        if not line.strip():
            continue
        instruction, _, rest = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "ARG" and not stages:
            name, _, default = rest.strip().partition("=")
            global_args[name] = default
        elif instruction == "FROM":
            stages.append((re.sub(r"\$\{(\w+)\}", lambda m: global_args[m.group(1)], rest.strip()), []))
        else:
            stages[-1][1].append((instruction, rest.strip()))
    return stages


def apt_packages(stage):
    packages = []
    for instruction, text in stage[1]:
        if instruction == "RUN" and "apt-get install" in text:
            words = shlex.split(text.split("apt-get install", 1)[1].split("&&")[0])
            packages += [w for w in words if not w.startswith("-")]
    return packages


def setup_sh_packages():
    with open(os.path.join(ds.SOURCE_DIR, "scripts", "setup.sh")) as f:
        block = re.search(r"packages=\((.*?)\n\)", f.read(), re.S).group(1)
    return {w for line in block.splitlines() for w in line.split("#")[0].split()}


def needed_libraries(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)


def owning_package(soname):
    """The Debian package that ships the library this machine's loader resolves `soname` to."""
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    match = re.search(rf"^\s*{re.escape(soname)} \(.*?x86-64.*?\) => (\S+)$", cache, re.M) or \
        re.search(rf"^\s*{re.escape(soname)} \(.*?\) => (\S+)$", cache, re.M)
    path = match.group(1)
    for candidate in (path, os.path.realpath(path), path.replace("/lib/", "/usr/lib/", 1)):
        result = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if result.returncode == 0:
            return result.stdout.split(":", 1)[0].split(",")[0].strip()
    raise AssertionError(f"no package ships {soname} ({path})")


def cmake_command(stage):
    for instruction, text in stage[1]:
        if instruction == "RUN" and "cmake -S" in text:
            return shlex.split(text.split("cmake -S", 1)[1].split("&&")[0].replace('"${KEPLER_VMLINUX_BTF}"', "BTF"))
    raise AssertionError("the build stage runs no CMake configuration")


def cmake_targets(stage):
    for instruction, text in stage[1]:
        if instruction == "RUN" and "--target" in text:
            return shlex.split(text.split("--target", 1)[1].split("&&")[0])
    return []


def json_array(text):
    return [s for s in re.findall(r'"([^"]*)"', text)]


class DockerImages(unittest.TestCase):
    def stages(self, image):
        return parse_dockerfile(os.path.join(IMAGES_DIR, f"{image}.Dockerfile"))

    def test_debian_12_multi_stage_with_a_slim_runtime(self):
        for image in IMAGES:
            stages = self.stages(image)
            self.assertGreaterEqual(len(stages), 2, image)
            self.assertEqual(stages[0][0], "debian:bookworm AS source", image)
            self.assertEqual(stages[-1][0], "debian:bookworm-slim", image)
            # BINARIES (default source) picks the stage the runtime copies from: the compile, or binaries
            # built on a Debian 12 host (deploy/containers/build.sh); both put the same files under /out.
            names = [s[0].split(" AS ")[1] for s in stages if " AS " in s[0]]
            self.assertEqual(names, ["source", "prebuilt", "build"], image)
            self.assertEqual(stages[2][0], "source AS build", image)
            runtime = apt_packages(stages[-1])
            self.assertFalse([p for p in runtime if p.endswith("-dev") or p in {"build-essential", "cmake", "clang"}],
                             f"{image}: no build tools in the runtime stage")
            ignore = os.path.join(IMAGES_DIR, f"{image}.Dockerfile.dockerignore")
            with open(ignore) as f:
                self.assertIn("build-*", f.read().split(), f"{image}: build directories stay out of the context")

    def test_build_stage_uses_the_projects_packages_and_cmake_options(self):
        known_packages = setup_sh_packages()
        with open(os.path.join(ds.SOURCE_DIR, "CMakeLists.txt")) as f:
            root = f.read()
        with open(os.path.join(ds.SOURCE_DIR, "bpf", "CMakeLists.txt")) as f:
            bpf = f.read()
        for image in IMAGES:
            build = self.stages(image)[0]
            unknown = set(apt_packages(build)) - known_packages
            self.assertFalse(unknown, f"{image}: build packages that scripts/setup.sh does not install: {unknown}")
            for arg in cmake_command(build):
                if not arg.startswith("-D"):
                    continue
                name, _, value = arg[2:].partition("=")
                if name.startswith("CMAKE_"):
                    continue
                self.assertTrue(re.search(rf"(option|set)\({name}\b", root + bpf), f"{image}: -D{name} is no option")
                if name == "KEPLERSHM_COMPONENTS":
                    for component in value.split(";"):
                        self.assertTrue(os.path.isfile(os.path.join(ds.SOURCE_DIR, component, "CMakeLists.txt")),
                                        f"{image}: component {component}")
            for target in cmake_targets(build):
                self.assertTrue(os.path.isfile(os.path.join(BIN_DIR, target)), f"{image}: target {target}")

    def test_build_stage_configuration_really_configures(self):
        for image in IMAGES:
            build = self.stages(image)[0]
            args = [a for a in cmake_command(build) if a.startswith("-D")]
            args = [a.replace("=BTF", "=/sys/kernel/btf/vmlinux") for a in args]
            if any("bpf" in a for a in args) and not os.path.exists("/sys/kernel/btf/vmlinux"):
                self.skipTest("no /sys/kernel/btf/vmlinux on this machine for the eBPF build")
            with tempfile.TemporaryDirectory() as tmp:
                result = subprocess.run(["cmake", "-S", ds.SOURCE_DIR, "-B", tmp] + args,
                                        capture_output=True, text=True, timeout=240)
                self.assertEqual(result.returncode, 0, f"{image}: {result.stderr[-3000:]}")
                targets = subprocess.run(["cmake", "--build", tmp, "--target", "help"], capture_output=True,
                                         text=True, timeout=60).stdout
                for target in cmake_targets(build):
                    self.assertIn(f"... {target}", targets, f"{image}: {target} is not built by that configuration")

    def test_runtime_stage_installs_every_shared_library_the_binaries_need(self):
        library = os.path.basename(ds.LIBRARY)
        for image, spec in IMAGES.items():
            runtime = set(apt_packages(self.stages(image)[-1]))
            for binary in spec["binaries"] + [library]:
                path = ds.LIBRARY if binary == library else os.path.join(BIN_DIR, binary)
                for soname in needed_libraries(path):
                    if soname.startswith("libkeplershm.so"):
                        continue  # copied from the build stage
                    package = owning_package(soname)
                    self.assertTrue(package in runtime or package in DEBIAN_BASE_PACKAGES,
                                    f"{image}: {binary} needs {soname} from {package}, not installed")
            self.assertIn("ca-certificates", runtime, f"{image}: TLS to the API server / model server")

    def test_packages_exist_in_debian_12(self):
        wanted = {p for image in IMAGES for stage in self.stages(image) for p in apt_packages(stage)}
        # One local apt-cache query for all of them (apt's own metadata; nothing is downloaded).
        shown = subprocess.run(["apt-cache", "show", "--no-all-versions"] + sorted(wanted),
                               capture_output=True, text=True).stdout
        found = set(re.findall(r"^Package: (\S+)$", shown, re.M))
        self.assertEqual(wanted - found, set(), "packages Debian 12 does not have")

    def test_copies_entrypoint_and_user(self):
        library = os.path.basename(ds.LIBRARY)
        manifest = ds.pod_spec(ds.kube_documents("sidecar/daemonset.yaml")[0])
        for image, spec in IMAGES.items():
            runtime = self.stages(image)[-1][1]
            copied = []
            for instruction, text in runtime:
                if instruction == "COPY" and text.startswith("--from=build"):
                    copied += [os.path.basename(p) for p in text.split()[1:-1]]
            self.assertEqual(sorted(copied), sorted(spec["binaries"] + [library]), image)
            entrypoint = json_array(next(t for i, t in runtime if i == "ENTRYPOINT"))
            self.assertEqual(entrypoint, [f"/usr/local/bin/{spec['entrypoint']}"], image)
            known = ds.help_options(ds.COLLECT if image == "kepler-collect" else ds.ESTIMATE)
            for arg in json_array(next(t for i, t in runtime if i == "CMD")):
                self.assertIn(ds.split_flag(arg)[0], known, f"{image}: CMD {arg}")
            user, _, group = next(t for i, t in runtime if i == "USER").partition(":")
            context = ds.container(manifest, image)["securityContext"]
            self.assertEqual(int(user), context.get("runAsUser", 0), f"{image}: USER matches the manifest")
            self.assertEqual(int(group), context["runAsGroup"], f"{image}: group matches the manifest")
            # The manifests' probes and the runtime stage agree on where the probe is.
            for command in ds.probe_commands(ds.container(manifest, image)).values():
                self.assertEqual(command[0], "/usr/local/bin/keplershm-probe")
            self.assertTrue(any(i == "RUN" and "ldconfig" in t for i, t in runtime), f"{image}: ldconfig")

    def test_no_other_dockerfiles(self):
        self.assertEqual(sorted(os.path.basename(p) for p in glob.glob(os.path.join(IMAGES_DIR, "*.Dockerfile"))),
                         sorted(f"{image}.Dockerfile" for image in IMAGES), "every image is checked here")


if __name__ == "__main__":
    unittest.main()
