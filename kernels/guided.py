"""The guided filter's two pointwise steps (``imgfilters/ops/guided.py`` composes them with
two box means):

- ``coefficients_kernel``: from the box means of the guide, the image and their products,
  the local linear models' ``a`` (a grey guide: ``cov / (var + eps)`` per channel; a colour
  guide: the 3 x 3 system solved by its adjugate) and ``b = mean_x - a . mean_g``, written
  as the stacked planes the second box mean reads;
- ``apply_kernel``: ``mean_a . guide + mean_b``, stored in the image's dtype and layout.

One program a block of pixels of one image; each value read and written once. The means
are float32 (B, P, H, W) tensors, contiguous: P = 2 + 2C planes for a grey guide (mean_g,
mean_gg, mean_x, mean_gx), 9 + 4C for a colour one (mean_g, the six mean_gigj, mean_x,
mean_gx with g major). The arithmetic is ``reference.guided.coefficients``' in float32,
in its order of operations.
"""
import triton
import triton.language as tl

from .core import pixels
from .core.launch import launch, tile_config
from .core.tiling import cdiv, interpreted, pow2_at_least

# (i, j) of the colour guide's six products, in the order of their planes
_PAIRS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


@triton.jit
def _plane(base, p, hw, offs, mask):
    return tl.load(base + p * hw + offs, mask)


@triton.jit
def coefficients_kernel(M, AB, EPS, HW, eps_stride, G: tl.constexpr, C: tl.constexpr, OFF64: tl.constexpr,
                        BLOCK: tl.constexpr):
    """AB[b] = (a as G*C planes, g major, then b as C planes) from the means M[b]; eps is
    EPS[b * eps_stride]."""
    blocks = tl.cdiv(HW, BLOCK)
    b = tl.program_id(0) // blocks
    offs = (tl.program_id(0) % blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    if OFF64:  # (offsets past 2**31: every term of them in int64)
        b, offs, HW = b.to(tl.int64), offs.to(tl.int64), HW.to(tl.int64)
    P: tl.constexpr = (2 + 2 * C) if G == 1 else (9 + 4 * C)
    m = M + b * (P * HW)
    ab = AB + b * ((G * C + C) * HW)
    eps = tl.load(EPS + b * eps_stride)
    if G == 1:
        mean_g = _plane(m, 0, HW, offs, mask)
        denominator = _plane(m, 1, HW, offs, mask) - mean_g * mean_g + eps
        for c in tl.static_range(C):
            mean_x = _plane(m, 2 + c, HW, offs, mask)
            a = (_plane(m, 2 + C + c, HW, offs, mask) - mean_g * mean_x) / denominator
            tl.store(ab + c * HW + offs, a, mask)
            tl.store(ab + (C + c) * HW + offs, mean_x - a * mean_g, mask)
    else:
        g0 = _plane(m, 0, HW, offs, mask)
        g1 = _plane(m, 1, HW, offs, mask)
        g2 = _plane(m, 2, HW, offs, mask)
        s00 = _plane(m, 3, HW, offs, mask) - g0 * g0 + eps
        s01 = _plane(m, 4, HW, offs, mask) - g0 * g1
        s02 = _plane(m, 5, HW, offs, mask) - g0 * g2
        s11 = _plane(m, 6, HW, offs, mask) - g1 * g1 + eps
        s12 = _plane(m, 7, HW, offs, mask) - g1 * g2
        s22 = _plane(m, 8, HW, offs, mask) - g2 * g2 + eps
        # the inverse of the symmetric 3 x 3 matrix by its adjugate (Cramer's rule)
        c00, c01, c02 = s11 * s22 - s12 * s12, s02 * s12 - s01 * s22, s01 * s12 - s02 * s11
        c11, c12, c22 = s00 * s22 - s02 * s02, s01 * s02 - s00 * s12, s00 * s11 - s01 * s01
        det = s00 * c00 + s01 * c01 + s02 * c02
        for c in tl.static_range(C):
            mean_x = _plane(m, 9 + c, HW, offs, mask)
            v0 = _plane(m, 9 + C + c, HW, offs, mask) - g0 * mean_x
            v1 = _plane(m, 9 + 2 * C + c, HW, offs, mask) - g1 * mean_x
            v2 = _plane(m, 9 + 3 * C + c, HW, offs, mask) - g2 * mean_x
            a0 = (c00 * v0 + c01 * v1 + c02 * v2) / det
            a1 = (c01 * v0 + c11 * v1 + c12 * v2) / det
            a2 = (c02 * v0 + c12 * v1 + c22 * v2) / det
            tl.store(ab + c * HW + offs, a0, mask)
            tl.store(ab + (C + c) * HW + offs, a1, mask)
            tl.store(ab + (2 * C + c) * HW + offs, a2, mask)
            tl.store(ab + (3 * C + c) * HW + offs, mean_x - (a0 * g0 + a1 * g1 + a2 * g2), mask)


@triton.jit
def apply_kernel(MEANS, GUIDE, Y, HW, W, sgb, sgc, sgh, sgw, syb, syc, syh, syw, G: tl.constexpr,
                 C: tl.constexpr, OFF64: tl.constexpr, BLOCK: tl.constexpr):
    """Y[b, c] = sum_g MEANS[b, g*C + c] * GUIDE[b, g] + MEANS[b, G*C + c], the guide read
    in its dtype (unit scale) and Y stored in its own, both through their strides."""
    blocks = tl.cdiv(HW, BLOCK)
    b = tl.program_id(0) // blocks
    offs = (tl.program_id(0) % blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    if OFF64:
        b, offs, HW = b.to(tl.int64), offs.to(tl.int64), HW.to(tl.int64)
    rows, cols = offs // W, offs % W
    means = MEANS + b * ((G * C + C) * HW)
    guide = GUIDE + b * sgb + rows * sgh + cols * sgw
    y = Y + b * syb + rows * syh + cols * syw
    gs = ()
    for g in tl.static_range(G):
        gs = gs + (pixels.to_float(tl.load(guide + g * sgc, mask)),)
    for c in tl.static_range(C):
        acc = _plane(means, G * C + c, HW, offs, mask)
        for g in tl.static_range(G):
            acc += _plane(means, g * C + c, HW, offs, mask) * gs[g]
        pixels.store(y + c * syc, acc, mask)


def _past_int32(*tensors):
    """Whether an offset into these tensors (the batch's included) can pass 2**31: each
    offset is below its tensor's element count (an expanded guide's, smaller still)."""
    return max(t.numel() for t in tensors) >= 2 ** 31


def _block(n, x):
    """Pixels a program: one block of the whole plane in the interpreter (whose cost is per
    operation), else 1024 (memory-bound: 4 warps, 8 contiguous floats a thread)."""
    return pow2_at_least(n, 16, 1 << 16) if interpreted(x) else 1024


def coefficients(means, eps, guide_channels, channels):
    """The stacked (B, G*C + C, H, W) float32 planes of a and b from the contiguous float32
    ``means``; ``eps`` a float32 device vector of one value or one per image."""
    B, _, H, W = means.shape
    ab = means.new_empty(B, guide_channels * channels + channels, H, W)
    block = _block(H * W, means)
    launch(coefficients_kernel, (B * cdiv(H * W, block),),
           (means, ab, eps, H * W, 0 if eps.numel() == 1 else 1),
           dict(G=guide_channels, C=channels, OFF64=_past_int32(means, ab)), means, tile_config(BLOCK=block))
    return ab


def apply(means, guide, out):
    """``out`` (B, C, H, W, any layout and supported dtype) = ``mean_a . guide + mean_b``
    from the contiguous float32 ``means`` and the (B, G, H, W) ``guide`` (a batch stride of 0
    shares one guide)."""
    B, C, H, W = out.shape
    block = _block(H * W, out)
    launch(apply_kernel, (B * cdiv(H * W, block),),
           (means, guide, out, H * W, W, *guide.stride(), *out.stride()),
           dict(G=guide.shape[1], C=C, OFF64=_past_int32(means, guide, out)), out, tile_config(BLOCK=block))
