"""Gradient magnitude (and direction) on the CPU engine.

A task is a band of rows of one plane. Each input row is loaded once (converted, the ends
extended by the border) and run through both horizontal passes, the smoothing taps and
the derivative taps, into two rings of the last ``k`` results; an output row is then
``gx = sum_u ts[u] * hd[u]`` and ``gy = sum_u td[u] * hs[u]`` over the rings (one
vectorised pass a ring row), ``sqrt(gx^2 + gy^2)`` and, for the direction, ``atan2``.
Integer pixels are read as their values, the unit scale applied to the sums.
"""
import math

import numpy as np

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import FLOAT, IMAGE, INDEX, INT, ROW, TABLE, f32


@core.jit
def _correlate(dst, src, taps, n):
    """dst[j] = sum_v taps[v] * src[j + v] for j < n."""
    core.fill(dst, f32(0.0), n)
    for v in range(taps.shape[0]):
        core.axpy(dst, src[v:], taps[v], n)


@core.kernel(*IMAGE, *IMAGE, *IMAGE, ROW, ROW, INDEX, INDEX, FLOAT, FLOAT, INT, INT, INT, ROW, TABLE, TABLE, ROW,
             ROW)
def _gradient(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, du8, du16, df32, dkind, ts, td, rows, edges,
              border_value, unit, direction, n_bands, band_rows, pad, smooth, deriv, gx, gy):
    """Tasks ``lo .. hi - 1`` of ``planes * n_bands``: Y = |(gx, gy)| and, with
    ``direction``, D = atan2(gy, gx) (``rows``, ``edges``: the border maps). Buffers:
    ``pad`` (W + k - 1), the rings ``smooth`` and ``deriv`` (k, W), ``gx``, ``gy`` (W)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    k = ts.shape[0]
    r = k // 2
    for t in range(lo, hi):
        plane, band = t // n_bands, t % n_bands
        b, c = plane // C, plane % C
        i0 = band * band_rows
        i1 = min(H, i0 + band_rows)
        first = i0 - r
        for i in range(first, i1 + r):
            row = rows[i + r]
            if row < 0:
                core.fill(pad, border_value, W + 2 * r)
            else:
                core.load_row(xu8, xu16, xf32, kin, b, c, row, pad[r:], f32(1.0))
                core.fill_edges(pad, r, W, edges, border_value)
            slot = (i - first) % k
            _correlate(smooth[slot], pad, ts, W)
            _correlate(deriv[slot], pad, td, W)
            o = i - r
            if o < i0:
                continue
            base = o - r - first
            core.fill(gx, f32(0.0), W)
            core.fill(gy, f32(0.0), W)
            for u in range(k):
                core.axpy(gx, deriv[(base + u) % k], ts[u], W)
                core.axpy(gy, smooth[(base + u) % k], td[u], W)
            for j in range(W):
                a, e = gx[j] * unit, gy[j] * unit
                gx[j], gy[j] = a, e
                pad[j] = np.sqrt(a * a + e * e)  # (pad is free until the next input row)
            core.store_row(yu8, yu16, yf32, kout, b, c, o, pad)
            if direction:
                for j in range(W):
                    pad[j] = math.atan2(gy[j], gx[j])
                core.store_row(du8, du16, df32, dkind, b, c, o, pad)


def gradient_magnitude(img, y, smooth, derivative, code, border_value, direction=None):
    """|gradient| of ``img`` into ``y`` (and atan2(gy, gx) into ``direction``), the
    float64 taps ``smooth`` and ``derivative`` of one odd length, under the border ``code``."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    xs = cpu.image_args(x4)
    unit = cpu.unit_scale(xs[3])
    out = cpu.Output(_image.as_planes(y))
    out_d = cpu.Output(_image.as_planes(direction)) if direction is not None else None
    k = smooth.shape[0]
    r = k // 2
    n_bands, band_rows = cpu.bands(B * C, H, min_rows=max(16, 2 * k))
    cpu.run(_gradient, B * C * n_bands, *xs, *out.args, *(out_d.args if out_d else out.args),
            smooth.numpy().astype(np.float32), derivative.numpy().astype(np.float32),
            cpu.border_map(H, r, r, code), cpu.edge_map(W, r, r, code), f32(border_value / unit), f32(unit),
            direction is not None, n_bands, band_rows,
            scratch=(((W + 2 * r,), np.float32), ((k, W), np.float32), ((k, W), np.float32), ((W,), np.float32),
                     ((W,), np.float32)))
    out.finish()
    if out_d:
        out_d.finish()
    return y
