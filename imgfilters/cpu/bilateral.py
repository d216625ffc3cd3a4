"""The bilateral filters on the CPU engine: ``bilateral`` (with a fused prologue and
epilogue) and ``joint_bilateral``.

A task is a band of rows of one image, all its
channels. It walks its input rows once, from ``r`` rows above the band to ``r`` below,
each loaded once (values V in unit scale through the prologue; a joint guide G) into a
ring of the last ``2 r + 1`` rows, their ends extended by the border. The weight of a
pair of pixels p, q = p + (dy, dx)

    w = 2^(space (dy^2 + dx^2) - colour D^2),  D^2 = sum_c (G_q - G_p)^2 (l2) or (sum_c |G_q - G_p|)^2 (l1)

(``fastexp.exp2_neg``: arithmetic, no call) is the same for both, so it is computed once,
for the half of the window after the centre, and added to both pixels' sums (``_forward``,
``_backward``): half the exponentials and distances of a direct loop over the window.
Every loop runs over contiguous pixels of the padded rows, in blocks of columns whose
sums stay in cache, with loops written out for three channels; the window (square or
disk) is a list of taps, the border a map of rows and the rows' ends: one compiled kernel
for every option and dtype. Each pixel's own value, with weight 1, is added to its sums last.

``joint_bilateral_upsample`` is in ``upsample.py``.
"""
import numpy as np

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, FLOAT, IMAGE, INDEX, INT, ROW, TABLE, f32
from imgfilters.cpu.fastexp import LOG2E, exp2_neg, not_inlined, wide_vectors

BLOCK = 512  # pixels of a row per pass over the taps: the sums and a tap's rows stay in L1 and L2
SLACK = 16  # loops run over whole vectors of 16 (AVX-512 float32)
LIMIT = 1e30  # the largest coefficient (ops.bilateral's, as _image.finite_ratio keeps them)
F32_3D = core.array("float32", 3, "C")


@core.jit
def _forward(w, A, ap, V, qs, ps, G, gq, gp, joint, x0, dx, n, C, CG, s, s2, l1):
    """For the n pixels p of a row from padded column x0 and their taps q = p + dx in the
    row at ring slot ``qs`` (p's row at ``ps``): the weights w[i] = 2^(s - s2 D^2), D
    between the guide's pixels (V's, or G's at slots gq, gp when ``joint``), and p's sums
    A[ap, c] += w V_q, A[ap, C] += w. Indices are unsigned: no wraparound for numba to
    check, so the loops vectorise. Called from four places: not inlined (compile time)."""
    wide_vectors()
    not_inlined()
    if not joint and C == 3:  # (the guide's values are the values: one load each)
        for i in range(n):
            a, b = np.uint64(x0 + dx + i), np.uint64(x0 + i)
            q0, q1, q2 = V[qs, 0, a], V[qs, 1, a], V[qs, 2, a]
            d0, d1, d2 = q0 - V[ps, 0, b], q1 - V[ps, 1, b], q2 - V[ps, 2, b]
            if l1:
                d = abs(d0) + abs(d1) + abs(d2)
                e = exp2_neg(s - s2 * (d * d))
            else:
                e = exp2_neg(s - s2 * (d0 * d0 + d1 * d1 + d2 * d2))
            w[i] = e
            A[ap, 0, b] += e * q0
            A[ap, 1, b] += e * q1
            A[ap, 2, b] += e * q2
            A[ap, 3, b] += e
        return
    if not joint and C == 1:
        for i in range(n):
            a, b = np.uint64(x0 + dx + i), np.uint64(x0 + i)
            q = V[qs, 0, a]
            d = q - V[ps, 0, b]
            e = exp2_neg(s - s2 * (d * d))
            w[i] = e
            A[ap, 0, b] += e * q
            A[ap, 1, b] += e
        return
    if not joint:
        G, gq, gp, CG = V, qs, ps, C
    for i in range(n):
        w[i] = f32(0.0)
    for c in range(CG):
        for i in range(n):
            d = G[gq, c, np.uint64(x0 + dx + i)] - G[gp, c, np.uint64(x0 + i)]
            w[i] += abs(d) if l1 else d * d
    for i in range(n):
        d2 = w[i] * w[i] if l1 else w[i]
        w[i] = exp2_neg(s - s2 * d2)
    for c in range(C + 1):
        for i in range(n):
            b = np.uint64(x0 + i)
            A[ap, c, b] += w[i] * (V[qs, c, np.uint64(x0 + dx + i)] if c < C else f32(1.0))


@core.jit
def _backward(w, A, aq, V, ps, x0, dx, n, C):
    """q's sums from the weights ``w`` of ``_forward``: A[aq, c, x0 + dx + i] +=
    w[i] V[ps, c, x0 + i] (the values of p), A[aq, C, ...] += w[i]. Called from two
    places: not inlined (compile time)."""
    wide_vectors()
    not_inlined()
    if C == 3:
        for i in range(n):
            a, b = np.uint64(x0 + dx + i), np.uint64(x0 + i)
            e = w[i]
            A[aq, 0, a] += e * V[ps, 0, b]
            A[aq, 1, a] += e * V[ps, 1, b]
            A[aq, 2, a] += e * V[ps, 2, b]
            A[aq, 3, a] += e
    else:
        for c in range(C + 1):
            for i in range(n):
                a, b = np.uint64(x0 + dx + i), np.uint64(x0 + i)
                A[aq, c, a] += w[i] * (V[ps, c, b] if c < C else f32(1.0))


@core.jit
def _whole(x0, x1, end):
    """The length of x0 .. x1, in whole vectors if x1 ends the row (``end``)."""
    return (x1 - x0 + SLACK - 1) & -SLACK if x1 == end else x1 - x0


@core.jit
def _load(V, slot, xu8, xu16, xf32, kind, b, C, m, W, r, edges, unit, value, pro, chained):
    """Ring slot ``slot`` of V: row ``m`` (-1: the constant border) of image b's C
    channels at columns r.., through the prologue if ``chained``, the ends from the
    border."""
    for c in range(C):
        row = V[slot, c]
        if m < 0:
            core.fill(row, value, W + 2 * r)
        else:
            core.load_row(xu8, xu16, xf32, kind, b, c, m, row[r:], unit)
            if chained:
                core.apply_chain(row[r:], row[r:], W, pro[c])
            core.fill_edges(row, r, W, edges, value)


@core.jit
def _store(A, ap, V, ps, C, W, r, inv, out, epi, yu8, yu16, yf32, ky, b, y):
    """Output row y of image b from its sums A[ap] (padded columns) and, added last, its
    centre pixel V[ps] with weight 1, through the epilogue."""
    den = A[ap, C]
    for x in range(W):
        inv[x] = f32(1.0) / (den[np.uint64(r + x)] + f32(1.0))
    for c in range(C):
        o, num, centre = out[c], A[ap, c], V[ps, c]
        for x in range(W):
            o[x] = (num[np.uint64(r + x)] + centre[np.uint64(r + x)]) * inv[x]
        core.apply_chain(o, o, W, epi[c])
        core.store_row(yu8, yu16, yf32, ky, b, c, y, o)


@core.kernel(*IMAGE, *IMAGE, *IMAGE, ROW, ROW, INDEX, INDEX, INDEX, INDEX, FLOAT, FLOAT, FLOAT, INT, INT, CHAIN,
             CHAIN, INT, INT, F32_3D, F32_3D, F32_3D, ROW, TABLE, ROW, ROW)
def _bilateral(lo, hi, xu8, xu16, xf32, kx, gu8, gu16, gf32, kg, yu8, yu16, yf32, ky, colour, space, dys, dxs,
               rows, edges, xunit, gunit, value, l1, joint, pro, epi, n_bands, band_rows, V, G, A, w, out, inv, sp):
    """Tasks lo .. hi - 1 of ``B * n_bands`` (a band of ``band_rows`` rows of one image):
    Y = EPI(sum_q w(p, q) X~_q / sum_q w(p, q)). ``colour`` and ``space`` are per image
    (log2(e) / (2 sigma_color^2) and -log2(e) / (2 sigma_space^2)); ``dys, dxs`` the
    window's taps after the centre in row-major order (the other half mirrors them);
    ``rows`` maps the extended rows -r .. H + r - 1 to image rows (-1: constant),
    ``edges`` the row buffers' ends (``cpu.edge_map``); the guide is X through PRO unless
    ``joint`` (then G, whose batch may be 1).

    w(p, q) = w(q, p): each weight is computed once, at the pixel p of the pair whose row
    comes first (or whose column does, in one row), and added to both sums: p's from q's
    values, q's from p's. The sums of the r + 1 rows that p's row reaches stay in a ring
    ``A`` of padded rows; a row's sums are complete once it has been p's. Every pixel of
    the padded rows from r above the band is a p (its sums, out of the image or the band,
    are never read), so that the loops have no conditions, and run over whole vectors:
    rows have SLACK columns more than the padding, which only such sums reach. Buffers (from
    ``run``): the rings V (2r + 1, C, W + 2r + SLACK), G (the same for the guide's channels,
    or (1, 1, 1)), A (r + 2, C + 1, W + 2r + SLACK: the last a sink), the weights w
    (BLOCK + 2r + SLACK), an output row
    ``out`` (C, W), ``inv`` (W), the taps' spatial terms ``sp``."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kx)
    GB, CG = core.shape(gu8, gu16, gf32, kg)[:2]
    taps = dys.shape[0]
    r = (rows.shape[0] - H) // 2
    n = 2 * r + 1
    Wp = W + 2 * r
    chained, unchained = pro.shape[1] > 0, pro.shape[1] < 0
    sink = r + 1  # sums that nothing reads
    for t in range(lo, hi):
        b, band = t // n_bands, t % n_bands
        i0 = band * band_rows
        i1 = min(H, i0 + band_rows)
        s2 = colour[b]
        for k in range(taps):
            sp[k] = space[b] * f32(dys[k] * dys[k] + dxs[k] * dxs[k])
        for i in range(i0 - r, i1 + r):
            slot = (i - i0 + r) % n
            m = rows[i + r]
            _load(V, slot, xu8, xu16, xf32, kx, b, C, m, W, r, edges, xunit, value, pro, chained)
            if joint:  # (no prologue: ``not chained`` would be a constant, and a second compile)
                _load(G, slot, gu8, gu16, gf32, kg, b if GB > 1 else 0, CG, m, W, r, edges, gunit, value, pro,
                      unchained)
            # row i's sums start from 0; its centre pixel (weight 1) comes last, in _store, so
            # that the small weights add up before it (a float32 sum that starts at 1 rounds
            # away each weight below 2^-24: 4000 of them moved an output by 1.3e-4)
            at = (i - i0 + r) % (r + 1)
            for c in range(C + 1):
                for x in range(Wp):
                    A[at, c, x] = f32(0.0)
            y = i - r  # p's row: rows y .. y + r are loaded
            if y < i0 - r:
                continue
            ps, ap = (y - i0 + r) % n, (y - i0 + r) % (r + 1)
            for z0 in range(0, Wp, BLOCK):  # blocks of columns: the sums they reach stay in cache
                z1 = min(z0 + BLOCK, Wp)
                for k in range(taps):
                    dy, dx = dys[k], dxs[k]
                    qs, aq = (y + dy - i0 + r) % n, (y + dy - i0 + r) % (r + 1)
                    # p's padded columns whose q = p + dx is one too: xa .. xb. The block's
                    # p take their q's values (f0 .. f1), its q their p's (b0 .. b1, p's
                    # outside the block too), so that a pixel takes its sums' terms in the
                    # same order wherever the blocks begin (tiles equal the untiled call);
                    # the weights of the p outside go to the sink's sums. Ranges that end
                    # the row run as whole vectors (past xb into the padding and the slack).
                    xa, xb = max(0, -dx), Wp - max(dx, 0)
                    f0, f1 = max(z0, xa), min(z1, xb)
                    b0, b1 = max(z0 - dx, xa), min(z1 - dx, xb)
                    has_f, has_b = f1 > f0, b1 > b0
                    if not has_b:
                        if has_f:
                            _forward(w, A, ap, V, qs, ps, G, qs, ps, joint, f0, dx, _whole(f0, f1, xb), C, CG, sp[k],
                                     s2, l1)
                        continue
                    if not has_f:
                        _forward(w, A, sink, V, qs, ps, G, qs, ps, joint, b0, dx, _whole(b0, b1, xb), C, CG, sp[k],
                                 s2, l1)
                        _backward(w, A, aq, V, ps, b0, dx, _whole(b0, b1, xb), C)
                        continue
                    lo = min(f0, b0)
                    if b0 < f0:  # (dx > 0) the p before the block
                        _forward(w, A, sink, V, qs, ps, G, qs, ps, joint, b0, dx, _whole(b0, f0, xb), C, CG, sp[k],
                                 s2, l1)
                    _forward(w[f0 - lo:], A, ap, V, qs, ps, G, qs, ps, joint, f0, dx, _whole(f0, f1, xb), C, CG,
                             sp[k], s2, l1)
                    if b1 > f1:  # (dx < 0) the p after it
                        _forward(w[f1 - lo:], A, sink, V, qs, ps, G, qs, ps, joint, f1, dx, _whole(f1, b1, xb), C,
                                 CG, sp[k], s2, l1)
                    _backward(w[b0 - lo:], A, aq, V, ps, b0, dx, _whole(b0, b1, xb), C)
            if y >= i0:  # p's row is complete
                _store(A, ap, V, ps, C, W, r, inv, out, epi, yu8, yu16, yf32, ky, b, y)


def _taps(radius, window):
    """The window's offsets (dy, dx) after the centre in row-major order (the half that
    the kernel mirrors), as two int32 arrays."""
    offsets = [(dy, dx) for dy in range(0, radius + 1) for dx in range(-radius, radius + 1)
               if (dy > 0 or dx > 0) and (window == "square" or dy * dy + dx * dx <= radius * radius)]
    dys = np.array([o[0] for o in offsets], np.int32)
    dxs = np.array([o[1] for o in offsets], np.int32)
    return dys, dxs


def _coefficients(colors, spaces):
    """(colour, space) per image, float32: log2(e) / (2 sigma_color^2) and -log2(e) /
    (2 sigma_space^2), each kept within LIMIT (a sigma whose square underflows gives
    weights of 0 off the centre, as in the kernels)."""
    colour = np.array([_image.finite_ratio(LOG2E, 2 * s * s, LIMIT) for s in colors], np.float32)
    space = np.array([_image.finite_ratio(-LOG2E, 2 * s * s, LIMIT) for s in spaces], np.float32)
    return colour, space


def bilateral(img, guide, colors, spaces, radius, window, color_distance, border, border_value, fusion=None):
    """The bilateral filter of ``img`` (``guide`` None) or the joint one, as ``ops.bilateral``'s
    implementation: ``colors`` and ``spaces`` the per-image sigmas (tuples), ``border`` a
    border code; returns the output tensor."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    pro, epi, dtype = cpu.fused(fusion, C, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    out = cpu.Output(_image.as_planes(y))
    g4 = x4 if guide is None else _image.as_planes(guide)
    colour, space = _coefficients(colors, spaces)
    dys, dxs = _taps(radius, window)
    rows = cpu.border_map(H, radius, radius, border)
    edges = cpu.edge_map(W, radius, radius, border)
    n_bands, band_rows = cpu.bands(B, H, min_rows=max(16, 4 * radius))
    xa, ga = cpu.image_args(x4), cpu.image_args(g4)
    n, Wp, CG = 2 * radius + 1, W + 2 * radius + SLACK, g4.shape[1]
    shapes = ((n, C, Wp), (n, CG, Wp) if guide is not None else (1, 1, 1), (radius + 2, C + 1, Wp),
              (BLOCK + 2 * radius + SLACK,), (C, W), (W,), (max(len(dys), 1),))
    cpu.run(_bilateral, B * n_bands, *xa, *ga, *out.args, colour, space, dys, dxs, rows, edges,
            f32(cpu.unit_scale(xa[3])), f32(cpu.unit_scale(ga[3])), f32(border_value), int(color_distance == "l1"),
            int(guide is not None), pro, epi, n_bands, band_rows, scratch=[(shape, np.float32) for shape in shapes])
    out.finish()
    return y

