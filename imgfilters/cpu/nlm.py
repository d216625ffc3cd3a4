"""Non-local means on the CPU engine (``ops.nlm.nl_means``, with a fused prologue and
epilogue).

A task is a band of rows of one image. It loads the band's rows and the ``M = P // 2 + R``
rows on either side once, through the prologue, into padded rows (the border applied once
at their ends), then works in blocks of columns. The weight of a pair of pixels p and
q = p + d is the same for both, so each search offset ``d = (dy, dx)`` of the half after
the centre serves both: for each block it marches down the patch rows from ``dy`` above
the band (pixels p whose q lies in the band), the row of distances

    D(y, x) = sum_c (I_c(y, x) - I_c(y + dy, x + dx))^2

going into a ring of the last P such rows; a row's patch distances are the P x P box sums
of D (the ring's rows added, then P columns: sums of P terms, no running subtraction, so a
non-finite D stays in the windows that hold it), its weights
``2^(coef * max(S - floor, 0))`` (``fastexp.exp2_neg``; ``coef = -log2(e) / (h^2 P^2 C)``,
``floor = 2 sigma^2 P^2 C``, per image), added with the values at q to p's sums and with
those at p to q's, where they lie in the block. Every loop runs over contiguous pixels of
such rows. Half the distances and exponentials of a loop over the whole search window.
"""
import numpy as np

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, FLOAT, IMAGE, INDEX, INT, ROW, TABLE, f32
from imgfilters.cpu.fastexp import LOG2E, exp2_neg, not_inlined, wide_vectors

BLOCK = 256  # output columns per block: the block's rows and sums stay in L2 over all the offsets
BAND = 32  # output rows per task at most
SLACK = 16  # loops run over whole vectors of 16 (AVX-512 float32)
LIMIT = 1e30
F32_3D = core.array("float32", 3, "C")


@core.jit
def _distances(D, slot, X, C, y, yq, x0, xq, n):
    """D[slot, i] = sum_c (X[c, y, x0 + i] - X[c, yq, xq + i])^2, i < n."""
    wide_vectors()
    if C == 3:
        for i in range(n):
            a, b = np.uint64(x0 + i), np.uint64(xq + i)
            d0 = X[0, y, a] - X[0, yq, b]
            d1 = X[1, y, a] - X[1, yq, b]
            d2 = X[2, y, a] - X[2, yq, b]
            D[slot, i] = d0 * d0 + d1 * d1 + d2 * d2
    else:
        for i in range(n):
            d = X[0, y, np.uint64(x0 + i)] - X[0, yq, np.uint64(xq + i)]
            D[slot, i] = d * d
        for c in range(1, C):
            for i in range(n):
                d = X[c, y, np.uint64(x0 + i)] - X[c, yq, np.uint64(xq + i)]
                D[slot, i] += d * d


@core.jit
def _weights(w, D, first, P, colsum, n, coef, floor):
    """w[i] = 2^(coef * max(S_i - floor, 0)), S_i the P x P box sum of the ring D at
    column i (ring rows added into ``colsum`` from the top one, slot ``first``, down, then
    P of its columns), i < n. The order of the sums is the patch's, not the ring's: a tile
    of the image gets the untiled call's weights to the bit."""
    wide_vectors()
    m = n + P - 1
    for i in range(m):
        colsum[i] = D[first, i]
    for k in range(1, P):
        slot = (first + k) % P
        for i in range(m):
            colsum[i] += D[slot, np.uint64(i)]
    for i in range(n):
        w[i] = colsum[i]
    for j in range(1, P):
        for i in range(n):
            w[i] += colsum[np.uint64(i + j)]
    for i in range(n):
        t = w[i] - floor
        t = f32(0.0) if t < f32(0.0) else t  # (NaN stays NaN)
        w[i] = exp2_neg(coef * t)


@core.jit
def _accumulate(A, y, a0, w, w0, X, C, xr, x0, n):
    """A[y, c, a0 + i] += w[w0 + i] X[c, xr, x0 + i], A[y, C, a0 + i] += w[w0 + i], i < n."""
    wide_vectors()
    if C == 3:
        for i in range(n):
            a, b = np.uint64(a0 + i), np.uint64(x0 + i)
            e = w[np.uint64(w0 + i)]
            A[y, 0, a] += e * X[0, xr, b]
            A[y, 1, a] += e * X[1, xr, b]
            A[y, 2, a] += e * X[2, xr, b]
            A[y, 3, a] += e
    else:
        for c in range(C):
            for i in range(n):
                A[y, c, np.uint64(a0 + i)] += w[np.uint64(w0 + i)] * X[c, xr, np.uint64(x0 + i)]
        for i in range(n):
            A[y, C, np.uint64(a0 + i)] += w[np.uint64(w0 + i)]


@core.jit
def _zero(S, rows, C, n):
    for y in range(rows):
        for c in range(C + 1):
            for i in range(n):
                S[y, c, i] = f32(0.0)


@core.jit
def _add(A, S, rows, C, n):
    wide_vectors()
    for y in range(rows):
        for c in range(C + 1):
            for i in range(n):
                A[y, c, i] += S[y, c, i]


@core.jit
def _load(X, k, xu8, xu16, xf32, kind, b, C, m, W, M, edges, unit, value, pro):
    """Padded row k of X: image row ``m`` (-1: constant) of image b at columns M.., through
    the prologue, the ends from the border."""
    not_inlined()
    for c in range(C):
        row = X[c, k]
        if m < 0:
            core.fill(row, value, W + 2 * M)
        else:
            core.load_row(xu8, xu16, xf32, kind, b, c, m, row[M:], unit)
            core.apply_chain(row[M:], row[M:], W, pro[c])
            core.fill_edges(row, M, W, edges, value)


@core.jit
def _finish(out, C, W, epi, yu8, yu16, yf32, ky, b, y):
    """Output row y of image b from ``out`` (C, W), through the epilogue."""
    not_inlined()
    for c in range(C):
        core.apply_chain(out[c], out[c], W, epi[c])
        core.store_row(yu8, yu16, yf32, ky, b, c, y, out[c])


@core.kernel(*IMAGE, *IMAGE, ROW, ROW, INT, INT, INDEX, INDEX, FLOAT, FLOAT, CHAIN, CHAIN, INT, INT, F32_3D, TABLE,
             ROW, ROW, F32_3D, F32_3D, F32_3D)
def _nl_means(lo, hi, xu8, xu16, xf32, kx, yu8, yu16, yf32, ky, coefs, floors, P, R, rows, edges, unit, value,
              pro, epi, n_bands, band_rows, X, D, colsum, w, A, S, out):
    """Tasks lo .. hi - 1 of ``B * n_bands`` (a band of ``band_rows`` rows of one image).
    ``coefs`` and ``floors`` per image; ``rows`` maps the extended rows -M .. H + M - 1 to
    image rows (-1: constant), ``edges`` the padded rows' ends (``cpu.edge_map``). Buffers
    (from ``run``, ``_scratch``): the band's padded rows X, the ring of distances D, a
    row of column sums, the weights w, the block's sums A and one dy's sums S, the band's
    output rows."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kx)
    f = P // 2
    M = f + R
    first = np.int64(0)  # (a literal 0 argument would compile _accumulate a second time)
    for t in range(lo, hi):
        b, band = t // n_bands, t % n_bands
        i0 = band * band_rows
        i1 = min(H, i0 + band_rows)
        th = i1 - i0
        coef, floor = coefs[b], floors[b]
        for k in range(th + 2 * M):  # X row k: image row i0 - M + k
            _load(X, k, xu8, xu16, xf32, kx, b, C, rows[i0 + k], W, M, edges, unit, value, pro)
        for j0 in range(0, W, BLOCK):
            bw = min(BLOCK, W - j0)
            nv = (bw + SLACK - 1) & -SLACK  # whole vectors (the rows have SLACK columns more)
            _zero(A, th, C, nv)  # (the centre pixel, weight 1, comes last: small weights add up first)
            # w(p, q) = w(q, p): each offset d of the half after the centre serves p (the
            # values at q = p + d) and q (those at p); p runs over the rows from dy above
            # the band and the columns whose p or q lies in the block. The sums of one dy's
            # offsets go into S first, then into A: each float32 sum takes 2R + 1 terms, not
            # (2R + 1)^2 (at R = 35 the small weights that a sum of 5000 rounds away moved
            # outputs by 1e-4)
            for dy in range(0, R + 1):
                _zero(S, th, C, nv)
                for dx in range(-R, R + 1):
                    if dy == 0 and dx <= 0:
                        continue
                    xa, xb = min(0, -dx), max(bw, bw - dx)  # p's columns, relative to j0
                    nw = (xb - xa + SLACK - 1) & -SLACK  # whole vectors (the rows have SLACK more)
                    for k in range(th + dy + 2 * f):  # patch rows, from f above p's first row
                        yc = M - dy - f + k  # their X row
                        _distances(D, k % P, X, C, yc, yc + dy, M + j0 + xa - f, M + j0 + xa - f + dx, nw + 2 * f)
                        if k < 2 * f:
                            continue
                        y = k - 2 * f - dy  # p's row in the band (negative: above it)
                        _weights(w, D, (k + 1) % P, P, colsum, nw, coef, floor)
                        if y >= 0:  # p's sums, columns 0 .. bw
                            _accumulate(S, y, first, w, -xa, X, C, y + M + dy, M + j0 + dx, bw)
                        if y + dy < th:  # q's, its columns max(xa + dx, 0) .. min(xb + dx, bw)
                            c0, c1 = max(xa + dx, 0), min(xb + dx, bw)
                            _accumulate(S, y + dy, c0, w, c0 - dx - xa, X, C, y + M, M + j0 + c0 - dx, c1 - c0)
                _add(A, S, th, C, nv)
            for y in range(th):  # the block's columns of the output rows
                for i in range(bw):
                    inv = f32(1.0) / (A[y, C, i] + f32(1.0))
                    for c in range(C):
                        out[y, c, j0 + i] = (A[y, c, i] + X[c, y + M, np.uint64(M + j0 + i)]) * inv
        for y in range(th):
            _finish(out[y], C, W, epi, yu8, yu16, yf32, ky, b, i0 + y)


def _scratch(C, W, P, R, band_rows):
    """The working buffers of ``_nl_means`` (shape, dtype)."""
    f, M = P // 2, P // 2 + R
    wide = BLOCK + 2 * R + SLACK
    return (((C, band_rows + 2 * M, W + 2 * M + SLACK), np.float32), ((P, wide + 2 * f), np.float32),
            ((wide + 2 * f,), np.float32), ((wide,), np.float32), ((band_rows, C + 1, BLOCK + SLACK), np.float32),
            ((band_rows, C + 1, BLOCK + SLACK), np.float32), ((band_rows, C, W), np.float32))


def nl_means(img, h, sigma, patch_size, search_radius, border, border_value, fusion=None):
    """``ops.nlm``'s implementation on the engine: ``h`` and ``sigma`` per image (tuples of
    floats), ``border`` a border code; returns the output tensor."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    pro, epi, dtype = cpu.fused(fusion, C, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    out = cpu.Output(_image.as_planes(y))
    area = patch_size * patch_size * C
    coefs = np.array([_image.finite_ratio(-LOG2E, v * v * area, LIMIT) for v in h], np.float32)
    floors = np.array([2 * s * s * area for s in sigma], np.float32)
    M = patch_size // 2 + search_radius
    rows = cpu.border_map(H, M, M, border)
    edges = cpu.edge_map(W, M, M, border)
    n_bands, band_rows = cpu.bands(B, H, min_rows=1)
    n_bands = max(n_bands, -(-H // BAND))
    band_rows = -(-H // n_bands)
    xa = cpu.image_args(x4)
    cpu.run(_nl_means, B * n_bands, *xa, *out.args, coefs, floors, patch_size, search_radius, rows, edges,
            f32(cpu.unit_scale(xa[3])), f32(border_value), pro, epi, n_bands, band_rows,
            scratch=_scratch(C, W, patch_size, search_radius, band_rows))
    out.finish()
    return y
