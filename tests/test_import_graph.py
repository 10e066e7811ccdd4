"""The package's import graph, read from the code (every import statement, at module level or inside a
function, package faces included: `from ..weights import x` is an arrow to weights/__init__.py, which
has its own), has exactly one circle: the Tensor and its ops (tensor.py's operators delegate to
functional/, whose Functions return Tensors). Any other circle is a floor that is not one
(docs/architecture.md draws the floors)."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("framework", "models")


def _module_of(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict:
    """{module name: (path, is package face)} of every file of the packages."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[_module_of(path)] = (path, path.name == "__init__.py")
    return found


def _target(name: str, modules: dict) -> str | None:
    """The module an imported dotted name lands in: itself, else its parent (a name from a module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict:
    """{module: set of modules it imports} for the packages' own modules."""
    modules = _modules()
    graph = {m: set() for m in modules}
    for mod, (path, is_face) in modules.items():
        package = mod if is_face else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    head = ".".join(base + ([node.module] if node.module else []))
                else:
                    head = node.module or ""
                names = [head] + [f"{head}.{a.name}" for a in node.names]
            above = _above(mod)
            for name in names:
                target = _target(name, modules)
                if target and target != mod and target not in above:  # an ancestor is mid-import
                    graph[mod].add(target)
                    graph[mod].update(_faces_run(target, mod, modules))
    return graph


def _above(module: str) -> set:
    """The packages above `module` (itself excluded)."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _faces_run(target: str, importer: str, modules: dict) -> set:
    """The package faces Python runs to import `target` from `importer`: each package above the
    target that is not already above the importer (those are mid-import, not run again)."""
    above = _above(importer) | {importer}
    parts = target.split(".")
    return {p for p in (".".join(parts[:i]) for i in range(1, len(parts)))
            if p in modules and p not in above}


def circles(graph: dict) -> list[set]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    scc = set()
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        scc.add(member)
                        if member == node:
                            break
                    if len(scc) > 1:
                        out.append(scc)
    return out


def test_one_circle_the_tensor_and_its_ops():
    found = circles(import_graph())
    tensor = [c for c in found if "framework.tensor" in c]
    others = [sorted(c) for c in found if "framework.tensor" not in c]
    assert not others, f"circles besides Tensor <-> functional: {others}"
    assert len(tensor) == 1 and "framework.functional" in tensor[0]
    # the circle holds the core only: no subsystem above the ops is pulled into it
    outside = sorted(m for m in tensor[0] if not m.startswith(("framework.functional", "framework.tensor",
                                                               "framework.autograd", "framework.creation")))
    assert not outside, f"modules above the ops in the Tensor circle: {outside}"


def test_the_reader_finds_a_circle_through_a_package_face(tmp_path):
    """The rule itself: a circle through a package's __init__ (the weights <-> nn one it was written for)."""
    graph = {"a": {"b"}, "b": {"c.face"}, "c.face": {"c.x"}, "c.x": {"a"}, "d": {"a"}}
    assert circles(graph) == [{"a", "b", "c.face", "c.x"}]
