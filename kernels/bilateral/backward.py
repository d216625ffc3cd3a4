"""The gradient of the bilateral filter, ``bilateral_backward_kernel``, and its launch.

It works on ``(CP, BH, BW)`` blocks (CP, a power of two >= C, masked) of all channels at
once, one exponential per tap, the window's rows and columns as run-time loops: unrolled
columns made Triton 3.6 keep every tap's shifted block live (255 registers and spills)."""
import triton
import triton.language as tl

from . import plan as plans
from .common import LOG2E, _guide_batch_stride, _row, _wide
from ..core import borders
from ..core.launch import launch as launch_kernel, tile_config
from ..core.tiling import cdiv, interpreting, needs_int64, offset, pow2_at_least


@triton.jit
def _adjoint_row(AB, b, r, cols, H, W, C: tl.constexpr, OFF64: tl.constexpr):
    """Row r of ``bilateral_kernel``'s ADJOINT output AB (contiguous) at ``cols``: the C
    vectors of A and -beta, zero outside the image (no output there)."""
    inside = borders.inside(r, H) & borders.inside(cols, W)
    n = _wide((H, W), OFF64)
    plane = n[0] * n[1]
    row = AB + b * (C + 1) * plane + offset(tl.minimum(tl.maximum(r, 0), H - 1), W, OFF64)
    ptrs = row + tl.minimum(tl.maximum(cols, 0), W - 1)
    a = ()
    for c in tl.static_range(C):
        a = a + (tl.load(ptrs + c * plane, inside, other=0.0),)
    return a, tl.load(ptrs + C * plane, inside, other=0.0)


@triton.jit
def _pair(zv, zg, k: tl.constexpr, dx, dy, xp, gp, ap, nbp, xt, gt, at, nbt, space, color, natural,
          C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr,
          JOINT: tl.constexpr):
    """Add the pair (t, p), t being slot k's extended position and p = t + (dx, dy) the
    loaded one, into slot k's gradient sums (``bilateral_backward_kernel``); skipped (a
    uniform branch) outside a disk window and at the centre, whose value term A_t the sums
    start with and whose guide term is 0."""
    if DISK:
        take = (dx * dx + dy * dy <= R * R) & ((dx != 0) | (dy != 0))
    else:
        take = (dx != 0) | (dy != 0)
    if take:
        d = ()
        for c in tl.static_range(CG):
            d = d + (gt[k * CG + c] - gp[c],)
        if L1:
            s = tl.abs(d[0])
            for c in tl.static_range(1, CG):
                s += tl.abs(d[c])
            d2 = s * s
        else:
            d2 = d[0] * d[0]
            for c in tl.static_range(1, CG):
                d2 += d[c] * d[c]
        w = tl.exp2(space * (dx * dx) + space * (dy * dy) + color * d2)
        e = nbt[k] + nbp
        for c in tl.static_range(C):
            e += at[k * C + c] * xp[c]
            e += ap[c] * xt[k * C + c]
        # dL/dD^2 of the pair; w first, so that an underflowed weight gives 0, never 0 * inf
        f = ((e + e) * w) * natural
        if L1:
            f = f * s
        for c in tl.static_range(C):
            zv = zv[:k * C + c] + (zv[k * C + c] + w * ap[c],) + zv[k * C + c + 1:]
        for c in tl.static_range(CG):
            if L1:
                term = tl.where(d[c] > 0, f, tl.where(d[c] < 0, -f, 0.0))  # sign(0) = 0, as torch's abs
            else:
                term = f * d[c]
            if JOINT:
                zg = zg[:k * CG + c] + (zg[k * CG + c] + term,) + zg[k * CG + c + 1:]
            else:
                zv = zv[:k * C + c] + (zv[k * C + c] + term,) + zv[k * C + c + 1:]
    return zv, zg


@triton.jit
def _extended_position(x_base, g_base, AB, b, r, cols, H, W, sx, sg, border_value, C: tl.constexpr,
                       CG: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
                       OFF64: tl.constexpr):
    """Everything the gradient needs of row r at ``cols``: values, guide (the values unless
    JOINT), A and -beta."""
    x = _row(x_base, r, cols, H, W, sx[0], sx[1], sx[2], border_value, C, (), (), BORDER, NEAR)
    if JOINT:
        g = _row(g_base, r, cols, H, W, sg[0], sg[1], sg[2], border_value, CG, (), (), BORDER, NEAR)
    else:
        g = x
    a, nb = _adjoint_row(AB, b, r, cols, H, W, C, OFF64)
    return x, g, a, nb


@triton.jit
def _fold_row(D, b, r, cols, ok, z, k: tl.constexpr, N: tl.constexpr, H, W, R: tl.constexpr,
              BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr):
    """Add slot k's N gradient vectors, at the extended grid's row r and ``cols``, into the
    pixels of D (contiguous (B, N, H, W), zeroed) that the border reads those positions
    from (``borders.fold_add``): pixels within R + 1 of an edge receive several."""
    if NEAR:
        rr = borders.remap_near(r, H, BORDER)
        cc = borders.remap_near(cols, W, BORDER)
    else:
        rr = borders.remap(r, H, BORDER)
        cc = borders.remap(cols, W, BORDER)
    n = _wide((H, W), OFF64)
    plane = n[0] * n[1]
    ptrs = D + b * N * plane + offset(rr, W, OFF64) + cc
    inside = borders.inside(r, H) & borders.inside(cols, W)
    band = (rr <= R) | (rr >= H - 1 - R) | (cc <= R) | (cc >= W - 1 - R)
    for c in tl.static_range(N):
        borders.fold_add(ptrs + c * plane, z[k * N + c], ok, inside, band, BORDER)


@triton.jit
def bilateral_backward_kernel(X, G, AB, DX, DG, COLOR, SPACE, H, W, x_strides, g_strides,
                              border_value, C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr,
                              DISK: tl.constexpr, L1: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr,
                              NEAR: tl.constexpr, OFF64: tl.constexpr, SLIDE: tl.constexpr, K: tl.constexpr,
                              BW: tl.constexpr):
    """The gradient of ``bilateral_kernel``: DX += dL/dX and, when JOINT, DG += dL/dG
    (contiguous float32 (B, C or CG, H, W), zeroed), from AB, the ADJOINT pass's A = dL/dY
    / DEN and -beta = -(A . Y) (``_adjoint_row``).

    The forward's output at p is Y_p = sum_q w(p, q) X_q / DEN_p. Gathered at each position
    t of the border-extended grid (H + 2R) x (W + 2R), over the window's offsets d with
    p = t + d: the value path DX[t] += w(p, t) A_p (p in the image), and the guide path
    DG[t] += (e(t, p) + e(p, t)) dD^2(g_t - g_p)/dg_t, where e(a, b) = k w(a, b) (A_a . X_b
    - A_a . Y_a), k the natural colour coefficient. The window and the distances are
    symmetric, so w(t, p) = w(p, t): one exp2 a pair serves both paths and both
    directions, and A and beta are zero outside the image. The border fold goes into the
    store (``_fold_row``). Without a guide (JOINT false) both paths go into DX.

    The positions are rows of BW columns, as the forward's outputs, with the same two
    ways of reusing a loaded row: SLIDE, 2R + 1 rotating slots of pending positions down
    a strip of K rows; otherwise blocks of K rows. A slot keeps its sums, values, guide, A
    and -beta: C + 1 vectors more than the forward's."""
    pid = tl.program_id(0)
    HE = H + 2 * R
    tiles_w = tl.cdiv(W + 2 * R, BW)
    tiles = tiles_w * tl.cdiv(HE, K)
    b = (pid // tiles).to(tl.int64)
    t = pid % tiles
    h0 = (t // tiles_w) * K - R  # this program's first row and columns, in image coordinates
    cols = (t % tiles_w) * BW - R + tl.arange(0, BW)
    col_ok = cols < W + R
    sx = _wide(x_strides[1:], OFF64)
    sg = _wide(g_strides[1:], OFF64)
    color = tl.load(COLOR + b)
    space = tl.load(SPACE + b)
    natural = color / LOG2E
    x_base = X + b * x_strides[0]
    g_base = G + b * g_strides[0]
    fresh = ()  # a slot's new guide sums: none without a guide
    if JOINT:
        for _ in tl.static_range(CG):
            fresh = fresh + (tl.zeros((BW,), dtype=tl.float32),)
    if SLIDE:
        # slot j holds position row r + R - j while input row r is added (dy = j - R); the
        # slots of rows above h0 are scratch (never stored), so they start as row h0
        x, g, a, nb = _extended_position(x_base, g_base, AB, b, h0, cols, H, W, sx, sg, border_value, C, CG,
                                         JOINT, BORDER, NEAR, OFF64)
        xt, gt, at, nbt, zv, zg = x, g, a, (nb,), a, fresh
        for _ in tl.static_range(2 * R):
            xt, gt, at, nbt, zv, zg = xt + x, gt + g, at + a, nbt + (nb,), zv + a, zg + fresh
        h1 = tl.minimum(h0 + K, H + R)
        for r in range(h0 - R, h1 + R):
            for dx in range(-R, R + 1):
                xp, gp, ap, nbp = _extended_position(x_base, g_base, AB, b, r, cols + dx, H, W, sx, sg,
                                                     border_value, C, CG, JOINT, BORDER, NEAR, OFF64)
                for j in tl.static_range(2 * R + 1):
                    zv, zg = _pair(zv, zg, j, dx, j - R, xp, gp, ap, nbp, xt, gt, at, nbt, space, color, natural,
                                   C, CG, R, DISK, L1, JOINT)
            done = r - R
            _fold_row(DX, b, done, cols, col_ok & (done >= h0), zv, 2 * R, C, H, W, R, BORDER, NEAR, OFF64)
            if JOINT:
                _fold_row(DG, b, done, cols, col_ok & (done >= h0), zg, 2 * R, CG, H, W, R, BORDER, NEAR, OFF64)
            x, g, a, nb = _extended_position(x_base, g_base, AB, b, r + R + 1, cols, H, W, sx, sg, border_value,
                                             C, CG, JOINT, BORDER, NEAR, OFF64)
            xt, gt, at, nbt = x + xt[:2 * R * C], g + gt[:2 * R * CG], a + at[:2 * R * C], (nb,) + nbt[:2 * R]
            zv, zg = a + zv[:2 * R * C], fresh + zg[:len(fresh) * 2 * R]
    else:
        xt, gt, at, nbt, zv, zg = (), (), (), (), (), ()
        for k in tl.static_range(K):
            x, g, a, nb = _extended_position(x_base, g_base, AB, b, h0 + k, cols, H, W, sx, sg, border_value, C,
                                             CG, JOINT, BORDER, NEAR, OFF64)
            xt, gt, at, nbt, zv, zg = xt + x, gt + g, at + a, nbt + (nb,), zv + a, zg + fresh
        for dx in range(-R, R + 1):
            for i in range(K + 2 * R):
                xp, gp, ap, nbp = _extended_position(x_base, g_base, AB, b, h0 - R + i, cols + dx, H, W, sx, sg,
                                                     border_value, C, CG, JOINT, BORDER, NEAR, OFF64)
                for k in tl.static_range(K):
                    dy = i - R - k
                    if dy * dy <= R * R:
                        zv, zg = _pair(zv, zg, k, dx, dy, xp, gp, ap, nbp, xt, gt, at, nbt, space, color, natural,
                                       C, CG, R, DISK, L1, JOINT)
        for k in tl.static_range(K):
            ok = col_ok & (h0 + k < H + R)
            _fold_row(DX, b, h0 + k, cols, ok, zv, k, C, H, W, R, BORDER, NEAR, OFF64)
            if JOINT:
                _fold_row(DG, b, h0 + k, cols, ok, zg, k, CG, H, W, R, BORDER, NEAR, OFF64)


def launch_backward(x, guide, ab, dx, dg, color, space, radius, disk, l1, joint, border=0, border_value=0.0,
                    tile=None):
    """Add the gradients of ``launch`` into ``dx`` (B, C, H, W) and, when ``joint``, ``dg``
    (B, CG, H, W), both contiguous float32 and zeroed, from ``ab``, ``launch``'s adjoint
    buffer. ``tile``, a dict of SLIDE, K, BW and num_warps, bypasses the tile choice."""
    B, C, H, W = x.shape
    CG = guide.shape[1] if joint else C
    HE, WE = H + 2 * radius, W + 2 * radius
    if tile is None:
        tile = plans.backward_tile(C, CG, radius, joint)
        if interpreting():  # one column strip per image: the interpreter's cost is per operation
            tile.update(K=HE if tile["SLIDE"] else min(HE, 16), BW=pow2_at_least(WE, 16, 128))
    args = (x, guide, ab, dx, dg if joint else dx, color, space, H, W, x.stride(),
            (_guide_batch_stride(guide, B), *guide.stride()[1:]), float(border_value))
    meta = dict(C=C, CG=CG, R=radius, DISK=disk, L1=l1, JOINT=joint, BORDER=border, NEAR=2 * radius < min(H, W),
                OFF64=needs_int64(x, guide, ab))
    launch_kernel(bilateral_backward_kernel, lambda m: (B * cdiv(HE, m["K"]) * cdiv(WE, m["BW"]),), args, meta, x,
                  tile_config(**tile))
