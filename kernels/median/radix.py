"""``median_kernel`` (the radix select of a window's keys, or the 7 x 7 selection
network) and ``plane_kernel`` (the interpreter's: a whole plane's windows as one tensor)."""
import triton
import triton.language as tl

from ..core import borders, neighbourhood, pixels
from ..core.tiling import offset, tile_origin
from . import networks
from .common import FLOAT, RAW, _finish, _input_row, _key, _value


@triton.jit
def _step(prefix, bit, below, M: tl.constexpr):
    """One round: the median's key has ``bit`` set iff at most M keys lie below ``prefix | bit``."""
    return tl.where(below <= M, prefix | bit, prefix)



@triton.jit
def _bit(i, BITS: tl.constexpr):
    """The bit round ``i`` decides, from the top (uint32)."""
    shift = tl.zeros((), dtype=tl.int32) + (BITS - 1 - i)  # (i: a constexpr, or a loop's tensor)
    return tl.full((), 1, tl.uint32) << shift.to(tl.uint32)



@triton.jit
def _window_ptrs(x_base, rows, cols, u, v, H, W, sxh, R: tl.constexpr, SXW: tl.constexpr,
                 BORDER: tl.constexpr, OFF64: tl.constexpr):
    """Pointers to window position (u, v) of the outputs at (rows, cols), remapped, and
    whether that position lies in the image."""
    rr = rows + (u - R)
    cc = cols + (v - R)
    ptrs = x_base + offset(borders.remap(rr, H, BORDER), sxh, OFF64) + offset(borders.remap(cc, W, BORDER), SXW, OFF64)
    return ptrs, borders.inside(rr, H) & borders.inside(cc, W)



@triton.jit
def _count_below(x_base, rows, cols, cand, c, H, W, sxh, border_value, PRO: tl.constexpr, pro_args,
                 K: tl.constexpr, R: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
                 KEY: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """(keys below ``cand``, NaN) over the window, reloaded (large windows)."""
    below = tl.zeros((BH, BW), dtype=tl.int32)
    nan = tl.zeros((BH, BW), dtype=tl.int1)
    for u in range(K):
        for v in range(K):
            ptrs, ins = _window_ptrs(x_base, rows, cols, u, v, H, W, sxh, R, SXW, BORDER, OFF64)
            key, n = _key(ptrs, ins, border_value, c, PRO, pro_args, BORDER, KEY)
            below += (key < cand).to(tl.int32)
            nan = nan | n
    return below, nan



# Sizes and the strides other than the last are not specialised (one compile per window
# size, dtype and layout, whatever the image size).
@triton.jit(do_not_specialize=["C", "H", "W", "sxb", "sxc", "sxh", "syb", "syc", "syh", "SIZE_CLASS"])
def median_kernel(X, Y, C, H, W, sxb, sxc, sxh, syb, syc, syh, border_value,
                  PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                  K: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                  OFF64: tl.constexpr, KEY: tl.constexpr, BITS: tl.constexpr, ARG: tl.constexpr,
                  NETWORK: tl.constexpr, NEAR: tl.constexpr, SIZE_CLASS, BH: tl.constexpr, BW: tl.constexpr):
    """Y[b, c, i, j] = EPI(median over u, v < K of PRO(X~[b, c, i + u - K//2, j + v - K//2])),
    X~ being X extended by the border; with ``ARG`` the median's window position instead
    (Y int32). ``NETWORK``: a selection network instead of the radix select (7 x 7 windows,
    not ARG). ``NEAR``: the window reaches less than the image's height and width
    (the cheap border fold). ``SIZE_CLASS`` only feeds the autotune key."""
    R: tl.constexpr = K // 2
    M: tl.constexpr = (K * K - 1) // 2
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    unit = pixels.unit_scale(X.dtype.element_ty)
    prefix = tl.zeros((BH, BW), dtype=tl.uint32)
    pos = tl.zeros((BH, BW), dtype=tl.int32)
    y = tl.zeros((BH, BW), dtype=tl.float32)
    if NETWORK:  # the window's values in registers, through a selection network
        tl.static_assert(K == 7 and not ARG)
        col_offs, col_ins = neighbourhood.columns(cols - R, K, W, SXW, BORDER, NEAR, OFF64)
        vals = ()
        nan = tl.zeros((BH, BW), dtype=tl.int1)
        for u in tl.static_range(K):
            row = _input_row(x_base, rows + (u - R), H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args,
                             BORDER, NEAR, OFF64, KEY)
            if KEY == FLOAT:
                for v in tl.static_range(K):
                    nan = nan | (row[v] != row[v])
            vals = vals + row
        y = networks.median49(vals)
        if KEY == RAW:
            y = (y - neighbourhood.BIAS) * unit
    else:  # the radix select, the keys reloaded every round (L1 hits; a small program to compile)
        nan = tl.zeros((BH, BW), dtype=tl.int1)
        for i in range(BITS):
            bit = _bit(i, BITS)
            below, nan = _count_below(x_base, rows, cols, prefix | bit, c, H, W, sxh, border_value, PRO,
                                         pro_args, K, R, SXW, BORDER, OFF64, KEY, BH, BW)
            prefix = _step(prefix, bit, below, M)
        if ARG:
            below, nan = _count_below(x_base, rows, cols, prefix, c, H, W, sxh, border_value, PRO, pro_args,
                                         K, R, SXW, BORDER, OFF64, KEY, BH, BW)
            target = M - below
            seen = tl.zeros((BH, BW), dtype=tl.int32)
            for t in range(K * K):
                ptrs, ins = _window_ptrs(x_base, rows, cols, t // K, t % K, H, W, sxh, R, SXW, BORDER, OFF64)
                key, _ = _key(ptrs, ins, border_value, c, PRO, pro_args, BORDER, KEY)
                equal = key == prefix
                pos = tl.where(equal & (seen == target), t, pos)
                seen += equal.to(tl.int32)
        y = _value(prefix, unit, KEY)
    mask = (rows < H) & (cols < W)
    y_ptrs = Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, SYW, OFF64)
    _finish(y, nan, pos, x_base, y_ptrs, rows, cols, mask, b, c, H, W, sxh, PRO, pro_args, EPI, epi_args,
            SXW, BORDER, OFF64, KEY, ARG)



@triton.jit
def plane_kernel(X, Y, C, H, W, sxb, sxc, sxh, syb, syc, syh, border_value,
                 PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                 K: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                 OFF64: tl.constexpr, KEY: tl.constexpr, BITS: tl.constexpr, ARG: tl.constexpr,
                 BH: tl.constexpr, BW: tl.constexpr, NP: tl.constexpr):
    """``median_kernel``'s result for the interpreter: the window as one ``(NP, BH, BW)``
    gather (``NP``: K*K padded to a power of two; the padding's keys are the largest,
    never below a candidate), each round one comparison and one sum over it."""
    R: tl.constexpr = K // 2
    M: tl.constexpr = (K * K - 1) // 2
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    t = tl.arange(0, NP)[:, None, None]
    valid = t < K * K
    ptrs, ins = _window_ptrs(x_base, rows[None], cols[None], t // K, t % K, H, W, sxh, R, SXW, BORDER, OFF64)
    key, nan = _key(ptrs, ins, border_value, c, PRO, pro_args, BORDER, KEY)
    key = tl.where(valid, key, 0xFFFFFFFF)
    nan = tl.max((nan & valid).to(tl.int32), axis=0) > 0
    prefix = tl.zeros((BH, BW), dtype=tl.uint32)
    for i in tl.static_range(BITS):
        bit = _bit(i, BITS)
        below = tl.sum((key < (prefix | bit)[None]).to(tl.int32), axis=0)
        prefix = _step(prefix, bit, below, M)
    pos = tl.zeros((BH, BW), dtype=tl.int32)
    if ARG:
        target = M - tl.sum((key < prefix[None]).to(tl.int32), axis=0)
        equal = (key == prefix[None]).to(tl.int32)
        seen = tl.cumsum(equal, axis=0) - equal  # equal keys before each position
        pos = tl.max(tl.where((equal > 0) & (seen == target[None]), t, 0), axis=0)
    mask = (rows < H) & (cols < W)
    y_ptrs = Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, SYW, OFF64)
    _finish(_value(prefix, pixels.unit_scale(X.dtype.element_ty), KEY), nan, pos, x_base, y_ptrs, rows, cols, mask,
            b, c, H, W, sxh, PRO, pro_args, EPI, epi_args, SXW, BORDER, OFF64, KEY, ARG)

