"""The noise kernels (``kernels/add_noise.py``, the GPU path of ``degrade.add_gaussian_noise``
and ``add_poisson_noise``): their samples follow the distributions (chi-square against
Poisson's, moments against the normal's), their counters give every image, channel and
grey plane its own stream whatever the layout, and a generator's seed repeats them.
Float64 images take torch's samplers (``test_degrade.py``), the reference path."""
import math

import numpy as np
import pytest
import scipy.stats
import torch
import triton
import triton.language as tl

from helpers import count_launches
from imgfilters import degrade
from imgfilters.kernels import add_noise


def _generator(device, seed):
    return torch.Generator(device).manual_seed(seed)


def test_gaussian_noise_moments_streams_and_seed(device):
    x = torch.full((3, 3, 40, 56), 0.5, device=device)
    sigma = torch.tensor([4.0, 12.0, 8.0], device=device)
    gray = torch.tensor([False, False, True], device=device)
    y = degrade.add_gaussian_noise(x, sigma, gray, generator=_generator(device, 1), clip=False)
    n = ((y - x) * 255).double()
    for b in range(3):
        s = sigma[b].item()
        assert abs(n[b].std().item() - s) < 0.05 * s and abs(n[b].mean().item()) < 0.1 * s
        assert abs(scipy.stats.kurtosis(n[b].flatten().cpu().numpy())) < 0.2  # normal: excess kurtosis 0
    assert torch.equal(y[2, 0], y[2, 1]) and torch.equal(y[2, 1], y[2, 2])  # grey: one field
    flat = n[:2].reshape(6, -1)  # colour channels of both images: independent streams
    corr = torch.corrcoef(flat)
    assert (corr - torch.eye(6, dtype=corr.dtype, device=corr.device)).abs().max() < 0.06
    again = degrade.add_gaussian_noise(x, sigma, gray, generator=_generator(device, 1), clip=False)
    other = degrade.add_gaussian_noise(x, sigma, gray, generator=_generator(device, 2), clip=False)
    assert torch.equal(y, again) and (y != other).float().mean() > 0.99


def test_noise_follows_the_pixel_not_the_layout(device):
    """A pixel's counter is its position: a channels-last image gets the same noise, and
    clipping and the dtype act after it."""
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(2, 3, 17, 23, generator=gen).to(device)
    for poisson in (False, True):
        f = degrade.add_poisson_noise if poisson else degrade.add_gaussian_noise
        amount = 2.0 if poisson else 20.0
        y = f(x, amount, False, generator=_generator(device, 5))
        cl = f(x.to(memory_format=torch.channels_last), amount, False, generator=_generator(device, 5))
        assert cl.is_contiguous(memory_format=torch.channels_last) and torch.equal(y, cl)
        assert y.min() >= 0 and y.max() <= 1 and (y == 0).any() and (y == 1).any()
    half = degrade.add_gaussian_noise(x.half(), 20.0, False, generator=_generator(device, 5), clip=False)
    full = degrade.add_gaussian_noise(x, 20.0, False, generator=_generator(device, 5), clip=False)
    assert half.dtype == torch.float16 and (half.float() - full).abs().max() < 2e-3


def _chi_square_p(k, mean):
    """p-value of Poisson(mean) for the integer samples ``k`` (bins of expected count > 5)."""
    lo, hi = int(max(0, mean - 5 * mean ** 0.5 - 2)), int(mean + 5 * mean ** 0.5 + 3)
    edges = np.arange(lo, hi + 1)
    observed = np.array([(k < lo).sum()] + [(k == e).sum() for e in edges] + [(k > hi).sum()])
    dist = scipy.stats.poisson(mean)
    expected = np.array([dist.cdf(lo - 1)] + list(dist.pmf(edges)) + [dist.sf(hi)]) * len(k)
    keep = expected > 5
    chi = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    return scipy.stats.chi2.sf(chi, keep.sum() - 1)


@pytest.mark.parametrize("level", [0, 3, 9, 10, 40, 128, 255])  # means 0 to 256: inversion below 10, PTRS above
def test_poisson_samples_follow_poisson(level, device):
    """An image of all 256 levels (vals = 256) and a flat region at ``level``: the flat
    region's k = (noise / scale + xr) vals is Poisson with mean level / 255 * 256."""
    x = torch.full((1, 1, 96, 96), level / 255.0, device=device)
    x[0, 0, :2, :] = 0
    x[0, 0, 0, :] = torch.arange(96, device=device) / 255.0
    x[0, 0, 1, :] = torch.arange(96, 192, device=device) / 255.0
    x[0, 0, 2, :64] = torch.arange(192, 256, device=device) / 255.0
    y = degrade.add_poisson_noise(x, 1.0, False, generator=_generator(device, level), clip=False)
    xr = (x * 255).round() / 255
    k = ((y - x + xr) * 256).round()[0, 0, 3:].flatten().cpu().numpy()
    mean = level / 255 * 256
    if level == 0:
        assert (k == 0).all()
        return
    assert abs(k.mean() - mean) < 4 * (mean / len(k)) ** 0.5 + 1e-3
    assert _chi_square_p(k, mean) > 1e-3


def test_poisson_levels_and_grey_noise(device):
    """vals: the levels an image holds (3 here: 4), its luma's for grey noise (every
    channel the luma's sample)."""
    x = torch.zeros(2, 3, 32, 48, device=device)
    x[:, :, :, :16] = 40 / 255
    x[:, :, :, 16:32] = 80 / 255
    x[:, :, :, 32:] = 200 / 255
    gray = torch.tensor([False, True], device=device)
    y = degrade.add_poisson_noise(x, 1.0, gray, generator=_generator(device, 7), clip=False)
    k = (y - x + x) * 4  # (x is on its levels: xr = x)
    assert (k - k.round()).abs().max() < 1e-4  # k / vals with vals = 4
    k = k.round()
    for b in range(2):
        for cols, level in ((slice(0, 16), 40), (slice(16, 32), 80), (slice(32, 48), 200)):
            s = k[b, :, :, cols].flatten() if b == 0 else k[b, 0, :, cols].flatten()
            mean = level / 255 * 4
            assert abs(s.mean().item() - mean) < 5 * (mean / s.numel()) ** 0.5
            assert abs(s.var().item() / mean - 1) < 0.2
    assert torch.equal(y[1, 0], y[1, 1]) and torch.equal(y[1, 1], y[1, 2])
    assert not torch.equal(y[0, 0], y[0, 1])


def test_a_batch_draws_one_seed_a_call(device):
    """Each call draws its seed from the generator: two calls differ, a reseeded
    generator repeats them."""
    x = torch.full((1, 1, 8, 8), 0.5, device=device)
    g = _generator(device, 11)
    a, b = (degrade.add_poisson_noise(x, 3.0, False, generator=g) for _ in range(2))
    g = _generator(device, 11)
    assert not torch.equal(a, b) and torch.equal(a, degrade.add_poisson_noise(x, 3.0, False, generator=g))


def test_gaussian_noise_is_one_launch_and_poisson_two(device):
    """The noise needs no noise tensor and no torch arithmetic: Gaussian one launch,
    Poisson the levels' and the noise's."""
    x = torch.rand(2, 3, 8, 8, device=device)
    for f, amount, launches in ((degrade.add_gaussian_noise, 5.0, 1), (degrade.add_poisson_noise, 1.0, 2)):
        with count_launches() as counted:
            f(x, amount, torch.tensor([False, True], device=device))
        assert sum(counted.values()) == launches, counted



@triton.jit
def _log_factorials(X, Y, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(Y + i, add_noise._log_factorial(tl.load(X + i)))


def test_log_factorial_is_lgamma_in_float32(device):
    """PTRS's acceptance test reads log k! from the Stirling series, stepped down below k = 6
    by one log of a product: within float32 of ``math.lgamma`` for every k a mean up to 256
    reaches."""
    k = torch.arange(512, dtype=torch.float32, device=device)
    got = torch.empty_like(k)
    _log_factorials[(1,)](k, got, N=512)
    expected = torch.tensor([math.lgamma(v + 1.0) for v in range(512)], dtype=torch.float64)
    assert ((got.cpu().double() - expected).abs() / expected.clamp(min=1)).max() < 4e-6
