"""Non-local means and noise estimation: the float64 reference against scikit-image, the
kernel against the reference, automatic parameters, bad arguments."""
import numpy as np
import pytest
import torch
from skimage.restoration import denoise_nl_means

import imgfilters
from imgfilters import _image
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.ops.nlm import parameters
from imgfilters.reference import nlm as ref

from helpers import KERNEL_DTYPES, NLM_FLOAT32, SAMPLE_NAMES, TOLERANCE, gpu, random_image, sample


def psnr(a, b):
    return 10 * np.log10(1.0 / float(((a - b) ** 2).mean()))


def noisy_crop(name, sigma, gen, size=64):
    """A crop of a sample photo, float64 unit scale, plus unclipped Gaussian noise."""
    clean = sample(name)[:, 40:40 + size, 60:60 + size].to(torch.float64) / 255
    return clean, clean + sigma * torch.randn(clean.shape, generator=gen, dtype=torch.float64)


def reference(x, h, sigma, patch_size, radius, border="reflect", value=0.0):
    x4 = _image.as_planes(x.cpu())
    return ref.nl_means(_image.to_unit(x4), h, sigma, patch_size, radius, border, value).reshape(x.shape)


# ---- the reference against scikit-image ------------------------------------------------------

@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("sigma255", [10, 25])
def test_reference_psnr_is_within_1_db_of_scikit_image_fast_mode(name, sigma255, gen):
    """scikit-image sums a (P-1) x (P-1) window over P^2: the smaller the patch, the further
    apart (up to 1.3 dB at P = 5, 0.8 at P = 9 on these crops), so compare at P = 9."""
    sigma = sigma255 / 255
    clean, noisy = noisy_crop(name, sigma, gen)
    patch, radius, h = 9, 5, parameters(sigma, clean.shape[0])[2]
    ours = ref.nl_means(noisy[None], h, sigma, patch, radius)[0]
    theirs = denoise_nl_means(noisy.permute(1, 2, 0).numpy(), patch_size=patch, patch_distance=radius, h=h,
                              sigma=sigma, fast_mode=True, channel_axis=-1)
    theirs = torch.from_numpy(theirs).reshape(noisy.shape[1], noisy.shape[2], -1).permute(2, 0, 1)
    p_ours, p_theirs = psnr(ours, clean), psnr(theirs, clean)
    assert p_ours > psnr(noisy, clean) + 1.0  # it denoises
    assert abs(p_ours - p_theirs) <= 1.0, (p_ours, p_theirs)


def test_reference_of_a_constant_image_is_constant(gen):
    x = torch.full((2, 3, 9, 11), 0.3, dtype=torch.float64)
    assert torch.allclose(ref.nl_means(x, 0.05, 0.0, 3, 2), x)


def test_reference_per_image_parameters_equal_separate_calls(gen):
    x = torch.rand(3, 1, 13, 12, generator=gen, dtype=torch.float64)
    h = torch.tensor([0.05, 0.2, 0.1], dtype=torch.float64)
    sigma = torch.tensor([0.0, 0.1, 0.03], dtype=torch.float64)
    both = ref.nl_means(x, h, sigma, 3, 2)
    for b in range(3):
        one = ref.nl_means(x[b:b + 1], float(h[b]), float(sigma[b]), 3, 2)
        assert torch.allclose(both[b:b + 1], one)


# ---- kernel against the reference ------------------------------------------------------------

def assert_close(out, expected):
    got = out.detach().cpu().to(torch.float64)
    if out.dtype in _image.MAX_VALUE:
        err = (got - _image.from_unit(expected, out.dtype).to(torch.float64)).abs().max().item()
        assert err <= TOLERANCE[out.dtype], f"{out.dtype}: {err} levels"
    else:
        err = (got - expected).abs().max().item()
        assert err <= max(NLM_FLOAT32, TOLERANCE[out.dtype]), f"{out.dtype}: max error {err}"


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_every_dtype(dtype, gen, device):
    x = random_image((2, 3, 21, 27), dtype, gen, device)
    y = imgfilters.nl_means(x, 0.15, sigma=0.05, patch_size=3, search_radius=2)
    assert y.dtype == dtype and y.shape == x.shape and y.device == x.device
    assert_close(y, reference(x, 0.15, 0.05, 3, 2))


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("channels,patch", [(1, 5), (2, 3), (4, 7)])
def test_every_border_and_channel_count(border, channels, patch, gen, device):
    x = random_image((1, channels, 17, 23), torch.float32, gen, device)
    y = imgfilters.nl_means(x, 0.2, sigma=0.02, patch_size=patch, search_radius=2, border=border,
                            border_value=0.4)
    assert_close(y, reference(x, 0.2, 0.02, patch, 2, border, 0.4))


def test_batch_with_per_image_h_and_sigma(gen, device):
    x = random_image((3, 3, 14, 18), torch.float32, gen, device)
    h = torch.tensor([0.05, 0.3, 0.12])
    sigma = torch.tensor([0.0, 0.1, 0.04])
    y = imgfilters.nl_means(x, h, sigma=sigma, patch_size=3, search_radius=3)
    assert_close(y, reference(x, h.double(), sigma.double(), 3, 3))
    for b in range(3):
        one = imgfilters.nl_means(x[b], float(h[b]), sigma=float(sigma[b]), patch_size=3, search_radius=3)
        assert torch.equal(one, y[b])


@pytest.mark.parametrize("shape,patch,radius", [((5, 4), 3, 3), ((1, 1, 1), 1, 1), ((2, 2, 1, 9, 6), 5, 2),
                                                ((3, 3, 2), 7, 1)])
def test_odd_shapes_and_windows_larger_than_the_image(shape, patch, radius, gen, device):
    x = random_image(shape, torch.float32, gen, device)
    y = imgfilters.nl_means(x, 0.1, sigma=0.01, patch_size=patch, search_radius=radius, border="symmetric")
    assert_close(y, reference(x, 0.1, 0.01, patch, radius, "symmetric"))


def test_strips_of_several_rows_and_programs_agree(gen, device):
    """GPU-like strips: rows running down a strip (the running sum drops rows), several
    strips side by side and stacked (the interpreter otherwise runs one-row strips)."""
    from imgfilters.kernels import nlm as kernels
    x = random_image((1, 2, 11, 24), torch.float32, gen, device)
    y = torch.empty_like(x)
    coef = torch.tensor([-kernels.LOG2E / (0.1 ** 2 * 18)], device=device)
    floor = torch.tensor([2 * 0.02 ** 2 * 18], device=device)
    kernels.launch(x, y, coef, floor, 3, 1, tile=dict(TH=4, S=2, LANES=16, num_warps=1))
    assert_close(y, reference(x, 0.1, 0.02, 3, 1))


def test_real_photo_with_automatic_h_and_sigma(gen, device):
    """Small h (0.4 sigma) is where float32 rounding matters most."""
    _, noisy = noisy_crop("astronaut", 10 / 255, gen, size=48)
    x = noisy.clamp(0, 1).float().to(device)
    sigma = imgfilters.estimate_noise(x)
    y = imgfilters.nl_means(x, search_radius=3)
    _, _, h = parameters(float(sigma), 3)
    assert_close(y, reference(x, h, float(sigma), 3, 3))


def test_channels_last_views_and_input_untouched(gen, device):
    x = random_image((2, 3, 16, 20), torch.uint8, gen, device).to(memory_format=torch.channels_last)
    before = x.clone()
    y = imgfilters.nl_means(x, 0.1, sigma=0.02, patch_size=3, search_radius=2)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(x, before)
    view = x[:, :, 2:14, 3:17]
    assert torch.equal(imgfilters.nl_means(view, 0.1, sigma=0.02, patch_size=3, search_radius=2),
                       imgfilters.nl_means(view.contiguous(), 0.1, sigma=0.02, patch_size=3, search_radius=2))


# ---- automatic parameters and noise estimation -----------------------------------------------

def test_parameter_table_rows():
    assert parameters(15 / 255, 1) == (3, 10, pytest.approx(0.40 * 15 / 255))
    assert parameters(16 / 255, 1) == (5, 10, pytest.approx(0.40 * 16 / 255))
    assert parameters(40 / 255, 1)[:2] == (7, 17)
    assert parameters(100 / 255, 1) == (11, 17, pytest.approx(0.30 * 100 / 255))
    assert parameters(25 / 255, 3) == (3, 10, pytest.approx(0.55 * 25 / 255))
    assert parameters(50 / 255, 3) == (5, 17, pytest.approx(0.40 * 50 / 255))
    assert parameters(200 / 255, 4) == (7, 17, pytest.approx(0.35 * 200 / 255))


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_estimate_noise_within_10_percent(name, gen):
    clean = sample(name).to(torch.float64) / 255
    for sigma255 in (5, 10, 25, 50):
        sigma = sigma255 / 255
        noisy = (clean + sigma * torch.randn(clean.shape, generator=gen, dtype=torch.float64)).float()
        est = imgfilters.estimate_noise(noisy)
        assert est.shape == () and est.dtype == torch.float32
        assert abs(float(est) / sigma - 1) <= 0.10, (sigma255, float(est) * 255)


def test_estimate_noise_per_image_of_a_batch(gen, device):
    clean = sample("coffee").to(torch.float64) / 255
    sigmas = torch.tensor([5, 20, 40], dtype=torch.float64) / 255
    batch = clean + sigmas[:, None, None, None] * torch.randn(3, *clean.shape, generator=gen, dtype=torch.float64)
    est = imgfilters.estimate_noise(batch.reshape(1, 3, *clean.shape).to(torch.float32).to(device))
    assert est.shape == (1, 3) and est.device.type == torch.device(device).type
    assert torch.allclose(est.cpu().double().reshape(3), sigmas, rtol=0.1)


def test_estimate_noise_of_an_image_with_nan_or_inf_is_nan(gen, device):
    """Per image, on the GPU without a wait for the device: the other images keep their
    estimates; the automatic ``nl_means`` refuses the batch."""
    x = random_image((3, 3, 40, 48), torch.float32, gen, device)
    alone = imgfilters.estimate_noise(x[1])
    x[0, 1, 5, 5] = float("nan")
    x[2, 0, 7, 9] = float("inf")
    got = imgfilters.estimate_noise(x)
    assert torch.isnan(got[[0, 2]]).all() and torch.allclose(got[1], alone, rtol=1e-6, atol=0)  # (atomic sums)
    with pytest.raises(ValueError, match="NaN"):
        imgfilters.nl_means(x)


def test_estimate_noise_on_uint8_and_float64(gen):
    clean = sample("camera").to(torch.float64) / 255
    noisy = clean + 12 / 255 * torch.randn(clean.shape, generator=gen, dtype=torch.float64)
    as_u8 = (noisy * 255).round().clamp(0, 255).to(torch.uint8)
    assert abs(float(imgfilters.estimate_noise(as_u8)) * 255 / 12 - 1) <= 0.1
    est64 = imgfilters.estimate_noise(noisy)
    assert est64.dtype == torch.float64 and abs(float(est64) * 255 / 12 - 1) <= 0.1


def _covariance(stats):
    n = stats[:, -1, -1][:, None, None]
    total = stats[:, :-1, -1:]
    return (stats[:, :-1, :-1] - total * total.mT / n) / (n - 1)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_noise_patch_sums_match_the_float64_reference(dtype, gen, device):
    """The kernel's per-round patch sums (shifted by the first pixel, which the covariance
    does not see) against the float64 reference: patch count and covariance, on a
    channels-last batch whose second image keeps only its weak-texture patches."""
    from imgfilters.kernels import noise as kernel
    from imgfilters.ops.noise import _energy_form
    from imgfilters.reference import noise as ref_noise
    x = random_image((2, 3, 61, 83), dtype, gen, device).to(memory_format=torch.channels_last)
    stride = 3
    limits = np.array([np.inf, 2.9 * _image.MAX_VALUE.get(dtype, 1.0) ** 2])  # about half of image 1's patches
    got = x.new_zeros((2, kernel.STATS, kernel.STATS), dtype=torch.float64)
    kernel.launch(x, _energy_form(x.device), torch.tensor(limits, dtype=torch.float32, device=device), got, stride)
    got = got.cpu()
    want = ref_noise.patch_stats(x.cpu(), limits, stride)
    assert 0.2 * want[0, -1, -1] < want[1, -1, -1] < 0.8 * want[0, -1, -1]
    assert abs(got[:, -1, -1] - want[:, -1, -1]).max() <= 1  # a patch at the limit may fall either way in float32
    assert torch.allclose(_covariance(got), _covariance(want), rtol=0, atol=1e-3 * float(_covariance(want).abs().max()))


def test_noise_estimate_on_the_device_matches_the_host(gen, device):
    """The device path (patch sums, then eigenvalues by Householder and multisection in a
    kernel) against the float64 reference and LAPACK on the host, on two images with
    different noise; the interpreter runs it only here (seconds per round)."""
    from imgfilters.ops.noise import _estimate, _estimate_on_device
    clean = sample("coffee")[:, :48, :64].to(torch.float64) / 255
    noisy = clean + torch.tensor([4.0, 30.0], dtype=torch.float64)[:, None, None, None] / 255 * torch.randn(
        2, *clean.shape, generator=gen, dtype=torch.float64)
    x = (noisy.clamp(0, 1) * 255).round().to(torch.uint8)
    sigma = torch.empty(2, dtype=torch.float32, device=device)
    got = _estimate_on_device(x.to(device), sigma, 1 / 255).cpu()
    want = _estimate(x)
    assert torch.allclose(got, want, rtol=1e-4, atol=0), (got, want)
    assert torch.allclose(sigma.cpu().double(), want.sqrt() / 255, rtol=1e-4, atol=0)


def test_automatic_mode_denoises_a_photo(gen):
    clean, noisy = noisy_crop("coffee", 25 / 255, gen)
    out = imgfilters.nl_means(noisy)  # float64: the reference path, full automatic parameters
    assert psnr(out, clean) > psnr(noisy, clean) + 6


@pytest.mark.parametrize("call,error,match", [
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=0.0, patch_size=4), ValueError, "patch_size"),
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=0.0, patch_size=17), ValueError, "patch_size"),
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=0.0, patch_size=3.0), TypeError, "patch_size"),
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=0.0, search_radius=-1), ValueError, "search_radius"),
    (lambda x: imgfilters.nl_means(x, -0.1, sigma=0.0), ValueError, "h"),
    (lambda x: imgfilters.nl_means(x, 0.0, sigma=0.0), ValueError, "h"),
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=float("nan")), ValueError, "sigma"),
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=-0.01), ValueError, "sigma"),
    (lambda x: imgfilters.nl_means(x, torch.tensor([0.1, 0.2, 0.3]), sigma=0.0), ValueError, "h"),
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=0.0, border="wrap"), ValueError, "border"),
    (lambda x: imgfilters.nl_means(torch.rand(1, 5, 8, 8), 0.1, sigma=0.0), ValueError, "channels"),
    (lambda x: imgfilters.nl_means(x.int(), 0.1, sigma=0.0), TypeError, "dtype"),
    (lambda x: imgfilters.nl_means(x, 0.1, sigma=0.0, patch_size=True), TypeError, "patch_size"),
    (lambda x: imgfilters.estimate_noise(x[..., :6]), ValueError, "too small"),
    (lambda x: imgfilters.estimate_noise(torch.rand(1, 28, 28)), ValueError, "too small"),
    (lambda x: imgfilters.nl_means(torch.rand(3, 12, 12)), ValueError, "pass sigma"),
    (lambda x: imgfilters.nl_means(torch.full((1, 40, 40), float("nan"))), ValueError, "NaN"),
    (lambda x: imgfilters.estimate_noise(x.numpy()), TypeError, "img"),
])
def test_bad_arguments_raise_before_launch(call, error, match):
    x = torch.rand(2, 3, 8, 8)
    with pytest.raises(error, match=match):
        call(x)


def test_arguments_are_checked_in_their_order():
    # a bad h on an image too small for the noise estimate: the error names h, the first
    with pytest.raises(ValueError, match="h must"):
        imgfilters.nl_means(torch.rand(1, 3, 16, 16), h=-0.1)
    with pytest.raises(ValueError, match="too small to estimate"):
        imgfilters.nl_means(torch.rand(1, 3, 16, 16), h=0.1)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_large_image_matches_reference_and_allocates_only_the_output(dtype, gen, monkeypatch):
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    x = random_image((1, 3, 270, 480), dtype, gen, "cuda")
    imgfilters.nl_means(x, 0.2, sigma=0.05, patch_size=5, search_radius=4)  # tune first
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    y = imgfilters.nl_means(x, 0.2, sigma=0.05, patch_size=5, search_radius=4)
    assert torch.cuda.max_memory_allocated() - base <= y.numel() * y.element_size() + 4096
    assert_close(y, reference(x, 0.2, 0.05, 5, 4))


@gpu
def test_noise_estimate_and_automatic_parameters_stay_within_32_mib(gen):
    """The estimate samples patches on a grid instead of copying them all (issue 16)."""
    clean = sample("coffee").to(torch.float64) / 255
    big = torch.nn.functional.interpolate(clean[None], size=(2160, 3840), mode="bilinear")
    noisy = big + 25 / 255 * torch.randn(big.shape, generator=gen, dtype=torch.float64)
    x = (noisy.clamp(0, 1) * 255).round().to(torch.uint8).cuda()
    bound = 32 * 2 ** 20
    imgfilters.estimate_noise(x[..., :64, :64])  # cuBLAS's workspace, once per process, is not the estimate's
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    est = imgfilters.estimate_noise(x)
    assert torch.cuda.max_memory_allocated() - base <= bound
    assert abs(float(est) * 255 / 25 - 1) <= 0.15  # the clipped noise reads a little low
    x = x[..., :270, :480]
    torch.cuda.reset_peak_memory_stats()
    y = imgfilters.nl_means(x)
    assert torch.cuda.max_memory_allocated() - base <= y.numel() * y.element_size() + bound
