"""``estimate_noise`` on the device: two launches per round, nothing image-sized, no
wait for the host between rounds.

Sums (``stats_kernel``).

The estimate looks at the 7 x 7 patches of each channel on a regular grid of positions
(``stride`` apart) and needs, per image, the sums over the *kept* patches of their outer
products, of the patches themselves and their count: one 50 x 50 matrix, the patch with
a 1 appended, multiplied by itself. A patch is kept when its gradient energy, the
quadratic form ``p' D p`` of the central-difference operators, is below the round's limit
(infinite in the first round).

Each program walks blocks of BLOCK patches of one image: it gathers the block as a
(BLOCK, 64) float32 matrix (the 49 values, the 1, zero padding) straight from the image's
dtype, takes the energies as one product with D and the sums as one product of the block
with itself, both on tensor cores in three TF32 passes (``tf32x3``: float32's precision;
one pass for 8-bit images, whose values, products and sums TF32 holds exactly), adds them
to a float64 total and, at the end, atomically to the image's sums. The values
are shifted by the image's first pixel (the covariance does not change; the cancellation
in ``S / n - m m'`` shrinks to the image's range), so a block's float32 products carry
about 1e-7 of the total, errors that average out over the blocks in float64; 8-bit
images are summed exactly (their products and a block's sums stay below 2^24). The atomic
float64 additions make the last bits of the sums depend on the order programs finish, a
difference of about 1e-16 that the estimate does not see.

Variance: the covariance of the kept patches from the sums, its eigenvalues, and Chen et
al.'s mean of the smallest (see ``imgfilters/ops/noise.py``), all in float64.
The last program of the sums kernel to finish an image (``_last_of``: a ticket counted
atomically) brings its 49 x 49 covariance to tridiagonal form by Householder reflections
(``_tridiagonal``), 47 sequential steps on the register-resident matrix;
``eigenvalue_kernel`` (a program per image and eigenvalue) finds each eigenvalue by
multisection from Sturm counts (the number of eigenvalues below x is the number of
negative pivots of T - x I): each pass counts at POINTS points at once, one per thread,
and keeps the interval between two of them that holds it, so PASSES passes of the 49-step
recurrence (not 49 of bisection) reach 2^-48 of the spectrum's width; its last program per
image applies Chen et al.'s rule (``_variance_rule``) and writes the next round's energy
limit. So the rounds need no host: on the H200's host, LAPACK alone took 80-110 us per
49 x 49 eigenvalue problem, and every round would wait for a copy both ways; and the
last-program tails halve the launches, whose host time the device waited for.

On the H200 a 4K uint8 image's round takes about 130 us: the sums kernel with its
tridiagonal tail 95 (the tail's steps are bound by the matrix-wide reductions each
needs), the eigenvalue kernel with its rule 37 (PERFORMANCE.md).
"""
import triton
import triton.language as tl

from .core import pixels
from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import cdiv, interpreting, needs_int64, next_pow2, offset

PATCH = 7
STATS = PATCH * PATCH + 1  # the 49 patch values and the appended 1
WIDTH: tl.constexpr = tl.constexpr(64)  # a patch's STATS values zero padded, and the side of the matrices
PROGRAMS = 256  # programs per launch, about two per multiprocessor (each stays in one image)
BLOCK = 64  # patches per product on the GPU
INTERPRETER_BLOCK = 2 ** 14  # the interpreter's: few, large operations (a block is at most 2^20 values)
# Sturm counts per eigenvalue and pass, and the warps that run them: 257^6 > 2^48, 2^-48 of
# the spectrum's width (H200: 37 us a round against 40 at 128 points and 7 passes, 4 warps)
POINTS, PASSES, EIGENVALUE_WARPS = 256, 6, 8
# Warps of the sums kernel, whose last program per image also runs the tridiagonal form
# (H200, PERFORMANCE.md)
STATS_WARPS = 4


@triton.jit
def stats_kernel(x, form, limits, sums, work, tickets, sxb, sxc, sxh, sxw, n, nw, per_channel, stride, blocks, P,
                 PATCH: tl.constexpr, BLOCK: tl.constexpr, OFF64: tl.constexpr, PRECISION: tl.constexpr,
                 TAIL: tl.constexpr):
    STATS: tl.constexpr = PATCH * PATCH + 1
    pid = tl.program_id(0)
    b = pid // P
    part = pid - b * P
    j = tl.arange(0, WIDTH)
    inside = j < PATCH * PATCH
    dr, dc = j // PATCH, j % PATCH
    image = x + b.to(tl.int64) * sxb
    shift = pixels.load_raw(image)
    limit = tl.load(limits + b)
    d = tl.load(form + j[:, None] * WIDTH + j[None, :])
    total = tl.zeros((WIDTH, WIDTH), tl.float64)
    for t in range(part, blocks, P):
        k = t * BLOCK + tl.arange(0, BLOCK)
        valid = k < n
        c = k // per_channel
        rest = k - c * per_channel
        r = rest // nw
        row = r * stride
        col = (rest - r * nw) * stride
        ptrs = (image + offset(c, sxc, OFF64)[:, None] + offset(row[:, None] + dr[None, :], sxh, OFF64)
                + offset(col[:, None] + dc[None, :], sxw, OFF64))
        m = valid[:, None] & inside[None, :]
        p = tl.where(m, pixels.load_raw(ptrs, m) - shift, 0.0)
        energy = tl.sum(tl.dot(p, d, input_precision=PRECISION) * p, 1)
        keep = valid & (energy < limit)
        p = tl.where(keep[:, None], tl.where(j[None, :] == STATS - 1, 1.0, p), 0.0)
        total += tl.dot(tl.trans(p), p, input_precision=PRECISION).to(tl.float64)
    image_sums = sums + b.to(tl.int64) * (STATS * STATS)
    tl.atomic_add(image_sums + j[:, None] * STATS + j[None, :], total, (j[:, None] < STATS) & (j[None, :] < STATS),
                  sem="relaxed")
    if TAIL:
        if _last_of(tickets + b, P):
            _tridiagonal(image_sums, work + b.to(tl.int64) * (3 * WIDTH), PATCH)


@triton.jit
def _last_of(ticket, programs):
    """True in the last of ``programs`` programs to get here with the same ``ticket`` (a
    zeroed float64): the one that sees every other's writes (the barrier orders this
    program's threads' writes before its ticket, and the ticket's acquire-release orders
    the programs)."""
    tl.debug_barrier()
    return tl.atomic_add(ticket, 1.0, sem="acq_rel") == programs - 1


def launch(x, form, limits, sums, stride, work=None, tickets=None):
    """Add the kept sampled patches of each image of the (B, C, H, W) ``x`` to ``sums``
    (B, 50, 50) float64, zero or holding earlier sums: the patches at rows and columns
    ``0, stride, 2 stride, ...`` of each channel; ``form`` the (64, 64) float32 energy form
    (zero past 49), ``limits`` (B,) float32 energy limits in the image's stored units.
    With ``work`` (B, 3, 64) float64 and ``tickets`` (B,) zeroed float64, the last program
    of each image then brings its covariance to tridiagonal form in ``work`` (for
    ``eigenvalues``)."""
    B, C, H, W = x.shape
    nh, nw = cdiv(H - PATCH + 1, stride), cdiv(W - PATCH + 1, stride)
    n = C * nh * nw
    if interpreting():
        block, P = min(INTERPRETER_BLOCK, max(16, next_pow2(n))), 1
    else:
        block, P = BLOCK, max(1, min(cdiv(n, BLOCK), cdiv(PROGRAMS, B)))
    tail = work is not None
    args = (x, form, limits, sums, work if tail else sums, tickets if tail else sums, x.stride(0), x.stride(1),
            x.stride(2), x.stride(3), n, nw, nh * nw, stride, cdiv(n, block), P)
    # 8-bit values (shifted: |p| <= 255) and the form's quarters are exact in TF32, and so
    # are their products and a block's sums (below 2^24): one TF32 pass gives the same sums
    precision = "tf32" if x.element_size() == 1 else "tf32x3"
    launch_kernel(stats_kernel, lambda m: (B * P,), args,
                  dict(PATCH=PATCH, BLOCK=block, OFF64=needs_int64(x), PRECISION=precision, TAIL=tail), x,
                  tile_config(num_warps=STATS_WARPS))


@triton.jit
def _tridiagonal(s, t, PATCH: tl.constexpr):
    """The covariance of an image's kept patches from its sums at ``s`` (written by other
    programs: read past this multiprocessor's L1), reduced to tridiagonal form; its
    diagonal to ``t[0:64]``, squared subdiagonal to ``t[64:128]``."""
    N: tl.constexpr = PATCH * PATCH
    STATS: tl.constexpr = N + 1
    i = tl.arange(0, WIDTH)[:, None]  # rows
    j = tl.arange(0, WIDTH)[None, :]  # columns
    r = tl.arange(0, WIDTH)  # a row vector's index (SliceLayout 1 of the matrix)
    n = tl.maximum(tl.load(s + N * STATS + N, cache_modifier=".cg"), 2.0)
    total_r = tl.load(s + i * STATS + N, i < N, other=0.0, cache_modifier=".cg")  # (64, 1)
    total_c = tl.load(s + N * STATS + j, j < N, other=0.0, cache_modifier=".cg")  # (1, 64): the same, by symmetry
    a = tl.load(s + i * STATS + j, (i < N) & (j < N), other=0.0, cache_modifier=".cg")
    a = (a - total_r * total_c / n) / (n - 1.0)
    # Householder: step k zeroes column k below the subdiagonal, and row k. The matrix stays
    # exactly symmetric (the update adds the same two products at (i, j) and (j, i), and a
    # vector moved from the row layout to the column layout keeps its bits), so no
    # asymmetry builds up for the next steps to amplify.
    for k in range(0, N - 2):
        x = tl.where(r > k, tl.sum(tl.where(j == k, a, 0.0), 1), 0.0)
        norm2 = tl.sum(x * x, 0)
        head = tl.sum(tl.where(r == k + 1, x, 0.0), 0)
        alpha = tl.where(head > 0, -tl.sqrt(norm2), tl.sqrt(norm2))
        v = tl.where(r == k + 1, x - alpha, x)
        vv = norm2 - 2.0 * alpha * head + alpha * alpha
        beta = tl.where(vv > 0, 2.0 / tl.where(vv > 0, vv, 1.0), 0.0)
        v_c = v[None, :]
        p = beta * tl.sum(a * v_c, 1)
        w = p - 0.5 * beta * tl.sum(v * p, 0) * v
        a = a - (v[:, None] * w[None, :] + w[:, None] * v_c)
    d = tl.sum(tl.where(i == j, a, 0.0), 1)  # diagonal, rows 0..N-1
    e = tl.sum(tl.where(i == j + 1, a, 0.0), 0)  # subdiagonal: e[k] = T[k + 1, k]
    tl.store(t + r, d)
    tl.store(t + WIDTH + tl.arange(0, WIDTH), e * e)


@triton.jit
def eigenvalue_kernel(work, tickets, sums, previous, var, limits, sigma, threshold, unit, PATCH: tl.constexpr,
                      EIGS: tl.constexpr, POINTS: tl.constexpr, PASSES: tl.constexpr):
    """Program (b, g): the (m + 1)-th smallest eigenvalues of image b's tridiagonal form,
    m = g * EIGS ... g * EIGS + EIGS - 1, into ``work[b, 2, m]``, by multisection of the
    Gershgorin interval at POINTS points per pass; the last program of image b then
    applies Chen et al.'s rule (``_variance_rule``)."""
    N: tl.constexpr = PATCH * PATCH
    b = tl.program_id(0)
    m = tl.program_id(1) * EIGS + tl.arange(0, EIGS)[:, None]  # (EIGS, 1)
    t = work + b.to(tl.int64) * (3 * WIDTH)
    r = tl.arange(0, WIDTH)
    d = tl.load(t + r)
    e_below = tl.sqrt(tl.load(t + WIDTH + r))
    e_above = tl.sqrt(tl.load(t + WIDTH + r - 1, r >= 1, other=0.0))
    radius = e_above + tl.where(r < N - 1, e_below, 0.0)
    low = tl.min(tl.where(r < N, d - radius, 1e300), 0)
    high = tl.max(tl.where(r < N, d + radius, -1e300), 0)
    tiny = 1e-300 + 2.3e-16 * (high - low)  # LAPACK's pivot floor, relative to the spectrum
    at = (tl.arange(0, POINTS)[None, :] + 1).to(tl.float64) / (POINTS + 1)
    lo = tl.zeros((EIGS, 1), tl.float64) + low
    hi = tl.zeros((EIGS, 1), tl.float64) + high
    for _ in range(PASSES):
        x = lo + (hi - lo) * at  # (EIGS, POINTS)
        q = tl.load(t) - x
        q = tl.where(tl.abs(q) < tiny, -tiny, q)
        below = (q < 0).to(tl.int32)
        for k in range(1, N):
            q = tl.load(t + k) - x - tl.load(t + WIDTH + k - 1) / q
            q = tl.where(tl.abs(q) < tiny, -tiny, q)
            below += (q < 0).to(tl.int32)
        above = below <= m  # the eigenvalue is at or above x
        lo = tl.maximum(lo, tl.max(tl.where(above, x, -1e300), 1)[:, None])
        hi = tl.minimum(hi, tl.min(tl.where(above, 1e300, x), 1)[:, None])
    tl.store(t + 2 * WIDTH + m, 0.5 * (lo + hi), m < N)
    if _last_of(tickets + b, tl.num_programs(1)):
        _variance_rule(t, sums, previous, var, limits, sigma, threshold, unit, b, PATCH)


@triton.jit
def _variance_rule(t, sums, previous, var, limits, sigma, threshold, unit, b, PATCH: tl.constexpr):
    """Chen et al.'s variance of image b from its eigenvalues (ascending, ``t[128:177]``,
    written by other programs), the next round's energy limit, and the noise sigma in
    unit scale (``unit`` per stored unit). With too few kept patches for a covariance the
    previous round's variance stands (never in the first round, which keeps every patch:
    at least ``MIN_PATCHES``)."""
    N: tl.constexpr = PATCH * PATCH
    STATS: tl.constexpr = N + 1
    r = tl.arange(0, WIDTH)
    values = tl.load(t + 2 * WIDTH + r, r < N, other=0.0, cache_modifier=".cg")
    # the mean of the largest prefix of eigenvalues whose mean is at most its median
    means = tl.cumsum(values, 0) / (r + 1).to(tl.float64)
    medians = 0.5 * (tl.gather(values, r // 2, 0) + tl.gather(values, (r + 1) // 2, 0))  # of the first r + 1
    last = tl.max(tl.where((means <= medians * (1 + 1e-12)) & (r < N), r, -1), 0)
    v = tl.maximum(tl.sum(tl.where(r == last, means, 0.0), 0), 0.0)
    count = tl.load(sums + b.to(tl.int64) * (STATS * STATS) + N * STATS + N, cache_modifier=".cg")
    v = tl.where(count > 2 * N, v, tl.load(previous + b))
    tl.store(var + b, v)
    tl.store(limits + b, (v * threshold).to(tl.float32))
    tl.store(sigma + b, tl.sqrt(v) * unit)


def eigenvalues(work, tickets, sums, previous, var, limits, sigma, threshold, unit):
    """Chen et al.'s noise variance of each image from its round's tridiagonal form in
    ``work`` (B, 3, 64) float64 (``launch``) into ``var`` (B,) float64, ``var *
    threshold`` into ``limits`` (B,) float32, the next round's energy limits, and
    ``sqrt(var) * unit`` into ``sigma`` (B,) (any float dtype); ``sums``
    (B, 50, 50) the round's sums, ``previous`` (B,) the previous round's variances (they
    stand where too few patches were kept), ``tickets`` (B,) zeroed float64."""
    B = sums.shape[0]
    eigs, points, passes = (64, 4096, 4) if interpreting() else (1, POINTS, PASSES)  # 4097^4 > 2^48
    launch_kernel(eigenvalue_kernel, lambda m: (B, cdiv(PATCH * PATCH, eigs)),
                  (work, tickets, sums, previous, var, limits, sigma, float(threshold), float(unit)),
                  dict(PATCH=PATCH, EIGS=eigs, POINTS=points, PASSES=passes), sums,
                  tile_config(num_warps=EIGENVALUE_WARPS))
