"""models/ is a client of the framework: it imports only public framework names (no module or name
with a leading underscore, `framework._check`, `framework.functional.softmax._exp`, ...) and reaches
no private attribute of a framework module (`F._x`). A model's special op goes into
framework/functional/ as an op family (docs/architecture.md). The rule is read from the source with
ast, so it holds for code that never runs in a test too."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL_FILES = sorted((ROOT / "models").glob("*.py"))


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def private_framework_uses(source: str, filename: str = "<source>") -> list[str]:
    """Each import of a private framework module or name, and each private attribute of a name
    bound to a framework module, as 'line: what'."""
    tree = ast.parse(source, filename)
    found, modules = [], set()  # modules: local names bound to framework modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "framework" or a.name.startswith("framework."):
                    if _private(a.name):
                        found.append(f"{node.lineno}: import {a.name}")
                    modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "framework" or node.module.startswith("framework.")):
            if _private(node.module):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for a in node.names:
                if a.name.startswith("_"):
                    found.append(f"{node.lineno}: from {node.module} import {a.name}")
                elif a.name[:1].islower():  # a module (nn, functional, init) or a function
                    modules.add(a.asname or a.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


@pytest.mark.parametrize("path", MODEL_FILES, ids=[p.name for p in MODEL_FILES])
def test_models_use_only_public_framework_names(path):
    found = private_framework_uses(path.read_text(), str(path))
    assert not found, f"{path.relative_to(ROOT)} uses private framework names: {found}"


def test_the_rule_catches_each_kind_of_private_use():
    """The parser itself: what models/ had before (a private module, private names) and the other
    forms, against public uses that must pass."""
    bad = ("from framework._check import int_arg\n"
           "from framework.functional.softmax import _exp, softmax\n"
           "import framework._jit as jit\n"
           "import framework.functional as F\n"
           "from framework import nn\n"
           "y = F._util.dims\n"
           "z = nn._modules\n")
    assert [f.split(":")[0] for f in private_framework_uses(bad)] == ["1", "2", "3", "6", "7"]
    good = ("from framework.check import int_arg\n"
            "from framework.functional.attention import shift_mask\n"
            "import framework.functional as F\n"
            "from framework import nn\n"
            "from ._blocks import make_layer\n"  # models' own private module: its business
            "x = F.window_attention\n"
            "self._modules = {}\n"
            "y = nn.Module.__init__\n")
    assert private_framework_uses(good) == []


def test_framework_check_is_the_whole_public_face_of_the_checks():
    from framework import _check, check
    assert sorted(check.__all__) == sorted(_check.__all__)
    assert all(getattr(check, name) is getattr(_check, name) for name in _check.__all__)
