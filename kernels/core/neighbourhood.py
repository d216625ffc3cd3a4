"""The load of a filter's neighbourhood: one function, one order, for every filter kernel.

A filter reads the pixels around each output through the border and through its fused
prologue. Every kernel does it in this order:

1. **remap** (the caller): ``borders.remap`` (or ``remap_near``) maps the indices into the
   image, and ``borders.inside`` says which of them were inside. The caller does it
   where it is cheapest (a row's index once per row, a strip's columns once per strip),
   and hands over pointers and that mask.
2. **typed load** (``load``): any supported dtype as float32, in the scale ``SCALE``.
3. **prologue**: the pointwise steps the pipeline ran before the filter.
4. **constant border**: the border value where the index was outside, with the same
   ``tl.where`` the kernels always used.

The border value comes after the prologue because it is a pixel of the image the filter
receives: the unfused pipeline (``Normalize`` then a filter with ``border_value=0.2``)
pads the normalised image with 0.2, so a fused filter must give the prologue's output,
not the stored pixels, the border value, and ``imgfilters.fuse`` fuses constant borders
too. The caller gives ``border_value`` in the scale of the values returned.
"""
import triton
import triton.language as tl

from . import borders, pixels, pointwise
from .tiling import offset

# SCALE: the scale of the values ``load`` returns.
UNIT: tl.constexpr = tl.constexpr(0)  # unit scale (integers as value / max) through the prologue
# As UNIT with a prologue; without one the stored values as float32 (integers not scaled):
# a linear filter scales its taps or its result once (``linear_scale``), not every pixel.
LINEAR: tl.constexpr = tl.constexpr(1)
# Integers as the float 2^23 + value (one OR, exact) whose differences are the values'; no
# prologue. The caller subtracts the bias (and scales) only where it needs values.
BIASED: tl.constexpr = tl.constexpr(2)
BIAS: tl.constexpr = tl.constexpr(8388608.0)  # 2^23: the float with bits 0x4B000000


@triton.jit
def load(ptrs, inside, border_value, channel, PRO: tl.constexpr, pro_args, SCALE: tl.constexpr,
         BORDER: tl.constexpr, mask=None):
    """The pixels at ``ptrs`` (remapped into the image: step 1 above) as float32 in
    ``SCALE``, through the prologue ``PRO`` (a chain of ``core.pointwise`` steps with their
    ``pro_args``; ``channel`` is the pixels' channel index), and under the constant
    ``BORDER`` ``border_value`` (in ``SCALE``) where ``inside`` is false. ``inside`` None:
    every index is inside (no select). Lanes that ``mask`` masks off are undefined."""
    if SCALE == BIASED:
        tl.static_assert(len(PRO) == 0, "BIASED loads take no prologue")
        x = (tl.load(ptrs, mask).to(tl.uint32) | 0x4B000000).to(tl.float32, bitcast=True)
    elif SCALE == LINEAR and len(PRO) == 0:
        x = pixels.load_raw(ptrs, mask)
    else:
        x = pixels.load(ptrs, mask)
        if len(PRO) > 0:  # (the same code; the interpreter pays for every call of a jitted function)
            x = pointwise.apply_chain(x, channel, PRO, pro_args)
    if BORDER == borders.CONSTANT:
        if inside is not None:
            x = tl.where(inside, x, border_value)
    return x


@triton.jit
def drop_row(rows, N: tl.constexpr):
    """A marching lane's kept rows (rows of N values as one tuple) without the first row."""
    out = ()
    for q in tl.static_range(N, len(rows)):
        out = out + (rows[q],)
    return out


@triton.jit
def columns(first, N: tl.constexpr, W, SXW: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
            OFF64: tl.constexpr):
    """The N columns ``first + d`` (d < N) that a program's lanes read on every row (the
    median's and morphology's marching lanes): their offsets remapped into the image
    (``NEAR``: ``borders.remap_near``'s one fold) and whether each lies in the image, as
    tuples."""
    col_offs = ()
    col_ins = ()
    for d in tl.static_range(N):
        cc = first + d
        col_offs = col_offs + (offset(borders.remap_within(cc, W, BORDER, NEAR), SXW, OFF64),)
        col_ins = col_ins + (borders.inside(cc, W),)
    return col_offs, col_ins


@triton.jit
def linear_scale(dtype: tl.constexpr, PRO: tl.constexpr):
    """The factor that takes a linear filter of ``LINEAR`` pixels of ``dtype`` to unit
    scale (1 with a prologue, whose pixels are in unit scale)."""
    if len(PRO) == 0:
        return pixels.unit_scale(dtype)
    else:
        return 1.0
