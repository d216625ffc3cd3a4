"""The one way every family launches a kernel: ``launch(kernel, grid, args, meta, x, ...)``,
with a fixed tile or one tuned by ``Tuning``.

Host time. Triton's own launch binds and specialises every argument on every call (and its
autotuner adds a key and a dictionary walk): 20 to 60 us of host time on the H200's host,
as long as a small image's whole kernel. So the kernel Triton compiles for a launch is
kept here under a key that fixes everything its specialisation can depend on (every
integer argument exactly, tensors' dtypes and 16-byte alignment, floats by type, the
constexpr meta-parameters, the tile, the device), and the next launch with that key
calls the compiled kernel directly.

Relaunches. ``launch(..., reusable=True)`` returns a ``Relaunch`` of the compiled kernel
on its grid with everything but the leading tensors fixed: a family that keeps it under a
key of its own (the shapes, strides, dtypes, alignment and options it derives the launch
from) launches a repeated call with that, skipping its own derivations and the key above
(about 7 us of a 9 us launch on the development machine's CPU).

Tuning. ``Tuning`` times a kernel's candidate tiles on the first launch of each tuning
key (a coarser key: a size class, not the exact shape) and device, under a lock: Triton's
own autotuner shares one cache between threads and devices, and two threads tuning at
once crashed in it. Launches whose key is already known take no lock.
"""
import os
import threading

import torch
import triton
from triton import knobs
from triton.knobs import HookChain

from .tiling import interpreting

__all__ = ["launch", "Meta", "Kept", "Relaunch", "Tuning", "autotuning", "forget_relaunches", "tile_config",
           "aligned", "layout_key"]

# The tuning candidates are timed briefly: a new variant's first call waits for them.
_TUNE_WARMUP_MS, _TUNE_REP_MS = 5, 20
_MAX_LAUNCHES = 4096  # compiled launches kept; the cache is cleared when it fills

_launches = {}  # launch key -> (compiled kernel, constexpr tail, meta-parameters for the grid)
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


def tile_config(num_warps=4, num_stages=1, **meta):
    """A tile: the kernel's tile meta-parameters and its launch options."""
    return triton.Config(meta, num_warps=num_warps, num_stages=num_stages)


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
                return lambda: kernel[grid({**meta, **c.kwargs})](*args, **meta, **_options(c))
            times = [triton.testing.do_bench(run(c), warmup=_TUNE_WARMUP_MS, rep=_TUNE_REP_MS) for c in configs]
            config = self.chosen[key] = configs[times.index(min(times))]
        return config


def launch(kernel, grid, args, meta, x, config=None, tuning=None, reusable=False):
    """Launch ``kernel`` on ``x``'s device with positional ``args`` and constexpr ``meta``,
    in the tile ``config`` (a ``triton.Config``) or, when that is None, the one ``tuning``
    picks. ``grid(params)`` -> the launch grid, from the meta-parameters and the tile's.
    With ``reusable``, returns the launch's ``Relaunch`` (None in the interpreter)."""
    if not x.is_cuda and interpreting():  # the interpreter runs each launch; nothing to cache or tune
        config = config or tuning.candidates(meta)[0]
        kernel[grid({**meta, **config.kwargs})](*args, **meta, **_options(config))
        return None
    device = x.get_device()
    if device != torch._C._cuda_getDevice():
        with torch.cuda.device(device):
            return launch(kernel, grid, args, meta, x, config, tuning, reusable)
    key = _launch_key(kernel, args, meta, config, device)
    try:
        hit = _launches.get(key)
    except TypeError:  # an unhashable argument: launched without the cache
        hit = key = None
    if hit is not None:
        compiled, tail, params = hit
        if reusable:
            relaunch = Relaunch(compiled, grid(params), args, tail, device)
            relaunch(*args[:relaunch.tensors])
            return relaunch
        _run(compiled, grid(params), device, (*args, *tail))
        return None
    with _lock:
        if config is None:
            config = tuning.tile(kernel, grid, args, meta, device)
        if tuning is not None:  # (a family may pick a launch's tile itself: the report shows it too)
            tuning.last = config
        params = {**meta, **config.kwargs}
        compiled = kernel[grid(params)](*args, **meta, **_options(config))
        names = kernel.arg_names[len(args):]
        if not all(n in params for n in names):
            return None
        tail = tuple(params[n] for n in names)
        if key is not None:
            if len(_launches) >= _MAX_LAUNCHES:
                _launches.clear()
            _launches[key] = (compiled, tail, params)
    return Relaunch(compiled, grid(params), args, tail, device) if reusable else None


class Relaunch:
    """A compiled kernel on its grid and device with every argument fixed but the leading
    tensors, which it does not keep (an image is never held alive here).
    ``relaunch(*tensors)`` launches it on the current stream with those as its first
    ``relaunch.tensors`` arguments: they must have the shapes, strides, dtypes and 16-byte
    alignment (``aligned``) of the ones it was made with, and the grid must not depend on
    anything else that changed (a family keeps it under a key of the shapes it derives
    the launch from)."""

    __slots__ = ("compiled", "grid", "tensors", "rest", "device")

    def __init__(self, compiled, grid, args, tail, device):
        self.tensors = next((i for i, a in enumerate(args) if not isinstance(a, torch.Tensor)), len(args))
        self.compiled, self.grid, self.device = compiled, tuple(grid), device
        self.rest = (*args[self.tensors:], *tail)

    def __call__(self, *tensors):
        if self.device != torch._C._cuda_getDevice():
            with torch.cuda.device(self.device):
                return self(*tensors)
        _run(self.compiled, self.grid, self.device, (*tensors, *self.rest))


class Kept:
    """A family's ``Relaunch``es under keys of its own, each with what must stay alive while
    it is kept (plans whose ids are in its key); emptied when it reaches _MAX_LAUNCHES."""

    def __init__(self):
        self.entries = {}
        _kept.append(self)

    def get(self, key):
        hit = self.entries.get(key)
        return None if hit is None else hit[0]

    def keep(self, key, relaunch, *pinned):
        if relaunch is not None:
            if len(self.entries) >= _MAX_LAUNCHES:
                self.entries.clear()
            self.entries[key] = (relaunch, pinned)


_kept = []  # every family's Kept


def forget_relaunches():
    """Empty every family's ``Kept`` relaunches, so that the next calls derive their
    launches anew (tests that patch a family's tiles or plans)."""
    for kept in _kept:
        kept.entries.clear()


def _run(compiled, grid, device, args):
    """Launch ``compiled`` on ``grid`` (1 to 3 sizes) with all of its arguments on the
    current stream of ``device``, the current device."""
    g = grid + (1, 1)
    stream = triton.runtime.driver.active.get_current_stream(device)
    if _idle(knobs.runtime.launch_enter_hook) and _idle(knobs.runtime.launch_exit_hook):
        # what Triton's own runner does, without its per-call closure
        compiled.run(g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata, None, None, None, *args)
    else:  # launch hooks (profilers) get their metadata from Triton's runner
        compiled[g[:3]](*args, stream=stream)


def layout_key(*tensors):
    """What a ``Kept`` key holds of each of its launch's tensors: all that the launch may
    derive from them but their data (shape, strides, dtype, 16-byte alignment)."""
    return tuple([(t.shape, t.stride(), t.dtype, aligned(t)) for t in tensors])


def aligned(t):
    """Whether tensor ``t``'s data is 16-byte aligned, as Triton specialises a pointer."""
    return t.data_ptr() % 16 == 0


def _idle(hook):
    """No launch hook installed (Triton keeps them in a HookChain, or None)."""
    return hook is None or (isinstance(hook, HookChain) and not hook.calls)


def _options(config):
    return dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)


def _launch_key(kernel, args, meta, config, device):
    """Everything Triton's specialisation and the tile depend on (hashable unless an
    argument is not)."""
    tile = None if config is None else (tuple(config.kwargs.items()), config.num_warps, config.num_stages)
    # (most arguments are sizes and strides: ints are their own key, without a call)
    fixed = meta.key if type(meta) is Meta else tuple(meta.items())
    return kernel, device, tile, fixed, tuple([a if type(a) is int else _spec(a) for a in args])


def _spec(a):
    """What Triton may specialise a kernel argument on: integers exactly (it looks at
    ``== 1``, divisibility by 16 and the range), tensors by dtype and 16-byte alignment,
    floats by type only (never specialised), tuples element by element."""
    t = type(a)
    if t is torch.Tensor or isinstance(a, torch.Tensor):  # (subclasses too: Parameter, tv_tensors)
        return a.dtype, aligned(a)
    if t is float:
        return float
    if t is tuple:
        return tuple(map(_spec, a))
    return t, a
