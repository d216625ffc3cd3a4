"""Joint bilateral upsampling on the CPU engine (``ops.bilateral.joint_bilateral_upsample``).

A task is a band of output rows of one image. For each output row, two passes over the
window's taps: the largest exponent of each pixel, then the weights relative to it (no
tap has weight 1 here, and all of them can underflow, as the reference says); each tap's
low-resolution samples and resampled guide are gathered for the row's columns, then the
exponents and sums are loops over contiguous pixels. A module of its own, so that the
bilateral filters' first call does not compile it.
"""
import numpy as np
import torch
from numba import types

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import FLOAT, IMAGE, INDEX, INT, ROW, f32
from imgfilters.cpu.fastexp import LOG2E, exp2_neg, wide_vectors

LIMIT = 1e30  # the largest coefficient (as ops.bilateral's, ``_image.finite_ratio``)


@core.jit
def _gather(dst, src, row, cols, b0, shift, n, value):
    """dst[x] = src[row, cols[b0[x] + shift]] for x < n (-1 in ``cols`` or a ``row`` of
    -1: the constant border's ``value``): the low-resolution samples that a row of
    output pixels reaches at one tap."""
    if row < 0:
        for x in range(n):
            dst[x] = value
        return
    for x in range(n):
        j = cols[b0[x] + shift]
        dst[x] = src[row, j] if j >= 0 else value


@core.jit
def _up_exponents(e, GQ, gy, CG, srow, scol, s2, W, l1):
    """e[x] = srow + scol[x] - s2 D^2 between the guide row ``gy`` (CG, W) and the
    gathered samples GQ (CG, W)."""
    wide_vectors()
    for x in range(W):
        e[x] = f32(0.0)
    for c in range(CG):
        for x in range(W):
            d = GQ[c, x] - gy[c, x]
            e[x] += abs(d) if l1 else d * d
    for x in range(W):
        d2 = e[x] * e[x] if l1 else e[x]
        e[x] = srow + scol[x] - s2 * d2


@core.kernel(*IMAGE, *IMAGE, *IMAGE, types.Array(types.float32, 4, "A"), ROW, ROW, INDEX, INDEX, INDEX, INDEX,
             INDEX, INDEX, ROW, ROW, FLOAT, FLOAT, FLOAT, INT, INT, INT)
def _upsample(lo, hi, lu8, lu16, lf32, kl, gu8, gu16, gf32, kg, yu8, yu16, yf32, ky, glow, colour, space, dys, dxs,
              rows, cols, a0, b0, u, v, lunit, gunit, value, l1, n_bands, band_rows):
    """Tasks lo .. hi - 1 of ``B * n_bands`` (a band of output rows of one image): joint
    bilateral upsampling of the low-resolution image L (B, C, h, w) to the guide's rows
    and columns. ``glow`` is the guide resampled to (h, w) (batch 1 or B); ``rows`` and
    ``cols`` map the low-resolution rows and columns extended by r (-1: constant); ``a0``,
    ``b0`` are each output row's and column's nearest sample, ``u``, ``v`` their positions
    in low-resolution pixels. Two passes over the taps: the largest exponent of each
    pixel, then the weights relative to it (no tap has weight 1 here, and all of them can
    underflow, as the reference says)."""
    B, C, h, w = core.shape(lu8, lu16, lf32, kl)
    GB, CG, H, W = core.shape(gu8, gu16, gf32, kg)
    taps = dys.shape[0]
    r = (rows.shape[0] - h) // 2
    gy = np.empty((CG, W), np.float32)
    GQ = np.empty((CG, W), np.float32)
    LQ = np.empty((C, W), np.float32)
    e = np.empty(W, np.float32)
    top = np.empty(W, np.float32)
    num = np.empty((C, W), np.float32)
    den = np.empty(W, np.float32)
    scol = np.empty((2 * r + 1, W), np.float32)
    lrow = np.empty((C, w), np.float32)
    for t in range(lo, hi):
        b, band = t // n_bands, t % n_bands
        bg = b if GB > 1 else 0
        bl = b if glow.shape[0] > 1 else 0
        s2, sp = colour[b], space[b]
        for k in range(2 * r + 1):
            for x in range(W):
                d = v[x] - f32(b0[x] + k - r)
                scol[k, x] = sp * (d * d)
        for y in range(band * band_rows, min(H, (band + 1) * band_rows)):
            for c in range(CG):
                core.load_row(gu8, gu16, gf32, kg, bg, c, y, gy[c], gunit)
            for x in range(W):
                top[x] = -np.inf
            for k in range(taps):
                dy, dx = dys[k], dxs[k]
                row = rows[a0[y] + dy + r]
                for c in range(CG):
                    _gather(GQ[c], glow[bl, c], row, cols, b0, dx + r, W, value)
                dr = u[y] - f32(a0[y] + dy)
                _up_exponents(e, GQ, gy, CG, sp * (dr * dr), scol[dx + r], s2, W, l1)
                for x in range(W):
                    if e[x] > top[x]:
                        top[x] = e[x]
            num[:, :] = f32(0.0)
            den[:] = f32(0.0)
            for k in range(taps):
                dy, dx = dys[k], dxs[k]
                row = rows[a0[y] + dy + r]
                for c in range(CG):
                    _gather(GQ[c], glow[bl, c], row, cols, b0, dx + r, W, value)
                for c in range(C):
                    if row >= 0:
                        core.load_row(lu8, lu16, lf32, kl, b, c, row, lrow[c], lunit)
                    _gather(LQ[c], lrow[c:c + 1], 0 if row >= 0 else -1, cols, b0, dx + r, W, value)
                dr = u[y] - f32(a0[y] + dy)
                _up_exponents(e, GQ, gy, CG, sp * (dr * dr), scol[dx + r], s2, W, l1)
                for x in range(W):
                    wt = exp2_neg(e[x] - top[x])
                    den[x] += wt
                    for c in range(C):
                        num[c, x] += wt * LQ[c, x]
            for c in range(C):
                for x in range(W):
                    num[c, x] = num[c, x] / den[x]
                core.store_row(yu8, yu16, yf32, ky, b, c, y, num[c])


def joint_bilateral_upsample(low, guide, colors, spaces, radius, window, color_distance, border, border_value):
    """``ops.bilateral.joint_bilateral_upsample``'s implementation on the engine: ``colors``
    and ``spaces`` the per-image sigmas (tuples), ``border`` a border code."""
    l4, g4 = _image.as_planes(low), _image.as_planes(guide)
    B, C, h, w = l4.shape
    H, W = g4.shape[-2:]
    y = _image.new_image(low, (*low.shape[:-2], H, W))
    out = cpu.Output(_image.as_planes(y))
    colour = np.array([_image.finite_ratio(LOG2E, 2 * s * s, LIMIT) for s in colors], np.float32)
    space = np.array([_image.finite_ratio(-LOG2E, 2 * s * s, LIMIT) for s in spaces], np.float32)
    offsets = [(dy, dx) for dy in range(-radius, radius + 1) for dx in range(-radius, radius + 1)
               if window == "square" or dy * dy + dx * dx <= radius * radius]
    dys = np.array([o[0] for o in offsets], np.int32)
    dxs = np.array([o[1] for o in offsets], np.int32)
    # the guide at the samples' centres, as the reference resamples it (float32 here)
    glow = torch.nn.functional.interpolate(_image.to_unit(g4, torch.float32), size=(h, w), mode="bilinear",
                                           align_corners=False)
    a0 = ((2 * np.arange(H, dtype=np.int64) + 1) * h // (2 * H)).astype(np.int32)
    b0 = ((2 * np.arange(W, dtype=np.int64) + 1) * w // (2 * W)).astype(np.int32)
    u = ((np.arange(H) + 0.5) * (h / H) - 0.5).astype(np.float32)
    v = ((np.arange(W) + 0.5) * (w / W) - 0.5).astype(np.float32)
    n_bands, band_rows = cpu.bands(B, H)
    la, ga = cpu.image_args(l4), cpu.image_args(g4)
    cpu.run(_upsample, B * n_bands, *la, *ga, *out.args, glow.numpy(), colour, space, dys, dxs,
            cpu.border_map(h, radius, radius, border), cpu.border_map(w, radius, radius, border), a0, b0, u, v,
            f32(cpu.unit_scale(la[3])), f32(cpu.unit_scale(ga[3])), f32(border_value),
            int(color_distance == "l1"), n_bands, band_rows)
    out.finish()
    return y
