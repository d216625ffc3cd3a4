"""The one way every family launches a kernel: ``launch(kernel, grid, args, meta, x, tile)``,
with a fixed tile or one tuned by ``Tuning``.

Host time. Triton's own launch (``kernel[grid](...)``) binds and specialises every
argument on every call (and its autotuner adds a key and a dictionary walk): 20 to 60 us
of host time on the H200's host, as long as a small image's whole kernel. So the
``CompiledKernel`` that Triton returns for a launch is kept here under a key that fixes
everything its specialisation can depend on (every integer argument exactly, tensors'
dtypes and 16-byte alignment, floats by type, the constexpr meta-parameters, the tile, the
device), and the next launch with that key goes through the compiled kernel's own public
launcher, ``compiled[grid](*args)``. This is the one cache on the launch path, with the
families' plan memos (pure functions of plain values) and ``Tuning``'s choices.

Tuning. ``Tuning`` times a kernel's candidate tiles on the first launch of each tuning
key (a coarser key: a size class, not the exact shape) and device, under a lock: Triton's
own autotuner shares one cache between threads and devices, and two threads tuning at
once crashed in it. Launches whose key is already known take no lock.
"""
import dataclasses
import os
import threading
from typing import Optional

import torch
import triton

from .tiling import interpreted

__all__ = ["launch", "Meta", "Plan", "Tuning", "autotuning", "tile_config", "aligned"]

# The tuning candidates are timed briefly: a new variant's first call waits for them.
_TUNE_WARMUP_MS, _TUNE_REP_MS = 5, 20
_MAX_LAUNCHES = 4096  # compiled launches kept; the cache is cleared when it fills

_launches = {}  # launch key -> (compiled kernel, its constexpr arguments, meta-parameters for the grid)
_lock = threading.Lock()


def autotuning() -> bool:
    """False when ``IMGFILTERS_AUTOTUNE=0``: kernels then use their family's default tile
    instead of timing every candidate on the first call of each tuning key (the tests
    set this on the GPU, where tuning each of hundreds of variants would take minutes)."""
    return os.environ.get("IMGFILTERS_AUTOTUNE", "1") != "0"


class Meta(dict):
    """Constexpr meta-parameters that many launches share, for a family to build once and
    keep (never to modify): their part of the launch key is made and hashed once, not on
    every launch (a kernel's constant weight tables take microseconds to hash)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.key = _Hashed(self.items())


class _Hashed(tuple):
    """A tuple whose hash is computed once."""

    def __new__(cls, items):
        t = super().__new__(cls, items)
        t.hash = tuple.__hash__(t)
        return t

    def __hash__(self):
        return self.hash


@dataclasses.dataclass(frozen=True)
class Plan:
    """A launch as a family's plan function chose it, for ``launch``: the constexprs (a
    ``Meta``), the tile (None: the family's ``Tuning`` times its candidates on the first
    launch) and the grid (a tuple, or a function of the tile's meta-parameters where the
    tile is tuned)."""
    meta: Meta
    tile: Optional[triton.Config]
    grid: object


def tile_config(num_warps=4, num_stages=1, **meta):
    """A tile: the kernel's tile meta-parameters and its launch options (with its part of
    the launch key, hashed once)."""
    config = triton.Config(meta, num_warps=num_warps, num_stages=num_stages)
    config.key = _Hashed((tuple(meta.items()), num_warps, num_stages))
    return config


class Tuning:
    """How a kernel's tile is chosen: ``candidates(meta)`` -> the ``triton.Config`` tiles
    worth timing for a launch's constexpr ``meta`` (the first is the default, used when
    tuning is off), timed once per device and per value of the ``key`` parameters (named
    as in the kernel's signature) and the tensors' dtypes."""

    def __init__(self, candidates, key):
        self.candidates = candidates
        self.key = tuple(key)
        self.chosen = {}  # (device index, key values, dtypes) -> triton.Config
        self.last = None  # the tile of the latest launch not already cached (benchmark.py reports it)

    def tile(self, kernel, grid, args, meta, device):
        """The tile for this launch, timing the candidates on a new key (under the lock)."""
        configs = self.candidates(meta)
        if len(configs) == 1 or not autotuning():
            return configs[0]
        named = {**dict(zip(kernel.arg_names, args)), **meta}
        key = (device, tuple(named[k] for k in self.key), tuple(a.dtype for a in args if isinstance(a, torch.Tensor)))
        config = self.chosen.get(key)
        if config is None:
            def run(c):
                return lambda: kernel[_grid(grid, {**meta, **c.kwargs})](*args, **meta, **_options(c))
            times = [triton.testing.do_bench(run(c), warmup=_TUNE_WARMUP_MS, rep=_TUNE_REP_MS) for c in configs]
            config = self.chosen[key] = configs[times.index(min(times))]
        return config


def launch(kernel, grid, args, meta, x, config=None, tuning=None):
    """Launch ``kernel`` on ``x``'s device with positional ``args`` and constexpr ``meta``,
    in the tile ``config`` (a ``triton.Config``) or, when that is None, the one ``tuning``
    picks. ``grid``: the launch grid (1 to 3 sizes), or ``grid(params)`` -> it, from the
    meta-parameters and the tile's."""
    if interpreted(x):  # the interpreter runs each launch; nothing to cache or tune
        config = config or tuning.candidates(meta)[0]
        kernel[_grid(grid, {**meta, **config.kwargs})](*args, **meta, **_options(config))
        return
    device = x.get_device()
    if device != torch.cuda.current_device():
        with torch.cuda.device(device):
            return launch(kernel, grid, args, meta, x, config, tuning)
    key = _launch_key(kernel, args, meta, config, device)
    try:
        hit = _launches.get(key)
    except TypeError:  # an unhashable argument: launched without the cache
        hit = key = None
    if hit is not None:
        compiled, constexprs, params = hit
        compiled[_grid(grid, params)](*args, *constexprs)
        return
    with _lock:
        if config is None:
            config = tuning.tile(kernel, grid, args, meta, device)
        if tuning is not None:  # (a family may pick a launch's tile itself: the report shows it too)
            tuning.last = config
        params = {**meta, **config.kwargs}
        compiled = kernel[_grid(grid, params)](*args, **meta, **_options(config))
        names = kernel.arg_names[len(args):]
        # (the interpreter, which also takes CUDA tensors, returns no compiled kernel to keep)
        if key is not None and compiled is not None and all(n in params for n in names):
            if len(_launches) >= _MAX_LAUNCHES:
                _launches.clear()
            _launches[key] = (compiled, tuple(params[n] for n in names), params)


def _grid(grid, params):
    """``launch``'s ``grid`` as the 3 sizes a compiled kernel's launcher takes."""
    if callable(grid):
        grid = grid(params)
    return (*grid, 1, 1)[:3]


def aligned(t):
    """Whether tensor ``t``'s data is 16-byte aligned, as Triton specialises a pointer."""
    return t.data_ptr() % 16 == 0


def _options(config):
    return dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)


def _launch_key(kernel, args, meta, config, device):
    """Everything Triton's specialisation and the tile depend on (hashable unless an
    argument is not)."""
    tile = None if config is None else getattr(config, "key", None) or _tile_key(config)
    fixed = meta.key if type(meta) is Meta else tuple(meta.items())
    # (most arguments are sizes and strides, ints their own key, plain tensors, empty
    # prologue and epilogue chains and floats: all without a call; this runs on every launch)
    return kernel.fn, device, tile, fixed, tuple([
        a if type(a) is int else (a.dtype, a.data_ptr() % 16 == 0) if type(a) is torch.Tensor
        else a if a == () else float if type(a) is float else _spec(a)
        for a in args])


def _tile_key(config):
    """A ``triton.Config`` made elsewhere than ``tile_config``: its part of the launch key."""
    return tuple(config.kwargs.items()), config.num_warps, config.num_stages


def _spec(a):
    """What Triton may specialise a kernel argument on: integers exactly (it looks at
    ``== 1``, divisibility by 16 and the range), tensors by dtype and 16-byte alignment,
    floats by type only (never specialised), tuples element by element."""
    t = type(a)
    if t is int:
        return a
    if t is torch.Tensor or isinstance(a, torch.Tensor):  # (subclasses too: Parameter, tv_tensors)
        return a.dtype, aligned(a)
    if t is float:
        return float
    if t is tuple:
        return tuple(map(_spec, a)) if a else a
    return t, a
