"""Morphology's shared kernel helpers (the package's other modules have the kernels): how a
pass reads its source (``SOURCE``: the image through the prologue, a float buffer, or
integers as they are), the NaN-keeping min and max, the border's index remapping, and
the finishing store (the compound operations' difference, the epilogue, the typed store).
"""
import triton
import triton.language as tl

from ..core import borders, neighbourhood, pixels, pointwise

_NAN: tl.constexpr = tl.constexpr(tl.PropagateNan.ALL)
# SOURCE: what a kernel reads and how (``_load``)
BUFFER: tl.constexpr = tl.constexpr(0)  # a float buffer of an earlier launch, unit scale as stored
IMAGE: tl.constexpr = tl.constexpr(1)  # the image, unit scale through the prologue
RAW: tl.constexpr = tl.constexpr(2)  # integers (image or buffer, no prologue) as int32 stored values


@triton.jit
def _pick(a, b, DILATE: tl.constexpr):
    """min (max for dilation) of a and b, NaN if either is NaN."""
    if DILATE:
        return tl.maximum(a, b, propagate_nan=_NAN)
    else:
        return tl.minimum(a, b, propagate_nan=_NAN)


@triton.jit
def _load(ptrs, inside, border_value, c, PRO: tl.constexpr, pro_args, SOURCE: tl.constexpr, BORDER: tl.constexpr,
          mask=None):
    """Pixels as float32 in unit scale, or with ``RAW`` the stored integers as int32 (their
    min and max one integer instruction; ``border_value`` a stored level then), the constant
    border's value where not ``inside``."""
    if SOURCE == RAW:
        x = tl.load(ptrs, mask).to(tl.int32)
        if BORDER == borders.CONSTANT:
            if inside is not None:
                x = tl.where(inside, x, (tl.zeros((), tl.float32) + border_value).to(tl.int32))
        return x
    elif SOURCE == IMAGE:
        return neighbourhood.load(ptrs, inside, border_value, c, PRO, pro_args, neighbourhood.UNIT, BORDER, mask)
    else:
        x = pixels.load(ptrs, mask)
        if BORDER == borders.CONSTANT:
            if inside is not None:
                x = tl.where(inside, x, border_value)
        return x


@triton.jit
def _unit(y, dtype: tl.constexpr, SOURCE: tl.constexpr):
    """A min or max of ``_load``'s values in unit scale (RAW's integers converted once: the
    float 2^23 + value by one OR, exact)."""
    if SOURCE == RAW:
        return ((y.to(tl.uint32) | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0) * pixels.unit_scale(dtype)
    else:
        return y


@triton.jit
def _finish(y, in_dtype: tl.constexpr, SOURCE: tl.constexpr, y_ptrs, z_ptrs, ok, b, c, PRO: tl.constexpr, pro_args,
            EPI: tl.constexpr, epi_args, SUB: tl.constexpr, Z_INPUT: tl.constexpr, LEVELS: tl.constexpr):
    """Store a pass's result ``y`` (``_load``'s values of an ``in_dtype`` source): RAW
    integers into their own dtype as they are; otherwise in unit scale, with ``SUB`` 1
    ``y - Z``, 2 ``Z - y`` (``Z`` the image through the prologue when ``Z_INPUT``, else a
    buffer; ``y`` first as an image of ``LEVELS`` levels stores it, when the operation's
    images are integers), then the epilogue (whose input pixel is the result itself: no
    pointwise step reads it)."""
    if SOURCE == RAW and SUB == 0 and len(EPI) == 0 and y_ptrs.dtype.element_ty == in_dtype:
        tl.store(y_ptrs, y.to(in_dtype), ok)
    else:
        _finish_unit(_unit(y, in_dtype, SOURCE), y_ptrs, z_ptrs, ok, b, c, PRO, pro_args, EPI, epi_args, SUB, Z_INPUT,
                     LEVELS)


@triton.jit
def _finish_unit(y, y_ptrs, z_ptrs, ok, b, c, PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                 SUB: tl.constexpr, Z_INPUT: tl.constexpr, LEVELS: tl.constexpr):
    if SUB != 0:
        if LEVELS > 0:
            y = pointwise.quantize(y, c, LEVELS)
        if Z_INPUT:
            z = neighbourhood.load(z_ptrs, None, 0.0, c, PRO, pro_args, neighbourhood.UNIT, borders.REFLECT, ok)
        else:
            z = pixels.load(z_ptrs, ok)
        if SUB == 1:
            y = y - z
        else:
            y = z - y
    if len(EPI) > 0:
        y = pointwise.apply_epilogue(y, y, b, c, EPI, epi_args)
    pixels.store(y_ptrs, y, ok)


@triton.jit
def _index(i, n, BORDER: tl.constexpr):
    """(index into the image, inside) of indices ``i`` through the border."""
    return borders.remap(i, n, BORDER), borders.inside(i, n)
