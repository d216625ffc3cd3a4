"""``nibbles_kernel``: uint8 medians of 7 x 7 to 15 x 15 windows a nibble at a time,
from byte-lane counts."""
import triton
import triton.language as tl

from ..core import borders, neighbourhood, pixels
from ..core.tiling import offset, tile_origin
from .common import RAW, _finish, _key, _value


@triton.jit
def _coarse(v):
    """What value ``v`` (uint32, 0..255) adds to the counts of window values at or above
    16 k, k < 16: two uint64 words of byte lanes, (LOW, HIGH) lane j for k = j and k = j + 8,
    1 where ``v >= 16 k`` (LOW's lane 0, k = 0, always)."""
    h = (v >> 4).to(tl.uint64)
    ones = tl.full((), 0x0101010101010101, tl.uint64)
    low = ones >> (56 - 8 * tl.minimum(h, 7))
    high = tl.where(h >= 8, ones >> ((120 - 8 * h) & 63), 0)
    return low, high



@triton.jit
def _lanes_above(counts, M: tl.constexpr):
    """How many byte lanes of ``counts`` (each <= 225) exceed M (< 128): adding 127 - M
    sets a lane's top bit exactly then, without a carry out of the lane; the top bits are
    summed into the top byte by one multiplication."""
    top = ((counts + (127 - M) * 0x0101010101010101) >> 7) & 0x0101010101010101
    return ((top * 0x0101010101010101) >> 56).to(tl.int32)



@triton.jit
def _in_bin_below(packed, bin_bytes, f):
    """How many of the values packed four to a uint32 (byte lanes) have the high nibble of
    ``bin_bytes`` (16 b in every byte) and a low nibble below ``f`` (1..15), i.e. ``y = x ^
    bin_bytes < f``: 127 + f - (y & 127) keeps a byte's top bit iff y & 127 < f (no byte
    borrows), and y's own top bit must be clear. Each byte lane counts at most one value a
    word, and their total (<= 225) is summed by one multiplication at the end."""
    limits = 0x7F7F7F7F + f * 0x01010101
    not_bin = bin_bytes ^ 0xFFFFFFFF  # (^, not ~: the interpreter has no ~ of uint32)
    acc = tl.zeros_like(f)
    for i in tl.static_range(len(packed)):
        t = limits - ((packed[i] ^ bin_bytes) & 0x7F7F7F7F)
        acc += ((t & (packed[i] ^ not_bin)) >> 7) & 0x01010101
    return (acc * 0x01010101) >> 24



@triton.jit(do_not_specialize=["C", "H", "W", "sxb", "sxc", "sxh", "syb", "syc", "syh", "SIZE_CLASS"])
def nibbles_kernel(X, Y, C, H, W, sxb, sxc, sxh, syb, syc, syh, border_value,
                   EPI: tl.constexpr, epi_args, K: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
                   BORDER: tl.constexpr, OFF64: tl.constexpr, NEAR: tl.constexpr, SIZE_CLASS,
                   BW: tl.constexpr, SEG: tl.constexpr):
    """``median_kernel``'s result for uint8 keys (``KEY = RAW``, no prologue) and K up to
    15, a nibble at a time. A lane holds one output column and marches down SEG rows,
    keeping the window's K x K values packed four to a register (column by column, byte
    lanes; a new row shifts each column by one lane, the lanes past K hold 255, in no bin
    below a candidate) and the counts of window values at or above 16 k for k < 16 (byte
    lanes, <= 225, ``_coarse``: each row adds the new row's values and takes off the
    dropped row's). The median's high nibble b is the number of those counts above M,
    less one; with the count below 16 b its low nibble takes four radix rounds of
    ``_in_bin_below`` over the packed window."""
    R: tl.constexpr = K // 2
    M: tl.constexpr = (K * K - 1) // 2
    WORDS: tl.constexpr = K // 4 + 1  # a column's K values and at least one lane of 255
    LAST: tl.constexpr = (K - 1) // 4  # the word and lane of a column's newest value
    SHIFT: tl.constexpr = 8 * ((K - 1) % 4)
    KEPT: tl.constexpr = 0xFFFFFFFF ^ (0xFF << SHIFT)  # the other lanes of that word
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, SEG, BW)
    x_base = X + b * sxb + c * sxc
    y_base = Y + b * syb + c * syc
    cols = w0 + tl.arange(0, BW)
    unit = pixels.unit_scale(X.dtype.element_ty)
    col_offs, col_ins = neighbourhood.columns(cols - R, K, W, SXW, BORDER, NEAR, OFF64)
    # every value 255 to start (K*K of them in every count)
    packed = ()
    for _ in tl.static_range(K * WORDS):
        packed = packed + (tl.full((BW,), 0xFFFFFFFF, tl.uint32),)
    low = tl.full((BW,), 0x0101010101010101 * K * K, tl.uint64)
    high = tl.full((BW,), 0x0101010101010101 * K * K, tl.uint64)
    for r in range(h0 - R, tl.minimum(h0 + SEG, H) + R):
        # row r enters each column at lane K - 1; the column's oldest value (lane 0) leaves
        row_ptr = x_base + offset(borders.remap_within(r, H, BORDER, NEAR), sxh, OFF64)
        row_in = borders.inside(r, H)
        shifted = ()
        for d in tl.static_range(K):
            new, _nan = _key(row_ptr + col_offs[d], row_in & col_ins[d], border_value, c, (), (), BORDER, RAW)
            add_low, add_high = _coarse(new)
            drop_low, drop_high = _coarse(packed[d * WORDS] & 0xFF)
            low = low + add_low - drop_low
            high = high + add_high - drop_high
            for i in tl.static_range(WORDS):
                above = packed[d * WORDS + i + 1] if i + 1 < WORDS else 0xFF
                word = (packed[d * WORDS + i] >> 8) | (above << 24)
                if i == LAST:
                    word = (word & KEPT) | (new << SHIFT)
                shifted = shifted + (word,)
        packed = shifted
        o = r - R  # the output row whose window the columns now hold
        if o >= h0:
            nibble = _lanes_above(low, M) + _lanes_above(high, M) - 1
            at_or_above = (tl.where(nibble < 8, low, high) >> (8 * (nibble & 7)).to(tl.uint64)) & 0xFF
            below = K * K - at_or_above.to(tl.uint32)  # window values below 16 * nibble
            bin_bytes = (nibble * 0x10101010).to(tl.uint32)
            low_nibble = tl.zeros((BW,), dtype=tl.uint32)
            for step in range(4):  # (a run-time loop: a quarter of the code to compile, unrolled by LLVM)
                f = low_nibble | (8 >> step)
                low_nibble = tl.where(below + _in_bin_below(packed, bin_bytes, f) <= M, f, low_nibble)
            median = (nibble * 16).to(tl.uint32) | low_nibble
            y_ptrs = y_base + offset(o, syh, OFF64) + offset(cols, SYW, OFF64)
            if len(EPI) == 0 and Y.dtype.element_ty == X.dtype.element_ty:
                tl.store(y_ptrs, median.to(Y.dtype.element_ty), cols < W)
            else:
                _finish(_value(median, unit, RAW), False, median, x_base, y_ptrs, o, cols, cols < W, b, c, H, W,
                        sxh, (), (), EPI, epi_args, SXW, BORDER, OFF64, RAW, False)

