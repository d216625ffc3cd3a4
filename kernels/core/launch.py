"""The one way every family launches a kernel: ``launch(kernel, grid, args, meta, x, tile)``,
with a fixed tile or one tuned by ``Tuning``.

Host time. Triton's own launch (``kernel[grid](...)``) binds and specialises every
argument on every call (and its autotuner adds a key and a dictionary walk): 20 to 60 us
of host time on the H200's host, as long as a small image's whole kernel. So the
``CompiledKernel`` that Triton returns for a launch is kept here under a key that fixes
everything its specialisation can depend on (every integer argument exactly, tensors'
dtypes and 16-byte alignment, floats by type, the constexpr meta-parameters, the tile, the
device), and the next launch with that key goes through the compiled kernel's own public
launcher, ``compiled[grid](*args)``. A launch with a new key whose integers Triton would
specialise alike (new image sizes: equal to 1, divisible by 16 and of an integer type as
before) takes the same compiled kernel (``_specialised_alike``), not Triton's binder
again. This is the one cache on the launch path, with the families' plan memos (pure
functions of plain values) and ``Tuning``'s choices.

Tuning. ``Tuning`` times a kernel's candidate tiles on the first launch of each tuning
key (a coarser key: a size class, not the exact shape) and device, under a lock: Triton's
own autotuner shares one cache between threads and devices, and two threads tuning at
once crashed in it. Launches whose key is already known take no lock. Each choice is also
written to a small JSON file per GPU model and Triton version (``tuning_file``), keyed
by the kernel's source hash, so that every process on a machine runs the tile the first
one chose: timings of tiles within a few percent of each other pick different ones in
different processes (35 % apart for one gaussian in one measurement).
"""
import dataclasses
import json
import os
import re
import tempfile
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
_alike = {}  # the same entries by ``_specialised_alike``: what a launch key's integers specialise to
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


def tile_config(num_warps=4, num_stages=1, maxnreg=None, **meta):
    """A tile: the kernel's tile meta-parameters and its launch options (``maxnreg``: the
    registers a thread may use, when a kernel must fit more programs an SM than the
    compiler's choice lets it), with its part of the launch key, hashed once."""
    config = triton.Config(meta, num_warps=num_warps, num_stages=num_stages, maxnreg=maxnreg)
    config.key = _Hashed(_tile_key(config))
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
        """The tile for this launch: the one chosen before for its key, in this process or
        (``tuning_file``) in another on this machine, else the fastest candidate, timed now
        (under the lock) and recorded."""
        configs = self.candidates(meta)
        if len(configs) == 1 or not autotuning():
            return configs[0]
        named = {**dict(zip(kernel.arg_names, args)), **meta}
        values = tuple(named[k] for k in self.key)
        dtypes = tuple(a.dtype for a in args if isinstance(a, torch.Tensor))
        config = self.chosen.get((device, values, dtypes))
        if config is None:
            path = tuning_file(device)
            entry = f"{_name(kernel)} {kernel.cache_key} {_stable((values, dtypes))}"
            config = _stored(path, entry, configs)
            if config is None:
                def run(c):
                    return lambda: kernel[_grid(grid, {**meta, **c.kwargs})](*args, **meta, **_options(c))
                times = [triton.testing.do_bench(run(c), warmup=_TUNE_WARMUP_MS, rep=_TUNE_REP_MS) for c in configs]
                config = configs[times.index(min(times))]
                _store(path, entry, config)
            self.chosen[(device, values, dtypes)] = config
        return config


def tuning_file(device):
    """The file of tuned tiles for GPU ``device`` (an index): one per GPU model and Triton
    version, in ``$IMGFILTERS_CACHE_DIR`` or ``$XDG_CACHE_HOME/imgfilters`` (by default
    ``~/.cache/imgfilters``), folder ``tuning``. Deleting it makes the next process tune
    again."""
    base = os.environ.get("IMGFILTERS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "imgfilters")
    model = re.sub(r"[^A-Za-z0-9]+", "-", torch.cuda.get_device_name(device)).strip("-")
    major, minor = torch.cuda.get_device_capability(device)
    return os.path.join(base, "tuning", f"{model}-sm{major}{minor}-triton-{triton.__version__}.json")


def _name(kernel):
    return f"{kernel.fn.__module__}.{kernel.fn.__qualname__}"


def _stable(value):
    """``value`` (tuning key values: numbers, dtypes, strings, jitted functions of the
    pointwise chains, tuples of these) as text that is the same in every process."""
    if isinstance(value, tuple):
        return "(" + ",".join(_stable(v) for v in value) + ")"
    if hasattr(value, "cache_key") and hasattr(value, "fn"):  # a jitted function: its name and source
        return f"{_name(value)}:{value.cache_key}"
    return repr(value)


def _read(path):
    """The tuning file's entries, or none when it is missing or unreadable."""
    try:
        with open(path) as f:
            entries = json.load(f)
        return entries if isinstance(entries, dict) else {}
    except (OSError, ValueError):
        return {}


def _stored(path, entry, configs):
    """The candidate that ``entry`` of the tuning file names, or None (no entry, or one
    naming a tile that is no longer a candidate)."""
    saved = _read(path).get(entry)
    for c in configs:
        if saved == [c.kwargs, c.num_warps, c.num_stages]:
            return c
    return None


def _store(path, entry, config):
    """Add ``entry`` to the tuning file: read, merged and replaced in one rename, so that a
    reader never sees half a file (a concurrent writer's entry may be lost: it is tuned again).
    A cache: failing to write it changes nothing else."""
    entries = _read(path)
    entries[entry] = [config.kwargs, config.num_warps, config.num_stages]
    try:
        text = json.dumps(entries, indent=0, sort_keys=True)
    except (TypeError, ValueError):  # a tile parameter JSON cannot hold: kept in this process only
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    except OSError:
        pass


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
        alike = None if key is None else _specialised_alike(key, config)
        hit = _alike.get(alike)
        if hit is not None:  # new sizes that Triton would compile alike: its kernel, without Triton's binder
            _keep(key, alike, hit)
            compiled, constexprs, params = hit
            compiled[_grid(grid, params)](*args, *constexprs)
            return
        params = {**meta, **config.kwargs}
        compiled = kernel[_grid(grid, params)](*args, **meta, **_options(config))
        names = kernel.arg_names[len(args):]
        # (the interpreter, which also takes CUDA tensors, returns no compiled kernel to keep)
        if key is not None and compiled is not None and all(n in params for n in names):
            _keep(key, alike, (compiled, tuple(params[n] for n in names), params))


def _keep(key, alike, entry):
    """Keep a launch's ``entry`` under its key and ``_specialised_alike``'s (both cleared
    when full)."""
    if len(_launches) >= _MAX_LAUNCHES:
        _launches.clear()
        _alike.clear()
    _launches[key] = _alike[alike] = entry


def _grid(grid, params):
    """``launch``'s ``grid`` as the 3 sizes a compiled kernel's launcher takes."""
    if callable(grid):
        grid = grid(params)
    return (*grid, 1, 1)[:3]


def aligned(t):
    """Whether tensor ``t``'s data is 16-byte aligned, as Triton specialises a pointer."""
    return t.data_ptr() % 16 == 0


def _options(config):
    options = dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)
    if config.maxnreg is not None:
        options["maxnreg"] = config.maxnreg
    return options


_INTS = frozenset((int,))  # (a tuple of ints, such as a tensor's strides, is its own key)


def _launch_key(kernel, args, meta, config, device):
    """Everything Triton's specialisation and the tile depend on (hashable unless an
    argument is not)."""
    tile = None if config is None else getattr(config, "key", None) or _tile_key(config)
    fixed = meta.key if type(meta) is Meta else tuple(meta.items())
    # (most arguments are sizes and tuples of strides, ints their own key, plain tensors,
    # empty prologue and epilogue chains and floats: all without a call; this runs on every
    # launch)
    return kernel.fn, device, tile, fixed, tuple([
        a if type(a) is int else (a.dtype, a.data_ptr() % 16 == 0) if type(a) is torch.Tensor
        else a if type(a) is tuple and _INTS.issuperset(map(type, a)) else float if type(a) is float else _spec(a)
        for a in args])


def _specialised_alike(key, config):
    """A launch ``key`` with the tile ``config`` it runs (a tuned launch's key has none)
    and each integer argument as what Triton specialises it on (equal to 1, divisible by
    16, its integer type): the kernel Triton compiled for one key serves every key alike.
    New image sizes (random crops and resizes, a pipeline's random scales) then take the
    compiled kernel without Triton's own binder (PERFORMANCE.md)."""
    fn, device, _, fixed, arguments = key
    return fn, device, getattr(config, "key", None) or _tile_key(config), fixed, _integer_classes(arguments)


def _integer_classes(value):
    """``value`` (launch key arguments) with each int as Triton's specialisation sees it."""
    t = type(value)
    if t is int:
        return value == 1, value % 16 == 0, -2 ** 31 <= value < 2 ** 31, value < 2 ** 63
    if t is tuple:
        return tuple(map(_integer_classes, value))
    return value


def _tile_key(config):
    """A ``triton.Config``'s part of the launch key."""
    return tuple(config.kwargs.items()), config.num_warps, config.num_stages, config.maxnreg


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
