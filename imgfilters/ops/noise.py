"""Gaussian noise level estimation: ``estimate_noise``.

The method is Liu, Tanaka and Okutomi, "Single-image noise level estimation for blind
denoising" (IEEE TIP 2013), with the final variance taken as in Chen, Zhu and Heng, "An
efficient statistical method for image noise level estimation" (ICCV 2015):

1. Take the 7 x 7 patches of every channel. The noise variance is the spread of patches in
   the directions where image content has none: the small eigenvalues of their
   covariance.
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

import torch
import torch.nn.functional as F
from torch import Tensor

from imgfilters import _image
from imgfilters.ops import library

__all__ = ["estimate_noise"]

PATCH = 7
MIN_PATCHES = 10 * PATCH * PATCH
CONFIDENCE = 0.99
ROUNDS = 3
SAMPLE_WHOLE, SAMPLE_CROP, SAMPLE_GRID = 2048, 1024, 3  # estimate_sampled's crops
MAX_PATCHES = 2 ** 17  # a strided subset of patches on large images bounds the memory at ~50 MB
# Fewer patches leave the 49 x 49 covariance too poorly sampled: pure noise of sigma 0.1 on
# a 16 x 16 grey image reads 0.07, on 12 x 12 it reads 0.


def estimate_noise(img):
    """The standard deviation of additive white Gaussian noise in each image, in unit
    intensity scale (integers read as value / max, so 10/255 for sigma 10 on a uint8 image).

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` image of any supported dtype, with at least
            490 7 x 7 patches over its channels (29 x 29 grey, 19 x 19 RGB).
            The channels of an image are assumed to share one noise level.

    Returns:
        A float32 tensor of the batch shape (``img.shape[:-3]``; 0-d for one image) on
        ``img``'s device; float64 for float64 input.
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
    return torch.stack(sigmas).median(0).values


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
    x4 = _image.as_planes(img)
    if x4.is_floating_point() and not torch.isfinite(x4).all():
        raise ValueError("img has NaN or infinite values; its noise cannot be estimated")
    sigmas = [_estimate(_image.to_unit(x4[b], _dtype(img), copy=False)) for b in range(x4.shape[0])]  # read only
    return torch.stack(sigmas).sqrt().to(_dtype(img)).reshape(_batch(img))


def _estimate(x):
    """Noise variance of one (C, H, W) unit-scale image: a 0-d float64 tensor."""
    C, H, W = x.shape
    n = (H - PATCH + 1) * (W - PATCH + 1) * C
    stride = 1
    while n > MAX_PATCHES * stride * stride:
        stride += 1
    planes = x[:, None]
    patches = F.unfold(planes, PATCH, stride=stride).to(torch.float64)  # (C, 49, L)
    patches = patches.permute(1, 0, 2).reshape(PATCH * PATCH, -1)
    # gradient energy of each patch: squared central differences inside it, both directions
    gx = 0.5 * (planes[..., 2:] - planes[..., :-2])
    gy = 0.5 * (planes[..., 2:, :] - planes[..., :-2, :])
    area = PATCH * (PATCH - 2)
    energy = (F.avg_pool2d(gx * gx, (PATCH, PATCH - 2), stride=stride)
              + F.avg_pool2d(gy * gy, (PATCH - 2, PATCH), stride=stride)).reshape(-1).to(torch.float64) * area
    threshold = _texture_threshold()
    keep = torch.ones_like(energy)
    var = _noise_variance(patches, keep)
    for _ in range(ROUNDS - 1):
        weak = (energy < var * threshold).to(torch.float64)
        # with too few weak patches for a covariance, the previous estimate stands
        var = torch.where(weak.sum() > 2 * PATCH * PATCH, _noise_variance(patches, weak), var)
    return var


def _noise_variance(patches, keep):
    """Chen et al.'s estimate from the covariance of the kept patches (columns)."""
    count = keep.sum().clamp(min=2)
    mean = (patches * keep).sum(1, keepdim=True) / count
    centred = patches - mean
    cov = (centred * keep) @ centred.T / (count - 1)
    ev = torch.linalg.eigvalsh(cov)  # ascending
    k = torch.arange(1, ev.numel() + 1, device=ev.device)
    means = ev.cumsum(0) / k
    medians = 0.5 * (ev[(k - 1) // 2] + ev[k // 2])
    # the largest prefix of small eigenvalues whose mean does not exceed its median
    last = torch.where(means <= medians * (1 + 1e-12), k, 0).max()
    return means[last - 1].clamp(min=0)


@functools.lru_cache(maxsize=None)
def _texture_threshold():
    """Liu et al.'s weak-texture threshold per unit of noise variance: the CONFIDENCE
    quantile of a patch's gradient energy under pure noise, a gamma distribution with
    shape rank(D)/2 and scale 2 tr(D)/rank(D), D = Dh'Dh + Dv'Dv the gradient operators on
    a patch."""
    eye = torch.eye(PATCH * PATCH, dtype=torch.float64).reshape(-1, 1, PATCH, PATCH)
    dh = F.conv2d(eye, torch.tensor([[[[-0.5, 0.0, 0.5]]]], dtype=torch.float64)).reshape(PATCH * PATCH, -1).T
    dv = F.conv2d(eye, torch.tensor([[[[-0.5], [0.0], [0.5]]]], dtype=torch.float64)).reshape(PATCH * PATCH, -1).T
    d = dh.T @ dh + dv.T @ dv
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
