"""The one place that validates and normalises image tensors (docs/ARCHITECTURE.md, Layers).

Images are ``(..., C, H, W)`` tensors (``(H, W)`` is one channel) of a supported dtype.
Integers are read as value / max, floats as they are. Every check raises before any
launch, naming the argument and what is allowed.
"""
import contextlib
import contextvars
import functools
import math
import numbers
import operator
import os
import sys

import torch

from imgfilters.kernels.core.borders import BORDERS, border_code
from imgfilters.kernels.core.tiling import interpreting

KERNEL_DTYPES = (torch.uint8, torch.uint16, torch.float16, torch.bfloat16, torch.float32)
DTYPES = KERNEL_DTYPES + (torch.float64,)
DTYPE_NAMES = ", ".join(str(d).replace("torch.", "") for d in DTYPES)
MAX_VALUE = {torch.uint8: 255.0, torch.uint16: 65535.0}


def check_image(img, name="img"):
    """Raise TypeError/ValueError unless ``img`` is a usable image tensor."""
    if not isinstance(img, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (..., C, H, W) or (H, W), "
                        f"got {type(img).__name__}")
    if img.dtype not in DTYPES:
        raise TypeError(f"{name} has dtype {img.dtype}; supported dtypes: {DTYPE_NAMES}")
    if img.ndim < 2:
        raise ValueError(f"{name} must have shape (..., C, H, W) or (H, W), got {tuple(img.shape)}")
    if img.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(img.shape)})")


def as_planes(img):
    """A 4-D (B, C, H, W) view of ``img`` ((H, W) -> (1, 1, H, W)); a copy only when the
    leading dimensions cannot be merged into one (rare non-contiguous views)."""
    if img.ndim == 2:
        return img[None, None]
    if img.ndim == 3:
        return img[None]
    if img.ndim == 4:
        return img
    return img.reshape(-1, *img.shape[-3:])


def uses_kernels(img) -> bool:
    """True when ``img`` is processed by the Triton kernels: CUDA tensors, and CPU tensors
    under ``TRITON_INTERPRET=1`` unless the CPU engine is switched on (``cpu_engine``);
    float64 always takes the float64 reference path."""
    if img.dtype == torch.float64:
        return False
    return img.is_cuda or (interpreting() and not _engine_selected())


def uses_cpu_engine(img) -> bool:
    """True when ``img`` is processed by the compiled CPU engine (``imgfilters.cpu``): CPU
    tensors that are not float64, except under ``TRITON_INTERPRET=1`` (there CPU tensors
    run the Triton kernels in the interpreter: how CI tests the kernels) unless
    ``cpu_engine(True)`` or ``IMGFILTERS_CPU_ENGINE=1`` says otherwise; and never inside
    ``differentiating`` (the float64 reference's gradient, whose tensors the engine
    cannot read)."""
    if img.dtype == torch.float64 or img.device.type != "cpu" or _DIFFERENTIATING.get():
        return False
    return _engine_selected()


_DIFFERENTIATING = contextvars.ContextVar("differentiating", default=False)


@contextlib.contextmanager
def differentiating():
    """Within the block (this thread's), CPU tensors take the float64 reference: what
    ``torch.func`` differentiates there (``ops/library.py``, the reference path's backward)."""
    token = _DIFFERENTIATING.set(True)
    try:
        yield
    finally:
        _DIFFERENTIATING.reset(token)


_ENGINE = [None]  # cpu_engine's switch: None follows IMGFILTERS_CPU_ENGINE and TRITON_INTERPRET


def _engine_selected() -> bool:
    """Whether CPU tensors (not float64) take the CPU engine: the ``cpu_engine`` switch if
    set, else ``IMGFILTERS_CPU_ENGINE`` (``1``: always, ``0``: never, read on every call),
    else unless ``TRITON_INTERPRET=1``."""
    on = _ENGINE[0]
    if on is None:
        env = os.environ.get("IMGFILTERS_CPU_ENGINE", "")
        return env == "1" or (env != "0" and not interpreting())
    return on


@contextlib.contextmanager
def cpu_engine(on=True):
    """Within the block, CPU tensors take the CPU engine (``on``) or not (the float64
    reference, or the interpreted kernels under ``TRITON_INTERPRET=1``), whatever the
    environment says; the tests' switch. Process-wide, not per thread."""
    previous, _ENGINE[0] = _ENGINE[0], bool(on)
    try:
        yield
    finally:
        _ENGINE[0] = previous


def check_border(border, border_value=0.0):
    """Validate a border mode name; returns its kernel code."""
    if border not in BORDERS:
        raise ValueError(f"border must be one of {', '.join(map(repr, BORDERS))}, got {border!r}")
    check_number(border_value, "border_value")
    return border_code(border)


def check_number(value, name, *, low=None, high=None, low_open=False):
    """Validate a real, finite scalar parameter in [low, high] (or (low, high] when
    ``low_open``); returns it as a float."""
    if type(value) is not float:  # (the common case skips the slower checks)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
        value = float(value)
    if not -math.inf < value < math.inf:  # not math.isfinite: torch.compile traces comparisons of symbolic floats
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def check_integer(value, name, low, high, odd=False):
    """Validate an integer parameter in [low, high] (odd if ``odd``: a window's side);
    returns it as an int."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    try:
        value = operator.index(value)  # ints, numpy and 0-d torch integers; not floats or bools
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if not low <= value <= high or (odd and value % 2 == 0):
        raise ValueError(f"{name} must be {'an odd' if odd else 'an'} integer in [{low}, {high}], got {value}")
    return value


def per_image(value, name, batch, *, positive=True):
    """A per-image parameter as the ops take it: a Python float for a number (checked
    here: finite, and > 0, or >= 0 when ``positive`` is False, of any sign when it is
    None; the custom op's path makes it a 0-d
    float64 tensor, ``library.op``: a tensor made on every call costs microseconds of host
    time), or a tensor of one value or of ``batch`` values along one dimension (its values
    are checked inside the op, by ``per_image_values``: reading them here would break a
    ``torch.compile`` graph). Values are parameters, not differentiable inputs: a
    tensor's graph is not followed."""
    if not isinstance(value, torch.Tensor):
        return float(check_number(value, name, low=None if positive is None else 0.0, low_open=bool(positive)))
    if value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {value.dtype}")
    if value.numel() != 1 and (value.ndim != 1 or value.numel() != batch):
        raise ValueError(f"{name} as a tensor must be 1-D with one value per image ({batch}), "
                         f"got shape {tuple(value.shape)}")
    return value.detach()


def per_image_values(values, name, batch, *, positive=True):
    """Inside an op: a ``per_image`` parameter -> a float64 CPU tensor of ``batch`` values,
    checked as ``per_image`` checks a number."""
    return torch.tensor(per_image_floats(values, name, batch, positive=positive), dtype=torch.float64)


def per_image_floats(values, name, batch, *, positive=True):
    """``per_image_values`` as a tuple of Python floats (what the kernels' host code reads:
    tensor operations cost microseconds of host time each)."""
    rule = "finite" if positive is None else f"finite and {'>' if positive else '>='} 0"
    if isinstance(values, float) or values.numel() == 1:  # checked as a Python number
        v = float(values)
        if not (math.isfinite(v) and (positive is None or (v > 0 if positive else v >= 0))):
            raise ValueError(f"{name} must be {rule}, got {v:g}")
        return (v,) * batch
    t = values.to("cpu", torch.float64).reshape(-1)
    ok = torch.isfinite(t)
    if positive is not None:
        ok &= (t > 0) if positive else (t >= 0)
    if not ok.all():
        bad = ", ".join(f"{v:g}" for v in t[~ok][:4].tolist())
        raise ValueError(f"{name} must be {rule}, got {bad}")
    return tuple(t.tolist())


def finite_ratio(numerator, denominator, limit=1e30):
    """``numerator / denominator`` (Python floats, denominator >= 0) clamped to
    [-limit, limit], so that it stays finite in float32 (0 gives the limit's sign)."""
    if denominator > 0:
        return min(max(numerator / denominator, -limit), limit)
    return math.copysign(limit, numerator)


def on(values, device):
    """A small CPU vector of parameters (per image or per channel; a tensor, or a tuple
    of floats) as float32 on ``device``, from a cache of device tensors keyed by the
    values: a copy on every call would be one more transfer next to the filter's, and
    cannot be captured in a CUDA graph. New values (a transform's fresh draw, on nearly
    every call) are copied asynchronously (``sent``), the host not waiting for the GPU;
    until that copy is known to be done, a stream that uses the tensor waits for it.
    A tensor used while a CUDA graph is being captured is kept for good: the graph reads
    it at every replay, after the cache may have dropped it."""
    # keyed by the values as they are (no conversion op on every call: it cost more than
    # the rest of a small image's host time)
    if isinstance(values, tuple):
        key, shape = values, (len(values),)
    else:
        key, shape = tuple(values.reshape(-1).tolist()), tuple(values.shape)
    entry = _constant(key, shape, device if isinstance(device, torch.device) else torch.device(device))
    t, copied = entry
    if t.is_cuda and torch.cuda.is_current_stream_capturing():
        # (no event query or wait while capturing: a graph replays after its capture,
        # which begins with a synchronisation)
        _CAPTURED[id(t)] = t
    elif copied is not None and not torch.compiler.is_compiling():  # (another stream would not wait for it)
        if copied.query():
            entry[1] = None
        else:
            torch.cuda.current_stream(t.device).wait_event(copied)
    return t


_CAPTURED = {}


@functools.lru_cache(maxsize=256)
def _constant(values, shape, device):
    """[a read-only float32 tensor of ``shape`` holding ``values`` on ``device``, the
    event its asynchronous copy is done at (None: done)]."""
    host = torch.tensor(values, dtype=torch.float32).reshape(shape)
    t = sent(host, device)
    if not _asynchronous(host, device):
        return [t, None]
    copied = torch.cuda.Event()
    copied.record(torch.cuda.current_stream(t.device))
    return [t, copied]


def sent(host, device, dtype=torch.float32):
    """The CPU tensor ``host`` as ``dtype`` on ``device``, without the host waiting for the
    GPU, for use on the current stream: a copy from pageable memory returns only once the
    stream has run everything queued before it, so that a call drawing fresh parameters (a
    transform's per-image sigmas, on every call) would leave the GPU idle through each
    call's host time. Pinned memory is copied asynchronously (torch keeps the pinned block
    until the copy is done).
    Where ``_asynchronous`` says no, a plain copy."""
    device = device if isinstance(device, torch.device) else torch.device(device)
    if not _asynchronous(host, device):
        return host.to(device, dtype)
    return host.to(dtype).pin_memory().to(device, non_blocking=True)


def _asynchronous(host, device):
    """Whether ``sent`` copies ``host`` to the ``torch.device`` ``device`` through pinned
    memory: from the host to a GPU, not for a tensor that requires grad (its graph is
    kept), not while a CUDA graph is being captured (the graph would re-read the pinned
    block at every replay, after it was reused), nor where ``torch.compile`` traces the
    copy (its graph makes its own transfers)."""
    return (device.type == "cuda" and host.device.type == "cpu" and not host.requires_grad
            and not torch.compiler.is_compiling() and not torch.cuda.is_current_stream_capturing())


def to_unit(img, dtype=torch.float64, copy=True):
    """``img`` as a float tensor in unit scale (integers divided by their max); a copy
    unless ``copy=False``, so that a reference result never shares the input's memory (an
    op's output must not alias its input)."""
    scale = MAX_VALUE.get(img.dtype)
    out = img.to(dtype, copy=copy)
    return out / scale if scale else out


def from_unit(y, dtype):
    """A unit-scale float tensor back to ``dtype``: integers round half to even and
    saturate, as the kernels' typed store does."""
    scale = MAX_VALUE.get(dtype)
    if scale is None:
        return y.to(dtype)
    return (y * scale).round().clamp(0, scale).to(torch.int64).to(dtype)


def is_channels_last(img) -> bool:
    """A 4-D tensor laid out channels-last (and not also plain contiguous)."""
    return img.ndim == 4 and not img.is_contiguous() and img.is_contiguous(memory_format=torch.channels_last)


def _planes(shape):
    """The (B, C, H, W) shape that ``as_planes`` gives an image of ``shape``."""
    shape = tuple(shape)
    if len(shape) == 2:
        return (1, 1, *shape)
    return (math.prod(shape[:-3]), *shape[-3:])


def _layout(img):
    """Channels-last when ``img``'s planes are (a (C, H, W) tensor with HWC strides, as
    ``pil_to_tensor`` gives, counts), else contiguous."""
    return torch.channels_last if is_channels_last(as_planes(img)) else torch.contiguous_format


def new_image(img, shape=None, dtype=None):
    """An uninitialised output for ``img``: ``shape`` and ``dtype`` (default ``img``'s),
    channels-last when ``img`` is, else contiguous. The ops and their fake (shape
    inference) implementations both allocate through here, so a compiled graph sees the
    layout an eager call returns."""
    shape = img.shape if shape is None else shape
    if img.is_contiguous():  # (the common case: no layout to work out, microseconds of host time)
        return torch.empty(shape, dtype=dtype or img.dtype, device=img.device)
    planes = torch.empty(_planes(shape), dtype=dtype or img.dtype, device=img.device, memory_format=_layout(img))
    return planes if planes.ndim == len(shape) else planes.view(shape)


def in_layout(img, out, shape=None):
    """``out`` reshaped to ``img``'s shape (or ``shape``) in ``new_image``'s layout."""
    shape = img.shape if shape is None else shape
    layout = _layout(img)
    if out.shape == shape and out.is_contiguous(memory_format=layout):  # (a view costs microseconds of host time)
        return out
    return out.reshape(_planes(shape)).contiguous(memory_format=layout).view(shape)


def wrap(img, out):
    """``out`` as ``img``'s tv_tensors type (an op returns plain tensors). An image is a
    tv_tensor only once torchvision is loaded: the ops never import it themselves."""
    tv_tensors = sys.modules.get("torchvision.tv_tensors")
    return tv_tensors.wrap(out, like=img) if tv_tensors and isinstance(img, tv_tensors.TVTensor) else out
