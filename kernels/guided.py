"""The guided filter's two launches (``imgfilters/ops/guided.py`` puts a box mean of the
models between them):

- ``models_kernel``: the local linear models ``a`` and ``b`` from the image and the guide,
  the window means of their products summed in registers (no plane of means or products
  is written): a grey guide's ``a = cov / (var + eps)`` per channel, a colour guide's
  3 x 3 system solved by its adjugate, and ``b = mean_x - a . mean_g``, written as the
  stacked float32 planes the box mean reads;
- ``apply_kernel``: ``mean_a . guide + mean_b``, stored in the image's dtype and layout
  (the fast guided filter's bilinear upsampling of the means read in place).

The arithmetic is ``reference.guided.coefficients``' in float32, in its order of
operations.
"""
import torch
import triton
import triton.language as tl

from .core import borders, neighbourhood, pixels
from .core.launch import launch, tile_config
from .core.tiling import cdiv, interpreted, needs_int64, offset, pow2_at_least


@triton.jit
def _plus(a, b, SIGN: tl.constexpr):
    """The tuples a + SIGN * b, term by term."""
    s = ()
    for q in tl.static_range(len(a)):
        s = s + ((a[q] + b[q]) if SIGN > 0 else (a[q] - b[q]),)
    return s


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
        sums = _plus(sums, _terms(gs, xs, G, C), 1)
    return sums


@triton.jit
def _not_finite(sums):
    """How many columns of the block have a sum that is not finite (a NaN or inf would
    stay in the running sums after its row left the window)."""
    z = sums[0] * 0.0
    for q in tl.static_range(1, len(sums)):
        z += sums[q] * 0.0
    return tl.sum((z != z).to(tl.int32))


@triton.jit
def _store_models(ab, o, cols, HW, W, ok, m, eps, G: tl.constexpr, C: tl.constexpr, OFF64: tl.constexpr):
    """The models of the window means ``m`` (``_terms``' order) into the planes ``ab``
    (a: G * C planes, g major; then b: C planes) at row ``o``."""
    at = offset(o, W, OFF64) + cols
    if G == 1:
        mean_g = m[0]
        denominator = m[1] - mean_g * mean_g + eps
        for c in tl.static_range(C):
            mean_x = m[2 + c]
            a = (m[2 + C + c] - mean_g * mean_x) / denominator
            tl.store(ab + c * HW + at, a, ok)
            tl.store(ab + (C + c) * HW + at, mean_x - a * mean_g, ok)
    else:
        g0, g1, g2 = m[0], m[1], m[2]
        s00 = m[3] - g0 * g0 + eps
        s01 = m[4] - g0 * g1
        s02 = m[5] - g0 * g2
        s11 = m[6] - g1 * g1 + eps
        s12 = m[7] - g1 * g2
        s22 = m[8] - g2 * g2 + eps
        # the inverse of the symmetric 3 x 3 matrix by its adjugate (Cramer's rule)
        c00, c01, c02 = s11 * s22 - s12 * s12, s02 * s12 - s01 * s22, s01 * s12 - s02 * s11
        c11, c12, c22 = s00 * s22 - s02 * s02, s01 * s02 - s00 * s12, s00 * s11 - s01 * s01
        det = s00 * c00 + s01 * c01 + s02 * c02
        for c in tl.static_range(C):
            mean_x = m[9 + c]
            v0 = m[9 + C + c] - g0 * mean_x
            v1 = m[9 + 2 * C + c] - g1 * mean_x
            v2 = m[9 + 3 * C + c] - g2 * mean_x
            a0 = (c00 * v0 + c01 * v1 + c02 * v2) / det
            a1 = (c01 * v0 + c11 * v1 + c12 * v2) / det
            a2 = (c02 * v0 + c12 * v1 + c22 * v2) / det
            tl.store(ab + c * HW + at, a0, ok)
            tl.store(ab + (C + c) * HW + at, a1, ok)
            tl.store(ab + (2 * C + c) * HW + at, a2, ok)
            tl.store(ab + (3 * C + c) * HW + at, mean_x - (a0 * g0 + a1 * g1 + a2 * g2), ok)


@triton.jit
def models_kernel(X, GD, AB, EPS, H, W, eps_stride, sxb, sxc, sxh, sxw, sgb, sgc, sgh, sgw,
                  R: tl.constexpr, G: tl.constexpr, C: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
                  OFF64: tl.constexpr, BLOCK: tl.constexpr, SEG: tl.constexpr):
    """AB[b] = the models (``_store_models``) of image X[b] (C channels, any dtype, unit
    scale) and guide GD[b] (G channels) over (2R + 1)^2 windows; eps is EPS[b * eps_stride].

    One program a block of BLOCK columns and SEG rows of one image. It marches down the
    rows keeping, for each column, the window's sums of the terms (``_terms``): each
    output row adds the row entering the window and subtracts the one leaving it, both
    summed across the window's columns from L1-resident loads. Where a sum is not finite
    the window is summed afresh (a NaN or inf reaches only the windows that hold it)."""
    col_blocks = tl.cdiv(W, BLOCK)
    per_image = col_blocks * tl.cdiv(H, SEG)
    b = (tl.program_id(0) // per_image).to(tl.int64)
    t = tl.program_id(0) % per_image
    h0 = (t // col_blocks) * SEG
    cols = (t % col_blocks) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < W
    x_img = X + b * sxb
    g_img = GD + b * sgb
    HW = H * W
    if OFF64:
        HW = HW.to(tl.int64)
    ab = AB + b * ((G + 1) * C) * HW
    eps = tl.load(EPS + b * eps_stride)
    zero = tl.zeros((BLOCK,), dtype=tl.float32)
    sums = _no_terms(zero, G, C)
    for r in range(h0 - R, h0 + R):
        sums = _plus(sums, _row_sums(x_img, g_img, r, cols, H, W, sxc, sxh, sxw, sgc, sgh, sgw, zero,
                                     R, G, C, BORDER, NEAR, OFF64), 1)
    for o in range(h0, tl.minimum(h0 + SEG, H)):
        sums = _plus(sums, _row_sums(x_img, g_img, o + R, cols, H, W, sxc, sxh, sxw, sgc, sgh, sgw, zero,
                                     R, G, C, BORDER, NEAR, OFF64), 1)
        if _not_finite(sums) > 0:
            sums = _no_terms(zero, G, C)
            for r in range(o - R, o + R + 1):
                sums = _plus(sums, _row_sums(x_img, g_img, r, cols, H, W, sxc, sxh, sxw, sgc, sgh, sgw, zero,
                                             R, G, C, BORDER, NEAR, OFF64), 1)
        means = ()
        for q in tl.static_range(len(sums)):
            means = means + (sums[q] * (1.0 / ((2 * R + 1) * (2 * R + 1))),)
        _store_models(ab, o, cols, HW, W, ok, means, eps, G, C, OFF64)
        sums = _plus(sums, _row_sums(x_img, g_img, o - R, cols, H, W, sxc, sxh, sxw, sgc, sgh, sgw, zero,
                                     R, G, C, BORDER, NEAR, OFF64), -1)


@triton.jit
def _bilinear_axis(d, n_in, scale):
    """``F.interpolate``'s bilinear source pixels and weight along one axis
    (``align_corners=False``) for output indices ``d``: (j0, j1, t), weights 1 - t and t."""
    u = tl.maximum(scale * (d.to(tl.float32) + 0.5) - 0.5, 0.0)
    j0 = tl.minimum(u.to(tl.int32), n_in - 1)
    t = tl.minimum(tl.maximum(u - j0.to(tl.float32), 0.0), 1.0)
    return j0, tl.minimum(j0 + 1, n_in - 1), t


@triton.jit
def apply_kernel(MEANS, GUIDE, Y, H, W, h, w, scale_h, scale_w, sgb, sgc, sgh, sgw, syb, syc, syh, syw,
                 G: tl.constexpr, C: tl.constexpr, UP: tl.constexpr, OFF64: tl.constexpr, BLOCK: tl.constexpr):
    """Y[b, c] = sum_g M[b, g*C + c] * GUIDE[b, g] + M[b, G*C + c], the guide read in its
    dtype (unit scale) and Y stored in its own, both through their strides. M is MEANS
    ((B, P, h, w) float32, contiguous), or under UP its bilinear upsampling to H x W (the
    fast guided filter's: ``resize(..., "bilinear", antialias=False)``), read in place."""
    blocks = tl.cdiv(H * W, BLOCK)
    b = tl.program_id(0) // blocks
    offs = (tl.program_id(0) % blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < H * W
    hw = h * w
    if OFF64:
        b, offs, hw = b.to(tl.int64), offs.to(tl.int64), hw.to(tl.int64)
    rows, cols = offs // W, offs % W
    means = MEANS + b * ((G * C + C) * hw)
    guide = GUIDE + b * sgb + rows * sgh + cols * sgw
    y = Y + b * syb + rows * syh + cols * syw
    if UP:
        r0, r1, ty = _bilinear_axis(rows, h, scale_h)
        c0, c1, tx = _bilinear_axis(cols, w, scale_w)
        at00, at01, at10, at11 = r0 * w + c0, r0 * w + c1, r1 * w + c0, r1 * w + c1
    gs = ()
    for g in tl.static_range(G):
        gs = gs + (pixels.to_float(tl.load(guide + g * sgc, mask)),)
    for c in tl.static_range(C):
        if UP:
            acc = _upsampled(means + (G * C + c) * hw, at00, at01, at10, at11, ty, tx, mask)
            for g in tl.static_range(G):
                acc += _upsampled(means + (g * C + c) * hw, at00, at01, at10, at11, ty, tx, mask) * gs[g]
        else:
            acc = tl.load(means + (G * C + c) * hw + offs, mask)
            for g in tl.static_range(G):
                acc += tl.load(means + (g * C + c) * hw + offs, mask) * gs[g]
        pixels.store(y + c * syc, acc, mask)


@triton.jit
def _upsampled(plane, at00, at01, at10, at11, ty, tx, mask):
    """A plane's bilinear value from its four pixels (in ``F.interpolate``'s order of operations)."""
    top = (1.0 - tx) * tl.load(plane + at00, mask) + tx * tl.load(plane + at01, mask)
    bottom = (1.0 - tx) * tl.load(plane + at10, mask) + tx * tl.load(plane + at11, mask)
    return (1.0 - ty) * top + ty * bottom


def _past_int32(*tensors):
    """Whether an offset into these tensors (the batch's included) can pass 2**31: each
    offset is below its tensor's element count (an expanded guide's, smaller still)."""
    return max(t.numel() for t in tensors) >= 2 ** 31


def _block(n, x):
    """Pixels a program: one block of the whole plane in the interpreter (whose cost is per
    operation), else 1024 (memory-bound: 4 warps, 8 contiguous floats a thread)."""
    return pow2_at_least(n, 16, 1 << 16) if interpreted(x) else 1024


def models(x, guide, eps, radius, border):
    """The stacked (B, G*C + C, H, W) float32 planes of ``a`` and ``b`` for the (B, C, H, W)
    image ``x`` and (B, G, H, W) ``guide`` (any supported dtypes and strides, unit scale;
    a batch stride of 0 shares one guide); ``eps`` a float32 device vector of one value or
    one per image."""
    B, C, H, W = x.shape
    G = guide.shape[1]
    ab = x.new_empty(B, (G + 1) * C, H, W, dtype=torch.float32)
    # (the interpreter's cost is per operation: one program an image)
    block, seg = (pow2_at_least(W, 16, 1 << 16), H) if interpreted(x) else (128, 32)
    launch(models_kernel, (B * cdiv(W, block) * cdiv(H, seg),),
           (x, guide, ab, eps, H, W, 0 if eps.numel() == 1 else 1, *x.stride(), *guide.stride()),
           dict(R=radius, G=G, C=C, BORDER=borders.border_code(border), NEAR=radius < min(H, W),
                OFF64=needs_int64(x, guide) or (G + 1) * C * H * W >= 2 ** 31),
           x, tile_config(BLOCK=block, SEG=seg))
    return ab


def apply(means, guide, out):
    """``out`` (B, C, H, W, any layout and supported dtype) = ``mean_a . guide + mean_b``
    from the contiguous float32 ``means`` (B, P, h, w), upsampled bilinearly in the kernel
    when smaller than ``out``, and the (B, G, H, W) ``guide`` (a batch stride of 0 shares
    one guide)."""
    B, C, H, W = out.shape
    h, w = means.shape[-2:]
    block = _block(H * W, out)
    launch(apply_kernel, (B * cdiv(H * W, block),),
           (means, guide, out, H, W, h, w, h / H, w / W, *guide.stride(), *out.stride()),
           dict(G=guide.shape[1], C=C, UP=(h, w) != (H, W), OFF64=_past_int32(means, guide, out)), out,
           tile_config(BLOCK=block))
