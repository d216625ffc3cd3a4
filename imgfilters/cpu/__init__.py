"""The CPU engine: compiled CPU kernels for float32 and integer CPU tensors (issue 43).

CUDA tensors run the Triton kernels and float64 runs the float64 reference
(``imgfilters/reference``); every other CPU tensor runs here, in kernels that numba
compiles to machine code for the host on first use and caches on disk. This file holds
the engine's conventions and its host-side helpers (no numba: ``import imgfilters`` and
the command line's ``--help`` stay fast); ``core.py`` holds the compiled helpers every
family shares, and each family has its module (``separable.py``, ``filter2d.py``,
``resample.py``, ``pointwise.py``, ``jpeg.py``, ...), imported by its op on the first
engine call.

Conventions (every family follows them):

- **Dispatch.** An op takes the engine when ``_image.uses_cpu_engine(img)``: a CPU tensor,
  not float64, outside ``_image.differentiating`` (the reference path's gradient runs
  the float64 definition), and the engine selected: always, except under
  ``TRITON_INTERPRET=1`` (how CI tests the Triton kernels on CPU tensors). The tests
  switch it on there with ``_image.cpu_engine(True)``, or ``IMGFILTERS_CPU_ENGINE=1``
  (``0`` switches it off: CPU tensors then run the reference).
- **Arrays.** A kernel receives numpy views (zero-copy) of the ``(B, C, H, W)`` planes of
  its input and of the output that the op allocated (``_image.new_image``: channels-last
  stays channels-last), any strides. Each image argument is three arrays, uint8, uint16
  and float32 (two of them an empty stand-in), and a ``kind`` code (``U8``, ``U16``,
  ``F32``) that says which one holds the image: one compiled kernel serves every pair of
  input and output dtypes. float16 and bfloat16 (numba has no half types) are converted
  to float32 on the way in and back on the way out (round to nearest even, as the
  kernels' store).
- **Values.** Arithmetic is float32 (JPEG's float64, as its definition). Integers are read
  as value / max (or as their values with the taps scaled, for a linear filter without a
  prologue) and stored rounded half to even and saturated, as the kernels' typed store.
- **Rows.** Kernels work a row at a time: a row is loaded once into a float32 buffer
  (converted, through the prologue, the border applied once at its ends), inner loops run
  over contiguous pixels of such buffers with plain ``range`` indices (numba's negative-
  index wraparound then folds away and LLVM vectorises them), and the result row goes
  through the epilogue into the typed store.
- **Borders** are run-time codes (``kernels/core/borders.py``: 0 reflect, 1 symmetric, 2
  replicate, 3 constant), through index maps built here (``border_map``): no
  specialisation per border.
- **Chains.** A fused prologue or epilogue is a float32 array ``(C, steps, 4)``: per
  channel, each step's code (``STEP_CODES``) and up to three parameters, with the
  per-channel vectors resolved (``chain``); ``core.apply_chain`` runs it over a row.
- **Specialisations.** Kernels are compiled for explicit signatures of ``'A'``-layout
  arrays (``core.image_args`` and friends): one specialisation per kernel whatever the
  dtypes, layouts and borders, so a cold process compiles each kernel once (about a
  second or two) and a warm one loads it from the disk cache.
- **First calls.** The engine keeps its own disk cache of machine code (``native.py``):
  a kernel's first call in a process loads its object code (compiled for this CPU, keyed
  on the engine's sources, the CPU, numba's and llvmlite's versions) with llvmlite's
  MCJIT and calls it through ctypes and a small trampoline, without importing numba
  (about 30 ms, the first kernel). On a miss, the kernel's object is made from the LLVM IR
  that the package ships (``ir/``, written by ``scripts/build_cpu_ir.py``: the kernel
  linked with its helpers as numba lowers them), by numba's module passes and code
  generation through llvmlite alone (``native.machine_code``, the same machine code as
  numba's, without numba: a cold first call 0.25-0.9 s of CPU against 2.3-3.6); where that
  IR does not apply (changed sources, another LLVM or target), numba compiles it
  (``build.py``, the one module that imports numba). Either way the object goes to the
  cache, written atomically; a damaged or stale file never runs. So ``core.py`` and the
  families import no numba: their helpers and kernels are plain functions (``core.jit``,
  ``core.intrinsic``, ``core.kernel``) and their argument types numba's type strings
  (``core.array``).
- **Threads.** ``threads()`` is ``torch.get_num_threads()`` (DataLoader workers that set
  one thread get one), at most the CPUs this process may use. A kernel takes
  ``(lo, hi, ...)``, a range of its independent tasks (planes, or bands of rows of a
  plane), and ``run`` splits the tasks into that many contiguous ranges, run by a pool of
  Python threads (the kernels release the GIL) and the calling thread. Not numba's
  ``parallel=True``: its threading layers are not safe under ``fork`` (DataLoader
  workers) nor, with the default layer, under calls from several threads at once (Dask),
  and a parallel kernel took ten times longer to compile.
- **No runtime.** Kernels and helpers compile without numba's runtime (``_nrt=False``):
  they allocate nothing (their working buffers come from ``run``'s ``scratch``, one set per
  thread) and their array views carry no reference counts. With it, each view passed to a
  helper cost a call to increment and one to decrement a count: on 224-pixel rows the
  separable kernel took 0.53 us a row, without it 0.24.
- **Compiles.** FMA contraction only (``core.FASTMATH``: no ``nnan``/``ninf``, NaN and inf
  propagate as IEEE says; no reassociation), numpy's error model, no Python wrappers
  (``build.py``). Every helper a kernel calls is inlined into it, so keep helpers short
  and their call sites few: a cold compile of the separable kernel is about 2.5 s of CPU.
  A conditional expression is two more blocks in numba's IR, whose SSA passes grow with
  blocks times variables: straight-line code of many selections takes ``core.lesser`` and
  ``core.greater`` (an LLVM select each; the median networks compiled 2.3 times faster).

Putting an op on the engine (the ops of ``ops/separable.py``, ``ops/filter2d.py``,
``ops/resample.py``, ``ops/pointwise.py`` and ``ops/jpeg.py`` show it):

1. ``imgfilters/cpu/<family>.py``: its kernels (``@core.kernel(*IMAGE, *IMAGE, ...)``,
   ``fn(lo, hi, ..., *buffers)`` over tasks, the working buffers last) and a host function
   that takes the op's tensors and arguments, allocates the output with
   ``_image.new_image``, converts the arguments to arrays (``image_args``, ``Output``,
   ``border_map``, ``fused``), calls ``run`` (with ``scratch``) and ``Output.finish``.
2. In the op's implementation, before the reference branch::

       if _image.uses_cpu_engine(img):
           from imgfilters.cpu import <family> as engine   # (no numba: the kernels load on first call)
           return engine.<function>(img, ..., fusion)

3. ``library.op(..., cpu_engine=True)`` when the implementation takes ``fusion``: fused
   pipelines then fuse on CPU tensors too (without it they run the op unfused there).
4. Tests in ``tests/test_cpu_<family>.py`` with the ``cpu_engine`` fixture (every dtype,
   border, layout, fused steps, against the float64 reference); ``test_nonfinite.py``
   checks the engine path of every filter already. ``scripts/benchmark.py cpu`` notices
   by itself that the op runs on the engine.
"""
import functools
import hashlib
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

U8, U16, F32 = 0, 1, 2
KINDS = {torch.uint8: U8, torch.uint16: U16, torch.float32: F32}
HALF = (torch.float16, torch.bfloat16)
MAX_VALUE = {U8: 255.0, U16: 65535.0, F32: 1.0}

# the step codes of a chain array (``chain``); 7 is unsharp masking's epilogue, which also
# reads the input pixel at the output position
STEP_CODES = {"scale": 0, "normalize": 1, "clamp": 2, "quantize": 3, "gamma": 4, "srgb_to_linear": 5,
              "linear_to_srgb": 6, "unsharp": 7}
UNSHARP = STEP_CODES["unsharp"]

_DUMMY = {U8: np.empty((1, 1, 1, 1), np.uint8), U16: np.empty((1, 1, 1, 1), np.uint16),
          F32: np.empty((1, 1, 1, 1), np.float32)}


def threads() -> int:
    """The engine's thread count: ``torch.get_num_threads()``, at most the CPUs this
    process may run on (read once per process: the query costs microseconds)."""
    return max(1, min(torch.get_num_threads(), _cpus(os.getpid())))


@functools.lru_cache(maxsize=4)
def _cpus(pid):
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        return os.cpu_count() or 1


_POOL = {"pid": None, "pool": None, "size": 0}
_POOL_LOCK = threading.Lock()


def _pool(workers):
    """A pool of at least ``workers`` threads, made anew in a forked child (whose parent's
    threads did not follow it)."""
    with _POOL_LOCK:
        if _POOL["pid"] != os.getpid() or _POOL["size"] < workers:
            _POOL.update(pid=os.getpid(), size=workers,
                         pool=ThreadPoolExecutor(max_workers=workers, thread_name_prefix="imgfilters-cpu"))
        return _POOL["pool"]


def run(kernel, tasks, *args, scratch=(), n_threads=None):
    """``kernel(lo, hi, *args, *buffers)`` over ``tasks`` independent tasks, split into
    ``threads()`` contiguous ranges: one in the calling thread, the others in the pool.
    ``scratch`` lists the ``(shape, dtype)`` of the kernel's working buffers: each range
    gets its own, zero-filled (kernels allocate nothing themselves)."""
    n = min(n_threads or threads(), tasks)
    if n <= 1:
        kernel(0, tasks, *args, *_buffers(scratch))
        return
    bounds = [tasks * k // n for k in range(n + 1)]
    pool = _pool(n - 1)
    futures = [pool.submit(kernel, bounds[k], bounds[k + 1], *args, *_buffers(scratch)) for k in range(1, n)]
    try:
        kernel(bounds[0], bounds[1], *args, *_buffers(scratch))
    finally:
        for f in futures:
            f.result()


def _buffers(scratch):
    return tuple(np.zeros(shape, dtype) for shape, dtype in scratch)


def bands(planes, rows, min_rows=16, n_threads=None):
    """``(bands, rows per band)``: how many bands of rows to cut each plane into, so that
    ``planes * bands`` tasks split evenly over the threads (a band recomputes the rows its
    filter reaches above it: bands of at least ``min_rows`` rows)."""
    n = n_threads or threads()
    count = n // math.gcd(planes, n)
    count = max(1, min(count, rows // max(min_rows, 1)))
    return count, -(-rows // count)


def image_args(x4):
    """``(u8, u16, f32, kind)`` of a ``(B, C, H, W)`` CPU tensor: numpy views of its planes
    in the array of its dtype, empty stand-ins for the others (float16 and bfloat16 as a
    float32 copy)."""
    if x4.dtype in HALF:
        x4 = x4.float()
    kind = KINDS[x4.dtype]
    arrays = dict(_DUMMY)
    arrays[kind] = x4.detach().numpy()
    return arrays[U8], arrays[U16], arrays[F32], kind


class Output:
    """The output planes ``y4`` as kernel arguments (``args``, as ``image_args``); a
    float16 or bfloat16 output is written to a float32 buffer that ``finish`` copies back."""

    def __init__(self, y4):
        self.y4 = y4
        self.buffer = torch.empty(y4.shape, dtype=torch.float32) if y4.dtype in HALF else None
        self.args = image_args(y4 if self.buffer is None else self.buffer)

    def finish(self):
        if self.buffer is not None:
            self.y4.copy_(self.buffer)


def unit_scale(kind):
    """The factor from stored values of ``kind`` to unit scale."""
    return 1.0 / MAX_VALUE[kind]


@functools.lru_cache(maxsize=1024)
def border_map(n, before, after, code):
    """For the positions ``-before .. n + after - 1`` of an axis of ``n`` pixels, the
    pixel that the border ``code`` reads there (int32), or -1 where the constant border
    supplies the value (``reference.borders.border_indices``). Shared: not to be modified."""
    i = np.arange(-before, n + after, dtype=np.int64)
    if code == 0:  # reflect-101
        period = max(2 * n - 2, 1)
        j = np.abs(i) % period
        j = np.where(j >= n, period - j, j)
    elif code == 1:  # symmetric
        j = np.where(i < 0, -1 - i, i) % (2 * n)
        j = np.where(j >= n, 2 * n - 1 - j, j)
    elif code == 2:  # replicate
        j = np.clip(i, 0, n - 1)
    else:  # constant
        j = np.where((i >= 0) & (i < n), i, -1)
    return j.astype(np.int32)


@functools.lru_cache(maxsize=1024)
def edge_map(n, before, after, code):
    """``border_map`` of the positions outside the axis only: the ``before`` positions
    before it, then the ``after`` after it (what a row buffer's ends read). Shared: not
    to be modified."""
    m = border_map(n, before, after, code)
    return np.ascontiguousarray(np.concatenate([m[:before], m[before + n:]]))


def chain(steps, channels, first=()):
    """The chain array ``(channels, len(first) + len(steps), 4)`` float32 of pointwise
    ``steps`` (``ops.pointwise.Step``), after the ``first`` steps given as ``(code, p0,
    p1, p2)`` tuples (unsharp masking's epilogue): per channel, each step's code and
    parameters, a normalisation's per-channel values resolved."""
    out = np.zeros((channels, len(first) + len(steps), 4), np.float32)
    for s, step in enumerate(first):
        out[:, s, :len(step)] = step
    for s, step in enumerate(steps, len(first)):
        out[:, s, 0] = STEP_CODES[step.name]
        values = list(step.scalars) + [v.to(torch.float64).reshape(-1).expand(channels).numpy()
                                       for v in step.channel_vectors]
        for p, v in enumerate(values):
            out[:, s, 1 + p] = v
    return out


@functools.lru_cache(maxsize=64)
def no_chain(channels):
    """The chain array of no steps (shared: not to be modified)."""
    return np.zeros((channels, 0, 4), np.float32)


def fused(fusion, channels, dtype, first_epilogue=()):
    """``(prologue, epilogue, output dtype)`` chain arrays of a launch with ``fusion`` (a
    ``pointwise.Fusion`` or None) on ``dtype`` images; ``first_epilogue`` steps run before
    the fusion's epilogue (``chain``)."""
    if fusion is None:
        epi = chain((), channels, first_epilogue) if first_epilogue else no_chain(channels)
        return no_chain(channels), epi, dtype
    return (chain(fusion.prologue, channels), chain(fusion.epilogue, channels, first_epilogue), fusion.out_dtype)


def cache_dir():
    """Where the compiled kernels are cached (``native``): ``NUMBA_CACHE_DIR`` (or the
    user's cache folder) / ``imgfilters-cpu`` / a hash of the engine's sources, so that a
    change to a shared helper in ``core.py`` never loads a kernel compiled against the old
    one."""
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "imgfilters")
    return os.path.join(base, "imgfilters-cpu", sources_digest())


def sources_digest():
    """A hash of the engine's sources (its ``.py`` files)."""
    digest = hashlib.sha1()
    for f in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(f.name.encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()[:16]
