"""Gradient magnitude (and direction) in one launch: both first derivatives of a window
read once.

``gradient_kernel`` gives each program a ``BH x BW`` tile of one plane. For each of the
``2R + 1`` window rows it loads the row's ``2R + 1`` shifted tiles (L1 hits after the
first use of each pixel) and runs both horizontal passes on them, the smoothing taps
``TS`` and the derivative taps ``TD``; the vertical pass adds them into
``gx = sum_u TS[u] * hd_u`` and ``gy = sum_u TD[u] * hs_u``. The epilogue stores
``sqrt(gx^2 + gy^2)`` and, with ``DIRECTION``, ``atan2(gy, gx)`` into a second plane.
Tiles whose window lies inside the image (most) read plain offsets, contiguous columns
that load as vectors; the others remap column indices through the border once per tile,
row indices once per window row. The tap loop is loads and FMAs: ``4 (2R+1)^2`` FMAs and ``(2R+1)^2``
loads a pixel, 36 and 9 for 3 x 3 (4K RGB float32: 0.22 G loads, 0.9 G FMAs, and 200 MB
of one read and one write: about 0.04 ms of memory time on the H200, which bounds it).

The window rows are a run-time loop (a compile does not grow with the aperture, up to
31); the columns are unrolled.
"""
import triton
import triton.language as tl

from .core import borders, neighbourhood, pixels
from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin

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
def _window_sums(x_base, rows, cols, H, W, sxh, TS, TD, bv, c, R: tl.constexpr, SXW: tl.constexpr,
                 BORDER: tl.constexpr, OFF64: tl.constexpr, INTERIOR: tl.constexpr):
    """(gx, gy) of the tile before the scale: its window rows and columns as they are when
    ``INTERIOR``, else through the border (``bv`` the constant border in stored units)."""
    col_offs = ()
    col_ins = ()
    for v in tl.static_range(2 * R + 1):
        cv = cols + (v - R)
        if INTERIOR:
            col_offs = col_offs + (offset(cv, SXW, OFF64),)
        else:
            col_offs = col_offs + (offset(borders.remap(cv, W, BORDER), SXW, OFF64),)
            col_ins = col_ins + (borders.inside(cv, W),)
    ts = ()
    td = ()
    for v in tl.static_range(2 * R + 1):
        ts = ts + (tl.load(TS + v),)
        td = td + (tl.load(TD + v),)
    gx = tl.zeros(rows.shape, dtype=tl.float32) + tl.zeros(cols.shape, dtype=tl.float32)
    gy = tl.zeros_like(gx)
    for u in range(2 * R + 1):
        r = rows + (u - R)
        hs = tl.zeros_like(gx)
        hd = tl.zeros_like(gx)
        if INTERIOR:
            row_ptr = x_base + offset(r, sxh, OFF64)
            for v in tl.static_range(2 * R + 1):
                x = neighbourhood.load(row_ptr + col_offs[v], None, bv, c, (), (), neighbourhood.LINEAR, BORDER)
                hs += ts[v] * x
                hd += td[v] * x
        else:
            row_ptr = x_base + offset(borders.remap(r, H, BORDER), sxh, OFF64)
            row_in = borders.inside(r, H)
            for v in tl.static_range(2 * R + 1):
                x = neighbourhood.load(row_ptr + col_offs[v], row_in & col_ins[v], bv, c, (), (),
                                       neighbourhood.LINEAR, BORDER)
                hs += ts[v] * x
                hd += td[v] * x
        gx += tl.load(TS + u) * hd
        gy += tl.load(TD + u) * hs
    return gx, gy


@triton.jit
def gradient_kernel(X, Y, TS, TD, C, H, W, sxb, sxc, sxh, syb, syc, syh, syd, border_value,
                    R: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                    OFF64: tl.constexpr, DIRECTION: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """Y[b, c, i, j] = |(gx, gy)| with gx = sum_{u,v} TS[u] TD[v] X~[b, c, i+u-R, j+v-R] and
    gy = sum_{u,v} TD[u] TS[v] X~[...], X~ being X (unit scale) extended by the border;
    with ``DIRECTION`` also Y[b, c, i, j + syd] = atan2(gy, gx) (``syd``: the offset of
    the direction's planes, in elements)."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    scale = neighbourhood.linear_scale(X.dtype.element_ty, ())  # applied once, to the sums
    bv = border_value / scale
    # tiles whose window lies inside the image (most) read plain offsets: contiguous columns
    # the compiler loads as vectors; the rest remap every index through the border
    if (h0 >= R) & (h0 + BH + R <= H) & (w0 >= R) & (w0 + BW + R <= W):
        gx, gy = _window_sums(x_base, rows, cols, H, W, sxh, TS, TD, bv, c, R, SXW, BORDER, OFF64, True)
    else:
        gx, gy = _window_sums(x_base, rows, cols, H, W, sxh, TS, TD, bv, c, R, SXW, BORDER, OFF64, False)
    gx *= scale
    gy *= scale
    mask = (rows < H) & (cols < W)
    y_ptrs = Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, SYW, OFF64)
    pixels.store(y_ptrs, tl.sqrt(gx * gx + gy * gy), mask)
    if DIRECTION:
        pixels.store(y_ptrs + syd, atan2(gy, gx), mask)


def launch(x, y, smooth, derivative, border=0, border_value=0.0, direction=None):
    """|gradient| of 4-D ``x`` (B, C, H, W) into 4-D ``y``, and atan2(gy, gx) at
    ``direction`` elements past each magnitude (the same strides) when it is given; the
    taps float32 on the device, one odd length, ``border`` a code from ``core.borders``."""
    B, C, H, W = x.shape
    args = (x, y, smooth, derivative, C, H, W, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1),
            y.stride(2), direction or 0, float(border_value))
    meta = dict(R=smooth.shape[0] // 2, SXW=x.stride(3), SYW=y.stride(3), BORDER=border, OFF64=needs_int64(x, y),
                DIRECTION=direction is not None)
    if interpreting():  # one tile a plane where the tensor limit allows: the interpreter pays per operation
        bw = pow2_at_least(W, 1, 1024)
        tile = tile_config(BH=pow2_at_least(H, 1, tl.TRITON_MAX_TENSOR_NUMEL // 16 // bw), BW=bw)
    else:
        tile = tile_config(BH=16, BW=64, num_warps=4)
    launch_kernel(gradient_kernel, lambda m: (programs(B * C, H, W, m["BH"], m["BW"]),), args, meta, x, tile)
