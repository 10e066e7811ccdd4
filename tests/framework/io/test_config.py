"""The YAML side of configs (framework/io/config.py) and what a config may run: `imports:` takes
module names only, never file paths (the config's folder goes on sys.path only when there is
something to import); YAML without Python tags; the loader is a safe loader."""
import re
import subprocess
import sys

import pytest
import yaml

from framework.engine.commands.cli import train_main
from framework.io import config as config_mod
from framework.engine.config.schema import load_config, parse_config
from framework.io.config import ConfigError

from tests.conftest import tiny_config_text


@pytest.fixture
def evil(tmp_path):
    """A config folder holding evil.py, which leaves a marker file when imported."""
    marker = tmp_path / "PWNED"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    return tmp_path, marker


def with_imports(tmp_path, tiny_train, imports, folder=None):
    folder = folder or tmp_path
    path = folder / "cfg.yaml"
    path.write_text(tiny_config_text(tiny_train, tmp_path / "runs") + f"imports: {imports}\n")
    return path


@pytest.mark.parametrize("name", ["../evil.py", "./evil.py", "evil.py", "/tmp/evil",
                                  "sub/../evil", "evil/", "..evil", "evil.", "C:/evil",
                                  "evil; import os", "", " evil", "évil-1"])
def test_imports_refuse_anything_but_a_module_name(evil, tiny_train, name, capsys):
    folder, marker = evil
    path = with_imports(folder, tiny_train, [name], folder / "sub")
    where = f"{path}: imports: {name!r}"
    with pytest.raises(ConfigError, match=rf"^{re.escape(where)} is not a module name \(a config "
                                          rf"imports modules by name, e.g. 'my_layers', never by "
                                          rf"file path\)"):
        load_config(path)
    assert train_main([str(path), "--no-progress"]) == 2
    assert "is not a module name" in capsys.readouterr().err
    assert not marker.exists()


def test_imports_must_be_a_list_of_strings(tmp_path, tiny_train):
    for bad in ("evil", "[1, 2]", "{a: b}"):
        path = with_imports(tmp_path, tiny_train, bad)
        with pytest.raises(ConfigError, match=r"imports: expected a list of strings"):
            load_config(path)


def test_a_missing_module_is_named_with_where_it_was_looked_for(tmp_path, tiny_train):
    path = with_imports(tmp_path, tiny_train, ["no_such_module_xyz"])
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}: imports: cannot import module "
                                          rf"'no_such_module_xyz': .*\(looked in {tmp_path}"):
        load_config(path)


def test_module_names_do_run_code_a_config_is_code(evil, tiny_train, monkeypatch):
    """The documented trust model: `imports: [evil]` runs evil.py from the config's folder."""
    folder, marker = evil
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "evil", raising=False)
    load_config(with_imports(folder, tiny_train, ["evil"]))
    assert marker.exists()
    sys.modules.pop("evil", None)


def test_a_config_without_imports_leaves_sys_path_alone(tmp_path, tiny_train, monkeypatch):
    """Loading a config from a folder (/tmp, a run folder) must not put that folder first on
    sys.path, where a stray matplotlib.py or tqdm.py in it would shadow the real module."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = list(sys.path)
    path = tmp_path / "cfg.yaml"
    path.write_text(tiny_config_text(tiny_train, tmp_path / "runs"))
    load_config(path)
    path.write_text(tiny_config_text(tiny_train, tmp_path / "runs") + "imports: []\n")
    load_config(path)
    assert sys.path == before


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system ['touch {m}']",
    "!!python/object/new:subprocess.Popen [['touch', '{m}']]",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/object:builtins.object {{}}",
])
def test_yaml_python_tags_are_refused(tmp_path, tiny_train, tag, capsys):
    marker = tmp_path / "PWNED"
    value = tag.format(m=marker)
    path = tmp_path / "cfg.yaml"
    path.write_text(tiny_config_text(tiny_train, tmp_path / "runs").replace("name: tiny",
                                                                        f"name: {value}"))
    with pytest.raises(ConfigError, match=rf"(?s)^{re.escape(str(path))}: not valid YAML: .*could "
                                          rf"not determine a constructor for the tag "
                                          rf"'tag:yaml.org,2002:python/"):
        load_config(path)
    assert train_main([str(path), "--no-progress"]) == 2
    # and through a command-line override
    ok = tmp_path / "ok.yaml"
    ok.write_text(tiny_config_text(tiny_train, tmp_path / "runs"))
    with pytest.raises(ConfigError, match=r"--set name: cannot parse value .*could not determine a "
                                          r"constructor"):
        load_config(ok, [f"name={value}"])
    assert not marker.exists()


def test_the_config_loader_is_a_safe_loader():
    assert issubclass(config_mod.ConfigLoader, yaml.SafeLoader)
    with pytest.raises(ConfigError):
        parse_config("a: !!python/object/apply:os.getcwd []", do_imports=False)


def laughs(levels: int) -> str:
    """A "billion laughs" as one YAML flow value: ten aliases of ten aliases ... (10**levels
    strings, about 50 characters a level)."""
    parts = ["&l0 [" + ", ".join(["lol"] * 10) + "]"]
    parts += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


def test_check_size_counts_the_expanded_values_and_names_the_key():
    config_mod.check_size(yaml.safe_load(f"a: {laughs(4)}"), "ok.yaml")  # 12,346 values: fine
    with pytest.raises(ConfigError, match=r"^x.yaml: a.4: holds 111,111 values once its YAML "
                                          r"aliases are expanded, more than the 100,000 a config "
                                          r"may hold \(a 'billion laughs'\?\)$"):
        config_mod.check_size(yaml.safe_load(f"a: {laughs(9)}"), "x.yaml")
    with pytest.raises(ConfigError, match=r"^x.yaml: b.0: the value contains itself \(a "
                                          r"recursive YAML alias\)$"):
        parse_config("b: &b [*b]\n", "x.yaml", do_imports=False)


BOMB_RUN = """
import sys
from framework.engine.commands.cli import train_main
print(train_main([sys.argv[1], "--no-progress"]))
print(train_main([sys.argv[2], "--no-progress", "--set", "model.num_feat=" + sys.argv[3]]))
"""


def test_a_billion_laughs_in_a_file_or_a_set_is_refused_at_once_in_one_short_line(tmp_path,
                                                                                   tiny_train):
    """10**9 leaves from 500 bytes, in a config file and in a --set value: a one-line refusal
    naming the key, before anything renders the value (it printed 580 KB for 10**5 leaves and hung
    at 1.6-3 GB for 10**9). Run in a child process, so that a regression fails the test (by its
    timeout or its output) instead of hanging the suite."""
    text = tiny_config_text(tiny_train, tmp_path / "runs")
    bomb, ok = tmp_path / "bomb.yaml", tmp_path / "ok.yaml"
    bomb.write_text(text.replace("num_feat: [4, 4]", f"num_feat: {laughs(9)}"))
    ok.write_text(text)
    assert "num_feat: [4, 4]" in text and len(laughs(9)) < 600
    child = subprocess.run([sys.executable, "-c", BOMB_RUN, str(bomb), str(ok), laughs(9)],
                           capture_output=True, text=True, timeout=300)
    assert child.stdout.split() == ["2", "2"], child.stderr[-2000:]
    lines = child.stderr.splitlines()
    assert lines == [
        f"error: {bomb}: model.num_feat.4: holds 111,111 values once its YAML aliases are "
        f"expanded, more than the 100,000 a config may hold (a 'billion laughs'?)",
        "error: --set model.num_feat: 4: holds 111,111 values once its YAML aliases are expanded, "
        "more than the 100,000 a config may hold (a 'billion laughs'?)"], child.stderr[-2000:]


def test_every_message_is_bounded(tmp_path):
    """A value below the limit but long to print (a 100,000-character string) in a message: the
    repr is cut (framework._check.show), and so is each line of a ConfigError and of a command's
    error (clip_message)."""
    with pytest.raises(ConfigError) as exc:
        parse_config(f"name: [{'x' * 100_000}]\n", "cfg.yaml", do_imports=False)
    (line,) = [line for line in str(exc.value).split("\n") if "xxx" in line]
    assert len(line) < 400  # (other lines list the registries' names: they grow with them)
    long = ConfigError("\n".join(["a" * 5000] + ["b"] * 100))  # 101 lines
    first, *rest = str(long).split("\n")
    assert first == "a" * 1000 + "... (4,000 more characters)"
    assert len(rest) == 60 and rest[-1] == "... (41 more lines)"


@pytest.mark.parametrize("value, parsed", [
    ("{name}x2", "{name}x2"),            # not YAML (a flow mapping, then text): the text itself
    ("{name}", "{name}"),                # YAML's {name: null}: a file-name template
    ("{name}x{scale}", "{name}x{scale}"),
    ('"{name}x2"', "{name}x2"),          # quoted, as before
    ("[pixel", "[pixel"),
    ("2e-4", 2e-4), ("[pixel, gan]", ["pixel", "gan"]), ("{type: L1Loss}", {"type": "L1Loss"}),
    ("{}", {}), ("null", None),
])
def test_set_values_that_are_not_yaml_are_strings(value, parsed):
    """`--set datasets.train.filename_tmpl={name}x2` died with a raw YAML error unless quoted."""
    from framework.io.config import parse_scalar
    assert parse_scalar(value) == parsed
