"""The guided filter's launches (``imgfilters/ops/guided.py`` follows the first with the
box means of ``kernels/sliding.py``, and puts the box's adjoint between the gradients'
launches):

- ``models_kernel``: the local linear models ``a`` and ``b`` from the image and the guide,
  the window sums of their products sliding in registers (``kernels/sliding.py``; no
  plane of means or products is written): a grey guide's ``a = cov / (var + eps)`` per
  channel, a colour guide's 3 x 3 system solved by its adjugate, and ``b = mean_x - a .
  mean_g``, written as the stacked float32 planes the box means read. Under VJP the same
  window sums, recomputed, and the models' gradient taken back to the window means (one
  plane a term) and eps;
- ``apply_kernel``: the fast guided filter's output, ``mean_a . guide + mean_b`` from the
  box means upsampled bilinearly in place, stored in the image's dtype and layout; under
  VJP the gradients to the means and the guide (at full size the box launch of
  ``kernels/sliding.py`` does both);
- ``terms_vjp_kernel``: the gradients to the image and the guide from their terms'.

The arithmetic is ``reference.guided.coefficients``' in float32, in its order of
operations.
"""
import torch
import triton
import triton.language as tl

from . import sliding
from .core import borders, neighbourhood, pixels
from .core.launch import launch, tile_config
from .core.tiling import cdiv, interpreted, needs_int64, offset, pow2_at_least


@triton.jit
def _no_terms(zero, G: tl.constexpr, C: tl.constexpr):
    """``_terms``' tuple, every term ``zero``."""
    t = ()
    for _ in tl.static_range((2 + 2 * C) if G == 1 else (9 + 4 * C)):
        t = t + (zero,)
    return t


@triton.jit
def _terms(gs, xs, G: tl.constexpr, C: tl.constexpr):
    """The window's terms at one pixel, in the order of the models' means: the guide's G
    values, their products (grey: g g; colour: the six g_i g_j, i <= j), the image's C
    values, then g x (G * C, g major)."""
    if G == 1:
        t = (gs[0], gs[0] * gs[0])
    else:
        t = (gs[0], gs[1], gs[2], gs[0] * gs[0], gs[0] * gs[1], gs[0] * gs[2], gs[1] * gs[1], gs[1] * gs[2],
             gs[2] * gs[2])
    for c in tl.static_range(C):
        t = t + (xs[c],)
    for g in tl.static_range(G):
        for c in tl.static_range(C):
            t = t + (gs[g] * xs[c],)
    return t


@triton.jit
def _row_sums(x_img, g_img, r, cols, H, W, sxc, sxh, sxw, sgc, sgh, sgw, zero,
              R: tl.constexpr, G: tl.constexpr, C: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
              OFF64: tl.constexpr):
    """The window's terms of input row ``r`` summed over the 2R + 1 columns around each of
    ``cols`` (the border extends the image; the constant border reads zeros). NEAR: the
    radius is below both sides, so one fold maps every index the outputs read
    (``borders.remap_near``, without ``remap``'s integer modulo a tap)."""
    rm = borders.remap_within(r, H, BORDER, NEAR)
    x_row = x_img + offset(rm, sxh, OFF64)
    g_row = g_img + offset(rm, sgh, OFF64)
    row_in = borders.inside(r, H)
    sums = _no_terms(zero, G, C)
    for v in range(2 * R + 1):
        col = cols + (v - R)
        cm = borders.remap_within(col, W, BORDER, NEAR)
        ok = row_in & borders.inside(col, W)  # (read by the constant border only)
        gs = ()
        for g in tl.static_range(G):
            gs = gs + (neighbourhood.load(g_row + g * sgc + offset(cm, sgw, OFF64), ok, 0.0, g, (), (),
                                          neighbourhood.UNIT, BORDER),)
        xs = ()
        for c in tl.static_range(C):
            xs = xs + (neighbourhood.load(x_row + c * sxc + offset(cm, sxw, OFF64), ok, 0.0, c, (), (),
                                          neighbourhood.UNIT, BORDER),)
        sums = sliding.plus(sums, _terms(gs, xs, G, C), 1)
    return sums


@triton.jit
def _row_terms(x_img, g_img, r, H, x_steps, g_steps, columns, G: tl.constexpr, C: tl.constexpr,
               BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr):
    """The window's terms (``_terms``) of input row r at the lanes' columns, less those at
    their columns 2R + 1 to the left (``sliding``). ``x_steps`` and ``g_steps``: the image's
    and the guide's channel and row strides; ``columns``: the two columns' offsets in the
    image and in the guide, and their load masks."""
    sxc, sxh = x_steps
    sgc, sgh = g_steps
    x_own, x_back, g_own, g_back, own_ok, back_ok = columns
    rm, own_ok, back_ok = sliding.row_masks(r, H, own_ok, back_ok, BORDER, NEAR)
    x_row = x_img + offset(rm, sxh, OFF64)
    g_row = g_img + offset(rm, sgh, OFF64)
    gs = ()
    gb = ()
    for g in tl.static_range(G):
        gs = gs + (pixels.to_float(tl.load(g_row + g * sgc + g_own, own_ok, 0)),)
        gb = gb + (pixels.to_float(tl.load(g_row + g * sgc + g_back, back_ok, 0)),)
    xs = ()
    xb = ()
    for c in tl.static_range(C):
        xs = xs + (pixels.to_float(tl.load(x_row + c * sxc + x_own, own_ok, 0)),)
        xb = xb + (pixels.to_float(tl.load(x_row + c * sxc + x_back, back_ok, 0)),)
    return sliding.plus(_terms(gs, xs, G, C), _terms(gb, xb, G, C), -1)


@triton.jit
def _inverse(m, eps):
    """The colour guide's window covariance plus eps, S = mean(g g^T) - mean_g mean_g^T + eps I,
    from the window means ``m`` (``_terms``' order): the six entries of its adjugate
    (c00, c01, c02, c11, c12, c22; symmetric) and its determinant, S^-1 = adj / det
    (Cramer's rule)."""
    g0, g1, g2 = m[0], m[1], m[2]
    s00 = m[3] - g0 * g0 + eps
    s01 = m[4] - g0 * g1
    s02 = m[5] - g0 * g2
    s11 = m[6] - g1 * g1 + eps
    s12 = m[7] - g1 * g2
    s22 = m[8] - g2 * g2 + eps
    c00, c01, c02 = s11 * s22 - s12 * s12, s02 * s12 - s01 * s22, s01 * s12 - s02 * s11
    c11, c12, c22 = s00 * s22 - s02 * s02, s01 * s02 - s00 * s12, s00 * s11 - s01 * s01
    return (c00, c01, c02, c11, c12, c22), s00 * c00 + s01 * c01 + s02 * c02


@triton.jit
def _inverse_times(adj, det, v0, v1, v2):
    """S^-1 v from ``_inverse``'s adjugate and determinant."""
    return ((adj[0] * v0 + adj[1] * v1 + adj[2] * v2) / det,
            (adj[1] * v0 + adj[3] * v1 + adj[4] * v2) / det,
            (adj[2] * v0 + adj[4] * v1 + adj[5] * v2) / det)


@triton.jit
def _models(m, eps, G: tl.constexpr, C: tl.constexpr):
    """The local linear models of the window means ``m`` (``_terms``' order): ``a``'s
    G * C values (g major) and ``b``'s C. Grey guide: a = cov / (var + eps) per channel;
    colour: a = S^-1 cov; b = mean_x - a . mean_g."""
    a = ()
    b = ()
    if G == 1:
        mean_g = m[0]
        denominator = m[1] - mean_g * mean_g + eps
        for c in tl.static_range(C):
            mean_x = m[2 + c]
            a_c = (m[2 + C + c] - mean_g * mean_x) / denominator
            a = a + (a_c,)
            b = b + (mean_x - a_c * mean_g,)
    else:
        g0, g1, g2 = m[0], m[1], m[2]
        adj, det = _inverse(m, eps)
        a0s = ()
        a1s = ()
        a2s = ()
        for c in tl.static_range(C):
            mean_x = m[9 + c]
            a0, a1, a2 = _inverse_times(adj, det, m[9 + C + c] - g0 * mean_x, m[9 + 2 * C + c] - g1 * mean_x,
                                        m[9 + 3 * C + c] - g2 * mean_x)
            a0s = a0s + (a0,)
            a1s = a1s + (a1,)
            a2s = a2s + (a2,)
            b = b + (mean_x - (a0 * g0 + a1 * g1 + a2 * g2),)
        a = a0s + a1s + a2s
    return a, b


@triton.jit
def _models_vjp(m, eps, da, db, G: tl.constexpr, C: tl.constexpr):
    """Reverse mode through ``_models``: the gradients to the window means ``m`` (a tuple
    in ``_terms``' order) and to eps, for the gradients ``da`` (G * C, g major) and ``db``
    (C) of the models. With e_c = da_c - db_c mean_g (the gradient to a_c, b's share
    included): the covariance's d cov_c = S^-1 e_c, and dS = -sum_c d cov_c a_c^T (S
    symmetric); each mean's gradient collects those of the entries it enters."""
    a, b = _models(m, eps, G, C)
    if G == 1:
        mean_g = m[0]
        denominator = m[1] - mean_g * mean_g + eps
        d_var = tl.zeros_like(mean_g)
        d_mean_g = tl.zeros_like(mean_g)
        d_mean_x = ()
        d_cov = ()
        for c in tl.static_range(C):
            d_cov_c = (da[c] - db[c] * mean_g) / denominator
            d_var -= d_cov_c * a[c]
            d_mean_g -= db[c] * a[c] + d_cov_c * m[2 + c]
            d_mean_x = d_mean_x + (db[c] - d_cov_c * mean_g,)
            d_cov = d_cov + (d_cov_c,)
        d_mean_g -= 2.0 * mean_g * d_var
        return (d_mean_g, d_var) + d_mean_x + d_cov, d_var
    else:
        g0, g1, g2 = m[0], m[1], m[2]
        adj, det = _inverse(m, eps)
        zero = tl.zeros_like(g0)
        d00, d01, d02, d10, d11, d12, d20, d21, d22 = zero, zero, zero, zero, zero, zero, zero, zero, zero
        dg0, dg1, dg2 = zero, zero, zero
        d_mean_x = ()
        v0s = ()
        v1s = ()
        v2s = ()
        for c in tl.static_range(C):
            mean_x = m[9 + c]
            a0, a1, a2 = a[c], a[C + c], a[2 * C + c]
            v0, v1, v2 = _inverse_times(adj, det, da[c] - db[c] * g0, da[C + c] - db[c] * g1,
                                        da[2 * C + c] - db[c] * g2)
            d00 -= v0 * a0
            d01 -= v0 * a1
            d02 -= v0 * a2
            d10 -= v1 * a0
            d11 -= v1 * a1
            d12 -= v1 * a2
            d20 -= v2 * a0
            d21 -= v2 * a1
            d22 -= v2 * a2
            dg0 -= db[c] * a0 + v0 * mean_x
            dg1 -= db[c] * a1 + v1 * mean_x
            dg2 -= db[c] * a2 + v2 * mean_x
            d_mean_x = d_mean_x + (db[c] - (v0 * g0 + v1 * g1 + v2 * g2),)
            v0s = v0s + (v0,)
            v1s = v1s + (v1,)
            v2s = v2s + (v2,)
        # the products' means: S_ij and S_ji share one mean (i < j)
        s01, s02, s12 = d01 + d10, d02 + d20, d12 + d21
        dg0 -= 2.0 * d00 * g0 + s01 * g1 + s02 * g2
        dg1 -= s01 * g0 + 2.0 * d11 * g1 + s12 * g2
        dg2 -= s02 * g0 + s12 * g1 + 2.0 * d22 * g2
        return (dg0, dg1, dg2, d00, s01, s02, d11, s12, d22) + d_mean_x + v0s + v1s + v2s, d00 + d11 + d22


@triton.jit
def models_kernel(X, GD, OUT, D_AB, EPS, D_EPS, H, W, R0, ROWS, eps_stride, x_strides, g_strides,
                  R: tl.constexpr, G: tl.constexpr, C: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
                  VJP: tl.constexpr, EPS_GRAD: tl.constexpr, OFF64: tl.constexpr, BLOCK: tl.constexpr,
                  SEG: tl.constexpr):
    """OUT[b] = the models (``_models``: a's G * C planes, then b's C) of image X[b] (C
    channels, any dtype, unit scale) and guide GD[b] (G channels) over (2R + 1)^2 windows,
    at the ROWS rows from R0 (OUT's planes ROWS x W); eps is EPS[b * eps_stride]. VJP:
    OUT[b] = instead the gradients to the window means (``_models_vjp``, one plane a term
    of ``_terms``) for the models' gradients D_AB[b] (planes as the models'), and under
    EPS_GRAD D_EPS[program] = the program's share of the gradient to eps.

    One program a block of BLOCK lanes and SEG rows of one image, its window sums sliding
    (``kernels/sliding.py``); from the row where they stop being finite, the window's taps
    summed one by one (a NaN or inf reaches only the windows that hold it)."""
    sxb, sxc, sxh, sxw = x_strides
    sgb, sgc, sgh, sgw = g_strides
    col_blocks = tl.cdiv(W, BLOCK - 2 * R)
    per_image = col_blocks * tl.cdiv(ROWS, SEG)
    b = (tl.program_id(0) // per_image).to(tl.int64)
    t = tl.program_id(0) % per_image
    h0 = R0 + (t // col_blocks) * SEG
    own, own_ok, back, back_ok, cols, ok = sliding.lanes((t % col_blocks) * (BLOCK - 2 * R), W, W, R, BORDER, NEAR,
                                                         BLOCK)
    columns = (offset(own, sxw, OFF64), offset(back, sxw, OFF64), offset(own, sgw, OFF64), offset(back, sgw, OFF64),
               own_ok, back_ok)
    x_steps, g_steps = (sxc, sxh), (sgc, sgh)
    x_img = X + b * sxb
    g_img = GD + b * sgb
    HW = ROWS * W  # (OUT's and D_AB's planes)
    if OFF64:
        HW = HW.to(tl.int64)
    eps = tl.load(EPS + b * eps_stride)
    zero = tl.zeros((BLOCK,), dtype=tl.float32)
    d_eps = zero
    d = _no_terms(zero, G, C)
    # (the first 2R steps only enter rows: one loop body, so the kernel is compiled once)
    for o in range(h0 - 2 * R, tl.minimum(h0 + SEG, R0 + ROWS)):
        d = sliding.plus(d, _row_terms(x_img, g_img, o + R, H, x_steps, g_steps, columns, G, C, BORDER, NEAR, OFF64),
                         1)
        if o >= h0:
            if sliding.not_finite(d) > 0:
                sums = _no_terms(zero, G, C)
                for r in range(o - R, o + R + 1):
                    sums = sliding.plus(sums, _row_sums(x_img, g_img, r, cols, H, W, sxc, sxh, sxw, sgc, sgh, sgw, zero,
                                                        R, G, C, BORDER, NEAR, OFF64), 1)
            else:
                sums = sliding.cumsums(d)
            means = ()
            for q in tl.static_range(len(sums)):
                means = means + (sums[q] * (1.0 / ((2 * R + 1) * (2 * R + 1))),)
            at = offset(o - R0, W, OFF64) + cols
            if VJP:
                d_ab = D_AB + b * ((G + 1) * C) * HW + at
                da = ()
                for q in tl.static_range(G * C):
                    da = da + (tl.load(d_ab + q * HW, ok, 0.0),)
                db = ()
                for c in tl.static_range(C):
                    db = db + (tl.load(d_ab + (G * C + c) * HW, ok, 0.0),)
                d_means, d_eps_o = _models_vjp(means, eps, da, db, G, C)
                out = OUT + b * len(sums) * HW + at
                for q in tl.static_range(len(sums)):
                    tl.store(out + q * HW, d_means[q], ok)
                if EPS_GRAD:
                    d_eps += tl.where(ok, d_eps_o, 0.0)
            else:
                models_a, models_b = _models(means, eps, G, C)
                out = OUT + b * ((G + 1) * C) * HW + at
                for q in tl.static_range(G * C):
                    tl.store(out + q * HW, models_a[q], ok)
                for c in tl.static_range(C):
                    tl.store(out + (G * C + c) * HW, models_b[c], ok)
            d = sliding.plus(d, _row_terms(x_img, g_img, o - R, H, x_steps, g_steps, columns, G, C, BORDER, NEAR,
                                           OFF64), -1)
    if EPS_GRAD:
        tl.store(D_EPS + tl.program_id(0), tl.sum(d_eps))


@triton.jit
def terms_vjp_kernel(D_TERMS, X, GD, DX, DG, H, W, x_strides, g_strides,
                     G: tl.constexpr, C: tl.constexpr, OFF64: tl.constexpr, BLOCK: tl.constexpr):
    """The gradients DX[b] (C planes) and DG[b] (G planes, float32, contiguous) of the
    image X and the guide GD (any dtype and strides, unit scale) from the gradients
    D_TERMS[b] to their ``_terms`` at each pixel (one contiguous float32 plane a term):
    the terms' products differentiated by the product rule."""
    sxb, sxc, sxh, sxw = x_strides
    sgb, sgc, sgh, sgw = g_strides
    blocks = tl.cdiv(H * W, BLOCK)
    b = tl.program_id(0) // blocks
    offs = (tl.program_id(0) % blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < H * W
    if OFF64:
        b, offs = b.to(tl.int64), offs.to(tl.int64)
    rows, cols = offs // W, offs % W
    NG: tl.constexpr = 2 if G == 1 else 9  # the guide's own terms: its values and their products
    HW = H * W
    if OFF64:
        HW = HW.to(tl.int64)
    d_terms = D_TERMS + b * (NG + C + G * C) * HW + offs
    gs = ()
    for g in tl.static_range(G):
        gs = gs + (pixels.to_float(tl.load(GD + b * sgb + g * sgc + rows * sgh + cols * sgw, mask)),)
    xs = ()
    for c in tl.static_range(C):
        xs = xs + (pixels.to_float(tl.load(X + b * sxb + c * sxc + rows * sxh + cols * sxw, mask)),)
    d_gx = ()
    for q in tl.static_range(G * C):
        d_gx = d_gx + (tl.load(d_terms + (NG + C + q) * HW, mask),)
    for c in tl.static_range(C):
        dx = tl.load(d_terms + (NG + c) * HW, mask)
        for g in tl.static_range(G):
            dx += d_gx[g * C + c] * gs[g]
        tl.store(DX + (b * C + c) * HW + offs, dx, mask)
    if G == 1:
        dg = tl.load(d_terms, mask) + 2.0 * tl.load(d_terms + HW, mask) * gs[0]
        for c in tl.static_range(C):
            dg += d_gx[c] * xs[c]
        tl.store(DG + b * HW + offs, dg, mask)
    else:
        # the six products' gradients, (0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)
        p = ()
        for q in tl.static_range(3, 9):
            p = p + (tl.load(d_terms + q * HW, mask),)
        products = ((2.0 * p[0], p[1], p[2]), (p[1], 2.0 * p[3], p[4]), (p[2], p[4], 2.0 * p[5]))
        for g in tl.static_range(3):
            dg = tl.load(d_terms + g * HW, mask)
            for j in tl.static_range(3):
                dg += products[g][j] * gs[j]
            for c in tl.static_range(C):
                dg += d_gx[g * C + c] * xs[c]
            tl.store(DG + (b * 3 + g) * HW + offs, dg, mask)


@triton.jit
def _bilinear_axis(d, n_in, scale):
    """``F.interpolate``'s bilinear source pixels and weight along one axis
    (``align_corners=False``) for output indices ``d``: (j0, j1, t), weights 1 - t and t."""
    u = tl.maximum(scale * (d.to(tl.float32) + 0.5) - 0.5, 0.0)
    j0 = tl.minimum(u.to(tl.int32), n_in - 1)
    t = tl.minimum(tl.maximum(u - j0.to(tl.float32), 0.0), 1.0)
    return j0, tl.minimum(j0 + 1, n_in - 1), t


@triton.jit
def apply_kernel(MEANS, GUIDE, Y, D_MEANS, D_GUIDE, H, W, h, w, scale_h, scale_w, m_strides, g_strides, y_strides,
                 G: tl.constexpr, C: tl.constexpr, UP: tl.constexpr, VJP: tl.constexpr,
                 OFF64: tl.constexpr, BLOCK: tl.constexpr):
    """Y[b, c] = sum_g M[b, g*C + c] * GUIDE[b, g] + M[b, G*C + c], the guide read in its
    dtype (unit scale) and Y stored in its own, both through their strides. M is MEANS
    ((B, P, h, w) float32, rows of unit stride), or under UP its bilinear upsampling to
    H x W (the fast guided filter's: ``resize(..., "bilinear", antialias=False)``), read
    in place. VJP: Y is the output's gradient, read; the gradients to M (D_MEANS,
    (B, P, H, W)) and to the guide (D_GUIDE, (B, G, H, W)), float32 and contiguous, are
    stored."""
    smb, smp, smh = m_strides
    sgb, sgc, sgh, sgw = g_strides
    syb, syc, syh, syw = y_strides
    blocks = tl.cdiv(H * W, BLOCK)
    b = tl.program_id(0) // blocks
    offs = (tl.program_id(0) % blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < H * W
    HW = H * W
    if OFF64:
        b, offs, HW = b.to(tl.int64), offs.to(tl.int64), HW.to(tl.int64)
    rows, cols = offs // W, offs % W
    means = MEANS + b * smb
    guide = GUIDE + b * sgb + rows * sgh + cols * sgw
    y = Y + b * syb + rows * syh + cols * syw
    if UP:
        r0, r1, ty = _bilinear_axis(rows, h, scale_h)
        c0, c1, tx = _bilinear_axis(cols, w, scale_w)
        at00, at01, at10, at11 = r0 * smh + c0, r0 * smh + c1, r1 * smh + c0, r1 * smh + c1
    else:
        at = rows * smh + cols
    gs = ()
    for g in tl.static_range(G):
        gs = gs + (pixels.to_float(tl.load(guide + g * sgc, mask)),)
    d_guide = ()
    for _ in tl.static_range(G):
        d_guide = d_guide + (tl.zeros((BLOCK,), dtype=tl.float32),)
    for c in tl.static_range(C):
        if VJP:
            dy = tl.load(y + c * syc, mask).to(tl.float32)
            d_means = D_MEANS + b * ((G * C + C) * HW) + offs
            tl.store(d_means + (G * C + c) * HW, dy, mask)
            grown = ()
            for g in tl.static_range(G):
                tl.store(d_means + (g * C + c) * HW, dy * gs[g], mask)
                if UP:
                    mean_a = _upsampled(means + (g * C + c) * smp, at00, at01, at10, at11, ty, tx, mask)
                else:
                    mean_a = tl.load(means + (g * C + c) * smp + at, mask)
                grown = grown + (d_guide[g] + dy * mean_a,)
            d_guide = grown
        else:
            if UP:
                acc = _upsampled(means + (G * C + c) * smp, at00, at01, at10, at11, ty, tx, mask)
                for g in tl.static_range(G):
                    acc += _upsampled(means + (g * C + c) * smp, at00, at01, at10, at11, ty, tx, mask) * gs[g]
            else:
                acc = tl.load(means + (G * C + c) * smp + at, mask)
                for g in tl.static_range(G):
                    acc += tl.load(means + (g * C + c) * smp + at, mask) * gs[g]
            pixels.store(y + c * syc, acc, mask)
    if VJP:
        for g in tl.static_range(G):
            tl.store(D_GUIDE + (b * G + g) * HW + offs, d_guide[g], mask)


@triton.jit
def _upsampled(plane, at00, at01, at10, at11, ty, tx, mask):
    """A plane's bilinear value from its four pixels (in ``F.interpolate``'s order of operations)."""
    top = (1.0 - tx) * tl.load(plane + at00, mask) + tx * tl.load(plane + at01, mask)
    bottom = (1.0 - tx) * tl.load(plane + at10, mask) + tx * tl.load(plane + at11, mask)
    return (1.0 - ty) * top + ty * bottom


def _past_int32(*tensors):
    """Whether an offset into these tensors (the batch's included) can pass 2**31: the
    largest is the sum of (size - 1) * stride (views and expanded guides included)."""
    return max(sum((n - 1) * st for n, st in zip(t.shape, t.stride())) for t in tensors) >= 2 ** 31


def _block(n, x):
    """Pixels a program: one block of the whole plane in the interpreter (whose cost is per
    operation), else 1024 (memory-bound: 4 warps, 8 contiguous floats a thread)."""
    return pow2_at_least(n, 16, 1 << 16) if interpreted(x) else 1024


def terms(G, C):
    """How many terms (``_terms``) a window sums for a G-channel guide and C-channel image."""
    return (2 if G == 1 else 9) + C + G * C


def _launch_models(x, guide, eps, radius, border, out, rows, d_ab=None, d_eps=None):
    """``models_kernel`` into ``out``: the models at image rows ``rows`` (first, end), or
    with ``d_ab`` their gradient to the window means (and to eps into ``d_eps``, one
    value a program, when given)."""
    B, C, H, W = x.shape
    (block, seg, warps), programs = sliding.programs(x, radius, W, rows[1] - rows[0])
    launch(models_kernel, (programs,),
           (x, guide, out, out if d_ab is None else d_ab, eps, out if d_eps is None else d_eps, H, W, rows[0],
            rows[1] - rows[0], 0 if eps.numel() == 1 else 1, x.stride(), guide.stride()),
           dict(R=radius, G=guide.shape[1], C=C, BORDER=borders.border_code(border), NEAR=radius < min(H, W),
                VJP=d_ab is not None, EPS_GRAD=d_eps is not None, OFF64=needs_int64(x, guide, out)),
           x, tile_config(num_warps=warps, BLOCK=block, SEG=seg))


def models(x, guide, eps, radius, border, rows=None):
    """The stacked (B, G*C + C, rows, W) float32 planes of ``a`` and ``b`` for the (B, C,
    H, W) image ``x`` and (B, G, H, W) ``guide`` (any supported dtypes and strides, unit
    scale; a batch stride of 0 shares one guide) at image rows ``rows`` (first, end;
    default all); ``eps`` a float32 device vector of one value or one per image."""
    B, C, H, W = x.shape
    rows = (0, H) if rows is None else rows
    ab = x.new_empty(B, (guide.shape[1] + 1) * C, rows[1] - rows[0], W, dtype=torch.float32)
    _launch_models(x, guide, eps, radius, border, ab, rows)
    return ab


def models_vjp(x, guide, eps, d_ab, radius, border, eps_grad):
    """For the gradient ``d_ab`` of ``models``' planes: the gradients to the window means
    (B, ``terms``, H, W) float32, recomputed from ``x`` and ``guide``, and to eps, one
    value an image (None unless ``eps_grad``)."""
    B, C, H, W = x.shape
    d_means = x.new_empty(B, terms(guide.shape[1], C), H, W, dtype=torch.float32)
    d_eps = x.new_empty(sliding.programs(x, radius, W, H)[1], dtype=torch.float32) if eps_grad else None
    _launch_models(x, guide, eps, radius, border, d_means, (0, H), d_ab.contiguous(), d_eps)
    return d_means, None if d_eps is None else d_eps.view(B, -1).sum(1)


def terms_vjp(d_terms, x, guide):
    """The gradients (float32, contiguous) to the image ``x`` (B, C, H, W) and the guide
    (B, G, H, W) from ``d_terms``, the gradients to their terms (``terms``, contiguous)."""
    B, C, H, W = x.shape
    G = guide.shape[1]
    dx = x.new_empty(B, C, H, W, dtype=torch.float32)
    dg = x.new_empty(B, G, H, W, dtype=torch.float32)
    block = _block(H * W, x)
    launch(terms_vjp_kernel, (B * cdiv(H * W, block),), (d_terms, x, guide, dx, dg, H, W, x.stride(), guide.stride()),
           dict(G=G, C=C, OFF64=_past_int32(d_terms, x, guide)), x, tile_config(BLOCK=block))
    return dx, dg


def _launch_apply(means, guide, y, d_means=None, d_guide=None):
    """``apply_kernel`` into the image ``y``, or with ``d_means`` from the gradient ``y``
    into ``d_means`` and ``d_guide``."""
    B, C, H, W = y.shape
    h, w = means.shape[-2:]
    block = _block(H * W, y)
    tensors = (means, guide, y) if d_means is None else (means, guide, y, d_means)
    launch(apply_kernel, (B * cdiv(H * W, block),),
           (means, guide, y, y if d_means is None else d_means, y if d_guide is None else d_guide, H, W, h, w,
            h / H, w / W, means.stride()[:3], guide.stride(), y.stride()),
           dict(G=guide.shape[1], C=C, UP=(h, w) != (H, W), VJP=d_means is not None,
                OFF64=_past_int32(*tensors)), y, tile_config(BLOCK=block))


def apply(means, guide, out):
    """``out`` (B, C, H, W, any layout and supported dtype) = ``mean_a . guide + mean_b``
    from the float32 ``means`` (B, P, h, w; rows of unit stride), upsampled bilinearly in
    the kernel when smaller than ``out``, and the (B, G, H, W) ``guide`` (a batch stride of
    0 shares one guide)."""
    _launch_apply(means, guide, out)


def apply_vjp(grad, means, guide):
    """For the gradient ``grad`` (B, C, H, W, any strides) of ``apply``'s output: the
    gradients to its means at the output's size (B, P, H, W: the caller takes them through
    the upsampling's adjoint when ``means`` is smaller) and to the guide (B, G, H, W),
    float32 and contiguous."""
    B, C, H, W = grad.shape
    d_means = grad.new_empty(B, means.shape[1], H, W, dtype=torch.float32)
    d_guide = grad.new_empty(B, guide.shape[1], H, W, dtype=torch.float32)
    _launch_apply(means, guide, grad, d_means, d_guide)
    return d_means, d_guide
