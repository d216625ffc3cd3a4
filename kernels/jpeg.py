"""The JPEG round trip of ``imgfilters.reference.jpeg`` in one launch: every image of the
batch encoded and decoded at its own quality, nothing written but the output.

A program owns a 32-row strip of BW columns of one image (all its channels): two rows of
16 x 16 minimum coded units, BW / 16 of them across, independent of every other
program's (blocks never look past their own 8 x 8 pixels; the image's edge is extended by
clamped reads, as the codec extends it). It converts the strip to 8-bit YCbCr, subsamples
the chroma (a reshape and two sums), and transforms all of a plane's blocks at once as
products with block-diagonal matrices: ``D = Kr^T X Kc`` with ``Kr = I (x) K`` the
8 x 8 cosine matrix K repeated down the diagonal (32 x 32 for luma, 16 x 16 for chroma).
The products waste the zero blocks' multiply-adds (4x for 32 columns), which the tensor
cores absorb; a strip's work is a few products of 32 x 32 matrices.

Exactness: every sample is an integer below 2^24 wherever the reference rounds one
(libjpeg's fixed-point colour conversions are exact in float32), the DC term is the
block's integer sum (``K[x, 0] = 1``, and TF32's three-pass products keep integers below
2^11 exact), and the coefficients divide by their quantisers correctly rounded
(``div_rn``): a DC coefficient exactly half a quantiser off rounds as in float64. Other
coefficients carry float32's rounding; one within about 1e-4 of a tie may round the
other way than the float64 reference (the tests mask those blocks). So may a float32
input pixel whose product with 255, rounded, lands on a half level (the exact product
being just below it: about one float32 value per level).
"""
import math

import triton
import triton.language as tl

from .core import pixels
from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin

# A strip is 32 rows (two rows of minimum coded units) of COLUMNS columns on the GPU (its
# chroma, COLUMNS / 2 wide, meets tl.dot's least size, 16), INTERPRETER_COLUMNS in the
# interpreter (few, large operations).
COLUMNS = 32
INTERPRETER_COLUMNS = 256
# 8 warps: at 4 the colour kernel spills (168 registers, sm_90a, Triton 3.6), at 8 it
# holds 193 without spilling and compiles in 1.7 s instead of 3.9
WARPS = 8


@triton.jit
def _cosines(N: tl.constexpr, TRANSPOSED: tl.constexpr):
    """``I (x) K`` (N x N, N a multiple of 8; ``K[x, u] = cos((2x + 1) u pi / 16)``), or its
    transpose."""
    i = tl.arange(0, N)[:, None]
    j = tl.arange(0, N)[None, :]
    if TRANSPOSED:
        x, u = j % 8, i % 8
    else:
        x, u = i % 8, j % 8
    c = tl.cos((2 * x + 1).to(tl.float32) * u.to(tl.float32) * (math.pi / 16))
    return tl.where(i // 8 == j // 8, c, 0.0)


@triton.jit
def _quantised(x, q_ptr, scale, R: tl.constexpr, C: tl.constexpr, PRECISION: tl.constexpr):
    """An (R, C) tile of 8-bit samples (float32), its 8 x 8 blocks through the DCT, the
    quantisers (the base table at ``q_ptr``, 64 float32, scaled by libjpeg's ``scale``) and
    back: 8-bit samples again."""
    u = tl.arange(0, R)[:, None] % 8
    v = tl.arange(0, C)[None, :] % 8
    base = tl.load(q_ptr + u * 8 + v).to(tl.int32)  # (float32 integers: exact)
    q = tl.minimum(tl.maximum((base * scale + 50) // 100, 1), 255).to(tl.float32)
    # a(u) a(v): 1/8 for the DC term (exactly), sqrt(1/32) on the first row and column, else 1/4
    aa = tl.where((u == 0) & (v == 0), 0.125, tl.where((u == 0) | (v == 0), math.sqrt(1 / 32), 0.25))
    s = tl.dot(tl.dot(_cosines(R, True), x - 128.0, input_precision=PRECISION), _cosines(C, False),
               input_precision=PRECISION)
    ratio = tl.math.div_rn(s, tl.math.div_rn(q, aa))
    level = tl.where(ratio < 0, -tl.floor(0.5 - ratio), tl.floor(ratio + 0.5))  # half away from zero
    back = tl.dot(tl.dot(_cosines(R, False), level * (q * aa), input_precision=PRECISION), _cosines(C, True),
                  input_precision=PRECISION)
    return tl.minimum(tl.maximum(tl.floor(back + 128.5), 0.0), 255.0)


@triton.jit
def _level(v):
    """Unit-scale values as the 8-bit levels a codec takes (rounded, saturated)."""
    return tl.floor(tl.minimum(tl.maximum(v, 0.0), 1.0) * 255.0 + 0.5)


@triton.jit
def _unit(v):
    """Decoded samples, clamped to 0..255, in unit scale: the float32 nearest ``k / 255``
    (the reference's, rounded)."""
    return tl.math.div_rn(tl.minimum(tl.maximum(v, 0.0), 255.0), 255.0)


@triton.jit
def _fixed(a, wa, b, wb, c, wc, add):
    """libjpeg's fixed-point ``(wa a + wb b + wc c + add) >> 16``, exact in float32 (every
    partial sum of 8-bit samples and 16-bit weights stays below 2^24)."""
    return tl.floor((a * wa + b * wb + c * wc + add) * (1.0 / 65536))


# sizes and strides are not specialised: random resizes meet a new size every call
@triton.jit(do_not_specialize=["sq", "H", "W", "sxb", "sxc", "sxh", "sxw", "syb", "syc", "syh", "syw"])
def jpeg_kernel(X, Y, QUALITY, sq, TABLES, H, W, sxb, sxc, sxh, sxw, syb, syc, syh, syw,
                COLOR: tl.constexpr, BW: tl.constexpr, OFF64: tl.constexpr, PRECISION: tl.constexpr):
    """Y[b] = the JPEG round trip of X[b] (C = 3 if COLOR else 1) at quality QUALITY[b * sq]
    (float32; rounded half up, clamped to 1..100, NaN to 1); TABLES: the luma then the
    chroma base table, float32 (``reference.TABLES``)."""
    b, _, r0, c0 = tile_origin(tl.program_id(0), 1, H, W, 32, BW)
    rows = r0 + tl.arange(0, 32)[:, None]
    cols = c0 + tl.arange(0, BW)[None, :]
    at = offset(tl.minimum(rows, H - 1), sxh, OFF64) + offset(tl.minimum(cols, W - 1), sxw, OFF64)
    x_base = X + b * sxb
    quality = tl.minimum(tl.maximum(tl.floor(tl.load(QUALITY + b * sq) + 0.5), 1.0), 100.0).to(tl.int32)
    scale = tl.where(quality < 50, 5000 // quality, 200 - 2 * quality)
    mask = (rows < H) & (cols < W)
    y_at = Y + b * syb + offset(rows, syh, OFF64) + offset(cols, syw, OFF64)
    if COLOR:
        r = _level(pixels.load(x_base + at))
        g = _level(pixels.load(x_base + sxc + at))  # (a pointer plus a stride at a time: no
        bl = _level(pixels.load(x_base + sxc + sxc + at))  # int32 product that could wrap)
        luma = _quantised(_fixed(r, 19595.0, g, 38470.0, bl, 7471.0, 32768.0), TABLES, scale, 32, BW, PRECISION)
        # 4:2:0: each 2 x 2 sum plus libjpeg's bias, 1 and 2 on alternate chroma columns
        bias = 1.0 + (tl.arange(0, BW // 2) % 2).to(tl.float32)[None, :]
        cb = _fixed(r, -11059.0, g, -21709.0, bl, 32768.0, 8421375.0)
        cb = tl.floor((tl.sum(tl.sum(tl.reshape(cb, (16, 2, BW // 2, 2)), 3), 1) + bias) * 0.25)
        cr = _fixed(r, 32768.0, g, -27439.0, bl, -5329.0, 8421375.0)
        cr = tl.floor((tl.sum(tl.sum(tl.reshape(cr, (16, 2, BW // 2, 2)), 3), 1) + bias) * 0.25)
        cb = _quantised(cb, TABLES + 64, scale, 16, BW // 2, PRECISION) - 128.0
        cr = _quantised(cr, TABLES + 64, scale, 16, BW // 2, PRECISION) - 128.0
        cb = tl.reshape(tl.broadcast_to(cb[:, None, :, None], (16, 2, BW // 2, 2)), (32, BW))
        cr = tl.reshape(tl.broadcast_to(cr[:, None, :, None], (16, 2, BW // 2, 2)), (32, BW))
        red = luma + tl.floor((cr * 91881.0 + 32768.0) * (1.0 / 65536))
        green = luma + tl.floor((cb * -22554.0 + cr * -46802.0 + 32768.0) * (1.0 / 65536))
        blue = luma + tl.floor((cb * 116130.0 + 32768.0) * (1.0 / 65536))
        pixels.store(y_at, _unit(red), mask)
        pixels.store(y_at + syc, _unit(green), mask)
        pixels.store(y_at + syc + syc, _unit(blue), mask)
    else:
        grey = _quantised(_level(pixels.load(x_base + at)), TABLES, scale, 32, BW, PRECISION)
        pixels.store(y_at, _unit(grey), mask)


def launch(x, y, quality, tables):
    """The JPEG round trip of 4-D ``x`` (B, C, H, W), C 1 or 3, into ``y`` of its shape:
    ``quality`` (B,) float32 (any stride) and ``tables`` (``reference.TABLES``) on its
    device."""
    B, C, H, W = x.shape
    bw = pow2_at_least(W, 32, INTERPRETER_COLUMNS if interpreting() else COLUMNS)
    args = (x, y, quality, quality.stride(0), tables, H, W, *x.stride(), *y.stride())
    # three TF32 passes: float32's precision on the tensor cores (the interpreter ignores it)
    meta = dict(COLOR=C == 3, BW=bw, OFF64=needs_int64(x, y), PRECISION="tf32x3")
    launch_kernel(jpeg_kernel, lambda m: (programs(B, H, W, 32, bw),), args, meta, x, tile_config(num_warps=WARPS))
