"""What starting costs: ``import imgfilters`` loads no torch, Triton or torchvision, and the
command line answers ``--help``, ``--version`` and usage errors before importing them."""
import os
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


def _warmup(*args):
    """``python -m imgfilters.warmup`` with ``args``, outside Triton's interpreter (the CPU
    engine runs CPU tensors then, as it does for users)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-m", "imgfilters.warmup", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_warmup_runs_each_call_once_per_dtype():
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    done = _warmup("--device", device, "--only", "box_blur", "median_blur", "--size", "40x72", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    compiled = sorted(line.split(":")[0].split("] ")[1] for line in lines if "compiled" in line)
    assert compiled == sorted(f"compiled {name} #{i} {dtype} 40x72" for name, n in (("box_blur", 1), ("median_blur", 2))
                              for i in range(1, n + 1) for dtype in ("uint8", "float32"))
    assert sum("tuned" in line for line in lines) == (6 if device == "cuda" else 0)  # (the GPU's second step)
    assert _warmup("--list").stdout.split() == list(__import__("imgfilters.warmup").warmup.CALLS)
    if device == "cpu":  # (the default device is the GPU: without one, a usage error that says so)
        done = _warmup()
        assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr, done.stderr


@pytest.mark.parametrize("args, message", [(["--only", "nope"], "unknown call 'nope'"), (["--jobs", "0"], "--jobs"),
                                           (["--size", "10"], "HEIGHTxWIDTH"), (["--device", "tpu"], "invalid choice")])
def test_warmup_refuses_bad_arguments(args, message):
    done = _warmup("--device", "cpu", *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
