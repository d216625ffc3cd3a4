"""The resampling modes: their codes, and the index mapping and tap weights of each, per
axis, as the kernels compute them on the fly (``axis``, ``tap``) and as the host sizes
their loops (``taps``). Definitions: the package's docstring and
``imgfilters/reference/resample.py``."""
import numpy as np
import triton
import triton.language as tl

from ..core import borders, pixels, pointwise
from ..core.tiling import offset


# Mode codes: constexpr for the kernels (compiled kernels read only constexpr globals);
# the host compares against them and keys its tables by their int values.
NEAREST, NEAREST_EXACT, LINEAR, CUBIC, AA_LINEAR, AA_CUBIC, LANCZOS, AREA, MATLAB = (tl.constexpr(i) for i in range(9))
MODES = {name: code.value for name, code in [
    ("nearest", NEAREST), ("nearest-exact", NEAREST_EXACT), ("bilinear", LINEAR), ("bicubic", CUBIC),
    ("aa-bilinear", AA_LINEAR), ("aa-bicubic", AA_CUBIC), ("lanczos", LANCZOS), ("area", AREA), ("matlab", MATLAB)]}
SUPPORT = {AA_LINEAR.value: 1.0, AA_CUBIC.value: 2.0, LANCZOS.value: 3.0, MATLAB.value: 2.0}
# The host's tables by the codes' int values (comparing an int with a constexpr costs
# microseconds a call): taps of the fixed-support modes, the modes whose kernel widens by
# the downscaling factor, and those whose weights are normalised to sum 1.
FIXED_TAPS = {NEAREST.value: 1, NEAREST_EXACT.value: 1, LINEAR.value: 2, CUBIC.value: 4}
WIDENED_MODES = frozenset(m.value for m in (AA_LINEAR, AA_CUBIC, LANCZOS))
NORMALISED_MODES = frozenset(m.value for m in (AA_LINEAR, AA_CUBIC, LANCZOS, AREA, MATLAB))
PI: tl.constexpr = tl.constexpr(3.141592653589793)



@triton.jit
def _cubic(x, A: tl.constexpr):
    """Keys' cubic convolution kernel with parameter A (0 beyond |x| = 2)."""
    x = tl.abs(x)
    near = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    far = ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A
    return tl.where(x < 1.0, near, tl.where(x < 2.0, far, 0.0))


@triton.jit
def _sinc(x):
    px = PI * tl.where(x == 0.0, 1.0, x)
    return tl.where(x == 0.0, 1.0, tl.sin(px) / px)


@triton.jit
def _aa_filter(x, MODE: tl.constexpr):
    """The antialias path's kernel functions (PIL's filters)."""
    if MODE == AA_LINEAR:
        return tl.maximum(1.0 - tl.abs(x), 0.0)
    elif MODE == AA_CUBIC:
        return _cubic(x, -0.5)
    else:  # LANCZOS: sinc(x) sinc(x / 3) on |x| < 3
        return tl.where(tl.abs(x) < 3.0, _sinc(x) * _sinc(x / 3.0), 0.0)


@triton.jit
def axis(i, n_in, n_out, scale, scale_lo, support, MODE: tl.constexpr, ALIGN: tl.constexpr):
    """For output indices ``i`` along one axis: (first source index, tap count, the
    position the weights are measured from, relative to the first source index).

    Positions are formed in float64 from the source step as a float32 pair (``scale +
    scale_lo``): in float32, ``(i + 0.5) * scale`` is off by up to i ulps of the step,
    6e-5 of a pixel at i = 1000, and the weights and the result with it (3.5e-5 for a
    500 x 650 image, growing with the size). The relative position is then small and
    exact in float32."""
    fi = i.to(tl.float32)
    one = tl.full(i.shape, 1, tl.int32)
    if MODE == NEAREST:  # (an index only: float32, as torch's)
        return tl.minimum((fi * scale).to(tl.int32), n_in - 1), one, fi
    elif MODE == NEAREST_EXACT:
        return tl.minimum(((fi + 0.5) * scale).to(tl.int32), n_in - 1), one, fi
    elif MODE == AREA:
        start = (i * n_in) // n_out
        end = ((i + 1) * n_in + n_out - 1) // n_out
        return start, end - start, fi
    f = i.to(tl.float64)
    if MODE == LINEAR or MODE == CUBIC:
        if ALIGN:
            src = f * scale + f * scale_lo
        else:
            src = (f + 0.5) * scale + (f + 0.5) * scale_lo - 0.5
        if MODE == LINEAR:
            if not ALIGN:
                src = tl.maximum(src, 0.0)
            first = tl.floor(src).to(tl.int32)
            return first, 2 * one, (src - first).to(tl.float32)
        first = tl.floor(src).to(tl.int32) - 1
        return first, 4 * one, (src - first).to(tl.float32)
    elif MODE == MATLAB:
        u = (f + 0.5) * scale + (f + 0.5) * scale_lo + 0.5  # (i + 1) scale + (1 - scale) / 2: 1-based, as MATLAB
        left = tl.floor(u - support).to(tl.int32) - 1  # 0-based
        return left, one * (tl.ceil(2.0 * support).to(tl.int32) + 2), (u - left).to(tl.float32)
    else:
        centre = (f + 0.5) * scale + (f + 0.5) * scale_lo
        lo = tl.maximum((centre - support + 0.5).to(tl.int32), 0)
        hi = tl.minimum((centre + support + 0.5).to(tl.int32), n_in)
        return lo, hi - lo, (centre - lo).to(tl.float32)


@triton.jit
def source(idx, n_in, MODE: tl.constexpr):
    """A tap's source index brought into [0, n_in): MATLAB pads symmetrically, the others
    repeat the edge."""
    if MODE == MATLAB:
        return borders.remap(idx, n_in, borders.SYMMETRIC)
    return tl.minimum(tl.maximum(idx, 0), n_in - 1)


@triton.jit
def tap(k, first, count, rel, n_in, widen, MODE: tl.constexpr):
    """Tap ``k`` of every output along one axis: (source index in [0, n_in), raw weight;
    0 unless 0 <= k < count); ``rel`` is the position relative to ``first`` (``axis``).
    ``widen`` is max(scale, 1) where the kernel widens, else 1. ``k`` may be a tensor that
    broadcasts against the per-output vectors."""
    live = (k >= 0) & (k < count)
    if MODE == NEAREST or MODE == NEAREST_EXACT or MODE == AREA:
        w = tl.full(first.shape, 1.0, tl.float32)
    elif MODE == LINEAR:
        w = tl.where(k == 0, 1.0 - rel, rel)
    elif MODE == CUBIC:
        w = _cubic(rel - k, -0.75)
    elif MODE == MATLAB:
        w = _cubic((rel - (k + 1)) / widen, -0.5)
    else:
        w = _aa_filter((k - rel + 0.5) / widen, MODE)
    return source(first + k, n_in, MODE), tl.where(live, w, 0.0)


@triton.jit
def normaliser(first, count, rel, n_in, widen, TAPS, MODE: tl.constexpr):
    """1 / the sum of each output's TAPS weights along one axis (0 for outputs past the
    end, which have no taps: not 1 / 0)."""
    total = tl.zeros(first.shape, tl.float32)
    for k in range(0, TAPS):
        _, w = tap(k, first, count, rel, n_in, widen, MODE)
        total += w
    return tl.where(total != 0.0, 1.0 / tl.where(total != 0.0, total, 1.0), 0.0)


@triton.jit
def row_taps(line, row_ptr, first, count, rel, W, widen, TAPS, sxw, c, PRO: tl.constexpr, pro_args,
              MODE: tl.constexpr, OFF64: tl.constexpr):
    """``line`` plus the row pass's TAPS weighted, gathered pixels of the rows at
    ``row_ptr`` (through the prologue), in tap order."""
    for k in range(0, TAPS):
        cx, wx = tap(k, first, count, rel, W, widen, MODE)
        v = pointwise.apply_chain(pixels.load(row_ptr + offset(cx, sxw, OFF64)), c, PRO, pro_args)
        line += tl.where(wx != 0.0, wx * v, 0.0)  # (0 * NaN is NaN: a tap of weight 0 reads nothing)
    return line


def taps(mode, n_in, n_out, scale, antialias):
    """Taps per output along an axis (the loop bound), and the kernel's support and
    widening there."""
    widen = max(scale, 1.0) if (antialias or mode in WIDENED_MODES) else 1.0
    if mode in FIXED_TAPS:
        return FIXED_TAPS[mode], 0.0, 1.0
    if mode == AREA.value:
        return -(-n_in // n_out) + 1, 0.0, 1.0
    support = SUPPORT[mode] * widen
    if mode == MATLAB.value:
        return int(-(-2 * support // 1)) + 2, support, widen
    return 2 * int(-(-support // 1)) + 1, support, widen


def float32_pair(value):
    """``value`` as float32 ``hi`` plus float32 ``lo``, the rest: a kernel's float argument
    is float32, and the sum carries 48 bits."""
    hi = float(np.float32(value))
    return hi, float(np.float32(value - hi))
