"""Gradient magnitude (and direction) in one launch: both first derivatives of a window
read once.

``gradient_kernel`` marches lanes down the rows, as morphology's and the median's
row-marching kernels do: a program's BW lanes hold S adjacent output columns each and walk
SEG output rows of one plane. A lane loads each input row once (its S + 2R columns, the
next row's a row ahead so that its latency passes while this one is summed), takes the
row's horizontal smoothing and derivative sums at its S outputs (``_row_sums``: taps
``TS`` and ``TD``), and keeps them for the 2R + 1 output rows that use them; an output is
then ``gx = sum_u TS[u] hd_u`` and ``gy = sum_u TD[u] hs_u`` over its window's rows. Per
output: (S + 2R) / S loads, 2 (2R + 1) multiply-adds for the row sums and as many for
the column; the border's remapping once a program (columns) and once a row. The epilogue
stores ``sqrt(gx^2 + gy^2)`` and, with ``DIRECTION``, ``atan2(gy, gx)`` into a second
plane.

The first tile of this kernel (2-D tiles of 16 x 64, every window tap a shifted load:
``(2R+1)^2`` loads and ``4 (2R+1)^2`` FMAs a pixel) took 0.115 ms on the H200 for 4K RGB
float32 (PERFORMANCE.md), against about 0.047 ms of memory time.
"""
import triton
import triton.language as tl

from .core import borders, neighbourhood, pixels
from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin

# GPU: lanes, outputs a lane, rows a program (4 warps), as morphology's float32 lanes
TILE = (128, 4, 32)
PI: tl.constexpr = tl.constexpr(3.141592653589793)
TAN_PI_8: tl.constexpr = tl.constexpr(0.41421356237309503)


@triton.jit
def atan2(y, x):
    """``atan2(y, x)`` in float32, in [-pi, pi], as ``torch.atan2`` (signed zeros and
    infinities included; NaN in, NaN out): the quotient of the smaller and the larger
    magnitude in [0, 1], reduced by tan(pi/8) and Cephes' ``atanf`` polynomial (a few
    ulp), then unfolded into the octant and quadrant."""
    ax = tl.abs(x)
    ay = tl.abs(y)
    hi = tl.maximum(ax, ay)
    lo = tl.minimum(ax, ay)
    t = tl.where(hi == 0.0, 0.0, tl.where(lo == hi, 1.0, lo / tl.where(hi == 0.0, 1.0, hi)))
    big = t > TAN_PI_8
    z = tl.where(big, (t - 1.0) / (t + 1.0), t)
    z2 = z * z
    a = (((8.05374449538e-2 * z2 - 1.38776856032e-1) * z2 + 1.99777106478e-1) * z2 - 3.33329491539e-1) * z2 * z + z
    a = tl.where(big, a + PI / 4, a)
    a = tl.where(ay > ax, PI / 2 - a, a)
    a = tl.where(x.to(tl.int32, bitcast=True) < 0, PI - a, a)  # (the sign bit: -0.0 counts as negative)
    a = tl.where(y.to(tl.int32, bitcast=True) < 0, -a, a)
    return tl.where((x != x) | (y != y), float("nan"), a)


@triton.jit
def _lane_values(x_base, r, H, col_offs, col_ins, sxh, bv, c, BORDER: tl.constexpr, NEAR: tl.constexpr,
                 OFF64: tl.constexpr):
    """Input row ``r``'s values (stored units, float32) at a lane's columns (``col_offs``,
    remapped), through the border (``bv``: the constant border in stored units)."""
    row_ptr = x_base + offset(borders.remap_within(r, H, BORDER, NEAR), sxh, OFF64)
    row_in = borders.inside(r, H)
    vals = ()
    for d in tl.static_range(len(col_offs)):
        vals = vals + (neighbourhood.load(row_ptr + col_offs[d], row_in & col_ins[d], bv, c, (), (),
                                          neighbourhood.LINEAR, BORDER),)
    return vals


@triton.jit
def _row_sums(vals, ts, td, S: tl.constexpr):
    """A row's horizontal smoothing and derivative sums at a lane's S outputs, as two
    tuples (``vals``: its S + len(ts) - 1 values)."""
    hs = ()
    hd = ()
    for s in tl.static_range(S):
        a = ts[0] * vals[s]
        d = td[0] * vals[s]
        for v in tl.static_range(1, len(ts)):
            a += ts[v] * vals[s + v]
            d += td[v] * vals[s + v]
        hs = hs + (a,)
        hd = hd + (d,)
    return hs, hd


@triton.jit(do_not_specialize=["C", "H", "W", "sxb", "sxc", "sxh", "syb", "syc", "syh", "syd"])
def gradient_kernel(X, Y, TS, TD, C, H, W, sxb, sxc, sxh, syb, syc, syh, syd, border_value,
                    R: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                    NEAR: tl.constexpr, OFF64: tl.constexpr, DIRECTION: tl.constexpr, BW: tl.constexpr,
                    S: tl.constexpr, SEG: tl.constexpr):
    """Y[b, c, i, j] = |(gx, gy)| with gx = sum_{u,v} TS[u] TD[v] X~[b, c, i+u-R, j+v-R] and
    gy = sum_{u,v} TD[u] TS[v] X~[...], X~ being X (unit scale) extended by the border;
    with ``DIRECTION`` also Y[b, c, i, j + syd] = atan2(gy, gx) (``syd``: the offset of
    the direction's planes, in elements). Lanes as the module docstring says."""
    K: tl.constexpr = 2 * R + 1
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, SEG, BW * S)
    x_base = X + b * sxb + c * sxc
    y_base = Y + b * syb + c * syc
    lanes = w0 + S * tl.arange(0, BW)  # a lane's first output column
    col_offs, col_ins = neighbourhood.columns(lanes - R, S + K - 1, W, SXW, BORDER, NEAR, OFF64)
    ts = ()
    td = ()
    for v in tl.static_range(K):
        ts = ts + (tl.load(TS + v),)
        td = td + (tl.load(TD + v),)
    scale = neighbourhood.linear_scale(X.dtype.element_ty, ())  # applied once, to the sums
    bv = border_value / scale
    # the row sums of input rows o - R .. o + R - 1 (row u's S at u * S): the first 2R rows
    # in a run-time loop over tuples of a fixed size (one copy of the row step to compile:
    # unrolled, 7 x 7 compiled in 2.5-2.9 s for sm_90a against 0.4-0.5 for the loop)
    kept_s = ()
    for _ in tl.static_range((K - 1) * S):
        kept_s = kept_s + (tl.zeros((BW,), tl.float32),)
    kept_d = kept_s
    for r in range(h0 - R, h0 + R):
        hs, hd = _row_sums(_lane_values(x_base, r, H, col_offs, col_ins, sxh, bv, c, BORDER, NEAR, OFF64), ts, td, S)
        kept_s = neighbourhood.drop_row(kept_s + hs, S)
        kept_d = neighbourhood.drop_row(kept_d + hd, S)
    ahead = _lane_values(x_base, h0 + R, H, col_offs, col_ins, sxh, bv, c, BORDER, NEAR, OFF64)
    for o in range(h0, tl.minimum(h0 + SEG, H)):
        hs, hd = _row_sums(ahead, ts, td, S)
        ahead = _lane_values(x_base, o + R + 1, H, col_offs, col_ins, sxh, bv, c, BORDER, NEAR, OFF64)
        window_s = kept_s + hs
        window_d = kept_d + hd
        y_row = y_base + offset(o, syh, OFF64)
        for s in tl.static_range(S):
            gx = ts[0] * window_d[s]
            gy = td[0] * window_s[s]
            for u in tl.static_range(1, K):
                gx += ts[u] * window_d[u * S + s]
                gy += td[u] * window_s[u * S + s]
            gx *= scale
            gy *= scale
            cols = lanes + s
            y_ptrs = y_row + offset(cols, SYW, OFF64)
            pixels.store(y_ptrs, tl.sqrt(gx * gx + gy * gy), cols < W)
            if DIRECTION:
                pixels.store(y_ptrs + syd, atan2(gy, gx), cols < W)
        kept_s = neighbourhood.drop_row(window_s, S)
        kept_d = neighbourhood.drop_row(window_d, S)


def launch(x, y, smooth, derivative, border=0, border_value=0.0, direction=None):
    """|gradient| of 4-D ``x`` (B, C, H, W) into 4-D ``y``, and atan2(gy, gx) at
    ``direction`` elements past each magnitude (the same strides) when it is given; the
    taps float32 on the device, one odd length, ``border`` a code from ``core.borders``."""
    B, C, H, W = x.shape
    r = smooth.shape[0] // 2
    args = (x, y, smooth, derivative, C, H, W, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1),
            y.stride(2), direction or 0, float(border_value))
    # NEAR: every row and column an output reads lies within one image size of the image
    meta = dict(R=r, SXW=x.stride(3), SYW=y.stride(3), BORDER=border, NEAR=r < H and r < W,
                OFF64=needs_int64(x, y), DIRECTION=direction is not None)
    if interpreting():  # (one program a plane; S = 2 keeps the lanes' column arithmetic in the tests)
        bw, s, seg = pow2_at_least(-(-W // 2), 1, 1 << 20), 2, H
    else:
        bw, s, seg = TILE
    launch_kernel(gradient_kernel, lambda m: (programs(B * C, H, W, seg, bw * s),), args, meta, x,
                  tile_config(BW=bw, S=s, SEG=seg, num_warps=1 if interpreting() else 4))
