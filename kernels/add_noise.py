"""Gaussian and Poisson noise added in one launch (``imgfilters.degrade``'s
``add_gaussian_noise`` and ``add_poisson_noise`` on the kernels' path), drawn from Philox, a
counter-based generator (Triton's ``tl.randn``/``tl.rand``): a value's random numbers are
a function of the call's seed and the value's position, so the batch needs no generator
state and no noise tensor, and a seed gives the same noise on any launch grid.

Counters: the noise plane ``j`` of image ``b`` at pixel ``p`` draws from counter ``(b *
(C + 1) + j) * H * W + p``, plane 0 the grey noise that every channel of a grey image
shares, plane ``c + 1`` channel c's own (as ``torch.randn(B, C + 1, H, W)`` lays them
out). Poisson's rejection rounds draw further uniforms at that counter plus multiples of
``B * (C + 1) * H * W``.

Gaussian: ``y = x + sigma n``, n standard normal. Poisson (BasicSR's
``generate_poisson_noise_pt``): ``xr`` the pixel rounded to 8-bit levels, ``vals`` the
image's count of distinct levels rounded up to a power of two, ``y = x + scale (k / vals -
xr)`` with k Poisson of mean ``xr vals``; grey images take the noise of their rounded luma
(and the luma's own ``vals``) in every channel. The levels an image holds come from
``levels_kernel``, a launch before: each program's 8-bit histogram of its pixels and of
their luma, flags set where a count is nonzero.

Poisson samples (mean up to 256): below ``INVERSION_MEAN`` by inversion (one uniform, the
cumulative probabilities summed term by term: about mean + 1 steps); above it Hormann's
transformed rejection (PTRS, 1993; numpy's ``random_poisson_ptrs``): two uniforms a round,
a round accepted with probability about 0.9, its test against ``log k!`` from the Stirling
series (``_log_factorial``). Both are exact samplers up to float32 arithmetic. Lanes that
have their sample wait for the rest of their block (at most a few rounds).

Clipping to [0, 1] and the store in the image's dtype end the launch.
"""
import triton
import triton.language as tl

from .core import pixels
from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import cdiv, interpreting, needs_int64, offset

# Poisson means below this by inversion, the rest by PTRS (numpy's split); inversion's most
# terms (below mean 10, P(k > 63) < 1e-30)
INVERSION_MEAN: tl.constexpr = tl.constexpr(10.0)
INVERSION_STEPS: tl.constexpr = tl.constexpr(64)
LEVELS: tl.constexpr = tl.constexpr(256)  # 8-bit levels: Poisson's rounding
# pixels a program (GPU), 4 warps: Gaussian (64 registers; 1024 spill); Poisson, whose two
# inlined samplers took 255 registers and spilled at 1024 (sm_90a, scripts/offline_sass.py)
BLOCK = 512
POISSON_BLOCK = 256
LEVELS_BLOCK = 4096  # pixels a program of ``levels_kernel`` (GPU)


@triton.jit
def _luma(x_base, pix, ok, sxc, C, SXW: tl.constexpr, OFF64: tl.constexpr):
    """ITU-R 601 luma of RGB pixels, the channels' mean for other counts (``degrade._gray``)."""
    if C == 3:
        y = (0.299 * pixels.load(x_base + pix, ok) + 0.587 * pixels.load(x_base + sxc + pix, ok)
             + 0.114 * pixels.load(x_base + 2 * sxc + pix, ok))
    else:
        y = tl.zeros(pix.shape, tl.float32)
        for c in range(C):
            y += pixels.load(x_base + offset(c, sxc, OFF64) + pix, ok)
        y = y / C
    return y


@triton.jit
def _first(BLOCK: tl.constexpr, OFF64: tl.constexpr):
    """The first pixel of this program's block of the plane (int64 when a plane's pixels
    may pass 2**31)."""
    if OFF64:
        return tl.program_id(0).to(tl.int64) * BLOCK
    else:
        return tl.program_id(0) * BLOCK


@triton.jit
def _level(x):
    """The 8-bit level of unit-scale ``x`` (what storing it into uint8 gives), as int32."""
    return pixels.from_float(x, tl.uint8).to(tl.int32)


@triton.jit
def _log_factorial(k):
    """log(k!) for k >= 0 (float32): the Stirling series at max(k + 1, 7), stepped down
    for smaller k (numpy's ``loggam``)."""
    x = k + 1.0
    n = tl.maximum(tl.floor(7.0 - x), 0.0)
    x0 = x + n
    x2 = 1.0 / (x0 * x0)
    s = -1.39243221690590
    s = s * x2 + 1.796443723688307e-01
    s = s * x2 - 2.955065359477124e-02
    s = s * x2 + 6.410256410256410e-03
    s = s * x2 - 1.917526917526918e-03
    s = s * x2 + 8.417508417508418e-04
    s = s * x2 - 5.952380952380952e-04
    s = s * x2 + 7.936507936507937e-04
    s = s * x2 - 2.777777777777778e-03
    s = s * x2 + 8.333333333333333e-02
    g = s / x0 + 0.9189385332046727 + (x0 - 0.5) * tl.log(x0) - x0
    # log Gamma(x) = log Gamma(x + n) - log prod (x + n - j), j <= n: one log of the product
    # (integers up to 6!, exact in float32) where six logs took a libdevice polynomial each
    steps = tl.full(k.shape, 1.0, tl.float32)
    for j in tl.static_range(1, 7):
        steps *= tl.where(j <= n, tl.maximum(x0 - j, 1.0), 1.0)
    return g - tl.log(steps)


@triton.jit
def _poisson(mean, seed, counter, stride):
    """A Poisson sample of each lane's ``mean`` (0 to 256), as float32, from Philox at
    ``counter`` (and ``counter + i * stride`` for round i of the rejection)."""
    # inversion for small means: the least k whose cumulative probability passes u
    small = mean < INVERSION_MEAN
    u = tl.rand(seed, counter)
    p = tl.exp(-tl.minimum(mean, INVERSION_MEAN))
    cdf = p
    k = tl.zeros(mean.shape, tl.float32)
    active = small & (u > cdf)
    step = 0
    while (tl.max(active.to(tl.int32), 0) > 0) & (step < INVERSION_STEPS):
        k += active.to(tl.float32)
        p = tl.where(active, p * mean / tl.maximum(k, 1.0), p)  # (k is 0 only in lanes already done)
        cdf = tl.where(active, cdf + p, cdf)
        active = active & (u > cdf)
        step += 1
    # transformed rejection for the rest
    m = tl.maximum(mean, INVERSION_MEAN)
    slam = tl.sqrt(m)
    loglam = tl.log(m)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_invalpha = tl.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2.0)
    active = mean >= INVERSION_MEAN
    rounds = 0
    while tl.max(active.to(tl.int32), 0) > 0:
        c = counter + (2 * rounds + 1) * stride
        uu = tl.rand(seed, c) - 0.5
        v = tl.rand(seed, c + stride)
        us = tl.maximum(0.5 - tl.abs(uu), 1e-12)  # (0 has probability 0; it would divide by 0)
        kk = tl.floor((2.0 * a / us + b) * uu + m + 0.43)
        accept = (us >= 0.07) & (v <= vr)
        rejected = (kk < 0.0) | ((us < 0.013) & (v > us))
        test = (tl.log(tl.maximum(v, 1e-30)) + log_invalpha - tl.log(a / (us * us) + b)
                <= -m + kk * loglam - _log_factorial(tl.maximum(kk, 0.0)))
        accept = accept | (~rejected & test)
        k = tl.where(active & accept, kk, k)
        active = active & ~accept
        rounds += 1
    return k


@triton.jit(do_not_specialize=["C", "H", "W", "sxb", "sxc", "sxh"])
def levels_kernel(X, FLAGS, C, H, W, sxb, sxc, sxh, SXW: tl.constexpr, OFF64: tl.constexpr, BLOCK: tl.constexpr):
    """FLAGS[b, 0, v] = 1 where some channel of image b has 8-bit level v, FLAGS[b, 1, v]
    where its luma does (FLAGS zeroed before): a program's histograms of BLOCK pixels."""
    b = tl.program_id(1)
    first = _first(BLOCK, OFF64)
    p = first + tl.arange(0, BLOCK)
    ok = p < H * W
    p = tl.where(ok, p, first)  # (lanes past the image count as the block's first pixel)
    row = p // W
    pix = offset(row, sxh, OFF64) + offset(p - row * W, SXW, OFF64)
    x_base = X + offset(b, sxb, OFF64)
    bins = tl.arange(0, LEVELS)
    present = tl.zeros((LEVELS,), tl.int32)
    for c in range(C):
        present += tl.histogram(_level(pixels.load(x_base + offset(c, sxc, OFF64) + pix)), LEVELS)
    f_base = FLAGS + b * 2 * LEVELS
    tl.store(f_base + bins, tl.full((LEVELS,), 1, tl.int32), mask=present > 0)
    luma = tl.histogram(_level(_luma(x_base, pix, None, sxc, C, SXW, OFF64)), LEVELS)
    tl.store(f_base + LEVELS + bins, tl.full((LEVELS,), 1, tl.int32), mask=luma > 0)


@triton.jit
def _vals(FLAGS):
    """Poisson's ``vals`` from an image's level flags: the count of levels present (at
    least 1) rounded up to a power of two."""
    n = tl.maximum(tl.sum(tl.load(FLAGS + tl.arange(0, LEVELS)), 0), 1).to(tl.float32)
    return tl.exp2(tl.ceil(tl.log2(n)))


@triton.jit(do_not_specialize=["C", "H", "W", "sxb", "sxc", "sxh", "syb", "syc", "syh", "s_amount", "s_gray"])
def noise_kernel(X, Y, AMOUNT, GRAY, SEED, FLAGS, unit, C, H, W, sxb, sxc, sxh, syb, syc, syh, s_amount, s_gray,
                 POISSON: tl.constexpr, CLIP: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
                 OFF64: tl.constexpr, BLOCK: tl.constexpr):
    """Y = X + noise (module docstring) for BLOCK pixels of image ``program_id(1)``:
    ``unit * AMOUNT[b * s_amount]`` the image's sigma (unit scale) or Poisson scale,
    ``GRAY[b * s_gray]`` nonzero for grey noise, ``SEED`` the call's Philox seed (a device
    scalar: no copy to the host), ``FLAGS`` ``levels_kernel``'s (Poisson)."""
    b = tl.program_id(1)
    p = _first(BLOCK, OFF64) + tl.arange(0, BLOCK)
    hw = H * W
    ok = p < hw
    row = p // W
    col = p - row * W
    x_base = X + offset(b, sxb, OFF64)
    y_base = Y + offset(b, syb, OFF64)
    x_pix = offset(row, sxh, OFF64) + offset(col, SXW, OFF64)
    y_pix = offset(row, syh, OFF64) + offset(col, SYW, OFF64)
    amount = tl.load(AMOUNT + b * s_amount).to(tl.float32) * unit
    gray = tl.load(GRAY + b * s_gray) != 0
    seed = tl.load(SEED)
    planes = C + 1
    counter = (b.to(tl.int64) * planes) * hw + p  # plane 0's; plane j's is j * hw further
    stride = tl.num_programs(1).to(tl.int64) * planes * hw  # a Poisson round's further counters
    vals = 1.0
    if POISSON:
        vals = _vals(FLAGS + 2 * b * LEVELS)
    shared = tl.zeros((BLOCK,), tl.float32)  # a grey image's noise, every channel's
    if gray:
        if POISSON:
            g = _level(_luma(x_base, x_pix, ok, sxc, C, SXW, OFF64)).to(tl.float32) / 255.0
            g_vals = _vals(FLAGS + (2 * b + 1) * LEVELS)
            shared = _poisson(g * g_vals, seed, counter, stride) / g_vals - g
        else:
            shared = tl.randn(seed, counter)
    for c in range(C):
        x = pixels.load(x_base + offset(c, sxc, OFF64) + x_pix, ok)
        if gray:
            n = shared
        elif POISSON:
            xr = _level(x).to(tl.float32) / 255.0
            n = _poisson(xr * vals, seed, counter + (c + 1) * hw, stride) / vals - xr
        else:
            n = tl.randn(seed, counter + (c + 1) * hw)
        y = x + n * amount
        if CLIP:
            y = tl.minimum(tl.maximum(y, 0.0), 1.0)
        pixels.store(y_base + offset(c, syc, OFF64) + y_pix, y, ok)


def add(x, y, amount, unit, gray, seed, poisson, clip):
    """y = x + noise, for 4-D float ``x`` and ``y``: ``amount`` (B or 1 values on the
    device) times ``unit`` the sigma in unit scale or the Poisson scale, ``gray`` (B or 1
    bools), ``seed`` (one int64 on the device)."""
    import torch
    B, C, H, W = x.shape
    off64 = needs_int64(x, y)
    plane = max(16, triton.next_power_of_2(H * W)) if interpreting() else None  # (the interpreter: a program a plane)
    flags = x  # (a stand-in: Gaussian noise reads no flags)
    if poisson:
        flags = torch.zeros(B, 2, LEVELS.value, dtype=torch.int32, device=x.device)
        block = plane or LEVELS_BLOCK
        launch_kernel(levels_kernel, (cdiv(H * W, block), B), (x, flags, C, H, W, x.stride(0), x.stride(1),
                                                                x.stride(2)),
                      dict(SXW=x.stride(3), OFF64=off64), x, tile_config(BLOCK=block, num_warps=4))
    block = plane or (POISSON_BLOCK if poisson else BLOCK)
    args = (x, y, amount, gray, seed, flags, float(unit), C, H, W, x.stride(0), x.stride(1), x.stride(2), y.stride(0),
            y.stride(1), y.stride(2), int(amount.numel() > 1), int(gray.numel() > 1))
    meta = dict(POISSON=bool(poisson), CLIP=bool(clip), SXW=x.stride(3), SYW=y.stride(3), OFF64=off64)
    launch_kernel(noise_kernel, (cdiv(H * W, block), B), args, meta, x, tile_config(BLOCK=block, num_warps=4))
