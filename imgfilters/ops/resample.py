"""Resampling: ``resize`` (torchvision's), ``upsample`` (``F.interpolate``'s) and
``imresize`` (MATLAB's bicubic).

One launch per call (two, through a float32 intermediate no larger than the input, for
other downscales by 2 or more on both axes), every dtype read and written directly
(uint8 in, uint8 out, no float copy). Ratios f / d per axis (f outputs per d source pixels, f 1, 2 or 4: x2, x4,
4/3, 1/2, 1/4, 2/3, ...) take the constant-phase kernel with the float64 reference's
weights as constant tables (``phase_tables``, once per mode and ratio); other sizes a
kernel that computes its weights (``kernels.launch`` picks). Integer images are
resampled as PIL and torch's CPU path do: the row pass is clamped to the value range before the column pass.
That matters only where bicubic or Lanczos overshoot next to saturated pixels, and there
torchvision on CUDA differs (it resamples a float copy without that clamp, by tens of
levels on hard edges); the uint8 peers of the tests are PIL and torchvision on the CPU.

Where one axis keeps its size, the scale on it is 1 (a copy along that axis) for
bilinear, antialiased bicubic and Lanczos, as torch's CPU kernels do. torch's CUDA kernels
differ in two corners: bicubic copies only when both axes keep their size, and bilinear
still applies ``1 / scale_factor`` on an unchanged axis.
Gradients for floating-point inputs are the transposed resampling, exactly
``F.interpolate``'s: one kernel launch for integer factors 1 and 2 per axis, otherwise
products with the two weight matrices.
"""
import enum
import functools
import math
import os
import numbers
from typing import List

import numpy as np
import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import resample as kernels
from imgfilters.ops import library, pointwise
from imgfilters.reference import resample as reference

__all__ = ["resize", "upsample", "imresize"]

RESIZE_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "lanczos", "area")
UPSAMPLE_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "area")


def resize(img, size, interpolation="bilinear", max_size=None, antialias=True):
    """Resize with the semantics of ``torchvision.transforms.v2.functional.resize``.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        size: ``(h, w)``, or an int (or ``[int]``) for the shorter side, the longer one
            keeping the aspect ratio (truncated), or ``None`` with ``max_size``.
        interpolation: an ``InterpolationMode`` (NEAREST, NEAREST_EXACT, BILINEAR,
            BICUBIC, LANCZOS) or one of ``"nearest"``, ``"nearest-exact"``,
            ``"bilinear"``, ``"bicubic"``, ``"lanczos"`` (Lanczos-3 as PIL's, its support
            widened when downsampling) and ``"area"`` (``F.interpolate(mode="area")``,
            ``cv2.INTER_AREA`` for integer factors).
        max_size: as torchvision's: the longer side's bound when ``size`` is an int.
        antialias: widen bilinear and bicubic when downsampling (PIL's scheme, A = -0.5
            for bicubic); ignored by nearest and area; Lanczos always uses it.

    Equals torchvision within float32 rounding (float) and one level (uint8).
    """
    return _resample(img, *_resize_plan(img, size, interpolation, max_size, antialias))


def _resize_plan(img, size, interpolation="bilinear", max_size=None, antialias=True):
    _image.check_image(img)
    mode = _mode(interpolation, RESIZE_MODES, "interpolation")
    H, W = img.shape[-2:]
    out = reference.resized_size(H, W, _size_arg(size, max_size), max_size)
    _check_out(img, out, "size" if size is not None else "max_size")
    aa = bool(antialias) and mode in ("bilinear", "bicubic") or mode == "lanczos"
    return _plan(img, out, mode, aa, False, (None, None))


def upsample(img, scale_factor=None, size=None, mode="bicubic", align_corners=False):
    """Resample with the semantics of ``torch.nn.functional.interpolate`` (default
    ``recompute_scale_factor``): give ``scale_factor`` (a float or ``(fy, fx)``; the
    output is ``floor(in * f)`` and coordinates map through ``1 / f``) or ``size``
    (an int or ``(h, w)``), not both.

    ``mode``: ``"nearest"``, ``"nearest-exact"``, ``"bilinear"``, ``"bicubic"`` (A = -0.75,
    torch's) or ``"area"``; ``align_corners`` only with bilinear and bicubic. Works for
    any factor, up or down (no antialias: that is ``resize``'s). Equals ``F.interpolate``
    within float32 rounding.
    """
    return _resample(img, *_upsample_plan(img, scale_factor, size, mode, align_corners))


def _upsample_plan(img, scale_factor=None, size=None, mode="bicubic", align_corners=False):
    _image.check_image(img)
    mode = _mode(mode, UPSAMPLE_MODES, "mode")
    if align_corners and mode not in ("bilinear", "bicubic"):
        raise ValueError("align_corners can only be set with the bilinear and bicubic modes")
    out, scales = _scaled_size(img, scale_factor, "scale_factor", size, math.floor)
    return _plan(img, out, mode, False, bool(align_corners), scales)


def imresize(img, scale=None, size=None, antialias=True):
    """MATLAB's ``imresize`` with its default bicubic kernel (A = -0.5), as BasicSR's
    ``matlab_functions.imresize``: ``scale`` (a float or ``(sy, sx)``; output
    ``ceil(in * scale)``) or ``size`` (``(h, w)``), not both; with ``antialias`` the
    kernel widens when shrinking; borders are the symmetric extension. This is how
    super-resolution benchmarks make their low-resolution inputs."""
    return _resample(img, *_imresize_plan(img, scale, size, antialias))


def _imresize_plan(img, scale=None, size=None, antialias=True):
    _image.check_image(img)
    out, scales = _scaled_size(img, scale, "scale", size, math.ceil)
    return _plan(img, out, "matlab", bool(antialias), False, scales)


_PLANS = {"resize": _resize_plan, "upsample": _upsample_plan, "imresize": _imresize_plan}


def tile_plan(name, a):
    """For ``imgfilters.tiling``: the output ``(h, w)`` of the call ``name(**a)`` and, for
    the H and W axes, ``span(start, stop) -> (cols, values)``, the taps of an output span
    (``reference.row_taps``), with the coordinate scales, antialiasing and same-size
    copies of the call. ``a["img"]`` may be a meta tensor: only its shape and dtype are
    read."""
    size, mode, antialias, align_corners, scale = _PLANS[name](**a)
    spans = [functools.partial(reference.row_taps, n, m, mode, antialias=antialias or mode == "lanczos",
                               align_corners=align_corners, scale=s)
             for n, m, s in zip(a["img"].shape[-2:], size, scale)]
    return tuple(size), spans


def as_enum(interpolation):
    """torchvision's ``InterpolationMode`` for a mode's name (``"bicubic"``); anything else
    as it is."""
    from torchvision.transforms import InterpolationMode  # (the transforms' concern: the ops never load torchvision)
    if isinstance(interpolation, str):
        return next((m for m in InterpolationMode if m.value == interpolation.lower()), interpolation)
    return interpolation


def _mode(value, allowed, name):
    if isinstance(value, enum.Enum):  # torchvision's InterpolationMode: its value is the mode's name
        if value.value not in allowed:
            raise ValueError(f"{name} {value} is not supported; use one of {', '.join(allowed)}")
        value = value.value
    mode = str(value).lower().replace("_", "-") if isinstance(value, str) else None
    if mode not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)} (or an InterpolationMode), got {value!r}")
    return mode


def _size_arg(size, max_size):
    if size is None:
        if max_size is None:
            raise ValueError("size is None: give max_size")
        return None
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        return int(size)
    if isinstance(size, (list, tuple)) and len(size) in (1, 2) and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in size):
        return [int(v) for v in size]
    raise TypeError(f"size must be an int or a sequence of 1 or 2 ints, got {size!r}")


def _pair_of(value, name, kind):
    if type(value) is kind and 0 < value < math.inf:  # (the common call: one plain number)
        return value, value
    vals = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(vals) != 2 or not all(type(v) in (int, float) or isinstance(v, numbers.Real) and not isinstance(v, bool)
                                 for v in vals):
        raise TypeError(f"{name} must be a number or a pair of numbers, got {value!r}")
    if kind is int and not all(float(v).is_integer() for v in vals):
        raise TypeError(f"{name} must hold integers, got {value!r}")
    vals = [kind(v) for v in vals]
    if not all(0 < v < math.inf for v in vals):
        raise ValueError(f"{name} must be positive, got {value!r}")
    return tuple(vals)


def _scaled_size(img, factor, name, size, rounding):
    """(output size, per-axis coordinate scales) from exactly one of a magnification
    ``factor`` (output ``rounding(in * factor)``, coordinates through ``1 / factor``) and a
    ``size`` (scales from the sizes: ``None``)."""
    if (factor is None) == (size is None):
        raise ValueError(f"give exactly one of {name} and size")
    H, W = img.shape[-2:]
    if size is not None:
        out, scales = _pair_of(size, "size", int), (None, None)
    else:
        fy, fx = _pair_of(factor, name, float)
        out, scales = (rounding(H * fy), rounding(W * fx)), (1.0 / fy, 1.0 / fx)
    _check_out(img, out, name if size is None else "size")
    return out, scales


def _check_out(img, out, name):
    """The output size ``out`` (set by the argument ``name``) is at least 1 x 1 and fits in
    the memory of ``img``'s device: an absurd factor fails here, not after seconds in the
    allocator (or hours in the interpreter)."""
    if min(out) < 1:
        raise ValueError(f"the output size must be at least 1 x 1, got {out[0]} x {out[1]}")
    nbytes = img.numel() // (img.shape[-2] * img.shape[-1]) * out[0] * out[1] * img.element_size()
    if nbytes < 2 ** 30 or torch.compiler.is_compiling() or img.device.type not in ("cpu", "cuda"):
        return  # (every device has a GiB: the common case asks nothing more)
    limit = _device_memory(img.device)
    if nbytes > limit:
        raise ValueError(f"{name} gives a {out[0]} x {out[1]} output of {nbytes / 2 ** 30:.1f} GiB, more than the "
                         f"{limit / 2 ** 30:.1f} GiB of memory of {img.device}")


@functools.lru_cache(maxsize=None)
def _device_memory(device):
    """Bytes of memory of a CPU or CUDA device (cached: the query costs microseconds)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _axis_scale(n_in, n_out, mode, antialias, align_corners, scale):
    """The coordinate scale the kernel uses along one axis (reference.coordinate_scale),
    with torch's copy when the size does not change for the modes that make one."""
    if n_out == n_in and mode in ("bilinear", "lanczos") or (mode == "bicubic" and antialias and n_out == n_in):
        return 1.0
    return reference.coordinate_scale(n_in, n_out, align_corners, scale)


def _code(mode, antialias):
    if mode in ("bilinear", "bicubic") and antialias:
        return kernels.MODES["aa-" + mode]
    return kernels.MODES[mode]


def _plan(img, out, mode, antialias, align_corners, scales):
    """All three public functions: the op's arguments after the image, with the kernels'
    coordinate scales from the sizes."""
    H, W = img.shape[-2:]
    scale = [_axis_scale(H, out[0], mode, antialias, align_corners, scales[0]),
             _axis_scale(W, out[1], mode, antialias, align_corners, scales[1])]
    return list(out), mode, antialias, align_corners, scale


@functools.lru_cache(maxsize=None)
def phase_tables(mode, antialias, f, d):
    """The ``kernels.PhasePlan`` of an axis resampled by the ratio f / d (f outputs per d
    source pixels, in lowest terms), without align_corners; None where a lane would read
    more than ``kernels.MAX_REACH`` blocks of d source pixels on a side, or more than
    ``kernels.MAX_SLOTS`` pixels (each block padded to a power of two).

    The weights are the float64 reference's (``weights``), on an axis long enough that its
    edges do not meet. Inside, lane l's output phase p (output f l + p) weighs source pixel
    d (l + m) + q with a constant. Near an edge the taps fold onto the edge pixels or are
    dropped and the rest renormalised. The kernel reads a tap past the edge from the edge
    pixel (d = 1) or block, which is torch's clamping where d = 1; elsewhere (MATLAB's
    symmetric padding, the antialiased modes' renormalising, shrinking) the E lanes
    nearest each edge get the reference's rows, in which taps outside the image weigh 0
    (so an inf there meets no weight of 0 or of the other sign)."""
    lanes = 8 * kernels.MAX_REACH + 8
    w = reference.weights(lanes * d, lanes * f, mode, antialias=antialias, scale=d / f).numpy()

    def rows(lane, m):  # (f, (2 m + 1) d): lane's phases over source pixels d (lane - m) ...
        out = np.zeros((f, (2 * m + 1) * d))
        for p in range(f):
            for s in np.flatnonzero(w[f * lane + p]):
                i = s - d * (lane - m)
                if not 0 <= i < out.shape[1]:
                    return None
                out[p, i] = w[f * lane + p, s]
        return out

    centre = lanes // 2
    offsets = np.flatnonzero(w[f * centre:f * centre + f].any(0)) - d * centre
    m = int(max(1, -(offsets.min() // d), offsets.max() // d))
    slots = (2 * m + 1) * (1 << (d - 1).bit_length())  # (blocks padded to a power of two)
    inner = rows(centre, m) if m <= kernels.MAX_REACH and slots <= kernels.MAX_SLOTS else None
    if inner is None:
        return None

    def clamped(lane):  # the inner rows as the kernel applies them: taps past the edge read the edge pixel
        out = np.zeros_like(inner)
        for i in range(inner.shape[1]):
            j = min(max(d * (lane - m) + i, 0), lanes * d - 1) - d * (lane - m)
            out[:, j] += inner[:, i]
        return out

    # torch's modes clamp their taps into the image, each tap summed on its own, which the
    # kernel's clamped reads are where a lane reads single pixels (d = 1; with d > 1 it reads
    # the edge block); elsewhere a lane whose taps fold (MATLAB), are dropped (antialiased
    # modes) or reach past the edge takes the reference's row, one weight per pixel
    clamping = d == 1 and not antialias and mode in ("nearest", "nearest-exact", "bilinear", "bicubic", "area")

    def needs_row(lane):
        r = rows(lane, m)
        if clamping:
            return not np.allclose(r, clamped(lane), rtol=1e-12, atol=1e-15)
        outside = [i for i in range(inner.shape[1]) if not 0 <= d * (lane - m) + i < lanes * d]
        return bool(inner[:, outside].any()) or not np.allclose(r, inner, rtol=1e-12, atol=1e-15)

    def edge_lanes(lane_at):  # lanes from the edge that need their own rows
        if any(rows(lane_at(e), m) is None for e in range(2 * m + 2)):
            return None
        return max([e + 1 for e in range(2 * m + 2) if needs_row(lane_at(e))], default=0)

    e_first, e_last = edge_lanes(lambda e: e), edge_lanes(lambda e: lanes - 1 - e)
    if e_first is None or e_last is None:
        return None
    e = max(e_first, e_last)
    row_lanes = [centre] + list(range(e)) + [lanes - 1 - i for i in range(e)]
    values = np.stack([rows(lane, m) for lane in row_lanes])  # (1 + 2 e, f, (2 m + 1) d)
    blocks = values.reshape(1 + 2 * e, f, 2 * m + 1, d)
    nonzero = (blocks != 0).any(axis=(0, 3))
    mixed = nonzero & (blocks == 0).any(axis=(0, 3))  # a weight of 0 must read nothing: 0 * inf is NaN
    as_tuples = lambda a, kind: tuple(tuple(kind(v) for v in r) for r in a)
    return kernels.PhasePlan(f, d, m, e, as_tuples(values.reshape(-1, values.shape[-1]), float),
                             as_tuples(nonzero, bool), as_tuples(mixed, bool))


@functools.lru_cache(maxsize=4096)
def _phase_plans(shape, size, mode, antialias, align_corners, scale):
    """The (rows, columns) ``PhasePlan`` pair when both axes resample by a ratio f / d
    (f outputs per d source pixels, in lowest terms, the coordinate scale exactly d / f)
    that ``phases_kernel`` takes, on images long enough for its edge rows, else None."""
    if align_corners:
        return None
    plans = []
    for n, m, s in zip(shape, size, scale):
        common = math.gcd(n, m)
        f, d = m // common, n // common
        if f not in kernels.GROW_FACTORS or s * f != d:
            return None
        plan = phase_tables(mode, antialias, f, d)
        if plan is None or m // f < 2 * (plan.M + plan.E) + 2:
            return None
        plans.append(plan)
    return tuple(plans)


def _resample(img, *plan):
    return _image.wrap(img, _resample_op(img, *plan))


def _output_shape(img, size):
    return (*img.shape[:-2], *size)


def adjoint(grad, in_size, size, mode, antialias, align_corners, scale):
    """The transposed resampling of ``grad`` (..., h, w) of ``size`` back to ``in_size``:
    the constant-phase adjoint kernel where both axes' factors are in
    ``kernels.ADJOINT_FACTORS`` (1 or 2, the phase modes, no align_corners) and the input
    is at least 2 x 2; otherwise ``Wh^T g Ww`` with the reference's weight matrices
    (float32 on the device; both are at most out x in)."""
    phases = _adjoint_phases(tuple(in_size), tuple(size), mode, antialias, align_corners, tuple(scale))
    if phases is not None:  # integer factors: the constant-phase kernel's adjoint, one launch
        g4 = _image.as_planes(grad)
        out = torch.empty((*g4.shape[:2], *in_size), dtype=torch.float32, device=grad.device)
        kernels.launch_adjoint(g4, out, phases)
        return out if grad.ndim == 4 else out.reshape(*grad.shape[:-2], *in_size)
    f32 = dict(dtype=torch.float32, device=grad.device)
    aa = antialias or mode == "lanczos"
    wh, ww = (reference.weights(n, m, mode, antialias=aa, align_corners=align_corners, scale=s).to(**f32)
              for n, m, s in zip(in_size, size, scale))
    g = grad.float().reshape(-1, *size)
    return torch.einsum("oh,bop,pw->bhw", wh, g, ww).reshape(*grad.shape[:-2], *in_size)


def bilinear_adjoint(grad, in_size):
    """The gradient to an image of ``in_size`` (h, w) of its ``resize(img, grad's size,
    "bilinear", antialias=False)``, for that output's gradient ``grad`` (..., H, W)."""
    size = grad.shape[-2:]
    scale = [_axis_scale(n, m, "bilinear", False, False, None) for n, m in zip(in_size, size)]
    return adjoint(grad, tuple(in_size), tuple(size), "bilinear", False, False, scale)


@functools.lru_cache(maxsize=4096)
def _adjoint_phases(in_size, size, mode, antialias, align_corners, scale):
    """The ``PhasePlan`` pair of ``launch_adjoint`` for the transposed resampling of an
    ``in_size`` to ``size`` call, None where it does not apply (``adjoint``)."""
    code = _code(mode, antialias)
    factors = [kernels.adjoint_factor(code, n, m, s, align_corners) for n, m, s in zip(in_size, size, scale)]
    if None in factors or min(in_size) < 2:
        return None
    return tuple(phase_tables(mode, antialias, f, 1) for f in factors)


@library.op("resample", lambda img, size, *args: _image.new_image(img, _output_shape(img, size)), grads=("img",),
            linear=True, cpu_engine=True, backward=lambda grad, img, *args: adjoint(grad, img.shape[-2:], *args))
def _resample_op(img: Tensor, size: List[int], mode: str, antialias: bool, align_corners: bool,
                 scale: List[float], *, fusion=None) -> Tensor:
    """``resize``, ``upsample`` and ``imresize``: ``size`` (h, w) out, ``scale`` the
    coordinate scale per axis (``_axis_scale``); one launch (with ``fusion``'s prologue
    and epilogue, a ``pointwise.Fusion``)."""
    x4 = _image.as_planes(img)
    integer = pointwise.fused_input_dtype(fusion, img.dtype) in _image.MAX_VALUE
    aa = antialias or mode == "lanczos"  # (Lanczos always widens when shrinking)
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import resample as engine
        return engine.resample(img, size, mode, aa, align_corners, scale, integer, fusion)
    if not _image.uses_kernels(img):
        y = reference.resize(_image.to_unit(x4), size, mode, aa, align_corners, scale=tuple(scale),
                             intermediate_clamp=integer)
        return _image.in_layout(img, _image.from_unit(y, img.dtype), _output_shape(img, size))
    pro, epi, dtype = pointwise.fused_chains(fusion, x4.shape[1], img.device, img.dtype)
    y = _image.new_image(img, _output_shape(img, size), dtype=dtype)
    kernels.launch(x4, _image.as_planes(y), _code(mode, antialias), scale[0], scale[1], align_corners, antialias,
                   clamp_rows=integer, pro=pro, epi=epi,
                   phases=_phase_plans(tuple(x4.shape[-2:]), tuple(size), mode, aa, align_corners, tuple(scale)))
    return y
