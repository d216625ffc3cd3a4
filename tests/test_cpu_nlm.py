"""The CPU engine's non-local means and noise estimate against the float64 reference:
every dtype, border, channel count, layout, per-image parameters, automatic parameters,
fused prologue and epilogue, through the public functions."""
import pytest
import torch
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.ops import noise
from imgfilters.ops.nlm import parameters
from imgfilters.reference import nlm as ref

from helpers import FUSED, KERNEL_DTYPES, NLM_FLOAT32, TOLERANCE, assert_fused_in_one_engine_pass, random_image, sample

pytestmark = pytest.mark.usefixtures("cpu_engine", "one_torch_thread")



def reference(x, h, sigma, patch_size, radius, border="reflect", value=0.0):
    x4 = _image.as_planes(x)
    return ref.nl_means(_image.to_unit(x4), h, sigma, patch_size, radius, border, value).reshape(x.shape)


def assert_close(out, expected):
    got = out.detach().to(torch.float64)
    if out.dtype in _image.MAX_VALUE:
        err = (got - _image.from_unit(expected, out.dtype).to(torch.float64)).abs().max().item()
        assert err <= TOLERANCE[out.dtype], f"{out.dtype}: {err} levels"
    else:
        err = (got - expected).abs().max().item()
        assert err <= max(NLM_FLOAT32, TOLERANCE[out.dtype]), f"{out.dtype}: max error {err}"


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_every_dtype_and_layout(dtype, gen):
    x = random_image((2, 3, 21, 27), dtype, gen)
    for img in (x, x.contiguous(memory_format=torch.channels_last), torch.cat([x, x], -1)[..., ::2]):
        y = imgfilters.nl_means(img, 0.15, sigma=0.05, patch_size=3, search_radius=2)
        assert y.dtype == dtype and y.shape == x.shape
        assert y.is_contiguous(memory_format=torch.channels_last) == _image.is_channels_last(img)
        assert_close(y, reference(img, 0.15, 0.05, 3, 2))


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("channels,patch", [(1, 5), (2, 3), (3, 7), (4, 1)])
def test_every_border_and_channel_count(border, channels, patch, gen):
    x = random_image((1, channels, 37, 290), torch.float32, gen)  # (wider than a block of columns)
    y = imgfilters.nl_means(x, 0.2, sigma=0.02, patch_size=patch, search_radius=3, border=border, border_value=0.4)
    assert_close(y, reference(x, 0.2, 0.02, patch, 3, border, 0.4))


@pytest.mark.parametrize("shape,patch,radius", [((5, 4), 3, 3), ((1, 1, 1), 1, 1), ((2, 2, 1, 9, 6), 5, 2),
                                                ((3, 3, 2), 7, 1), ((1, 70, 3), 15, 4)])
def test_odd_shapes_and_windows_larger_than_the_image(shape, patch, radius, gen):
    x = random_image(shape, torch.float32, gen)
    y = imgfilters.nl_means(x, 0.1, sigma=0.01, patch_size=patch, search_radius=radius, border="symmetric")
    assert_close(y, reference(x, 0.1, 0.01, patch, radius, "symmetric"))


def test_the_largest_window_keeps_its_small_weights(gen):
    """5041 offsets: a float32 sum of each pixel's weights in one would round many small
    ones away (8e-5 here); the engine sums each row of offsets first."""
    x = random_image((1, 3, 16, 16), torch.float32, gen)
    y = imgfilters.nl_means(x, 0.1, sigma=0.02, patch_size=7, search_radius=35, border="replicate")
    assert_close(y, reference(x, 0.1, 0.02, 7, 35, "replicate"))


def test_per_image_parameters_and_threads(gen):
    x = random_image((3, 3, 40, 18), torch.float32, gen)
    h, sigma = torch.tensor([0.05, 0.3, 0.12]), torch.tensor([0.0, 0.1, 0.04])
    before = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            results.append(imgfilters.nl_means(x, h, sigma=sigma, patch_size=3, search_radius=3))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], results[2])
    assert_close(results[0], reference(x, h.double(), sigma.double(), 3, 3))


def test_tiles_equal_the_untiled_call_to_the_bit(gen):
    """Each pixel's box sums and weighted sums add their terms in one order wherever a
    tile, band or block of columns begins (the command line tiles CPU images)."""
    x = random_image((1, 3, 100, 300), torch.float32, gen)  # (wider than a block of columns)
    whole = imgfilters.nl_means(x, 0.1, sigma=0.02, patch_size=3, search_radius=3)
    for tile in (48, 77):
        got = imgfilters.tiled(imgfilters.nl_means, x, 0.1, sigma=0.02, patch_size=3, search_radius=3, tile=tile,
                               progress=False, device="cpu")
        assert torch.equal(got, whole), tile


def test_photo_with_automatic_parameters(gen):
    """Small h (0.4 sigma) is where float32 rounding matters most."""
    clean = sample("astronaut")[:, 40:100, 60:120].to(torch.float64) / 255
    noisy = (clean + 10 / 255 * torch.randn(clean.shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    for x in (noisy.float(), (noisy * 255).round().to(torch.uint8)):
        sigma = imgfilters.estimate_noise(x)
        y = imgfilters.nl_means(x, search_radius=3)
        assert_close(y, reference(x, parameters(float(sigma), 3)[2], float(sigma), 3, 3))


def test_fused_prologue_and_epilogue(gen, monkeypatch):
    steps = [v2.ToDtype(torch.float32, scale=True), T.NonLocalMeans(0.1, sigma=0.02, patch_size=3, search_radius=2),
             v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.1])]
    x = random_image((2, 3, 19, 23), torch.uint8, gen)
    assert_fused_in_one_engine_pass(steps, x, monkeypatch, max(FUSED[torch.float32], NLM_FLOAT32))


# ---- the noise estimate ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.float32])
def test_noise_estimate_equals_the_reference_path(dtype, gen):
    clean = torch.stack([sample("coffee")[:, 40:136, 60:188], sample("astronaut")[:, 100:196, 60:188]]) / 255.0
    sigmas = torch.tensor([5.0, 30.0], dtype=torch.float64)[:, None, None, None] / 255
    x = (clean.double() + sigmas * torch.randn(clean.shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    x = _image.from_unit(x, dtype) if dtype in _image.MAX_VALUE else x.to(dtype)
    x = x.contiguous(memory_format=torch.channels_last)
    got = imgfilters.estimate_noise(x)
    assert got.shape == (2,) and got.dtype == torch.float32
    expected = (noise._estimate(x).sqrt() / _image.MAX_VALUE.get(dtype, 1.0)).float()
    assert torch.allclose(got, expected, rtol=1e-5, atol=0), (got, expected)


def test_noise_estimate_of_non_finite_images_is_nan():
    x = torch.rand(3, 3, 40, 40)
    x[0, 1, 5, 5] = float("nan")
    x[2, 0, 7, 9] = float("-inf")
    got = imgfilters.estimate_noise(x)
    assert torch.isnan(got[[0, 2]]).all() and got[1] == imgfilters.estimate_noise(x[1])
    with pytest.raises(ValueError, match="NaN"):
        imgfilters.nl_means(x)
