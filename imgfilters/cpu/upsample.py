"""Joint bilateral upsampling on the CPU engine (``ops.bilateral.joint_bilateral_upsample``).

A task is a band of output rows of one image. For each output row, two passes over the
window's taps: the largest exponent of each pixel, then the weights relative to it (no
tap has weight 1 here, and all of them can underflow, as the reference says). Each tap's
low-resolution samples (in unit scale, float32: a copy of the small image) and resampled
guide are gathered for a chunk of the row's columns once for all the output rows that
share their nearest sample row; the exponents and sums are loops over contiguous pixels.
A module of its own, so that the bilateral filters' first call does not compile it.
"""
import numpy as np
import torch

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import FLOAT, IMAGE, INDEX, INT, ROW, TABLE, f32
from imgfilters.cpu.fastexp import LOG2E, exp2_neg, wide_vectors

LIMIT = 1e30  # the largest coefficient (as ops.bilateral's, ``_image.finite_ratio``)
F32_4D = core.array("float32", 4, "A")
F32_3D = core.array("float32", 3, "C")
F64_2D, F64_1D = core.array("float64", 2, "C"), core.array("float64", 1, "C")
CACHE = 2 ** 18  # floats (1 MiB) of samples and exponents per column chunk


@core.jit
def _gather(Q, src, row, cols, b0, shift, x0, n, value):
    """Q[c, i] = src[c, row, cols[b0[x0 + i] + shift]] for every channel, i < n (-1 in
    ``cols`` or a ``row`` of -1: the constant border's ``value``): the low-resolution
    samples that a tap reaches from a row of output pixels."""
    for c in range(Q.shape[0]):
        if row < 0:
            for i in range(n):
                Q[c, i] = value
        else:
            for i in range(n):
                j = cols[b0[x0 + i] + shift]
                Q[c, i] = src[c, row, j] if j >= 0 else value


@core.jit
def _exponents(e, GQ, gy, x0, n, CG, srow, scol, s2, l1):
    """e[i] = srow + scol[i] - s2 D^2 between the guide row ``gy`` (CG, W) from column x0
    and the gathered samples GQ (CG, n)."""
    wide_vectors()
    for i in range(n):
        e[i] = f32(0.0)
    for c in range(CG):
        for i in range(n):
            d = GQ[c, i] - gy[c, np.uint64(x0 + i)]
            e[i] += abs(d) if l1 else d * d
    for i in range(n):
        d2 = e[i] * e[i] if l1 else e[i]
        e[i] = srow + scol[i] - s2 * d2


@core.jit
def _sums(num, den, e, top, LQ, C, n):
    """A tap's weights 2^(e - top) (overwriting e) into the float64 sums: no tap has weight
    1 first, and a float32 sum past the largest weight would round each weight below
    2^-24 of it away (thousands of them moved an output by 6e-5)."""
    wide_vectors()
    for i in range(n):
        e[i] = exp2_neg(e[i] - top[i])
        den[i] += np.float64(e[i])
    for c in range(C):
        for i in range(n):
            num[c, i] += np.float64(e[i]) * np.float64(LQ[c, i])


@core.kernel(F32_4D, *IMAGE, *IMAGE, F32_4D, ROW, ROW, INDEX, INDEX, INDEX, INDEX, INDEX, INDEX, ROW, ROW, FLOAT,
             FLOAT, INT, INT, INT, INT, TABLE, F32_3D, F32_3D, TABLE, ROW, F64_2D, F64_1D, TABLE, TABLE)
def _upsample(lo, hi, low, gu8, gu16, gf32, kg, yu8, yu16, yf32, ky, glow, colour, space, dys, dxs, rows, cols, a0, b0,
              u, v, gunit, value, l1, n_bands, band_rows, chunk, gy, GQ, LQ, E, top, num, den, scol, out):
    """Tasks lo .. hi - 1 of ``B * n_bands`` (a band of output rows of one image): joint
    bilateral upsampling of the low-resolution image ``low`` (B, C, h, w, unit scale) to
    the guide's rows and columns. ``glow`` is the guide resampled to (h, w) (batch 1 or
    B); ``rows`` and ``cols`` map the low-resolution rows and columns extended by r (-1:
    constant); ``a0``, ``b0`` are each output row's and column's nearest sample, ``u``,
    ``v`` their positions in low-resolution pixels. Columns go in chunks of ``chunk``, for
    which every tap's gathered samples stay until the nearest sample row changes (output
    rows that share it read the same samples) and every tap's exponents until both passes
    are done. Buffers (from ``run``): the guide's row gy (CG, W), the samples GQ (taps,
    CG, chunk) and LQ (taps, C, chunk), the exponents E (taps, chunk), ``top`` (chunk), the
    float64 sums ``num`` (C, chunk) and ``den`` (chunk), ``scol`` (2r + 1, chunk), an
    output row ``out`` (C, W)."""
    B, C = low.shape[:2]
    GB, CG, H, W = core.shape(gu8, gu16, gf32, kg)
    h = low.shape[2]
    taps = dys.shape[0]
    r = (rows.shape[0] - h) // 2
    for t in range(lo, hi):
        b, band = t // n_bands, t % n_bands
        bg = b if GB > 1 else 0
        bl = b if glow.shape[0] > 1 else 0
        s2, sp = colour[b], space[b]
        y0, y1 = band * band_rows, min(H, (band + 1) * band_rows)
        for y in range(y0, y1):
            for c in range(CG):
                core.load_row(gu8, gu16, gf32, kg, bg, c, y, gy[c], gunit)
            for x0 in range(0, W, chunk):
                n = min(chunk, W - x0)
                if y == y0 or a0[y] != a0[y - 1]:  # the taps' samples for this row of them
                    for k in range(2 * r + 1):
                        for i in range(n):
                            d = v[x0 + i] - f32(b0[x0 + i] + k - r)
                            scol[k, i] = sp * (d * d)
                    for k in range(taps):
                        row = rows[a0[y] + dys[k] + r]
                        _gather(GQ[k], glow[bl], row, cols, b0, dxs[k] + r, x0, n, value)
                        _gather(LQ[k], low[b], row, cols, b0, dxs[k] + r, x0, n, value)
                for i in range(n):
                    top[i] = -np.inf
                for k in range(taps):  # the largest exponent of each pixel
                    dr = u[y] - f32(a0[y] + dys[k])
                    _exponents(E[k], GQ[k], gy, x0, n, CG, sp * (dr * dr), scol[dxs[k] + r], s2, l1)
                    for i in range(n):
                        if E[k, i] > top[i]:  # (NaN never is: it stays in E, and the weight)
                            top[i] = E[k, i]
                for c in range(C):
                    for i in range(n):
                        num[c, i] = 0.0
                for i in range(n):
                    den[i] = 0.0
                for k in range(taps):  # the weights relative to it
                    _sums(num, den, E[k], top, LQ[k], C, n)
                for c in range(C):
                    for i in range(n):
                        out[c, x0 + i] = f32(num[c, i] / den[i])
            for c in range(C):
                core.store_row(yu8, yu16, yf32, ky, b, c, y, out[c])


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
    ga = cpu.image_args(g4)
    lowf = _image.to_unit(l4, torch.float32, copy=False)  # (small: the samples, read many times each)
    # columns a chunk: every tap's samples and exponents within CACHE floats
    chunk = max(16, min(W, CACHE // (len(offsets) * (C + g4.shape[1] + 1)) // 16 * 16))
    CG, taps = g4.shape[1], len(offsets)
    scratch = (((CG, W), np.float32), ((taps, CG, chunk), np.float32), ((taps, C, chunk), np.float32),
               ((taps, chunk), np.float32), ((chunk,), np.float32), ((C, chunk), np.float64), ((chunk,), np.float64),
               ((2 * radius + 1, chunk), np.float32), ((C, W), np.float32))
    cpu.run(_upsample, B * n_bands, lowf.numpy(), *ga, *out.args, glow.numpy(), colour, space, dys, dxs,
            cpu.border_map(h, radius, radius, border), cpu.border_map(w, radius, radius, border), a0, b0, u, v,
            f32(cpu.unit_scale(ga[3])), f32(border_value), int(color_distance == "l1"), n_bands, band_rows, chunk,
            scratch=scratch)
    out.finish()
    return y
