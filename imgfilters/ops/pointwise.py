"""Pointwise steps and chains: the host side of ``kernels/core/pointwise.py``.

A step works on unit-scale float values; a chain (a sequence of steps) is applied in one
pass, either on its own (``pointwise``) or as a filter kernel's prologue/epilogue
(``imgfilters.fuse``, built on ``kernel_chain``). Each step also has its float64 torch
definition, used by the reference path and the tests.
"""
import contextlib
import contextvars
from dataclasses import dataclass
from typing import Callable, Tuple

import torch

from imgfilters import _image
from imgfilters.kernels.core import pointwise as kernels
from imgfilters.kernels.core.tiling import interpreting, needs_int64, on_device, pow2_at_least, programs

__all__ = ["Step", "scale", "normalize", "clamp", "quantize", "gamma", "srgb_to_linear", "linear_to_srgb",
           "pointwise"]


@dataclass(frozen=True)
class Step:
    """One pointwise step: its name, its Triton function, its scalar arguments, per-channel
    vectors (broadcast to C channels at launch) and its float64 torch definition."""
    name: str
    kernel: object
    scalars: Tuple[float, ...] = ()
    channel_vectors: Tuple[torch.Tensor, ...] = ()
    reference: Callable = None

    def __repr__(self):
        vals = [f"{v:g}" for v in self.scalars] + [str(v.tolist()) for v in self.channel_vectors]
        return f"{self.name}({', '.join(vals)})"


def scale(factor):
    """x * factor."""
    f = _image.check_number(factor, "factor")
    return Step("scale", kernels.scale, (f,), reference=lambda x: x * f)


def normalize(mean, std):
    """(x - mean[c]) / std[c], torchvision's ``Normalize`` (one value or one per channel)."""
    mean = _vector(mean, "mean")
    std = _vector(std, "std")
    if (std == 0).any():
        raise ValueError("std must be non-zero")
    return Step("normalize", kernels.channel_affine, (), (1.0 / std, -mean / std),
                reference=lambda x: (x - _per_channel(mean, x)) / _per_channel(std, x))


def clamp(lo=0.0, hi=1.0):
    """min(max(x, lo), hi)."""
    lo = _image.check_number(lo, "lo")
    hi = _image.check_number(hi, "hi")
    if lo > hi:
        raise ValueError(f"clamp needs lo <= hi, got {lo} > {hi}")
    return Step("clamp", kernels.clamp, (lo, hi), reference=lambda x: x.clamp(lo, hi))


def quantize(levels):
    """Round to the grid of an integer image with ``levels`` + 1 values (255 for uint8)
    and saturate: an integer store and load, without the memory."""
    levels = _image.check_number(levels, "levels", low=0.0, low_open=True)
    return Step("quantize", kernels.quantize, (levels,),
                reference=lambda x: (x * levels).round().clamp(0, levels) / levels)


def gamma(g):
    """max(x, 0) ** g."""
    g = _image.check_number(g, "gamma", low=0.0, low_open=True)
    return Step("gamma", kernels.gamma, (g,), reference=lambda x: x.clamp(min=0) ** g)


def srgb_to_linear():
    """sRGB decoding (IEC 61966-2-1)."""
    def ref(x):
        x = x.clamp(min=0)
        return torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)
    return Step("srgb_to_linear", kernels.srgb_to_linear, reference=ref)


def linear_to_srgb():
    """sRGB encoding (IEC 61966-2-1)."""
    def ref(x):
        x = x.clamp(min=0)
        return torch.where(x <= 0.0031308, x * 12.92, 1.055 * x ** (1 / 2.4) - 0.055)
    return Step("linear_to_srgb", kernels.linear_to_srgb, reference=ref)


def kernel_chain(steps, channels, device, epilogue=False):
    """(steps, args) for a kernel's ``STEPS`` constexpr and its argument tuple; with
    ``epilogue`` each step is wrapped to take the epilogue's extra ``x_in`` argument."""
    fns, args = [], []
    for step in steps:
        vecs = []
        for v in step.channel_vectors:
            if v.numel() not in (1, channels):
                raise ValueError(f"{step.name} has {v.numel()} values for {channels} channels")
            vecs.append(v.expand(channels).to(device=device, dtype=torch.float32).contiguous())
        if epilogue:
            fns.append(kernels.as_epilogue)
            args.append((step.kernel, (*step.scalars, *vecs)))
        else:
            fns.append(step.kernel)
            args.append((*step.scalars, *vecs))
    return tuple(fns), tuple(args)


# The fusion context: ``imgfilters.fuse`` sets chains and an output dtype here, and the
# next filter launch (every filter is one launch) takes them as its prologue and epilogue.
_FUSED = contextvars.ContextVar("imgfilters_fused", default=None)


@contextlib.contextmanager
def fused(prologue, epilogue, dtype):
    """Run the filter called inside with ``prologue``/``epilogue`` steps and output ``dtype``."""
    token = _FUSED.set((tuple(prologue), tuple(epilogue), dtype))
    try:
        yield
    finally:
        _FUSED.reset(token)


def fused_chains(channels, device, dtype):
    """(prologue chain, epilogue chain, output dtype) for a filter launch of ``dtype``
    images: the fusion context's, or empty chains and ``dtype``."""
    ctx = _FUSED.get()
    if ctx is None:
        return ((), ()), ((), ()), dtype
    pro, epi, out = ctx
    return kernel_chain(pro, channels, device), kernel_chain(epi, channels, device, epilogue=True), out


def reference_chain(steps, x):
    """The chain's float64 definition on a unit-scale ``(..., C, H, W)`` tensor."""
    for step in steps:
        x = step.reference(x)
    return x


def pointwise(img, steps, *, dtype=None):
    """Apply a chain of pointwise steps to ``img`` in one pass over memory.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor of any supported dtype.
        steps: a sequence of steps from ``imgfilters.ops.pointwise`` (``scale``,
            ``normalize``, ``clamp``, ``gamma``, ``srgb_to_linear``, ``linear_to_srgb``).
        dtype: output dtype (default ``img.dtype``); integers are read as value / max and
            written rounded and saturated, so ``dtype=torch.float32`` on a uint8 image is
            torchvision's ``ToDtype(torch.float32, scale=True)`` followed by the chain.
    """
    _image.check_image(img)
    steps = tuple(steps)
    for s in steps:
        if not isinstance(s, Step):
            raise TypeError(f"steps must be pointwise Steps, got {type(s).__name__}")
    dtype = dtype or img.dtype
    if dtype not in _image.DTYPES:
        raise TypeError(f"dtype must be one of {_image.DTYPE_NAMES}, got {dtype}")
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    fns, args = kernel_chain(steps, C, img.device)  # also checks per-channel lengths
    if not _image.uses_kernels(img) or dtype == torch.float64:
        y = reference_chain(steps, _image.to_unit(x4))
        return _image.like_input(img, _image.from_unit(y, dtype))
    y4 = _image.new_planes(x4, dtype=dtype)
    # Memory-bound: 16 x 128 tiles of 4 warps keep 16-byte accesses on contiguous rows.
    bh, bw = (pow2_at_least(H, 1, 256), pow2_at_least(W, 16, 256)) if interpreting() else (16, 128)
    with on_device(img):
        kernels.elementwise_kernel[(programs(B * C, H, W, bh, bw),)](
            x4, y4, C, H, W, *x4.stride(), *y4.stride(), fns, args, OFF64=needs_int64(x4, y4), BH=bh, BW=bw,
            num_warps=4)
    return _image.like_input(img, y4)


def _vector(v, name):
    try:
        t = torch.as_tensor(v, dtype=torch.float64).flatten().cpu()
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {v!r}") from None
    if t.numel() == 0 or not torch.isfinite(t).all():
        raise ValueError(f"{name} must hold finite numbers, got {v!r}")
    return t


def _per_channel(v, x):
    return v.to(x.device, x.dtype).reshape(-1, 1, 1)
