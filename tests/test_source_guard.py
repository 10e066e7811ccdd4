"""A static guard over the source tree: no pickle, eval or unsafe YAML anywhere in what srgrad runs."""
import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted([p for d in ("framework", "models", "scripts", "configs")
                  for p in (REPO / d).rglob("*.py")] + [REPO / "srgrad_cli.py"])


def calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, ast.unparse(node.func)


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(REPO)) for p in SOURCES])
def test_no_pickle_eval_or_unsafe_yaml_in_the_source(path):
    """No module imports pickle/marshal/shelve/dill; no eval/exec; no torch.load; np.load only
    with allow_pickle=False; yaml.load only with the safe ConfigLoader."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            assert not {n.split(".")[0] for n in names} & {"pickle", "marshal", "shelve", "dill",
                                                           "cloudpickle", "joblib"}, \
                f"{path}:{node.lineno} imports a pickle-family module"
    for node, func in calls(tree):
        where = f"{path}:{node.lineno}: {func}"
        assert func not in ("eval", "exec", "compile", "__import__", "torch.load",
                            "yaml.unsafe_load", "yaml.full_load"), where
        if func in ("np.load", "numpy.load"):
            kw = {k.arg: ast.unparse(k.value) for k in node.keywords}
            assert kw.get("allow_pickle") == "False", where
        if func == "yaml.load":
            kw = {k.arg: ast.unparse(k.value) for k in node.keywords}
            assert kw.get("Loader") == "ConfigLoader", where


def test_the_guard_sees_the_source():
    assert any(p.name == "config.py" for p in SOURCES) and len(SOURCES) > 30
