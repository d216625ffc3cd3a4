"""What starting costs: ``import imgfilters`` loads no torch, Triton or torchvision, and the
command line answers ``--help``, ``--version`` and usage errors before importing them."""
import subprocess
import sys
import time

import pytest

MAIN = "import sys; from imgfilters.cli import main; sys.exit(main())"
HEAVY = ("torch", "triton", "torchvision", "imgfilters.ops", "imgfilters.kernels")


def python(code, *args, cwd=None):
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["--version"], 0),
                                        (["a.png", "b.png", "--method", "bilateral", "--patch-size", "5"], 2),
                                        (["a.png", "b.png", "--sigma", "-1"], 2), (["a.png"], 2)])
def test_command_line_answers_without_loading_torch(argv, code):
    start = time.perf_counter()
    done = python(MAIN, *argv)
    seconds = time.perf_counter() - start
    assert done.returncode == code, done.stderr
    assert seconds < 1.0, f"{argv}: {seconds:.2f} s"  # (the import of torch alone takes 2-5 s)


def test_import_loads_modules_on_first_use():
    probe = f"""
import sys, time
start = time.perf_counter()
import imgfilters
print(time.perf_counter() - start, [m for m in {HEAVY} if m in sys.modules])
imgfilters.gaussian_blur  # the first use loads the ops (and registers all of them), not torchvision
import torch
print(hasattr(torch.ops.imgfilters, "bilateral"), "torchvision" in sys.modules)
"""
    done = python(probe)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    seconds, loaded = first.split(" ", 1)
    assert loaded == "[]" and float(seconds) < 0.1
    assert second == "True False"
