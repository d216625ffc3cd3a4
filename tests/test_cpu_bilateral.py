"""The CPU engine's bilateral family against the float64 reference: every dtype, border,
window, colour distance, layout, guide, per-image sigmas, fused prologue and epilogue,
through the public functions."""
import math

import pytest
import torch
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.reference import bilateral as ref

from helpers import KERNEL_DTYPES, assert_fused_in_one_engine_pass, assert_matches, random_image, sample

pytestmark = pytest.mark.usefixtures("cpu_engine", "one_torch_thread")



def reference(x, guide, sc, ss, radius, window="square", dist="l2", border="reflect", value=0.0):
    x4 = _image.as_planes(x)
    g4 = x4 if guide is None else _image.as_planes(guide)
    y = ref.bilateral(_image.to_unit(x4), _image.to_unit(g4).expand(x4.shape[0], -1, -1, -1), sc, ss, radius,
                      window, dist, border, value)
    return y.reshape(x.shape)


def upsample_reference(low, guide, sc, ss, radius, window="square", dist="l2", border="reflect", value=0.0):
    l4, g4 = _image.as_planes(low), _image.as_planes(guide)
    y = ref.joint_bilateral_upsample(_image.to_unit(l4), _image.to_unit(g4).expand(l4.shape[0], -1, -1, -1),
                                     sc, ss, radius, window, dist, border, value)
    return y.reshape(*low.shape[:-2], *guide.shape[-2:])


def layouts(x):
    """``x`` contiguous, channels-last, and a strided view (every other column of a wider
    image)."""
    return {"contiguous": x, "channels_last": x.contiguous(memory_format=torch.channels_last),
            "strided": torch.cat([x, x], -1)[..., ::2]}


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_every_dtype_and_layout(dtype, gen):
    x = random_image((2, 3, 13, 37), dtype, gen)
    for name, img in layouts(x).items():
        for window, dist in (("square", "l2"), ("disk", "l1")):
            y = imgfilters.bilateral(img, 0.15, 1.2, radius=3, window=window, color_distance=dist)
            assert y.is_contiguous(memory_format=torch.channels_last) == (name == "channels_last")
            assert_matches(y, reference(img, None, 0.15, 1.2, 3, window, dist))


@pytest.mark.parametrize("border", BORDERS)
def test_every_border_window_and_distance(border, gen):
    x = random_image((1, 2, 21, 45), torch.float32, gen)
    for window in ("square", "disk"):
        for dist in ("l1", "l2"):
            y = imgfilters.bilateral(x, 0.2, 2.0, radius=4, window=window, color_distance=dist, border=border,
                                     border_value=0.4)
            assert_matches(y, reference(x, None, 0.2, 2.0, 4, window, dist, border, 0.4))


@pytest.mark.parametrize("shape,radius", [((1, 1), 2), ((3, 1, 1), 0), ((2, 5, 7), 6), ((4, 3, 9), 1),
                                          ((2, 2, 1, 6, 5), 2), ((1, 4, 3, 600), 3), ((1, 3, 300, 4), 5)])
def test_odd_shapes_channels_and_radius_larger_than_the_image(shape, radius, gen):
    x = random_image(shape, torch.float32, gen)
    for border in ("reflect", "constant"):
        y = imgfilters.bilateral(x, 0.3, 1.0, radius=radius, border=border, border_value=0.7)
        assert_matches(y, reference(x, None, 0.3, 1.0, radius, "square", "l2", border, 0.7))


def test_sample_photos_and_per_image_sigmas():
    x = torch.stack([sample("astronaut")[:, 60:140, 50:170], sample("chelsea")[:, 30:110, 50:170]])
    sc, ss = torch.tensor([0.05, 0.2]), torch.tensor([1.0, 3.0])
    y = imgfilters.bilateral(x, sc, ss, radius=5, window="disk", color_distance="l1")
    assert_matches(y, reference(x, None, sc, ss, 5, "disk", "l1"))
    assert_matches(imgfilters.bilateral(x.float() / 255, sc, ss, radius=3), reference(x.float() / 255, None, sc, ss, 3))


def test_joint_guides_shared_and_per_image(gen):
    x = random_image((3, 3, 17, 26), torch.uint8, gen)
    for guide in (random_image((1, 1, 17, 26), torch.float16, gen), random_image((3, 5, 17, 26), torch.uint16, gen),
                  random_image((3, 16, 17, 26), torch.float32, gen)):
        sc, ss = torch.tensor([0.05, 0.1, 0.4]), torch.tensor([1.0, 1.5, 0.8])
        for window, dist in (("square", "l1"), ("disk", "l2")):
            y = imgfilters.joint_bilateral(x, guide, sc, ss, radius=3, window=window, color_distance=dist,
                                           border="symmetric")
            assert_matches(y, reference(x, guide, sc, ss, 3, window, dist, "symmetric"))


def test_extreme_sigmas_stay_finite(gen):
    x = random_image((1, 3, 9, 40), torch.float32, gen)
    for sc, ss in [(1e-20, 1.0), (0.1, 1e-20), (1e-4, 1.0), (1e3, 1e3)]:
        y = imgfilters.bilateral(x, sc, ss, radius=2)
        assert torch.isfinite(y).all()
        assert_matches(y, reference(x, None, sc, ss, 2))


def test_a_wide_window_keeps_its_small_weights():
    """One bright pixel whose 1800 neighbours each weigh 3e-8: a float32 weight sum that
    started at the centre's 1 would round every one of them away (5e-5 in the output)."""
    x = torch.zeros(1, 1, 49, 49)
    x[0, 0, 24, 24] = 1.0
    sc = (2 * -math.log(3e-8)) ** -0.5
    y = imgfilters.bilateral(x, sc, 1000.0, radius=24, window="disk")
    assert_matches(y, reference(x, None, sc, 1000.0, 24, "disk"))


def test_threads_and_bands_do_not_change_the_result(gen):
    x = random_image((1, 3, 97, 45), torch.float32, gen)
    before = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            results.append(imgfilters.bilateral(x, 0.1, 1.5, radius=3))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], results[2])


def test_tiles_equal_the_untiled_call_to_the_bit(gen):
    """Each pixel takes its sums' terms in one order wherever a tile, band or block of
    columns begins (the command line tiles CPU images)."""
    x = random_image((1, 3, 40, 600), torch.float32, gen)  # (wider than a block of columns)
    for window, dist in (("square", "l2"), ("disk", "l1")):
        whole = imgfilters.bilateral(x, 0.1, 1.5, radius=3, window=window, color_distance=dist)
        for tile in (64, 77):
            got = imgfilters.tiled(imgfilters.bilateral, x, 0.1, 1.5, radius=3, window=window, color_distance=dist,
                                   tile=tile, progress=False, device="cpu")
            assert torch.equal(got, whole), (window, tile)


def test_input_is_not_modified_and_gradients_run_the_reference(gen):
    x = random_image((1, 2, 8, 9), torch.float32, gen)
    before = x.clone()
    imgfilters.bilateral(x, 0.2, 1.0)
    assert torch.equal(x, before)
    x.requires_grad_()
    (got,) = torch.autograd.grad(imgfilters.bilateral(x, 0.2, 1.0).sum(), x)
    x64 = x.detach().double().requires_grad_()
    (expected,) = torch.autograd.grad(ref.bilateral(x64, x64, 0.2, 1.0, 2).sum(), x64)
    assert got.dtype == torch.float32 and torch.allclose(got.double(), expected, atol=1e-5)


@pytest.mark.parametrize("steps", [
    [v2.ToDtype(torch.float32, scale=True), T.Bilateral(0.1, 1.5, radius=2), v2.Normalize([0.4, 0.5, 0.6],
                                                                                           [0.2, 0.3, 0.1])],
    [T.Bilateral(0.2, 1.0, window="disk", color_distance="l1"), v2.ToDtype(torch.float32, scale=True)],
])
def test_fused_prologue_and_epilogue(steps, gen, monkeypatch):
    x = random_image((2, 3, 19, 23), torch.uint8, gen)
    assert_fused_in_one_engine_pass(steps, x, monkeypatch)


# ---- joint bilateral upsampling ---------------------------------------------------------------

@pytest.mark.parametrize("sizes", [(6, 7, 12, 14), (5, 9, 17, 23), (8, 8, 8, 8), (9, 8, 5, 6), (2, 4, 41, 7)])
def test_upsample_every_border_window_and_distance(sizes, gen):
    h, w, H, W = sizes
    low = random_image((2, 3, h, w), torch.float32, gen)
    guide = random_image((2, 2, H, W), torch.float32, gen)
    for window, dist, border in [("square", "l2", "reflect"), ("disk", "l1", "constant"),
                                 ("square", "l1", "symmetric"), ("disk", "l2", "replicate")]:
        y = imgfilters.joint_bilateral_upsample(low, guide, 0.2, 1.0, radius=2, window=window, color_distance=dist,
                                                border=border, border_value=0.3)
        assert_matches(y, upsample_reference(low, guide, 0.2, 1.0, 2, window, dist, border, 0.3))


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_upsample_every_dtype_layout_and_shared_guide(dtype, gen):
    low = random_image((2, 2, 7, 11), dtype, gen).contiguous(memory_format=torch.channels_last)
    guide = random_image((1, 3, 20, 33), torch.uint8, gen)
    sc = torch.tensor([0.1, 0.3])
    y = imgfilters.joint_bilateral_upsample(low, guide, sc, 0.9)
    assert y.shape == (2, 2, 20, 33) and y.is_contiguous(memory_format=torch.channels_last)
    assert_matches(y, upsample_reference(low, guide, sc, 0.9, 2))


def test_upsample_of_a_wide_window_keeps_its_small_weights():
    """As for the bilateral filter: 1250 samples of weight 3e-8 next to one of weight 1."""
    low = torch.zeros(1, 1, 31, 31)
    low[0, 0, 15, 15] = 1.0
    sc = (2 * -math.log(3e-8)) ** -0.5
    y = imgfilters.joint_bilateral_upsample(low, low, sc, 1000.0, radius=20, window="disk")
    assert_matches(y, upsample_reference(low, low, sc, 1000.0, 20, "disk"))


def test_upsample_with_tiny_sigma_color_stays_finite(gen):
    # every sample differs from every pixel by 0.5: all weights underflow without the
    # largest exponent taken out first
    low = random_image((2, 1, 6, 7), torch.float32, gen)
    i, j = torch.meshgrid(torch.arange(12), torch.arange(14), indexing="ij")
    checker = ((i + j) % 2).to(torch.float32)[None, None]
    y = imgfilters.joint_bilateral_upsample(low, checker, 1e-3, 1.0, radius=2)
    assert torch.isfinite(y).all()
    assert (y.double() - upsample_reference(low, checker, 1e-3, 1.0, 2)).abs().max() <= 2e-3
