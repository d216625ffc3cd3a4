"""Real-ESRGAN's random blur kernels in one launch, as ``imgfilters/reference/degrade.py``
defines them: each program samples its images' kernel parameters from their uniforms, or
reads them, and writes them and the images' normalised kernels.

Why a kernel for a few thousand numbers: as batched torch operations the same steps took
about 60 of them, 20 to 40 us each on the H200's host (2.4 ms for 32 kernels).

A program holds IMAGES images: one on the GPU (a program per image), a batch's worth in the
interpreter, whose cost is per operation. Their parameters are (IMAGES,) vectors, their
kernels an (IMAGES, BLOCK, BLOCK) block (the kernel's side padded to a power of two):
every kind is evaluated on the block, the image's selected, the cells outside its own
size zeroed, and the block normalised to sum 1.

``SAMPLER``: GIVEN reads the parameters; MIXED samples ``reference.kernel_params`` from 9
uniforms per image, SINC_FILTER ``reference.sinc_params`` from 3, and both write them.
The options are run-time floats (never specialised) and a float32 table of the kernel
sizes, so no option recompiles. A sampled kernel is made from its parameters as they are
written, by the code that makes given ones: sampling and making in one launch gives, bit
for bit, the kernels of sampling, then making.

Parameters are the (7, B) float32 rows of ``reference.PARAMS`` (kind and size small
integers); kinds are coded as there (``reference.KINDS``, then SINC and PULSE).
"""
import itertools
import math

import triton
import triton.language as tl

from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import cdiv, interpreting, next_pow2

GIVEN: tl.constexpr = tl.constexpr(0)
MIXED: tl.constexpr = tl.constexpr(1)
SINC_FILTER: tl.constexpr = tl.constexpr(2)
SINC: tl.constexpr = tl.constexpr(6)
PULSE: tl.constexpr = tl.constexpr(7)
PARAMS: tl.constexpr = tl.constexpr(7)  # rows of a parameter set
WARPS = 4  # 32 x 32 cells: 8 a thread


@triton.jit
def bessel_j1(x):
    """J1(x), float64: Cephes' ``j1f``, a polynomial up to |x| = 2, above it
    ``sqrt(1/x) M(1/x) cos(x + P(x) - 3 pi / 4)`` with rational fits of the modulus M and
    the phase P, within 1.3e-8 of the true value (the fits' own error). In float32 it is
    off by 2e-7, and the sinc kernels' normalisation sums that error over their cells."""
    ax = tl.abs(x)
    z = ax * ax
    near = (z - 14.6819706421238932572) * x * (((((-4.878788132172128e-9 * z + 6.009061827883699e-7) * z
                                                  - 4.541343896997497e-5) * z + 1.937383947804541e-3) * z
                                                - 3.405537384615824e-2))
    far_x = tl.maximum(ax, 2.0)  # (the far branch is evaluated everywhere, selected above 2)
    q = 1.0 / far_x
    modulus = tl.sqrt(q) * (((((((6.913942741265801e-2 * q - 2.284801500053359e-1) * q + 3.138238455499697e-1) * q
                                 - 2.102302420403875e-1) * q + 5.435364690523026e-3) * q + 1.493389585089498e-1) * q
                              + 4.976029650847191e-6) * q + 7.978845453073848e-1)
    w = q * q
    phase = q * (((((((-4.497014141919556e1 * w + 5.073465654089319e1) * w - 2.485774108720340e1) * w
                     + 7.222973196770240) * w - 1.544842782180211) * w + 3.503787691653334e-1) * w
                  - 1.637986776941202e-1) * w + 3.749989509080821e-1) - 0.75 * math.pi
    far = modulus * tl.cos(far_x + phase)
    return tl.where(ax <= 2.0, near, tl.where(x < 0, -far, far))


@triton.jit
def _row(T, r, b, ok, B):
    """Row r of a (rows, B) float32 tensor at images b (1 for those past the batch)."""
    return tl.load(T + r * B + b, ok, other=1.0)


@triton.jit
def _between(u, low, high):
    """Uniform in [low, high) from uniforms in [0, 1) (``reference.uniform``)."""
    return low + u * (high - low)


@triton.jit
def _size(u, sizes, n_sizes, ok):
    """``sizes[floor(u * n_sizes)]`` (float32), the index kept in the table."""
    return tl.load(sizes + tl.minimum((u * n_sizes).to(tl.int32), n_sizes - 1), ok, other=1.0)


@triton.jit
def _mixed_params(U, b, ok, B, sizes, n_sizes, sampling):
    """``reference.kernel_params`` of images b's uniforms; ``sampling``: the cumulative
    probabilities of the first five kinds, sinc_prob, and the (low, high) of sigma,
    rotation, betag and betap."""
    c1, c2, c3, c4, c5, sinc_prob, sigma_lo, sigma_hi, rot_lo, rot_hi, betag_lo, betag_hi, betap_lo, betap_hi = sampling
    size = _size(_row(U, 0, b, ok, B), sizes, n_sizes, ok)
    u = _row(U, 1, b, ok, B)
    kind = ((u >= c1).to(tl.float32) + (u >= c2).to(tl.float32) + (u >= c3).to(tl.float32)
            + (u >= c4).to(tl.float32) + (u >= c5).to(tl.float32))
    kind = tl.where(_row(U, 2, b, ok, B) < sinc_prob, SINC, kind)
    iso = (kind == 0) | (kind == 2) | (kind == 4)
    sigma_x = _between(_row(U, 3, b, ok, B), sigma_lo, sigma_hi)
    sigma_y = tl.where(iso, sigma_x, _between(_row(U, 4, b, ok, B), sigma_lo, sigma_hi))
    theta = tl.where(iso, 0.0, _between(_row(U, 5, b, ok, B), rot_lo, rot_hi))
    below = _row(U, 6, b, ok, B) < 0.5
    u = _row(U, 7, b, ok, B)
    beta_g = tl.where(below, _between(u, betag_lo, 1.0), _between(u, 1.0, betag_hi))
    beta_p = tl.where(below, _between(u, betap_lo, 1.0), _between(u, 1.0, betap_hi))
    beta = tl.where((kind == 2) | (kind == 3), beta_g, tl.where((kind == 4) | (kind == 5), beta_p, 1.0))
    low_cut = tl.where(size < 13, math.pi / 3, math.pi / 5)
    cutoff = _between(_row(U, 8, b, ok, B), low_cut, math.pi)
    return kind, size, sigma_x, sigma_y, theta, beta, cutoff


@triton.jit
def _sinc_params(U, b, ok, B, sizes, n_sizes, sampling):
    """``reference.sinc_params`` of images b's uniforms; ``sampling``: prob and the cutoff's
    (low, high)."""
    prob, cut_lo, cut_hi = sampling
    size = _size(_row(U, 0, b, ok, B), sizes, n_sizes, ok)
    kind = tl.where(_row(U, 1, b, ok, B) < prob, SINC, PULSE).to(tl.float32)
    one = tl.full(size.shape, 1.0, tl.float32)
    return kind, size, one, one, 0.0 * one, one, _between(_row(U, 2, b, ok, B), cut_lo, cut_hi)


@triton.jit
def _kernels(params, R, BLOCK: tl.constexpr):
    """The (IMAGES, BLOCK, BLOCK) normalised kernels of the parameters (``reference.kernels``),
    the cell (i, j) at x = j - R, y = i - R; zero past 2R + 1."""
    kind, size, sigma_x, sigma_y, theta, beta, cutoff = params
    # what a kind does not use is a placeholder (given parameters may hold anything there):
    # the isotropic kinds' sigma_y and theta, the Gaussians' beta
    iso = (kind == 0) | (kind == 2) | (kind == 4)
    sigma_y = tl.where(iso, sigma_x, sigma_y)
    theta = tl.where(iso, 0.0, theta)
    beta = tl.where(kind < 2, 1.0, beta)
    i = tl.arange(0, BLOCK)
    y = (i[None, :, None] - R).to(tl.float32)
    x = (i[None, None, :] - R).to(tl.float32)
    kind = kind[:, None, None]
    c = tl.cos(theta)[:, None, None]
    s = tl.sin(theta)[:, None, None]
    u = c * x + s * y  # along the rotated axes
    v = c * y - s * x
    q = u * u / (sigma_x * sigma_x)[:, None, None] + v * v / (sigma_y * sigma_y)[:, None, None]
    # q^beta, 0 at q = 0 (beta > 0): log2 of q = 0 is never taken
    qb = tl.where(q > 0, tl.exp2(beta[:, None, None] * tl.log2(tl.where(q > 0, q, 1.0))), 0.0)
    w = tl.where((kind == 4) | (kind == 5), 1.0 / (qb + 1.0), tl.exp(-0.5 * qb))  # beta = 1 for Gaussians
    # The sinc kernel and the sum in float64: float32 J1's errors (2e-7), summed over the 441
    # cells into the normalisation, moved kernels of cutoff near pi by up to 1.5e-6; and a
    # float32 sum of 441 cells is off by a few 1e-7, and so would be the kernel's sum.
    r2 = x * x + y * y
    r = tl.sqrt(tl.where(r2 > 0, r2, 1.0).to(tl.float64))
    cut = cutoff.to(tl.float64)[:, None, None]
    sinc = tl.where(r2 > 0, cut * bessel_j1(cut * r) / (2 * math.pi * r), cut * cut / (4 * math.pi))
    w = tl.where(kind == SINC, sinc, w.to(tl.float64))
    w = tl.where(kind == PULSE, tl.where(r2 == 0, 1.0, 0.0), w)
    half = tl.floor(size[:, None, None] * 0.5)  # (k // 2, as the reference: an even size keeps k + 1 cells)
    w = tl.where((tl.abs(x) <= half) & (tl.abs(y) <= half) & (x <= R) & (y <= R), w, 0.0)
    return (w / tl.sum(tl.sum(w, 2), 1)[:, None, None]).to(tl.float32)


@triton.jit(do_not_specialize=["n_sizes", "B", "R"])
def random_kernel(U, sizes, n_sizes, sampling, P, K, B, R, SAMPLER: tl.constexpr, IMAGES: tl.constexpr,
                  BLOCK: tl.constexpr):
    """Images b = pid * IMAGES ... of B: their parameters, P[:, b] of the (7, B) float32 P,
    read (GIVEN) or sampled from the uniforms U[:, b] of U (9 or 3, B) float32 and the
    sampler's options ``sampling`` (a tuple of floats: ``options`` is a name Triton's
    launcher takes), then written; and unless K is None, their kernels K[b] of K (B, 2R + 1,
    2R + 1) float32. ``sizes``: the n_sizes kernel sizes to choose from (float32)."""
    b = tl.program_id(0) * IMAGES + tl.arange(0, IMAGES)
    ok = b < B
    if SAMPLER == GIVEN:
        params = ()
        for r in tl.static_range(PARAMS):
            params = params + (_row(P, r, b, ok, B),)
    else:
        if SAMPLER == MIXED:
            params = _mixed_params(U, b, ok, B, sizes, n_sizes, sampling)
        else:
            params = _sinc_params(U, b, ok, B, sizes, n_sizes, sampling)
        for r in tl.static_range(PARAMS):
            tl.store(P + r * B + b, params[r], ok)
    if K is not None:
        n = 2 * R + 1
        i = tl.arange(0, BLOCK)[None, :, None]
        j = tl.arange(0, BLOCK)[None, None, :]
        tl.store(K + b[:, None, None].to(tl.int64) * (n * n) + i * n + j, _kernels(params, R, BLOCK),
                 ok[:, None, None] & (i < n) & (j < n))


def launch_given(params, kernels):
    """The kernels (B, n, n) float32 (n odd) of the parameters ``params`` (7, B) float32,
    both contiguous on the device."""
    _launch(GIVEN, None, None, (), params, kernels)


def launch_mixed(u, params, kernels, kernel_sizes, kernel_prob, sinc_prob, sigma, rotation, betag, betap):
    """``reference.kernel_params`` of the uniforms ``u`` (9, B) float32 into ``params`` (7, B)
    float32 and, unless ``kernels`` is None, their kernels into it (B, n, n) float32, n odd;
    ``kernel_sizes`` a float32 table on the device, the other options as ``kernel_params``
    takes them."""
    cumulative = tuple(itertools.accumulate(kernel_prob))[:-1]
    _launch(MIXED, u, kernel_sizes, (*cumulative, sinc_prob, *sigma, *rotation, *betag, *betap), params, kernels)


def launch_sinc(u, params, kernels, kernel_sizes, prob, cutoff):
    """``launch_mixed`` for ``reference.sinc_params``: ``u`` (3, B)."""
    _launch(SINC_FILTER, u, kernel_sizes, (prob, *cutoff), params, kernels)


def _launch(sampler, u, sizes, sampling, params, kernels):
    B = params.shape[1]
    radius = 0 if kernels is None else kernels.shape[-1] // 2
    block = next_pow2(2 * radius + 1)
    images = min(next_pow2(B), tl.TRITON_MAX_TENSOR_NUMEL // (block * block)) if interpreting() else 1
    args = (u, sizes, 0 if sizes is None else sizes.numel(), sampling, params, kernels, B, radius)
    launch_kernel(random_kernel, lambda m: (cdiv(B, images),), args,
                  dict(SAMPLER=sampler.value, IMAGES=images, BLOCK=block), params, tile_config(num_warps=WARPS))
