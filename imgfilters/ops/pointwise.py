"""Pointwise steps and chains: the host side of ``kernels/core/pointwise.py``.

A step works on unit-scale float values; a chain (a sequence of steps) is applied in one
pass, either on its own (``pointwise``) or as a filter kernel's prologue/epilogue
(``imgfilters.fuse``: a ``Fusion`` handed to the filter, built on ``kernel_chain``). Each
step also has its float64 torch definition, used by the reference path and the tests.
"""
from dataclasses import dataclass
from typing import Callable, List, NamedTuple, Tuple

import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels.core import pointwise as kernels
from imgfilters.ops import library

__all__ = ["Step", "Fusion", "scale", "normalize", "clamp", "quantize", "gamma", "srgb_to_linear", "linear_to_srgb",
           "pointwise"]


@dataclass(frozen=True)
class Step:
    """One pointwise step: the name of its kind (``KINDS``: its Triton function and its
    float64 torch definition), its scalar arguments and per-channel vectors (broadcast to
    C channels at launch). Name, scalars and vectors are all an op's schema can carry."""
    name: str
    scalars: Tuple[float, ...] = ()
    channel_vectors: Tuple[torch.Tensor, ...] = ()

    @property
    def kernel(self):
        return KINDS[self.name].kernel

    def reference(self, x):
        """The step on a float64 ``(..., C, H, W)`` tensor."""
        return KINDS[self.name].reference(x, *self.scalars, *(_per_channel(v, x) for v in self.channel_vectors))

    def __repr__(self):
        vals = [f"{v:g}" for v in self.scalars] + [str(v.tolist()) for v in self.channel_vectors]
        return f"{self.name}({', '.join(vals)})"


class Kind(NamedTuple):
    """What a step's name stands for: its Triton function, its float64 definition
    ``reference(x, *scalars, *vectors)`` and how many scalars and vectors it takes."""
    kernel: object
    reference: Callable
    scalars: int
    vectors: int


def _srgb_to_linear(x):
    x = x.clamp(min=0)
    return torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(x):
    x = x.clamp(min=0)
    return torch.where(x <= 0.0031308, x * 12.92, 1.055 * x ** (1 / 2.4) - 0.055)


KINDS = {
    "scale": Kind(kernels.scale, lambda x, f: x * f, 1, 0),
    "normalize": Kind(kernels.channel_affine, lambda x, a, b: x * a + b, 0, 2),
    "clamp": Kind(kernels.clamp, lambda x, lo, hi: x.clamp(lo, hi), 2, 0),
    "quantize": Kind(kernels.quantize, lambda x, n: (x * n).round().clamp(0, n) / n, 1, 0),
    "gamma": Kind(kernels.gamma, lambda x, g: x.clamp(min=0) ** g, 1, 0),
    "srgb_to_linear": Kind(kernels.srgb_to_linear, _srgb_to_linear, 0, 0),
    "linear_to_srgb": Kind(kernels.linear_to_srgb, _linear_to_srgb, 0, 0),
}
STEP_NAMES = tuple(KINDS)  # a step's code in the op's schema (which has no list of strings) is its index


def scale(factor):
    """x * factor."""
    return Step("scale", (_image.check_number(factor, "factor"),))


def normalize(mean, std):
    """(x - mean[c]) / std[c], torchvision's ``Normalize`` (one value or one per channel),
    as x * (1 / std[c]) + (-mean[c] / std[c])."""
    mean = _vector(mean, "mean")
    std = _vector(std, "std")
    if (std == 0).any():
        raise ValueError("std must be non-zero")
    return Step("normalize", (), (1.0 / std, -mean / std))


def clamp(lo=0.0, hi=1.0):
    """min(max(x, lo), hi)."""
    lo = _image.check_number(lo, "lo")
    hi = _image.check_number(hi, "hi")
    if lo > hi:
        raise ValueError(f"clamp needs lo <= hi, got {lo} > {hi}")
    return Step("clamp", (lo, hi))


def quantize(levels):
    """Round to the grid of an integer image with ``levels`` + 1 values (255 for uint8)
    and saturate: an integer store and load, without the memory."""
    return Step("quantize", (_image.check_number(levels, "levels", low=0.0, low_open=True),))


def gamma(g):
    """max(x, 0) ** g."""
    return Step("gamma", (_image.check_number(g, "gamma", low=0.0, low_open=True),))


def srgb_to_linear():
    """sRGB decoding (IEC 61966-2-1)."""
    return Step("srgb_to_linear")


def linear_to_srgb():
    """sRGB encoding (IEC 61966-2-1)."""
    return Step("linear_to_srgb")


def kernel_chain(steps, channels, device, epilogue=False):
    """(steps, args) for a kernel's ``STEPS`` constexpr and its argument tuple; with
    ``epilogue`` each step is wrapped to take the epilogue's extra ``x_in`` argument."""
    _check_channels(steps, channels)
    fns, args = [], []
    for step in steps:
        vecs = [_image.on(v.expand(channels), device) for v in step.channel_vectors]
        if epilogue:
            fns.append(kernels.as_epilogue)
            args.append((step.kernel, (*step.scalars, *vecs)))
        else:
            fns.append(step.kernel)
            args.append((*step.scalars, *vecs))
    return tuple(fns), tuple(args)


NO_CHAIN = ((), ())  # a kernel chain of no steps


class Fusion(NamedTuple):
    """The pointwise steps fused into one filter launch (``imgfilters.fuse``), handed to the
    filter's implementation directly (``library.op``'s ``fused``): a custom op's schema
    cannot carry Triton functions.

    ``prologue`` runs on every pixel the filter loads, before the filter (a constant
    border's value is a pixel of the image after it: ``kernels/core/neighbourhood.py``);
    ``epilogue`` on each result before the store. ``in_dtype`` is the dtype of the image
    the filter receives in the unfused pipeline, what the prologue makes of the stored one
    (resampling clamps the row pass of integer images only), and ``out_dtype`` the
    output's."""
    prologue: Tuple[Step, ...]
    epilogue: Tuple[Step, ...]
    in_dtype: torch.dtype
    out_dtype: torch.dtype

    def chains(self, channels, device):
        """(prologue chain, epilogue chain) of a launch on ``channels`` channels."""
        return (kernel_chain(self.prologue, channels, device),
                kernel_chain(self.epilogue, channels, device, epilogue=True))


def fused_chains(fusion, channels, device, dtype):
    """(prologue chain, epilogue chain, output dtype) of a filter launch on ``dtype`` images
    with ``fusion``: its chains and output dtype, or (None) no steps and ``dtype``."""
    if fusion is None:
        return NO_CHAIN, NO_CHAIN, dtype
    return (*fusion.chains(channels, device), fusion.out_dtype)


def fused_input_dtype(fusion, dtype):
    """The dtype of the image the filter receives in the pipeline being fused (what the
    prologue makes of the stored one), or ``dtype`` without ``fusion``."""
    return dtype if fusion is None else fusion.in_dtype


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
    _check_channels(steps, _image.as_planes(img).shape[1])
    codes = [STEP_NAMES.index(s.name) for s in steps]
    scalars = [float(v) for s in steps for v in s.scalars]
    vectors = [v for s in steps for v in s.channel_vectors]
    return _image.wrap(img, _pointwise_op(img, codes, scalars, vectors, dtype))


@library.op("pointwise", lambda img, codes, scalars, vectors, dtype: _image.new_image(img, dtype=dtype))
def _pointwise_op(img: Tensor, codes: List[int], scalars: List[float], vectors: List[Tensor],
                  dtype: torch.dtype) -> Tensor:
    """The chain travels as its steps' codes (``STEP_NAMES``), their scalars and their
    vectors, in order."""
    steps, scalars, vectors = [], iter(scalars), iter(vectors)
    for name in map(STEP_NAMES.__getitem__, codes):
        kind = KINDS[name]
        steps.append(Step(name, tuple(next(scalars) for _ in range(kind.scalars)),
                          tuple(next(vectors) for _ in range(kind.vectors))))
    x4 = _image.as_planes(img)
    C = x4.shape[1]
    if _image.uses_cpu_engine(img) and dtype != torch.float64:
        from imgfilters.cpu import pointwise as engine
        return engine.pointwise(img, steps, dtype)
    if not _image.uses_kernels(img) or dtype == torch.float64:
        y = reference_chain(steps, _image.to_unit(x4))
        return _image.in_layout(img, _image.from_unit(y, dtype))
    fns, args = kernel_chain(steps, C, img.device)
    y = _image.new_image(img, dtype=dtype)
    kernels.launch_elementwise(x4, _image.as_planes(y), fns, args)
    return y


def halo(name, a, channels):
    """``pointwise`` reads no neighbour: an output tile needs no margin (``imgfilters.tiling``)."""
    return 0, 0


def _check_channels(steps, channels):
    for step in steps:
        for v in step.channel_vectors:
            if v.numel() not in (1, channels):
                raise ValueError(f"{step.name} has {v.numel()} values for {channels} channels")


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
