"""Every code block of the README runs as written: the Python blocks, and the command
lines of the CLI block on small image files of the names they use."""
import functools
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from imgfilters import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, re.DOTALL)
PYTHON = [code for lang, code in BLOCKS if lang == "python"]
COMMANDS = [line for lang, code in BLOCKS if lang == "bash" for line in code.splitlines()
            if line.startswith("imgfilters-denoise ")]


@pytest.fixture
def float64_path(monkeypatch):
    """CPU tensors on the float64 reference, as a user's CPU run (not the interpreter the
    other tests use: it would take minutes)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def test_readme_has_the_blocks():
    """The pattern finds every block (a malformed fence would drop one silently)."""
    assert len(PYTHON) == README.count("```python") >= 4
    assert len(COMMANDS) == README.count("\nimgfilters-denoise ") >= 6


# The large-image examples run at a tenth of their sizes (still several tiles and chunks):
# as written, the CPU's float64 path takes half an hour over them. Each replacement must
# find its text, so an edit of the README cannot silently run the full size.
SMALLER = {"(6000, 5000, 3)": "(600, 500, 3)", "(1500, 1250)": "(150, 125)", "(3, 8000, 8000)": "(3, 800, 800)",
           "chunks=(3, 2048, 2048)": "chunks=(3, 256, 256)", "(4000, 4000)": "(400, 400)"}


@pytest.mark.parametrize("code", PYTHON, ids=[f"python{i}" for i in range(len(PYTHON))])
def test_python_block_runs(code, float64_path, monkeypatch, tmp_path):
    (tmp_path / "samples").symlink_to(ROOT / "samples")  # (samples/coffee.png); the files it writes stay here,
    (tmp_path / "docs").mkdir()  # docs/sr_degradation.png too
    monkeypatch.chdir(tmp_path)
    for size, smaller in SMALLER.items():
        if size in code:
            code = code.replace(size, smaller)
    # torch.compile's graph capture (fullgraph: no break) without inductor's C++ build,
    # which takes a minute on a CPU
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    exec(compile(code, "README.md", "exec"), {})


def test_every_smaller_size_is_in_the_readme():
    assert all(size in README for size in SMALLER)


def test_command_lines_run(tmp_path, float64_path, monkeypatch, capsys):
    """(The filter itself is replaced by a copy: non-local means takes seconds per image on
    the CPU, and test_cli.py checks its results.)"""
    monkeypatch.setattr(cli, "_filter", lambda s, x, opts, tile, out=None: x.clone())
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    picture = lambda: Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))  # noqa: E731
    for name in ("noisy.png", "photo.jpg", "photo.png", "shoot/a.png", "shoot/sub/b.png"):
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        picture().save(name)
    picture().convert("L").save("scan.tif")
    for line in COMMANDS:
        argv = shlex.split(line, comments=True)[1:]
        assert cli.main(argv) == 0, (line, capsys.readouterr().err)
