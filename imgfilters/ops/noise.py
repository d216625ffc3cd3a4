"""Gaussian noise level estimation: ``estimate_noise``.

The method is Liu, Tanaka and Okutomi, "Single-image noise level estimation for blind
denoising" (IEEE TIP 2013), with the final variance taken as in Chen, Zhu and Heng, "An
efficient statistical method for image noise level estimation" (ICCV 2015):

1. Take the 7 x 7 patches of every channel, on a regular grid of positions spaced so
   that at most 2^16 are taken per image, read where they lie (on a GPU every step runs
   in kernels, ``kernels/noise.py``: no copy of the patches or of the image, no wait for
   the host). The noise variance is the spread of patches in the directions where image
   content has none: the small eigenvalues of their covariance.
2. Keep only *weak-texture* patches, those whose gradient energy is below what noise alone
   would give with 99 % probability (a gamma quantile, scaled by the current variance
   estimate), and re-estimate. Three rounds.
3. Each estimate is the mean of the smallest covariance eigenvalues, taking as many as
   keep that mean no larger than their median (Chen et al.): the eigenvalues that are
   pure noise cluster around sigma^2, content adds a heavy tail. Averaging them removes
   the low bias of using the single smallest eigenvalue.

On the sample photographs with synthetic Gaussian noise it lands within 2-3 % of the true
sigma from 5/255 to 50/255, where the wavelet median estimate of
``skimage.restoration.estimate_sigma`` reads 20-40 % high at 5/255 (it takes fine
texture for noise). Noise that was clipped at 0 and 1 reads lower, as it is.
"""
import functools
import math

import numpy as np
import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import noise as kernels
from imgfilters.ops import library
from imgfilters.reference import noise as reference

__all__ = ["estimate_noise"]

PATCH = reference.PATCH
MIN_PATCHES = 10 * PATCH * PATCH
CONFIDENCE = 0.99
ROUNDS = 3
SAMPLE_WHOLE, SAMPLE_CROP, SAMPLE_GRID = 2048, 1024, 3  # estimate_sampled's crops
# Patches sampled per image, on a regular grid of the positions (the float64 reference
# copies them: 26 MB for a 4K image). Fewer patches leave the 49 x 49 covariance too poorly
# sampled: pure noise of sigma 0.1 on a 16 x 16 grey image reads 0.07, on 12 x 12 it reads 0.
MAX_PATCHES = 2 ** 16


def estimate_noise(img):
    """The standard deviation of additive white Gaussian noise in each image, in unit
    intensity scale (integers read as value / max, so 10/255 for sigma 10 on a uint8 image).

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` image of any supported dtype, with at least
            490 7 x 7 patches over its channels (29 x 29 grey, 19 x 19 RGB).
            The channels of an image are assumed to share one noise level.

    Returns:
        A float32 tensor of the batch shape (``img.shape[:-3]``; 0-d for one image) on
        ``img``'s device; float64 for float64 input. An image holding NaN or an infinity
        gets NaN (the others of its batch their estimates): a GPU call does not wait for
        the device to find out.
    """
    _image.check_image(img)
    check_size(img)
    return _estimate_op(img)


def sample_windows(H, W):
    """The crops ``(r0, r1, c0, c1)`` on which ``estimate_sampled`` reads an H x W image:
    the whole image up to SAMPLE_WHOLE pixels a side (the same estimate as the untiled
    call); else a SAMPLE_GRID x SAMPLE_GRID grid of SAMPLE_CROP-pixel crops spread over
    it, deterministic, so every tile of an image gets the same parameters."""
    if H <= SAMPLE_WHOLE and W <= SAMPLE_WHOLE:
        return [(0, H, 0, W)]
    h, w = min(H, SAMPLE_CROP), min(W, SAMPLE_CROP)
    starts = lambda n, m: sorted({round(k * (n - m) / (SAMPLE_GRID - 1)) for k in range(SAMPLE_GRID)})
    return [(r, r + h, c, c + w) for r in starts(H, h) for c in starts(W, w)]


def estimate_sampled(read, H, W):
    """The noise sigma of each image of a large batch read crop by crop: ``read(r0, r1,
    c0, c1)`` gives the ``(..., C, h, w)`` tensor of a crop; the median of the crops'
    estimates (``sample_windows``), one float64 CPU value per image."""
    sigmas = [estimate_noise(read(*w)).to("cpu", torch.float64).reshape(-1) for w in sample_windows(H, W)]
    return check_estimated(torch.stack(sigmas).median(0).values)


def check_estimated(sigma):
    """``sigma`` (CPU values), unless an estimate is NaN: its image held NaN or an
    infinity, and a filter that needs the noise level cannot run on it."""
    if torch.isnan(sigma).any():
        raise ValueError("img has NaN or infinite values; its noise cannot be estimated: pass sigma")
    return sigma


def check_size(img):
    """Raise unless ``img`` has enough 7 x 7 patches per image for an estimate."""
    C, H, W = _image.as_planes(img).shape[1:]
    if H < PATCH or W < PATCH or (H - PATCH + 1) * (W - PATCH + 1) * C < MIN_PATCHES:
        raise ValueError(f"img of {C} x {H} x {W} is too small to estimate its noise: it needs {MIN_PATCHES} "
                         f"{PATCH} x {PATCH} patches (about 29 x 29 grey, 19 x 19 colour); pass sigma instead")


def _dtype(img):
    return torch.float64 if img.dtype == torch.float64 else torch.float32


def _batch(img):
    return img.shape[:-3] if img.ndim > 2 else ()


@library.op("estimate_noise", lambda img: img.new_empty(_batch(img), dtype=_dtype(img)))
def _estimate_op(img: Tensor) -> Tensor:
    return sigmas(_image.as_planes(img), _dtype(img)).reshape(_batch(img))


def sigmas(x4, dtype=torch.float64):
    """The noise sigma of each image of the (B, C, H, W) batch in unit scale, as ``dtype``
    on ``x4``'s device, NaN for an image holding NaN or an infinity: on the GPU for a GPU
    image other than float64 (the last kernel writes it; no wait for the device), else on
    the CPU (the CPU engine's patch sums, or the float64 reference's)."""
    unit = 1.0 / _image.MAX_VALUE.get(x4.dtype, 1.0)  # the patches are in the image's units
    # per image, whether it is finite: its largest magnitude, one read and no image-sized
    # mask (a wait for it cost a float32 4K image 0.6 ms: the host's launches no longer
    # overlapped the device's work)
    finite = torch.linalg.vector_norm(x4, math.inf, dim=(1, 2, 3)).isfinite() if x4.is_floating_point() else None
    if x4.is_cuda and x4.dtype != torch.float64:
        sigma = x4.new_empty(x4.shape[0], dtype=dtype)
        _estimate_on_device(x4, sigma, unit)
    else:
        if finite is not None and not finite.all():  # (estimated as black images, then NaN)
            x4 = torch.where(finite[:, None, None, None], x4, 0)
        var = _estimate_on_engine(x4) if _image.uses_cpu_engine(x4) else _estimate(x4)
        sigma = (var.sqrt() * unit).to(x4.device, dtype)
    return sigma if finite is None else torch.where(finite, sigma, math.nan)


def _stride(C, H, W):
    """The spacing of the sampled patch positions, the same along both axes: the smallest
    that samples at most MAX_PATCHES patches."""
    stride = max(1, math.isqrt(C * (H - PATCH + 1) * (W - PATCH + 1) // MAX_PATCHES))
    while C * -(-(H - PATCH + 1) // stride) * -(-(W - PATCH + 1) // stride) > MAX_PATCHES:
        stride += 1
    return stride


def _estimate(x4):
    """Noise variances of the (B, C, H, W) batch, in its own units, float64, on the host:
    ROUNDS rounds of the float64 reference's patch sums and Chen et al.'s variance, each
    round's energy limit from the one before (CPU and float64 images, and the
    interpreter, where the device path's eigenvalue kernel takes seconds: its tests call
    it directly)."""
    stride, threshold, B = _stride(*x4.shape[1:]), _texture_threshold(), x4.shape[0]
    var = _noise_variance(reference.patch_stats(x4, np.full(B, np.inf), stride).numpy())
    for _ in range(ROUNDS - 1):
        var = _noise_variance(reference.patch_stats(x4, var * threshold, stride).numpy(), var)
    return torch.from_numpy(var)


def _estimate_on_engine(x4):
    """``_estimate`` on the CPU engine (``imgfilters/cpu/noise.py``): each sampled patch
    and its gradient energy read once, then each round's sums over the patches it keeps
    as one float64 product."""
    from imgfilters.cpu import noise as engine
    stride, threshold, B = _stride(*x4.shape[1:]), _texture_threshold(), x4.shape[0]
    moments = engine.patch_moments(x4, stride)
    var = _noise_variance(engine.patch_stats(moments, np.full(B, np.inf)).numpy())
    for _ in range(ROUNDS - 1):
        var = _noise_variance(engine.patch_stats(moments, var * threshold).numpy(), var)
    return torch.from_numpy(var)


def _estimate_on_device(x4, sigma, unit):
    """``_estimate`` in the kernels (``kernels/noise.py``, two launches per round), with no
    wait for the host: the variances (B,) float64 on ``x4``'s device, and ``sqrt(var) *
    unit`` written to ``sigma`` (B,). Everything the rounds keep lives in one zeroed
    buffer (one allocation, one fill)."""
    B, C, H, W = x4.shape
    stride, threshold = _stride(C, H, W), _texture_threshold()
    stats, width = kernels.STATS, kernels.WIDTH.value
    parts = {"sums": ROUNDS * B * stats * stats, "var": (ROUNDS + 1) * B, "work": B * 3 * width,
             "tickets": 2 * ROUNDS * B, "limits": ROUNDS * B}
    state = dict(zip(parts, x4.new_zeros(sum(parts.values()), dtype=torch.float64).split(list(parts.values()))))
    sums = state["sums"].view(ROUNDS, B, stats, stats)
    var = state["var"].view(ROUNDS + 1, B)  # var[0]: the first round's "previous" (unused: it keeps every patch)
    work = state["work"].view(B, 3, width)
    tickets = state["tickets"].view(ROUNDS, 2, B)
    limits = state["limits"].view(torch.float32).view(2 * ROUNDS, B)  # limits[k]: round k's (k >= 1)
    form = _energy_form(x4.device)
    for k in range(ROUNDS):
        # the first round keeps every patch (a cached constant: no fill), the next ones
        # those below the limit that the round before set
        limit = _image.on((math.inf,) * B, x4.device) if k == 0 else limits[k]
        kernels.launch(x4, form, limit, sums[k], stride, work, tickets[k, 0])
        kernels.eigenvalues(work, tickets[k, 1], sums[k], var[k], var[k + 1], limits[k + 1], sigma, threshold, unit)
    return var[-1]


def _noise_variance(stats, previous=None):
    """Chen et al.'s estimate from the covariance of the kept patches, per image, from
    ``stats`` (B, 50, 50): their outer products, sums (last column) and count (last
    entry). With too few kept patches for a covariance, ``previous`` stands."""
    count = stats[:, -1, -1]
    n = np.maximum(count, 2)[:, None, None]
    total = stats[:, :-1, -1:]
    cov = (stats[:, :-1, :-1] - total * total.transpose(0, 2, 1) / n) / (n - 1)
    ev = torch.linalg.eigvalsh(torch.from_numpy(cov)).numpy()  # ascending
    k = np.arange(1, ev.shape[1] + 1)
    means = ev.cumsum(1) / k
    medians = 0.5 * (ev[:, (k - 1) // 2] + ev[:, k // 2])
    # the largest prefix of small eigenvalues whose mean does not exceed its median
    last = np.where(means <= medians * (1 + 1e-12), k, 0).max(1)
    var = np.maximum(means[np.arange(len(last)), last - 1], 0.0)
    if previous is not None:
        var = np.where(count > 2 * PATCH * PATCH, var, previous)
    return var


@functools.lru_cache(maxsize=None)
def _energy_form(device):
    """The gradient form as the kernel takes it: (64, 64) float32 on ``device``, zero
    past the 49 patch values."""
    form = torch.zeros(kernels.WIDTH.value, kernels.WIDTH.value, dtype=torch.float32)
    form[:PATCH * PATCH, :PATCH * PATCH] = reference.gradient_form()
    return form.to(device)


@functools.lru_cache(maxsize=None)
def _texture_threshold():
    """Liu et al.'s weak-texture threshold per unit of noise variance: the CONFIDENCE
    quantile of a patch's gradient energy under pure noise, a gamma distribution with
    shape rank(D)/2 and scale 2 tr(D)/rank(D), D = Dh'Dh + Dv'Dv the gradient operators on
    a patch."""
    d = reference.gradient_form()
    rank = int(torch.linalg.matrix_rank(d))
    shape = torch.tensor(rank / 2, dtype=torch.float64)
    lo, hi = 0.0, 10.0 * rank  # gamma quantile by bisection on the regularised incomplete gamma
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if torch.special.gammainc(shape, torch.tensor(mid, dtype=torch.float64)) < CONFIDENCE:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi) * 2.0 * float(d.trace()) / rank
