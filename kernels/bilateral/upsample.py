"""Joint bilateral upsampling, ``upsample_kernel``, its gradient,
``upsample_backward_kernel``, and their launches.

The forward works on rows as the filter does (``forward.py``): each low-resolution sample
a column reaches is read once for the K output rows of a program. The gradient works on
``(CP, BH, BW)`` blocks of all channels at once, its window as run-time loops (unrolled
columns took 74 s to compile at radius 8)."""
import triton
import triton.language as tl

from . import plan as plans, tiles
from .common import LOG2E, _distance2, _distance2_grad, _exponent, _guide_batch_stride, _output_tile, _vectors, _wide
from ..core import borders, pixels
from ..core.launch import launch as launch_kernel, tile_config
from ..core.tiling import (cdiv, interpreting, needs_int64, next_pow2, offset, pow2_at_least, programs, size_class,
                           tile_origin)


@triton.jit
def _exact(i, WIDE: tl.constexpr):
    """Integer positions as int64 when their products with the sizes can pass 2**31."""
    if WIDE:
        return i.to(tl.int64)
    else:
        return i


@triton.jit
def _nearest_sample(i, n_low, n_high, WIDE: tl.constexpr):
    """The low-resolution sample nearest to output pixel i's centre, floor((i + 0.5) *
    n_low / n_high), in exact integers: float32 ratios put ties on the wrong side."""
    return ((_exact(2 * i + 1, WIDE) * n_low) // (2 * n_high)).to(tl.int32)


@triton.jit
def _twice_offset(i, a, n_low, n_high, WIDE: tl.constexpr):
    """2 n_high (u_i - a), u_i = (i + 0.5) n_low / n_high - 0.5 being output i's centre in
    low-resolution pixels: an integer, exact before its conversion. (Float32 positions
    lose ~1e-4 px at 2K, which a small sigma_color amplifies.)"""
    return (_exact(2 * i + 1, WIDE) * n_low - _exact(2 * a + 1, WIDE) * n_high).to(tl.float32)


@triton.jit
def _distance_to_sample2(i, a, n_low, n_high, WIDE: tl.constexpr):
    """(u_i - a)^2 in low-resolution pixels (``_twice_offset``)."""
    d = _twice_offset(i, a, n_low, n_high, WIDE) / (2.0 * n_high)
    return d * d


@triton.jit
def _bilinear_source(a, n_low, n_high, WIDE: tl.constexpr):
    """Pixel and weight of the bilinear sample at low-resolution sample a's centre on the
    high-resolution axis: (a + 0.5) n_high / n_low - 0.5, clamped at 0, in integers."""
    num = tl.maximum(_exact(2 * a + 1, WIDE) * n_high - n_low, 0)
    i0 = num // (2 * n_low)
    return i0.to(tl.int32), (num - i0 * 2 * n_low).to(tl.float32) / (2.0 * n_low)


@triton.jit
def _guide_sample(g_base, chg, n_ch, sgc, a, bcol, h, w, H, W, sgh, sgw, WIDE: tl.constexpr, OFF64: tl.constexpr):
    """The guide resampled at low-resolution samples (a, bcol) (in-range indices):
    bilinear at (a + 0.5) * H / h - 0.5 clamped at 0, as ``F.interpolate(...,
    mode="bilinear", align_corners=False)``. Returns (CGP, BH, BW)."""
    y0, ly = _bilinear_source(a, h, H, WIDE)
    x0, lx = _bilinear_source(bcol, w, W, WIDE)
    ly = ly[None, :, None]
    lx = lx[None, None, :]
    y1 = tl.minimum(y0 + 1, H - 1)
    x1 = tl.minimum(x0 + 1, W - 1)
    valid = (chg < n_ch)[:, None, None]
    c_off = offset(chg, sgc, OFF64)[:, None, None]
    r0 = offset(y0, sgh, OFF64)[None, :, None]
    r1 = offset(y1, sgh, OFF64)[None, :, None]
    k0 = offset(x0, sgw, OFF64)[None, None, :]
    k1 = offset(x1, sgw, OFF64)[None, None, :]
    top = ((1.0 - lx) * pixels.load(g_base + (c_off + r0 + k0), valid)
           + lx * pixels.load(g_base + (c_off + r0 + k1), valid))
    bot = ((1.0 - lx) * pixels.load(g_base + (c_off + r1 + k0), valid)
           + lx * pixels.load(g_base + (c_off + r1 + k1), valid))
    return tl.where(valid, (1.0 - ly) * top + ly * bot, 0.0)


@triton.jit
def _upsample_tap(l_base, g_base, ch, chg, C, CG, slc, sgc, a, a_ok, bcol, h, w, H, W, slh, slw, sgh, sgw,
                  border_value, BORDER: tl.constexpr, WIDE: tl.constexpr, OFF64: tl.constexpr):
    """Values and guide of the low-resolution samples (a, bcol), border applied."""
    ar = borders.remap(a, h, BORDER)
    vals = _vectors(l_base, ch, C, slc, ar, a_ok, bcol, h, w, slh, slw, border_value, BORDER, OFF64)
    g = _guide_sample(g_base, chg, CG, sgc, ar, borders.remap(bcol, w, BORDER), h, w, H, W, sgh, sgw, WIDE, OFF64)
    if BORDER == borders.CONSTANT:
        ok = a_ok[:, None] & borders.inside(bcol, w)[None, :]
        valid = (chg < CG)[:, None, None]
        g = tl.where(ok[None, :, :] & valid, g, tl.where(valid, border_value, 0.0))
    return vals, g


@triton.jit
def _where(ok, vectors, other):
    """Each vector where ``ok``, else ``other``."""
    out = ()
    for c in tl.static_range(len(vectors)):
        out = out + (tl.where(ok, vectors[c], other),)
    return out


@triton.jit
def upsample_kernel(L, G, Y, COLOR, SPACE, C, h, w, H, W, l_strides, g_strides, y_strides,
                    border_value, CV: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, DISK: tl.constexpr,
                    L1: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, WIDE: tl.constexpr,
                    OFF64: tl.constexpr, SIZE_CLASS, K: tl.constexpr, BW: tl.constexpr):
    """Joint bilateral upsampling of L (B, C, h, w) to the guide's H x W (see
    ``reference.bilateral.joint_bilateral_upsample``). Positions are exact integer
    ratios. No prologue or epilogue: joint upsampling is not fusable (``imgfilters.fuse``
    has no transform that makes it).

    As the filter, on rows: every value is one row of one channel, BW output columns
    (one per thread). A program owns K output rows and CV of the C channels. For each
    low-resolution row that one of its rows reaches and each column offset dx, the
    samples (a, b0 + dx) of its columns (b0: each column's nearest) are read once, their
    CV values and their CG guide values (bilinear from the guide), and added to each of
    the K rows within R of them. The guide is prescaled by sqrt(-COLOR[b]), so the
    exponent is (spatial term - squared scaled distance).

    Unlike the filter, no tap is certain to weigh 1 (the centre), and with a small
    sigma_color every weight can underflow: the sums are kept relative to the largest
    exponent so far (online softmax's running maximum), with one exp2 a tap: 2^-|e - top|
    is the new tap's weight when e <= top, else the old sums' rescaling."""
    b, group, h0, w0 = tile_origin(tl.program_id(0), tl.cdiv(C, CV), H, W, K, BW)
    cols = w0 + tl.arange(0, BW)
    col_ok = cols < W
    cols = tl.minimum(cols, W - 1)  # (columns past the image are computed as the last, not stored)
    sl = _wide(l_strides[1:], OFF64)
    sg = _wide(g_strides[1:], OFF64)
    sy = _wide(y_strides[1:], OFF64)
    space = tl.load(SPACE + b)
    gscale = tl.sqrt(-tl.load(COLOR + b))
    graw = gscale * pixels.unit_scale(G.dtype.element_ty)  # stored guide values to prescaled ones
    c0 = (group * CV).to(tl.int32)
    l_base = L + b * l_strides[0]
    g_base = G + b * g_strides[0]
    b0 = _nearest_sample(cols, w, W, WIDE)

    # per output row k: its nearest sample row, (2 i + 1) h for its spatial terms, its
    # prescaled guide values, its sums
    a0 = ()
    twice_u = ()
    centre = ()
    num = ()
    den = ()
    top = ()
    zero = tl.zeros((BW,), dtype=tl.float32)
    for k in tl.static_range(K):
        i = tl.minimum(h0 + k, H - 1)  # (rows past the image are computed as the last, not stored)
        a0 = a0 + (_nearest_sample(i, h, H, WIDE),)
        twice_u = twice_u + (_exact(2 * i + 1, WIDE) * h,)
        row = g_base + i * sg[1] + cols * sg[2]
        for c in tl.static_range(CG):
            centre = centre + (pixels.load_raw(row + c * sg[0]) * graw,)
        for _ in tl.static_range(CV):
            num = num + (zero,)
        den = den + (zero,)
        top = top + (zero - float("inf"),)
    # the spatial terms are exact integer offsets (``_twice_offset``) squared, times these
    space_u = space / (2.0 * H) / (2.0 * H)
    space_v = space / (2.0 * W) / (2.0 * W)
    for dx in range(-R, R + 1):
        # the columns' samples, and what of their bilinear guide and their distance the rows share
        bcol = b0 + dx
        if NEAR:
            br = borders.remap_near(bcol, w, BORDER)
        else:
            br = borders.remap(bcol, w, BORDER)
        x0, lx = _bilinear_source(br, w, W, WIDE)
        k0 = x0 * sg[2]
        k1 = tl.minimum(x0 + 1, W - 1) * sg[2]
        l_col = l_base + br * sl[2]
        t = _twice_offset(cols, bcol, w, W, WIDE)
        space_x = space_v * t * t
        for a in range(a0[0] - R, a0[K - 1] + R + 1):
            if NEAR:
                ar = borders.remap_near(a, h, BORDER)
            else:
                ar = borders.remap(a, h, BORDER)
            y0, ly = _bilinear_source(ar, h, H, WIDE)
            g_row0 = g_base + y0 * sg[1]
            g_row1 = g_base + tl.minimum(y0 + 1, H - 1) * sg[1]
            vals = ()
            for c in tl.static_range(CV):
                vals = vals + (pixels.load(l_col + tl.minimum(c0 + c, C - 1) * sl[0] + ar * sl[1]),)
            g = ()
            for c in tl.static_range(CG):
                t0 = pixels.load_raw(g_row0 + c * sg[0] + k0)
                t0 = t0 + lx * (pixels.load_raw(g_row0 + c * sg[0] + k1) - t0)
                t1 = pixels.load_raw(g_row1 + c * sg[0] + k0)
                t1 = t1 + lx * (pixels.load_raw(g_row1 + c * sg[0] + k1) - t1)
                g = g + ((t0 + ly * (t1 - t0)) * graw,)
            if BORDER == borders.CONSTANT:  # samples outside the grid are the border value
                ok = borders.inside(a, h) & borders.inside(bcol, w)
                vals = _where(ok, vals, border_value)
                g = _where(ok, g, border_value * gscale)
            twice_a = _exact(2 * a + 1, WIDE) * H
            for k in tl.static_range(K):
                dy = a - a0[k]
                take = dy * dy <= R * R
                if DISK:
                    take = take & (dx * dx + dy * dy <= R * R)
                if take:
                    u = (twice_u[k] - twice_a).to(tl.float32)
                    e = _exponent(space_u * u * u + space_x, g, centre[k * CG:k * CG + CG], L1)
                    d = e - top[k]
                    x = tl.exp2(-tl.abs(d))
                    up = d > 0
                    rescale = tl.where(up, x, 1.0)
                    wt = tl.where(up, 1.0, x)
                    for c in tl.static_range(CV):
                        num = num[:k * CV + c] + (num[k * CV + c] * rescale + wt * vals[c],) + num[k * CV + c + 1:]
                    den = den[:k] + (den[k] * rescale + wt,) + den[k + 1:]
                    top = top[:k] + (tl.maximum(top[k], e),) + top[k + 1:]

    y_base = Y + b * y_strides[0]
    for k in tl.static_range(K):
        i = h0 + k
        inv = 1.0 / den[k]
        for c in tl.static_range(CV):
            pixels.store(y_base + (c0 + c) * sy[0] + i * sy[1] + cols * sy[2], num[k * CV + c] * inv,
                         col_ok & (i < H) & (c0 + c < C))


@triton.jit
def upsample_backward_kernel(L, G, GO, DL, DGL, DGH, COLOR, SPACE, C, CG, h, w, H, W,
                             l_strides, g_strides, border_value,
                             R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr, BORDER: tl.constexpr,
                             WIDE: tl.constexpr, OFF64: tl.constexpr, CP: tl.constexpr, CGP: tl.constexpr,
                             BH: tl.constexpr, BW: tl.constexpr):
    """The gradient of ``upsample_kernel``, on (CP, BH, BW) blocks of all channels. GO is
    dL/dY (contiguous float32); the program adds dL/dL into DL (B, C, h, w) and
    dL/d(resampled guide) into DGL (B, CG, h, w) with atomics (a low-resolution sample is
    shared by many outputs), and stores dL/dG at its own pixels into DGH (B, CG, H, W); all
    contiguous float32. The forward sums are recomputed first (relative to their running
    maximum, as the forward), so nothing per tap is ever stored."""
    slb, slc, slh, slw = l_strides
    sgb, sgc, sgh, sgw = g_strides
    b, color, space, ch, chg, rows, cols = _output_tile(COLOR, SPACE, H, W, CP, CGP, BH, BW)
    l_base = L + b * slb
    g_base = G + b * sgb
    inside_out = (rows < H)[:, None] & (cols < W)[None, :]
    a0 = _nearest_sample(rows, h, H, WIDE)
    b0 = _nearest_sample(cols, w, W, WIDE)
    g_p = _vectors(g_base, chg, CG, sgc, tl.minimum(rows, H - 1), rows < H, tl.minimum(cols, W - 1), H, W,
                   sgh, sgw, 0.0, borders.REPLICATE, OFF64)

    num = tl.zeros((CP, BH, BW), dtype=tl.float32)
    den = tl.zeros((BH, BW), dtype=tl.float32)
    top = tl.full((BH, BW), -float("inf"), dtype=tl.float32)
    for dy in range(-R, R + 1):
        a = a0 + dy
        a_ok = borders.inside(a, h)
        du2 = _distance_to_sample2(rows, a, h, H, WIDE)
        for dx in range(-R, R + 1):
            if (not DISK) or (dx * dx + dy * dy <= R * R):
                bcol = b0 + dx
                vals, g = _upsample_tap(l_base, g_base, ch, chg, C, CG, slc, sgc, a, a_ok, bcol, h, w, H, W, slh,
                                        slw, sgh, sgw, border_value, BORDER, WIDE, OFF64)
                dv2 = _distance_to_sample2(cols, bcol, w, W, WIDE)
                expo = space * (du2[:, None] + dv2[None, :]) + color * _distance2(g - g_p, L1)
                new_top = tl.maximum(top, expo)
                rescale = tl.exp2(top - new_top)
                wt = tl.exp2(expo - new_top)
                num = num * rescale[None, :, :] + wt[None, :, :] * vals
                den = den * rescale + wt
                top = new_top
    y = num / den[None, :, :]
    out_offs = ((b * C + ch)[:, None, None].to(tl.int64) * H * W
                + (rows[:, None].to(tl.int64) * W + cols[None, :])[None, :, :])
    out_mask = (ch < C)[:, None, None] & inside_out[None, :, :]
    k = color / LOG2E
    a_p = tl.load(GO + out_offs, out_mask, other=0.0) / den[None, :, :]
    beta = tl.sum(a_p * y, axis=0)
    dg_p = tl.zeros((CGP, BH, BW), dtype=tl.float32)
    for dy in range(-R, R + 1):
        a = a0 + dy
        a_ok = borders.inside(a, h)
        ar = borders.remap(a, h, BORDER)
        du2 = _distance_to_sample2(rows, a, h, H, WIDE)
        for dx in range(-R, R + 1):
            if (not DISK) or (dx * dx + dy * dy <= R * R):
                bcol = b0 + dx
                vals, g = _upsample_tap(l_base, g_base, ch, chg, C, CG, slc, sgc, a, a_ok, bcol, h, w, H, W,
                                        slh, slw, sgh, sgw, border_value, BORDER, WIDE, OFF64)
                dv2 = _distance_to_sample2(cols, bcol, w, W, WIDE)
                diff = g_p - g
                # the same weights relative to the same maximum as ``den``
                wt = tl.exp2(space * (du2[:, None] + dv2[None, :]) + color * _distance2(diff, L1) - top)
                wt = tl.where(inside_out, wt, 0.0)
                e = (tl.sum(a_p * vals, axis=0) - beta) * wt * k
                jac = _distance2_grad(diff, L1)
                dg_p += e[None, :, :] * jac
                # scatter to the sample read (a constant border's samples are no pixel)
                src = (ar[:, None].to(tl.int64) * w + borders.remap(bcol, w, BORDER)[None, :])[None, :, :]
                ok = inside_out
                if BORDER == borders.CONSTANT:
                    ok = ok & a_ok[:, None] & borders.inside(bcol, w)[None, :]
                tl.atomic_add(DL + (b * C + ch)[:, None, None].to(tl.int64) * h * w + src,
                              wt[None, :, :] * a_p, mask=(ch < C)[:, None, None] & ok[None, :, :])
                tl.atomic_add(DGL + (b * CG + chg)[:, None, None].to(tl.int64) * h * w + src,
                              -e[None, :, :] * jac, mask=(chg < CG)[:, None, None] & ok[None, :, :])
    g_offs = ((b * CG + chg)[:, None, None].to(tl.int64) * H * W
              + (rows[:, None].to(tl.int64) * W + cols[None, :])[None, :, :])
    tl.store(DGH + g_offs, dg_p, (chg < CG)[:, None, None] & inside_out[None, :, :])


def _upsample_meta(low, guide, radius, disk, l1, border, *tensors):
    """The constexprs shared by the upsampling kernels."""
    h, w = low.shape[-2:]
    H, W = guide.shape[-2:]
    # exact positions multiply indices (past the grid by up to R) by the other size
    wide = max((2 * (h + radius) + 1) * H, (2 * H + 1) * h, (2 * (w + radius) + 1) * W, (2 * W + 1) * w) >= 2 ** 31
    return dict(R=radius, DISK=disk, L1=l1, BORDER=border, WIDE=wide, OFF64=needs_int64(low, guide, *tensors))


def launch_upsample(low, guide, y, color, space, radius, disk, l1, border=0, border_value=0.0, tile=None):
    """Joint bilateral upsampling of 4-D ``low`` (B, C, h, w) into ``y`` (B, C, H, W) with
    ``guide`` (batch B or 1, CG, H, W). ``tile``, a ``triton.Config`` of K, BW and
    num_warps, bypasses the tile choice."""
    B, C, h, w = low.shape
    CG, H, W = guide.shape[1:]
    args = (low, guide, y, color, space, C, h, w, H, W, low.stride(), (_guide_batch_stride(guide, B),
            *guide.stride()[1:]), y.stride(), float(border_value))
    meta = dict(_upsample_meta(low, guide, radius, disk, l1, border, y), CV=min(C, tiles.UPSAMPLE_CHANNELS), CG=CG,
                NEAR=radius < min(h, w), SIZE_CLASS=size_class(H, W))
    groups = cdiv(C, meta["CV"])
    if tile is None and interpreting():  # few programs: the interpreter's cost is per operation
        tile = tile_config(K=min(H, 16), BW=pow2_at_least(W, 16, 128))
    launch_kernel(upsample_kernel, lambda m: (programs(B * groups, H, W, m["K"], m["BW"]),), args, meta, low,
                  tile or plans.upsample_tile(meta))


def launch_upsample_backward(low, guide, grad, d_low, d_guide_low, d_guide, color, space, radius, disk, l1,
                             border=0, border_value=0.0):
    """The gradient of ``launch_upsample`` for the output gradient ``grad``: adds into
    ``d_low`` and ``d_guide_low`` (B, C or CG, h, w; zeroed) and stores ``d_guide`` (B, CG,
    H, W); all contiguous float32."""
    B, C, h, w = low.shape
    CG, H, W = guide.shape[1:]
    args = (low, guide, grad, d_low, d_guide_low, d_guide, color, space, C, CG, h, w, H, W, low.stride(),
            (_guide_batch_stride(guide, B), *guide.stride()[1:]), float(border_value))
    meta = dict(_upsample_meta(low, guide, radius, disk, l1, border), CP=next_pow2(C), CGP=next_pow2(CG))
    # not worth tuning (once per step); 8 x 32 keeps its blocks in registers
    tile = (tile_config(BH=pow2_at_least(H, 1, 128), BW=pow2_at_least(W, 1, 128)) if interpreting()
            else tile_config(BH=8, BW=32))
    launch_kernel(upsample_backward_kernel, lambda m: (programs(B, H, W, m["BH"], m["BW"]),), args, meta, low, tile)
