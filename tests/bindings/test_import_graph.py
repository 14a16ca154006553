"""The package's module structure: no import cycle among its modules, the research toolkit in
keplershm.research, and the old research paths as deprecated aliases that nothing in the package uses.

The import graph is read from the source with ``ast`` (nothing is imported to build it): every ``import``
and ``from ... import`` anywhere in a module, inside functions too, absolute or relative, that names a
module of the package. A package's own ``__init__`` running because one of its submodules is imported
is not an edge (that is how Python imports submodules, not a choice of the module); naming the package
itself (``import keplershm``, ``from .. import name``) is.
"""
import ast
import importlib.util
import os
import subprocess
import sys

import pytest

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
PACKAGE = "keplershm"
RESEARCH = ("train", "validation", "analyze", "plot", "kepler_model")
# The deprecated aliases: keplershm.<name> -> keplershm.research.<name>.
MOVED = {"%s.%s" % (PACKAGE, name): "%s.research.%s" % (PACKAGE, name) for name in RESEARCH}


def package_dir():
    spec = importlib.util.find_spec(PACKAGE)  # finds the package without running its __init__
    assert spec is not None and spec.submodule_search_locations, "keplershm is not on PYTHONPATH"
    return list(spec.submodule_search_locations)[0]


def modules(root, package):
    """{module name: (path, is_package)} of every .py file under `root` (the directory of `package`)."""
    found = {}
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if os.path.exists(os.path.join(directory, d, "__init__.py")))
        relative = os.path.relpath(directory, root)
        prefix = package if relative == "." else package + "." + relative.replace(os.sep, ".")
        for name in sorted(files):
            if name.endswith(".py"):
                stem = name[:-3]
                module = prefix if stem == "__init__" else prefix + "." + stem
                found[module] = (os.path.join(directory, name), stem == "__init__")
    return found


def _resolve(name, known):
    """The longest module of `known` that `name` is or lies inside (``keplershm.reader.Frame`` -> reader)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root, package):
    """{module: {imported module: first line}} among the modules of `package` found under `root`."""
    known = modules(root, package)
    graph = {}
    for module, (path, is_package) in known.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        base = module if is_package else module.rpartition(".")[0]  # what "from . import" starts from
        edges = graph.setdefault(module, {})

        def add(target, line):
            target = _resolve(target, known)
            if target is not None and target != module:
                edges.setdefault(target, line)

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base.split(".")
                    if node.level - 1 >= len(parts):
                        continue  # beyond the top of the package: not ours
                    source = ".".join(parts[:len(parts) - (node.level - 1)])
                    if node.module:
                        source += "." + node.module
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = source + "." + alias.name
                    # "from X import name": the module X.name if there is one, else X itself.
                    add(submodule if submodule in known else source, node.lineno)
    return graph


def cycles(graph):
    """Every strongly connected component of more than one module (or a module importing itself), each
    given as one cycle through it: [a, b, ..., a]."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def connect(v):  # Tarjan's algorithm; the graph is small, recursion is fine
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(_one_cycle(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _one_cycle(graph, component):
    """A shortest cycle through the first module (by name) of a strongly connected component."""
    start = min(component)
    paths, queue = {start: [start]}, [start]
    for v in queue:  # breadth first, within the component
        for w in sorted(graph.get(v, ())):
            if w == start:
                return paths[v] + [start]
            if w in component and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError("no cycle through %s" % start)


def describe(graph, cycle):
    return " -> ".join("%s (line %d)" % (a, graph[a][b]) for a, b in zip(cycle, cycle[1:])) + " -> " + cycle[-1]


def test_no_import_cycle_among_the_package_modules():
    graph = import_graph(package_dir(), PACKAGE)
    found = cycles(graph)
    assert not found, "import cycles in keplershm:\n  " + "\n  ".join(describe(graph, c) for c in found)


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph(package_dir(), PACKAGE)
    assert "keplershm.reader" in graph["keplershm.recorder"]            # from .reader import ... (top level)
    assert "keplershm.remote" in graph["keplershm.recorder"]            # from .remote import ... (in a function)
    assert "keplershm.research.train" in graph["keplershm.cli"]         # from .research.train import (in a function)
    assert "keplershm.dataset" in graph["keplershm.research.train"]     # from ..dataset import (two levels)
    assert "keplershm.research.validation" in graph["keplershm.research.train"]
    assert "keplershm.errors" in graph["keplershm"]                     # from . import errors (in __init__)
    assert "keplershm.research.train" in graph["keplershm.train"]       # from .research import train (alias)


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_is_found_and_named(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from .a import A\n",
        "pkg/a.py": "from .b import B\nA = 1\n",
        "pkg/b.py": "B = 2\n\ndef late():\n    from .sub import c\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "import os\n\n\ndef later():\n    from .. import a\n    import pkg.b\n",
        "pkg/d.py": "from . import a\n",  # into the cycle, not part of it
    })
    graph = import_graph(str(tmp_path / "pkg"), "pkg")
    found = cycles(graph)
    assert found == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    assert describe(graph, found[0]) == "pkg.a (line 1) -> pkg.b (line 4) -> pkg.sub.c (line 5) -> pkg.a"


def test_the_research_modules_live_in_keplershm_research():
    root = package_dir()
    for name in RESEARCH:
        assert os.path.exists(os.path.join(root, "research", name + ".py")), name


def test_nothing_in_the_package_imports_a_deprecated_path():
    graph = import_graph(package_dir(), PACKAGE)
    users = ["%s imports %s (line %d)" % (module, old, targets[old])
             for module, targets in graph.items() if module not in MOVED for old in MOVED if old in targets]
    assert not users, "use the keplershm.research paths:\n  " + "\n  ".join(users)


def _python(code, *options):
    return subprocess.run([PYTHON, *options, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_package_and_its_cli_import_without_a_deprecation_warning():
    result = _python("import keplershm, keplershm.cli, keplershm.research", "-W", "error::DeprecationWarning")
    assert result.returncode == 0, result.stderr
    # Each subcommand's module, as cli.main imports it; only our own warnings are errors here (third-party
    # libraries such as XGBoost may warn about their own dependencies).
    code = "import importlib\nfor name in %r:\n    importlib.import_module('keplershm.research.' + name)\n" % (RESEARCH,)
    result = _python(code + "import keplershm.recorder, keplershm.serve", "-W", "error:keplershm.:DeprecationWarning")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", RESEARCH)
def test_an_old_path_still_imports_with_a_deprecation_warning(name):
    code = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    from keplershm import {name} as old  # line 5
import keplershm.research.{name} as new
import keplershm
assert old is new and keplershm.{name} is new, (old, new)
ours = [w for w in caught if issubclass(w.category, DeprecationWarning) and "keplershm.research" in str(w.message)]
assert len(ours) == 1, [str(w.message) for w in caught]
print(ours[0].filename, ours[0].lineno, ours[0].message)
""".format(name=name)
    result = _python(code)
    assert result.returncode == 0, result.stderr
    where, line, message = result.stdout.strip().split(" ", 2)
    assert (where, line) == ("<string>", "5")  # the warning points at the line that imported the old path
    assert message.startswith("keplershm.%s moved to keplershm.research.%s" % (name, name))
    assert "next release" in message
