"""General 2-D correlation on the CPU engine, one kernel for the batch or one per image.

A task is a band of rows of one plane. Its input rows are loaded once each (converted,
through the prologue, the ends extended by the border) into a ring of the last ``kh``
padded rows; each output row is then ``sum_u sum_v k[u, v] * ring[u][j + v]``: one vectorised pass over the row per tap,
the accumulator staying in L1 (passes of four taps, ``core.combine_shifted``, ran at half
the speed on rows of 256 pixels: their setup per pass costs as much as the pass).
Without a prologue, integer pixels are read as their values, the unit scale on the taps.
"""
import numpy as np
import torch

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, FLOAT, IMAGE, INDEX, INT, ROW, TABLE, f32

KERNELS = core.array("float32", 3, "C")  # (B or 1, kh, kw)


@core.kernel(*IMAGE, *IMAGE, KERNELS, INDEX, INDEX, FLOAT, FLOAT, FLOAT, CHAIN, CHAIN, INT, INT, TABLE, ROW, ROW)
def _filter2d(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, k, rows, edges, border_value, in_scale, unit,
              pro, epi, n_bands, band_rows, ring, acc, xin):
    """Tasks ``lo .. hi - 1`` of ``planes * n_bands``: Y = EPI(sum_{u,v} k[b, u, v] PRO(X~)[i + u - ry,
    j + v - rx]); ``rows``, ``edges``, ``in_scale`` and ``unit`` as in the separable kernel.
    Buffers: ``ring`` (kh, W + 2 rx), ``acc`` and ``xin`` (W)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    kh, kw = k.shape[1], k.shape[2]
    rx, ry = kw // 2, kh // 2
    wp = W + 2 * rx
    reads = core.reads_input(epi)
    for t in range(lo, hi):
        plane, band = t // n_bands, t % n_bands
        b, c = plane // C, plane % C
        taps = k[b if k.shape[0] > 1 else 0]
        i0 = band * band_rows
        i1 = min(H, i0 + band_rows)
        first = i0 - ry
        for i in range(first, i1 + ry):
            pad = ring[(i - first) % kh]
            r = rows[i + ry]
            if r < 0:
                core.fill(pad, border_value, wp)
            else:
                core.load_row(xu8, xu16, xf32, kin, b, c, r, pad[rx:], in_scale)
                core.apply_chain(pad[rx:], xin, W, pro[c])
                core.fill_edges(pad, rx, W, edges, border_value)
            o = i - ry
            if o < i0:
                continue
            base = o - ry - first
            core.fill(acc, f32(0.0), W)
            for u in range(kh):
                src = ring[(base + u) % kh]
                for v in range(kw):
                    core.axpy(acc, src[v:], taps[u, v], W)
            if reads:
                core.load_row(xu8, xu16, xf32, kin, b, c, o, xin, unit)
                core.apply_chain(xin, xin, W, pro[c])
            core.apply_chain(acc, xin, W, epi[c])
            core.store_row(yu8, yu16, yf32, kout, b, c, o, acc)


def filter2d(img, kernel, code, border_value, fusion=None):
    """``img`` correlated with ``kernel`` ((kh, kw) or (B, kh, kw), any float dtype) under
    the border ``code``, with ``fusion``'s prologue and epilogue."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    pro, epi, dtype = cpu.fused(fusion, C, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    out = cpu.Output(_image.as_planes(y))
    xs = cpu.image_args(x4)
    unit = cpu.unit_scale(xs[3])
    linear = pro.shape[1] == 0
    k = kernel.detach().to("cpu", torch.float64)
    k = (k if k.ndim == 3 else k[None]) * (unit if linear else 1.0)
    kh, kw = k.shape[-2:]
    n_bands, band_rows = cpu.bands(B * C, H, min_rows=max(16, 2 * kh))
    cpu.run(_filter2d, B * C * n_bands, *xs, *out.args, np.ascontiguousarray(k.numpy(), dtype=np.float32),
            cpu.border_map(H, kh // 2, kh // 2, code), cpu.edge_map(W, kw // 2, kw // 2, code),
            f32(border_value / unit if linear else border_value), f32(1.0 if linear else unit), f32(unit),
            pro, epi, n_bands, band_rows,
            scratch=(((kh, W + 2 * (kw // 2)), np.float32), ((W,), np.float32), ((W,), np.float32)))
    out.finish()
    return y
