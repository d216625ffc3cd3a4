"""The median filter on the CPU engine: the GPU kernel's radix select, vectorised along rows.

A task is a band of rows of one plane. Its input rows are loaded once each (converted,
through the prologue, the ends extended by the border) into a ring of the last ``k``
padded rows, each turned in place into int32 keys whose order is the values' order: a
uint8 or uint16 image without a prologue (and a constant border value that is a stored
level) keys its stored values (8 or 16 bits); everything else the float32 bits, the
lower 31 flipped for negatives, NaN as the largest key (32 bits). An output row's
medians are then found one bit at a time for the whole row at once: each round counts,
for every pixel, the window keys below its candidate ``prefix + bit``, five window
positions a pass over the row (``_count5``, a loop that LLVM vectorises); a last count
below the largest key finds the windows that hold a NaN (float keys). ``k*k * bits``
compare-and-adds a pixel, as on the GPU: time grows with ``k*k``.
"""
import numpy as np

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, FLOAT, IMAGE, INDEX, INT, ROW, f32
from numba import types

KEYS = types.Array(types.int32, 2, "C")  # the ring of key rows
COUNTS = types.Array(types.int32, 1, "C")
LARGEST = np.int32(2 ** 31 - 1)


@core.jit
def _count5(below, a, b, c, d, e, cand, n):
    """below[j] += how many of a[j], b[j], c[j], d[j], e[j] lie below cand[j]."""
    for j in range(n):
        t = cand[j]
        below[j] += (np.int32(a[j] < t) + np.int32(b[j] < t) + np.int32(c[j] < t) + np.int32(d[j] < t)
                     + np.int32(e[j] < t))


@core.jit
def _count(below, ring, slot0, k, never, cand, n):
    """below[j] = the keys of output j's window (ring rows ``slot0 + u`` mod k, shifted
    by v) that lie below cand[j]; five window positions a pass, ``never`` (the largest
    keys) standing in for the missing ones of the last."""
    for j in range(n):
        below[j] = 0
    kk = k * k
    for t in range(0, kk, 5):
        r0 = ring[(slot0 + t // k) % k][t % k:]
        r1 = ring[(slot0 + (t + 1) // k) % k][(t + 1) % k:] if t + 1 < kk else never
        r2 = ring[(slot0 + (t + 2) // k) % k][(t + 2) % k:] if t + 2 < kk else never
        r3 = ring[(slot0 + (t + 3) // k) % k][(t + 3) % k:] if t + 3 < kk else never
        r4 = ring[(slot0 + (t + 4) // k) % k][(t + 4) % k:] if t + 4 < kk else never
        _count5(below, r0, r1, r2, r3, r4, cand, n)


@core.kernel(*IMAGE, *IMAGE, INDEX, INDEX, FLOAT, FLOAT, FLOAT, CHAIN, CHAIN, INT, INT, INT, INT,
             KEYS, ROW, ROW, ROW, COUNTS, COUNTS, COUNTS, COUNTS)
def _median(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, rows, edges, border_value, in_scale, unit,
            pro, epi, n_bands, band_rows, k, bits, ring, pad, acc, xin, prefix, cand, below, never):
    """Tasks ``lo .. hi - 1`` of ``planes * n_bands``: Y = EPI(median of PRO(X~) over
    k x k windows). ``bits``: 8 or 16 keys the stored values (``in_scale`` 1, ``unit``
    to unit scale), 32 the float bits. Buffers: ``ring`` (k, W + k - 1) keys, ``pad``
    (W + k - 1), ``acc``, ``xin`` (W), ``prefix``, ``cand``, ``below`` (W), ``never``
    (W + k - 1, filled here)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    r = k // 2
    wp = W + 2 * r
    m = (k * k - 1) // 2
    floats = bits == 32
    reads = core.reads_input(epi)
    for j in range(wp):
        never[j] = LARGEST
    for t in range(lo, hi):
        plane, band = t // n_bands, t % n_bands
        b, c = plane // C, plane % C
        i0 = band * band_rows
        i1 = min(H, i0 + band_rows)
        first = i0 - r
        for i in range(first, i1 + r):
            row = rows[i + r]
            if row < 0:
                core.fill(pad, border_value, wp)
            else:
                core.load_row(xu8, xu16, xf32, kin, b, c, row, pad[r:], in_scale)
                core.apply_chain(pad[r:], xin, W, pro[c])
                core.fill_edges(pad, r, W, edges, border_value)
            keys = ring[(i - first) % k]
            if floats:
                as_bits = pad.view(np.int32)
                for j in range(wp):
                    x = as_bits[j]
                    keys[j] = LARGEST if pad[j] != pad[j] else x ^ ((x >> 31) & LARGEST)
            else:
                for j in range(wp):
                    keys[j] = np.int32(pad[j])
            o = i - r
            if o < i0:
                continue
            slot0 = (o - r - first) % k
            start = -(2 ** 31) if floats else 0
            for j in range(W):
                prefix[j] = start
            for bit in range(bits - 1, -1, -1):
                step = np.int32(1 << bit) if bit < 31 else np.int32(0)
                for j in range(W):  # (bit 31: from -2^31 to 0, which is -2^31 + 2^31)
                    cand[j] = prefix[j] + step if bit < 31 else np.int32(0)
                _count(below, ring, slot0, k, never, cand, W)
                for j in range(W):
                    prefix[j] = cand[j] if below[j] <= m else prefix[j]
            if floats:
                for j in range(W):
                    x = prefix[j]
                    prefix[j] = x ^ ((x >> 31) & LARGEST)
                as_float = prefix.view(np.float32)
                for j in range(W):
                    acc[j] = as_float[j]
                for j in range(W):
                    cand[j] = LARGEST
                _count(below, ring, slot0, k, never, cand, W)  # windows holding a NaN key
                for j in range(W):
                    if below[j] < k * k:
                        acc[j] = np.float32(np.nan)
            else:
                for j in range(W):
                    acc[j] = f32(prefix[j]) * unit
            if reads:
                core.load_row(xu8, xu16, xf32, kin, b, c, o, xin, unit)
                core.apply_chain(xin, xin, W, pro[c])
            core.apply_chain(acc, xin, W, epi[c])
            core.store_row(yu8, yu16, yf32, kout, b, c, o, acc)


def median_blur(img, k, code, border_value, fusion=None):
    """The median of ``img`` over ``k x k`` windows under the border ``code``, with
    ``fusion``'s prologue and epilogue."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    pro, epi, dtype = cpu.fused(fusion, C, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    out = cpu.Output(_image.as_planes(y))
    xs = cpu.image_args(x4)
    unit = cpu.unit_scale(xs[3])
    bits = 32
    if xs[3] != cpu.F32 and pro.shape[1] == 0:
        level = border_value / unit
        if code != 3 or (level == round(level) and 0 <= level <= 1 / unit):
            bits = 8 if xs[3] == cpu.U8 else 16
    raw = bits < 32
    r = k // 2
    n_bands, band_rows = cpu.bands(B * C, H, min_rows=max(16, 2 * k))
    wp = W + 2 * r
    cpu.run(_median, B * C * n_bands, *xs, *out.args, cpu.border_map(H, r, r, code), cpu.edge_map(W, r, r, code),
            f32(round(border_value / unit) if raw else border_value), f32(1.0 if raw else unit), f32(unit),
            pro, epi, n_bands, band_rows, k, bits,
            scratch=(((k, wp), np.int32), ((wp,), np.float32), ((W,), np.float32), ((W,), np.float32),
                     ((W,), np.int32), ((W,), np.int32), ((W,), np.int32), ((wp,), np.int32)))
    out.finish()
    return y
