"""The README's examples run as printed: the Extending section's registered model, loss and metric
train from YAML (in a subprocess: they register globally), and every command it lists exists."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _block_after(heading: str, lang: str = "python") -> str:
    section = README[README.index(heading):]
    return re.search(rf"```{lang}\n(.*?)```", section, re.S).group(1)


def test_extending_example_trains_from_yaml(tmp_path, tiny_train):
    (tmp_path / "my_ext.py").write_text(_block_after("## Extending"))
    (tmp_path / "cfg.yaml").write_text(textwrap.dedent(f"""\
        imports: [my_ext]
        name: ext
        scale: 2
        run_root: {tmp_path / 'runs'}
        model: {{type: TinyNet, num_feat: 16, scale: 2}}
        datasets:
          train: {{type: HRImageDataset, root: {tiny_train}, gt_size: 8}}
          val: {{type: HRImageDataset, root: {tiny_train}}}
        train:
          total_iters: 2
          batch_size: 2
          optimizer: {{type: Adam, lr: 1e-3}}
          loss: {{type: EdgeLoss, loss_weight: 0.5}}
          log_every: 1
        val: {{every: 2, metrics: [psnr, mae]}}
        checkpoint: {{every: 2}}
        """))
    code = ("import sys; from framework.engine.commands.cli import train_main; "
            "sys.exit(train_main([sys.argv[1], '--no-progress']))")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cfg.yaml")], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = (tmp_path / "runs" / "ext" / "metrics.csv").read_text().splitlines()
    header, last = rows[0].split(","), dict(zip(rows[0].split(","), rows[-1].split(",")))
    assert "mae_y" in header and 0 < float(last["mae_y"]) < 1, rows
    assert float(last["loss"]) > 0


def test_every_command_in_the_summary_is_installed():
    block = _block_after("## Commands", "bash")
    names = sorted(set(re.findall(r"^(srgrad-[a-z]+)", block, re.M)))
    scripts = (REPO / "pyproject.toml").read_text()
    assert len(names) >= 7
    for name in names:
        assert re.search(rf'^{name} = "', scripts, re.M), f"{name} is not in pyproject's scripts"


def test_commands_on_the_bundled_images_write_under_runs():
    """A command the README gives on the repository's own images writes into runs/ (ignored by
    git), never into the repository's root (the custom-layer example wrote ihc_x2.png there)."""
    commands = [line for block in re.findall(r"```bash\n(.*?)```", README, re.S)
                for line in block.splitlines() if "--input data/" in line]
    assert len(commands) >= 2
    for line in commands:
        for part in line.split("&&"):
            output = re.search(r"--output (\S+)", part)
            if "--input data/" in part:
                assert output and output.group(1).startswith("runs/"), part
