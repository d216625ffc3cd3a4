"""Morphology on the CPU engine: one kernel for a pass of any mask, a row at a time.

A task is a band of rows of one plane. Each input row is loaded once (converted to unit
scale, through the prologue, its ends extended by the border: ``kw // 2`` positions
before, ``kw - 1 - kw // 2`` after, by the pass's anchor) and turned into the mins (maxes)
of every run length the mask's rows hold: ``levels`` of doubling width (``min(x[j],
x[j + p])``, one vectorised loop a level: at most five for 63 columns), then each length
``w`` from the largest level ``p <= w`` as ``min(M_p[j], M_p[j + w - p])``. Those rows go
into a ring of the last ``kh`` input rows; an output row is then the min over the mask's
runs (row ``u``, first column ``a``, length ``w``) of ``ring[u][w][j + a]``: one vectorised
pass over the row per run. A rectangle is one length and ``kh`` runs; a 15 x 15 ellipse
5 lengths and 15 runs. Every min/max keeps NaN (``_pick``).

The finishing (``sub``): the compound operations subtract the result from, or subtract
from it, a second image (the input through the prologue, or the first chain's result),
then the epilogue and the typed store. The host function chains the passes of an
operation (OpenCV's rule for iterations) through buffers in the image's dtype (float32
after a prologue), as the GPU path does.
"""
import math

import numpy as np
import torch

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, FLOAT, IMAGE, INDEX, INT, f32

RUNS = core.array("int32", 2)  # (runs, 3): row offset from the anchor, first column, length index
LENGTHS = core.array("float32", 3)  # (kh, lengths, padded row)
LEVELS = core.array("float32", 2)  # (doubling levels, padded row)
ROWBUF = core.array("float32", 1)


@core.jit
def _pick(dst, a, b, n, dilate):
    """dst[j] = min(a[j], b[j]) (max with ``dilate``), NaN if either is NaN."""
    if dilate:
        for j in range(n):
            x, y = a[j], b[j]
            dst[j] = x if (x > y or x != x) else y
    else:
        for j in range(n):
            x, y = a[j], b[j]
            dst[j] = x if (x < y or x != x) else y


@core.kernel(*IMAGE, *IMAGE, *IMAGE, INDEX, INDEX, FLOAT, FLOAT, FLOAT, FLOAT, CHAIN, CHAIN, INT, INT, INT, INT, INT,
             INT, RUNS, INDEX, INT, INT, INT, INT, LENGTHS, LEVELS, ROWBUF, ROWBUF)
def _pass(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, zu8, zu16, zf32, kz, rows, edges, border_value,
          in_scale, z_scale, levels_of, pro, epi, n_bands, band_rows, kh, kw, ay, ax, runs, lengths, dilate, x_input,
          sub, z_input, ring, levels, acc, zrow):
    """Tasks ``lo .. hi - 1`` of ``planes * n_bands``: one pass, Y = EPI(finish(min over
    the runs of PRO(X~))). ``rows``: the border map of the rows (``ay`` before, ``kh - 1 -
    ay`` after), ``edges``: the columns' edge map (``ax`` before, ``kw - 1 - ax`` after);
    ``in_scale`` and ``z_scale`` the unit scales of X and Z; ``pro`` applies to X when
    ``x_input`` (X is the image, not a buffer of an earlier pass) and to Z when
    ``z_input``; ``sub`` 1: Y = result - Z, 2: Z - result, the result first as an image of
    ``levels_of`` levels stores it (0: a float operation). Buffers: ``ring`` (kh,
    lengths, W + kw - 1), ``levels`` (1 + log2 of the longest run, W + kw - 1), ``acc`` and ``zrow`` (W)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    wp = W + kw - 1
    n_len = lengths.shape[0]
    for t in range(lo, hi):
        plane, band = t // n_bands, t % n_bands
        b, c = plane // C, plane % C
        i0 = band * band_rows
        i1 = min(H, i0 + band_rows)
        first = i0 - ay
        for i in range(first, i1 + kh - 1 - ay):
            slot = ring[(i - first) % kh]
            pad = levels[0]
            r = rows[i + ay]
            if r < 0:
                core.fill(pad, border_value, wp)
            else:
                core.load_row(xu8, xu16, xf32, kin, b, c, r, pad[ax:], in_scale)
                if x_input:
                    core.apply_chain(pad[ax:], acc, W, pro[c])
                core.fill_edges(pad, ax, W, edges, border_value)
            p = 1
            level = 0
            for d in range(n_len):  # lengths ascending: the doubling levels made as needed
                w = lengths[d]
                while 2 * p <= w:
                    _pick(levels[level + 1], levels[level], levels[level][p:], wp - 2 * p + 1, dilate)
                    p *= 2
                    level += 1
                _pick(slot[d], levels[level], levels[level][w - p:], wp - w + 1, dilate)
            o = i - (kh - 1 - ay)
            if o < i0:
                continue
            base = o - first
            for k in range(runs.shape[0]):
                src = ring[(base + runs[k, 0]) % kh][runs[k, 2]][runs[k, 1]:]
                if k == 0:
                    for j in range(W):
                        acc[j] = src[j]
                else:
                    _pick(acc, acc, src, W, dilate)
            if sub != 0:
                if levels_of > 0:
                    for j in range(W):
                        acc[j] = np.rint(min(max(acc[j] * levels_of, f32(0.0)), levels_of)) / levels_of
                core.load_row(zu8, zu16, zf32, kz, b, c, o, zrow, z_scale)
                if z_input:
                    core.apply_chain(zrow, zrow, W, pro[c])
                if sub == 1:
                    for j in range(W):
                        acc[j] = acc[j] - zrow[j]
                else:
                    for j in range(W):
                        acc[j] = zrow[j] - acc[j]
            core.apply_chain(acc, acc, W, epi[c])
            core.store_row(yu8, yu16, yf32, kout, b, c, o, acc)


def _runs(rows, kw, ay):
    """The mask's runs as an int32 (n, 3) array (row offset from the anchor, first column,
    index of its length) and the lengths, ascending."""
    runs = []
    for u, bits in enumerate(rows):
        v = 0
        while v < kw:
            if bits >> v & 1:
                a = v
                while v < kw and bits >> v & 1:
                    v += 1
                runs.append((u - ay, a, v - a))
            else:
                v += 1
    lengths = sorted({w for _, _, w in runs})
    table = np.array([(du, a, lengths.index(w)) for du, a, w in runs], dtype=np.int32).reshape(-1, 3)
    return table, np.array(lengths, dtype=np.int32)


def _one_pass(x4, y4, rows, kw, anchor, dilate, code, border_value, pro, epi, x_input, z4=None, sub=0,
              z_input=False, levels=0.0):
    B, C, H, W = x4.shape
    kh = len(rows)
    ay, ax = anchor
    out = cpu.Output(y4)
    xs = cpu.image_args(x4)
    zs = cpu.image_args(x4 if z4 is None else z4)
    table, lengths = _runs(rows, kw, ay)
    n_bands, band_rows = cpu.bands(B * C, H, min_rows=max(16, 2 * kh))
    wp = W + kw - 1
    cpu.run(_pass, B * C * n_bands, *xs, *out.args, *zs, cpu.border_map(H, ay, kh - 1 - ay, code),
            cpu.edge_map(W, ax, kw - 1 - ax, code), f32(border_value), f32(cpu.unit_scale(xs[3])),
            f32(cpu.unit_scale(zs[3])), f32(levels), pro, epi, n_bands, band_rows, kh, kw, ay, ax, table, lengths,
            int(dilate), int(x_input), sub, int(z_input),
            scratch=(((kh, len(lengths), wp), np.float32), ((int(lengths[-1]).bit_length(), wp), np.float32),
                     ((W,), np.float32),
                     ((W,), np.float32)))
    out.finish()


def morphology(img, op, rows, kw, iterations, border, border_value, fusion=None):
    """``op`` of ``img`` by the mask of bit-set ``rows`` and ``kw`` columns (the op's
    arguments: ``ops/morphology.py``), with ``fusion``'s prologue and epilogue."""
    from imgfilters.ops.morphology import _chains, _passes
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    pro, epi, dtype = cpu.fused(fusion, C, img.dtype)
    none = cpu.no_chain(C)
    y = _image.new_image(img, dtype=dtype)
    y4 = _image.as_planes(y)
    buffer_dtype = img.dtype if pro.shape[1] == 0 and img.dtype in cpu.KINDS else torch.float32
    plan = _passes(rows, kw, iterations)
    code = 3 if border is None else _image.check_border(border)
    levels = _image.MAX_VALUE.get(buffer_dtype, 0.0)  # (an integer operation: results as stored)

    def chain(x, out, is_input, dilate, last_epi=none, sub=0, z=None, z_input=False):
        value = (-math.inf if dilate else math.inf) if border is None else border_value
        for k, (r, w, anchor) in enumerate(plan):
            last = k == len(plan) - 1
            dst = out if last and out is not None else torch.empty(x4.shape, dtype=buffer_dtype)
            _one_pass(x, dst, r, w, anchor, dilate, code, value, pro, last_epi if last else none, is_input,
                      z if last else None, sub if last else 0, z_input, levels)
            x, is_input = dst, False
        return x

    first, second, sub, z = _chains(op)
    if second is None:
        chain(x4, y4, True, first == "dilate", epi)
    elif z == "first":
        e = chain(x4, None, True, first == "dilate")
        chain(x4, y4, True, second == "dilate", epi, sub, e)
    else:
        t = chain(x4, None, True, first == "dilate")
        chain(t, y4, False, second == "dilate", epi, sub, x4 if z else None, z == "input")
    return y
