"""Resampling on the CPU engine: ``resize``, ``upsample`` and ``imresize``, every mode.

Both axes are resampled with the float64 reference's taps (``reference.resample.taps``),
computed once per size and mode: per output pixel its source pixels of nonzero weight,
repeated pixels merged (MATLAB's folded border) as the reference's matrix merges them, so
a NaN or inf reaches exactly the outputs that weigh it. The vertical taps are a list per
output row (weight 0 pads the shorter lists and is skipped); the horizontal ones are
``(K, W_out)`` tables of source columns and weights read with vector gathers, whose
padding points at a zero kept after the row (0 * 0, never 0 * inf).

A task is a band of output rows of a plane. Two orders:

- rows first (W pass then H pass, as the reference): each source row the band reads is
  resampled along W once into a ring of such rows (clamped to [0, 1] for integer images,
  as PIL and torch's CPU path clamp their 8-bit intermediate), and each output row is
  the weighted sum of its ring rows;
- columns first (H pass then W pass): each output row is the weighted sum of its source
  rows (read once into a ring, through the prologue), then resampled along W.

The cheaper order runs (counting multiply-adds; gathers at twice the cost), except that
integer images whose W pass can overshoot (negative weights, or a prologue) keep the
reference's order for its clamp.
"""
import functools

import numpy as np

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, FLOAT, IMAGE, INDEX, INT, ROW, SLOTS, TABLE, f32
from imgfilters.reference import resample as reference

COLUMNS = core.array("uint32", 2, "C")  # (K, n) source columns (W: the zero after the row)
OFFSETS = core.array("int32", 2, "C")  # (f, K) a phase's taps, relative to its block
ROWS = core.array("int32", 2, "C")  # (H_out, K) source rows


@core.jit
def gather(dst, src, cols, weights, n):
    """dst[j] = sum_k weights[k, j] * src[cols[k, j]], j < n."""
    c0, w0 = cols[0], weights[0]
    for j in range(n):
        dst[j] = w0[j] * src[c0[j]]
    for k in range(1, cols.shape[0]):
        ck, wk = cols[k], weights[k]
        for j in range(n):
            dst[j] += wk[j] * src[ck[j]]


@core.jit
def interleave(dst, planar, f, l0, l1):
    """dst[f l + p] = planar[p, l] for l0 <= l < l1."""
    n = l1 - l0
    if f == 1:
        d, a = dst[l0:], planar[0, l0:]
        for j in range(n):
            d[j] = a[j]
    elif f == 2:
        d, a, b = dst[2 * l0:], planar[0, l0:], planar[1, l0:]
        for j in range(n):
            d[2 * j] = a[j]
            d[2 * j + 1] = b[j]
    else:
        for p in range(f):
            d, a = dst[f * l0 + p:], planar[p, l0:]
            for j in range(n):
                d[f * j] = a[j]


@core.jit
def horizontal(dst, src, planar, f, l0, l1, offsets, weights, counts, at, cols, col_w, zeros, n):
    """The W pass of the row ``src`` (its zero after it included) into ``dst`` (``n``
    outputs). With ``f`` > 0 the outputs f l + p, l0 <= l < l1, are phase p's taps
    (``offsets`` from l, ``weights``, ``counts[p]`` of them) as vectorised passes over
    contiguous pixels into ``planar`` rows, interleaved, and the outputs ``at`` (the
    edges) are gathered from their ``cols`` and ``col_w``; with ``f`` = 0 every output is
    gathered (vector gathers)."""
    if f == 0:
        gather(dst, src, cols, col_w, n)
        return
    m = l1 - l0
    for p in range(f):
        row = planar[p, l0:]
        if counts[p] == 0:
            core.fill(row, f32(0.0), m)
        else:
            core.combine_shifted(row, src, l0, offsets[p], weights[p], counts[p], zeros, m)
    interleave(dst, planar, f, l0, l1)
    for e in range(at.shape[0]):
        v = col_w[0, e] * src[cols[0, e]]
        for k in range(1, cols.shape[0]):
            v += col_w[k, e] * src[cols[k, e]]
        dst[at[e]] = v


@core.jit
def clamp01(buf, n):
    for j in range(n):
        buf[j] = min(max(buf[j], f32(0.0)), f32(1.0))


@core.kernel(*IMAGE, *IMAGE, INT, INT, INT, OFFSETS, TABLE, INDEX, INDEX, COLUMNS, TABLE, ROWS, TABLE, INDEX, INT, INT,
             INT, FLOAT, CHAIN, CHAIN, INT, INT, TABLE, SLOTS, SLOTS, ROW, TABLE, ROW, ROW)
def _resample(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, f, l0, l1, offsets, weights, counts, at, cols,
              col_w, rows, row_w, row_counts, n_slots, columns_first, clamp, in_scale, pro, epi, n_bands, band_rows,
              ring, tags, slots, line, planar, acc, zeros):
    """Tasks ``lo .. hi - 1`` of ``planes * n_bands``, each a band of output rows: the W
    pass (``horizontal``'s tables) and the H pass (``row_counts[d]`` source ``rows`` of
    output row d, their weights ``row_w``) in either order; ``n_slots`` rows in the ring
    hold every source row of an output row. Buffers (``resample``'s ``scratch``): ``ring``,
    its rows' ``tags``, an output row's ring ``slots``, a source ``line`` (W + 1), the
    ``planar`` phases, ``acc`` (W_out) and ``zeros``."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    HO, WO = core.shape(yu8, yu16, yf32, kout)[2:]
    for t in range(lo, hi):
        plane, band = t // n_bands, t % n_bands
        b, c = plane // C, plane % C
        d0 = band * band_rows
        d1 = min(HO, d0 + band_rows)
        tags[:] = -1
        for d in range(d0, d1):
            for k in range(row_counts[d]):
                r = rows[d, k]
                s = r % n_slots
                slots[k] = s
                if tags[s] == r:
                    continue
                tags[s] = r
                held = ring[s]
                if columns_first:
                    core.load_row(xu8, xu16, xf32, kin, b, c, r, held, in_scale)
                    core.apply_chain(held, held, W, pro[c])
                else:
                    core.load_row(xu8, xu16, xf32, kin, b, c, r, line, in_scale)
                    core.apply_chain(line, line, W, pro[c])
                    line[W] = 0.0
                    horizontal(held, line, planar, f, l0, l1, offsets, weights, counts, at, cols, col_w, zeros, WO)
                    if clamp:
                        clamp01(held, WO)
            if columns_first:
                core.combine(line, ring, slots, row_w[d], row_counts[d], zeros, W)
                line[W] = 0.0
                horizontal(acc, line, planar, f, l0, l1, offsets, weights, counts, at, cols, col_w, zeros, WO)
            else:
                core.combine(acc, ring, slots, row_w[d], row_counts[d], zeros, WO)
            core.apply_chain(acc, acc, WO, epi[c])
            core.store_row(yu8, yu16, yf32, kout, b, c, d, acc)


@functools.lru_cache(maxsize=256)
def axis_taps(n_in, n_out, mode, antialias, align_corners, scale):
    """``(cols, weights)``, two ``(n_out, K)`` arrays (int64, float64): each output pixel's
    source pixels of nonzero weight (repeated pixels merged, as the reference's matrix
    merges them), left-aligned, padded with weight 0 on pixel 0. Shared: not modified."""
    cols, values = reference.taps(n_in, n_out, mode, antialias=antialias, align_corners=align_corners, scale=scale)
    cols, values = cols.numpy(), values.numpy().copy()
    order = np.argsort(cols, axis=1, kind="stable")
    cols, values = np.take_along_axis(cols, order, 1), np.take_along_axis(values, order, 1)
    for k in range(cols.shape[1] - 1, 0, -1):  # runs of one column: their sum on the first
        same = cols[:, k] == cols[:, k - 1]
        values[same, k - 1] += values[same, k]
        values[same, k] = 0.0
    keep = values != 0
    order = np.argsort(~keep, axis=1, kind="stable")  # nonzero weights first
    width = max(1, int(keep.sum(1).max()))
    cols = np.take_along_axis(cols, order, 1)[:, :width]
    values = np.take_along_axis(values, order, 1)[:, :width]
    cols = np.where(values != 0, cols, 0)
    return cols, values


def _columns_first(shape, size, kv, kh, phases, keep_order):
    """Whether to resample along H first: the cheaper order (multiply-adds, gathers at
    four times the cost), unless ``keep_order`` (an integer image whose W pass can
    overshoot: the reference clamps it)."""
    (H, W), (HO, WO) = shape, size
    w_pass = WO * kh * (1 if phases else 4)
    cost_rows = H * w_pass + HO * WO * kv  # W pass on the source rows, then H
    cost_columns = HO * W * kv + HO * w_pass  # H pass on the source columns, then W
    return cost_columns < cost_rows and not keep_order


MAX_PHASES = 8


def phases(n_in, n_out, cols, weights):
    """The W pass's constant-phase form where ``n_out`` = f ``n_in`` (f <= ``MAX_PHASES``):
    ``(f, l0, l1, offsets, weights, counts, at)``, output f l + p (l0 <= l < l1) being
    ``sum_k weights[p, k] * x[l + offsets[p, k]]`` (``counts[p]`` taps) as the reference's
    taps say for every such l; ``at`` lists the other outputs (the edges). f = 0 where
    there is no such form."""
    none = (0, 0, 0, np.zeros((1, 1), np.int32), np.zeros((1, 1), np.float32), np.zeros(1, np.int32),
            np.arange(n_out, dtype=np.int32))
    if n_out % n_in or n_out // n_in > MAX_PHASES or n_in < 8:
        return none
    f, L = n_out // n_in, n_in
    j = f * np.arange(L)[:, None] + np.arange(f)[None, :]  # (L, f)
    w = weights[j]  # (L, f, K)
    rel = np.where(w != 0, cols[j] - np.arange(L)[:, None, None], np.iinfo(np.int64).min)
    m = L // 2
    match = ((rel == rel[m]) & (w == w[m])).all(axis=(1, 2))
    if not match[m]:
        return none
    l0 = m - int(np.argmin(match[m::-1])) + 1 if not match[:m + 1].all() else 0
    l1 = m + int(np.argmin(match[m:])) if not match[m:].all() else L
    if l1 - l0 < 8:
        return none
    counts = (w[m] != 0).sum(1).astype(np.int32)
    k = max(1, int(counts.max()))
    offsets = np.where(w[m] != 0, rel[m], 0)[:, :k].astype(np.int32)
    at = np.concatenate([np.arange(f * l0), np.arange(f * l1, n_out)]).astype(np.int32)
    return (f, l0, l1, np.ascontiguousarray(offsets), np.ascontiguousarray(w[m][:, :k], dtype=np.float32), counts,
            at)


@functools.lru_cache(maxsize=256)
def _plan(shape, size, mode, antialias, align_corners, scale, clamp, linear, unit):
    """The kernel's tables and order for planes of ``shape`` (H, W) resampled to ``size``."""
    (H, W), (HO, WO) = shape, size
    rows, row_w = axis_taps(H, HO, mode, antialias, align_corners, scale[0])
    cols, col_w = axis_taps(W, WO, mode, antialias, align_corners, scale[1])
    f = phases(W, WO, cols, col_w)[0]
    columns_first = _columns_first((H, W), (HO, WO), rows.shape[1], cols.shape[1], f > 0,
                                   clamp and ((col_w < 0).any() or not linear))
    if linear:  # the unit scale on the first pass's weights: integers read as their values
        if columns_first:
            row_w = row_w * unit
        else:
            col_w = col_w * unit
    f, l0, l1, offsets, weights, counts, at = phases(W, WO, cols, col_w)
    if f:  # the edges' taps only
        cols, col_w = cols[at], col_w[at]
    table = np.where(col_w != 0, cols, W).T.astype(np.uint32)
    row_counts = (row_w != 0).sum(1)
    span = np.where(row_w != 0, rows, 0).max(1) - np.where(row_w != 0, rows, H).min(1)
    n_slots = int(max(span.max(), 0)) + 2
    return (f, l0, l1, offsets, weights, counts, at, np.ascontiguousarray(table),
            np.ascontiguousarray(col_w.T, dtype=np.float32), np.ascontiguousarray(rows, dtype=np.int32),
            np.ascontiguousarray(row_w, dtype=np.float32), row_counts.astype(np.int32), n_slots, columns_first)


def resample(img, size, mode, antialias, align_corners, scale, clamp, fusion=None):
    """``img`` resampled to ``size`` (H, W) as the float64 reference's ``resize`` (``mode``,
    ``antialias``, ``align_corners``, per-axis coordinate ``scale``), the W pass clamped to
    [0, 1] when ``clamp`` (integer images), with ``fusion``'s prologue and epilogue."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    pro, epi, dtype = cpu.fused(fusion, C, img.dtype)
    y = _image.new_image(img, (*img.shape[:-2], *size), dtype=dtype)
    out = cpu.Output(_image.as_planes(y))
    xs = cpu.image_args(x4)
    unit = cpu.unit_scale(xs[3])
    linear = pro.shape[1] == 0
    *tables, columns_first = _plan(
        (H, W), tuple(size), mode, bool(antialias), bool(align_corners), tuple(scale), bool(clamp), linear, unit)
    n_bands, band_rows = cpu.bands(B * C, size[0], min_rows=8)
    f, rows, n_slots, WO = tables[0], tables[9], tables[-1], size[1]
    scratch = (((n_slots, W + 1 if columns_first else WO), np.float32), ((n_slots,), np.int64),
               ((rows.shape[1],), np.int64), ((W + 1,), np.float32), ((max(f, 1), W), np.float32),
               ((WO,), np.float32), ((max(W, WO),), np.float32))
    cpu.run(_resample, B * C * n_bands, *xs, *out.args, *tables, int(columns_first), int(clamp),
            f32(1.0 if linear else unit), pro, epi, n_bands, band_rows, scratch=scratch)
    out.finish()
    return y
