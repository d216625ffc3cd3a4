"""Shared test helpers: random and sample images, per-dtype tolerances, comparisons, counts
of compiles and launches."""
import collections
import contextlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from imgfilters import _image

# Tests that need the compiled kernels on a GPU (full-size images, peak memory, inductor).
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SAMPLE_NAMES = ("astronaut", "camera", "coffee", "chelsea")
KERNEL_DTYPES = _image.KERNEL_DTYPES

# Allowed |kernel - float64 reference| per output dtype: floats in unit scale (relative to
# max(1, |value|)), integers in levels. float16/bfloat16: one unit in the last place of 1.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2 ** -10, torch.bfloat16: 2 ** -7,
             torch.uint8: 1, torch.uint16: 1, torch.float64: 1e-12}
# The bounds that differ from TOLERANCE, each with its reason:
# - NLM's float32 kernel: its weights exp(-d^2 / h^2) still count at d^2 / h^2 ~ 30, so the
#   float32 rounding of the patch sums (~1e-6 relative) grows to ~1e-5 of the output.
NLM_FLOAT32 = 5e-5
# - Gradients (float32 kernels against the float64 reference's autograd), relative to the
#   largest gradient value: they sum many taps of either sign, so the small ones carry the
#   large ones' rounding.
GRADIENT = 1e-5
# - A fused pipeline against the unfused one (both float32 kernels, rounding at different
#   steps), relative to max(1, |value|); with a float16 step, about two float16 ulps of 1.
FUSED = {torch.float32: 2e-5, torch.float16: 2e-3}


def count_compiles(monkeypatch):
    """A Counter of the Triton kernels (by function name) that compile, or load from the
    disk cache, a new specialisation from now on: Triton does that once per pattern of
    its integer arguments (being 1, multiples of 16) and constexpr values."""
    import triton.runtime.jit as jit
    counts = collections.Counter()
    original = jit.JITFunction._do_compile

    def counting(self, *args, **kwargs):
        counts[self.fn.__name__] += 1
        return original(self, *args, **kwargs)
    monkeypatch.setattr(jit.JITFunction, "_do_compile", counting)
    return counts


# The issues' bound on a cold first call (compile and tuning included) on the H200.
COLD_CALL_S = 5.0


def cold_first_call(tmp_path, setup, first, again):
    """Run ``first`` (a line of Python, after ``setup``) in a fresh process with an empty
    Triton cache and tuning on, then ``again`` (a call that must not compile). Returns the
    CPU seconds of ``first`` (the process's and its compiler subprocesses'), and the wall
    seconds of both. The calls are timed while no other test of the suite runs (the
    suite's exclusive lock, ``conftest.one_timed_step_at_a_time``: the tests that call
    this are marked ``timed``), so that the bound holds whatever the suite's parallelism."""
    import subprocess
    import sys
    script = f"""
import fcntl, os, resource, time, torch, imgfilters
{setup}
def cpu():
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime
torch.cuda.synchronize()
locks = os.environ.get("IMGFILTERS_TEST_LOCKS")
if locks:  # no other test of the suite running (tests/conftest.py)
    tests = open(os.path.join(locks, "tests"), "a")
    fcntl.flock(tests, fcntl.LOCK_EX)
t, c = time.perf_counter(), cpu()
{first}
torch.cuda.synchronize()
wall, busy = time.perf_counter() - t, cpu() - c
t = time.perf_counter()
{again}
torch.cuda.synchronize()
print(busy, wall, time.perf_counter() - t)
"""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path), IMGFILTERS_CACHE_DIR=str(tmp_path),
               IMGFILTERS_AUTOTUNE="1")  # (no tile tuned before: a cold call tunes too)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-2000:]
    return tuple(map(float, out.stdout.split()[-3:]))


@contextlib.contextmanager
def count_launches():
    """A Counter of the Triton kernels (by name) launched inside the block: in the
    interpreter, by its launcher; on the GPU, by Triton's launch hook (while one is set,
    ``kernels/core/launch.py`` launches through Triton's runner, which calls it)."""
    counts = collections.Counter()
    if os.environ.get("TRITON_INTERPRET") == "1":
        from triton.runtime.interpreter import InterpretedFunction
        original = InterpretedFunction.run

        def run(self, *args, **kwargs):
            counts[self.fn.__name__] += 1
            return original(self, *args, **kwargs)
        InterpretedFunction.run = run
        try:
            yield counts
        finally:
            InterpretedFunction.run = original
    else:
        from triton import knobs

        def hook(metadata):
            counts[metadata.get()["name"]] += 1
        knobs.runtime.launch_enter_hook.add(hook)
        try:
            yield counts
            torch.cuda.synchronize()
        finally:
            knobs.runtime.launch_enter_hook.remove(hook)


def assert_fused_in_one_engine_pass(steps, x, monkeypatch, tolerance=FUSED[torch.float32]):
    """``imgfilters.fuse`` of the torchvision pipeline ``steps`` runs in one pass of the CPU
    engine (the filter with its prologue and epilogue) and equals the unfused pipeline
    (relative to max(1, |value|); integer outputs within one level)."""
    import imgfilters
    from imgfilters import cpu
    from torchvision.transforms import v2
    fused = imgfilters.fuse(v2.Compose(steps))
    calls, run = [], cpu.run
    monkeypatch.setattr(cpu, "run", lambda *a, **k: calls.append(a[0]) or run(*a, **k))
    got = fused(x)
    assert len(calls) == 1
    expected = v2.Compose(steps)(x)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    err = ((got.double() - expected.double()).abs() / expected.double().abs().clamp(min=1)).max()
    assert err <= (1 if expected.dtype in (torch.uint8, torch.uint16) else tolerance)


def random_image(shape, dtype, gen, device="cpu"):
    """Uniform random image over the dtype's full unit range."""
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    if dtype in _image.MAX_VALUE:
        x = (x * _image.MAX_VALUE[dtype]).round().to(torch.int64).to(dtype)
    else:
        x = x.to(dtype)
    return x.to(device)


def sample(name):
    """A sample photograph as a uint8 (C, H, W) tensor."""
    arr = np.asarray(Image.open(SAMPLES / f"{name}.png"))
    t = torch.from_numpy(arr.copy())
    return t[None] if t.ndim == 2 else t.permute(2, 0, 1).contiguous()


def assert_matches(out, ref_unit, dtype=None):
    """``out`` (any dtype) equals the float64 unit-scale ``ref_unit`` within TOLERANCE."""
    dtype = dtype or out.dtype
    assert out.dtype == dtype
    assert out.shape == ref_unit.shape, (out.shape, ref_unit.shape)
    got = out.detach().cpu().to(torch.float64)
    ref = ref_unit.detach().cpu().to(torch.float64)
    if dtype in _image.MAX_VALUE:
        expected = _image.from_unit(ref, dtype).to(torch.float64)
        err = (got - expected).abs().max().item()
        assert err <= TOLERANCE[dtype], f"{dtype}: max error {err} levels"
    else:
        err = ((got - ref).abs() / ref.abs().clamp(min=1)).max().item()
        assert err <= TOLERANCE[dtype], f"{dtype}: max error {err}"


def assert_gradient_matches(got, expected):
    """A kernel's gradient equals the float64 reference's ``expected`` within GRADIENT of
    its largest value."""
    err = (got.detach().cpu().to(torch.float64) - expected).abs().max().item()
    assert err <= GRADIENT * expected.abs().max().item(), f"gradient: max error {err}"
