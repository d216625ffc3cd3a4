"""Separable correlation on the CPU engine: ``separable_filter``, gaussian and box blur,
unsharp masking (an epilogue).

A task is a band of rows of one plane. It walks its input rows once, from ``ry`` rows
above the band to ``ry`` below: each row is loaded into a buffer (converted, through the
prologue), its ends extended by the border, filtered horizontally into a ring of the last
``2 ry + 1`` filtered rows; each output row is then the vertical combination of the ring's
rows, through the epilogue into the typed store. Both passes are vectorised loops over a
row that take four taps a pass (``core.combine``, ``core.combine_shifted``): one store of
the accumulator per four rows read (pairing a symmetric filter's taps to halve the
multiplies ran no faster: the loads bound these loops). Without a prologue, integer
pixels are read as their values and the unit scale rides on the horizontal taps.
"""
import numpy as np

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, FLOAT, IMAGE, INDEX, INT, ROW, SLOTS, TABLE, f32


@core.jit
def _horizontal(dst, pad, taps, offsets, zeros, n):
    """dst[j] = sum_v taps[v] * pad[j + v], j < n."""
    core.combine_shifted(dst, pad, 0, offsets, taps, taps.shape[0], zeros, n)


@core.kernel(*IMAGE, *IMAGE, ROW, ROW, INDEX, INDEX, FLOAT, FLOAT, FLOAT, CHAIN, CHAIN, INT, INT, SLOTS,
             ROW, TABLE, ROW, ROW, ROW, SLOTS)
def _separable(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, tx, ty, rows, edges, border_value, in_scale,
               unit, pro, epi, n_bands, band_rows, offsets, pad, ring, acc, xin, zeros, slots):
    """Tasks ``lo .. hi - 1`` of ``planes * n_bands``: Y = EPI(ty^T * (PRO(X~) * tx)).
    ``rows`` maps the extended rows ``-ry .. H + ry - 1`` to input rows (-1: the constant
    border), ``edges`` the extended columns outside the image (``cpu.edge_map``);
    ``in_scale`` scales loaded pixels (1 with the unit scale on ``tx``), ``unit`` takes them
    to unit scale (the epilogue's input pixel); ``offsets`` is ``0 .. kx - 1``. Buffers:
    ``pad`` (W + 2 rx), ``ring`` (ky, W), ``acc``, ``xin``, ``zeros`` (W), ``slots`` (ky)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    kx, ky = tx.shape[0], ty.shape[0]
    rx, ry = kx // 2, ky // 2
    reads = core.reads_input(epi)
    for t in range(lo, hi):
        plane, band = t // n_bands, t % n_bands
        b, c = plane // C, plane % C
        i0 = band * band_rows
        i1 = min(H, i0 + band_rows)
        first = i0 - ry
        for i in range(first, i1 + ry):
            r = rows[i + ry]
            if r < 0:
                core.fill(pad, border_value, W + 2 * rx)
            else:
                core.load_row(xu8, xu16, xf32, kin, b, c, r, pad[rx:], in_scale)
                core.apply_chain(pad[rx:], xin, W, pro[c])
                core.fill_edges(pad, rx, W, edges, border_value)
            _horizontal(ring[(i - first) % ky], pad, tx, offsets, zeros, W)
            o = i - ry  # the output row this input row completes
            if o < i0:
                continue
            base = o - ry - first
            for u in range(ky):
                slots[u] = (base + u) % ky
            core.combine(acc, ring, slots, ty, ky, zeros, W)
            if reads:
                core.load_row(xu8, xu16, xf32, kin, b, c, o, xin, unit)
                core.apply_chain(xin, xin, W, pro[c])
            core.apply_chain(acc, xin, W, epi[c])
            core.store_row(yu8, yu16, yf32, kout, b, c, o, acc)


def separable_filter(img, tx, ty, code, border_value, fusion=None, unsharp=None):
    """``img`` correlated with ``outer(ty, tx)`` (float64 CPU tensors of odd length) under
    the border ``code``, with ``fusion``'s prologue and epilogue (``pointwise.Fusion``);
    ``unsharp`` = (amount, threshold) makes it unsharp masking (an epilogue before the
    fusion's)."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    first = ((cpu.UNSHARP, *unsharp),) if unsharp is not None else ()
    pro, epi, dtype = cpu.fused(fusion, C, img.dtype, first)
    y = _image.new_image(img, dtype=dtype)
    out = cpu.Output(_image.as_planes(y))
    xs = cpu.image_args(x4)
    unit = cpu.unit_scale(xs[3])
    linear = pro.shape[1] == 0  # integers read as their values, the unit scale on the taps
    tx64, ty64 = tx.numpy(), ty.numpy()
    rx, ry = len(tx64) // 2, len(ty64) // 2
    n_bands, band_rows = cpu.bands(B * C, H, min_rows=max(16, 4 * ry))
    cpu.run(_separable, B * C * n_bands, *xs, *out.args,
            (tx64 * unit if linear else tx64).astype(np.float32), ty64.astype(np.float32),
            cpu.border_map(H, ry, ry, code), cpu.edge_map(W, rx, rx, code),
            f32(border_value / unit if linear else border_value), f32(1.0 if linear else unit), f32(unit),
            pro, epi, n_bands, band_rows, np.arange(len(tx64)),
            scratch=(((W + 2 * rx,), np.float32), ((len(ty64), W), np.float32), ((W,), np.float32),
                     ((W,), np.float32), ((W,), np.float32), ((len(ty64),), np.int64)))
    out.finish()
    return y
