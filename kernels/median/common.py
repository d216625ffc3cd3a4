"""The median family's sizes, its two kinds of keys, and the device helpers its kernels
share: a window value's key, the key back to a value, an input row of a marching
kernel, the finishing store."""
import triton
import triton.language as tl

from ..core import borders, neighbourhood, pixels, pointwise
from ..core.tiling import offset


MAX_SIZE = 31
NETWORK_SIZE = 7  # the window of ``median_kernel``'s selection network
RAW: tl.constexpr = tl.constexpr(0)  # keys: the stored integer values
FLOAT: tl.constexpr = tl.constexpr(1)  # keys: float32 unit-scale values, order-preserving bits



@triton.jit
def _key(ptrs, inside, border_value, c, PRO: tl.constexpr, pro_args, BORDER: tl.constexpr, KEY: tl.constexpr):
    """(key, NaN) of the pixels at ``ptrs`` (remapped into the image), in
    ``neighbourhood.load``'s order: typed load, prologue, the constant border's value
    where not ``inside`` (``border_value``: a unit-scale float for FLOAT keys, a stored
    level for RAW ones)."""
    if KEY == FLOAT:
        x = neighbourhood.load(ptrs, inside, border_value, c, PRO, pro_args, neighbourhood.UNIT, BORDER)
        bits = x.to(tl.uint32, bitcast=True)
        # (^ 0xFFFFFFFF, not ~: the interpreter has no ~ of uint32)
        key = tl.where((bits >> 31) != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)
        return key, x != x
    else:
        key = tl.load(ptrs).to(tl.uint32)
        if BORDER == borders.CONSTANT:
            level = (tl.zeros((), dtype=tl.float32) + border_value).to(tl.uint32)  # (a float argument)
            key = tl.where(inside, key, level)
        return key, False



@triton.jit
def _value(key, unit, KEY: tl.constexpr):
    """A key back to its float32 unit-scale value."""
    if KEY == FLOAT:
        bits = tl.where((key >> 31) != 0, key ^ 0x80000000, key ^ 0xFFFFFFFF)
        return bits.to(tl.float32, bitcast=True)
    else:  # (2^23 + key as float bits, exact, minus 2^23: no slow integer conversion)
        return ((key | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0) * unit



@triton.jit
def _input_row(x_base, r, H, col_offs, col_ins, sxh, border_value, c, PRO: tl.constexpr, pro_args,
               BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr, KEY: tl.constexpr):
    """Input row ``r``'s values at the lanes' columns (``col_offs``, remapped), as the
    selection networks take them: unit-scale floats (FLOAT keys) or stored integers as
    2^23 + value (RAW; one OR, their order the values')."""
    row_ptr = x_base + offset(borders.remap_within(r, H, BORDER, NEAR), sxh, OFF64)
    row_in = borders.inside(r, H)
    vals = ()
    for d in tl.static_range(len(col_offs)):
        if KEY == FLOAT:
            vals = vals + (neighbourhood.load(row_ptr + col_offs[d], row_in & col_ins[d], border_value, c, PRO,
                                              pro_args, neighbourhood.UNIT, BORDER),)
        else:
            vals = vals + (neighbourhood.load(row_ptr + col_offs[d], row_in & col_ins[d],
                                              border_value + neighbourhood.BIAS, c, PRO, pro_args,
                                              neighbourhood.BIASED, BORDER),)
    return vals



@triton.jit
def _finish(y, nan, pos, x_base, y_ptrs, rows, cols, mask, b, c, H, W, sxh, PRO: tl.constexpr, pro_args,
            EPI: tl.constexpr, epi_args, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
            KEY: tl.constexpr, ARG: tl.constexpr):
    """Store the median ``y`` (unit scale; NaN where the window held one, through the
    epilogue), or with ``ARG`` its window position ``pos``."""
    if ARG:
        tl.store(y_ptrs, pos, mask)
    else:
        if KEY == FLOAT:
            y = tl.where(nan, float("nan"), y)
        if len(EPI) > 0:
            x_in = neighbourhood.load(x_base + offset(borders.remap(rows, H, BORDER), sxh, OFF64)
                                      + offset(borders.remap(cols, W, BORDER), SXW, OFF64), None, 0.0, c, PRO,
                                      pro_args, neighbourhood.UNIT, BORDER)
            y = pointwise.apply_epilogue(y, x_in, b, c, EPI, epi_args)
        pixels.store(y_ptrs, y, mask)

