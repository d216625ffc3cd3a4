"""The CPU engine's separable family against the float64 reference: every dtype, border,
layout, fused prologue and epilogue, through the public functions."""
import pytest
import torch
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.reference import separable as ref

from helpers import (KERNEL_DTYPES, assert_fused_in_one_engine_pass, assert_gradient_matches, assert_matches,
                     random_image, sample)

pytestmark = pytest.mark.usefixtures("cpu_engine")


def reference(x, tx, ty, border="reflect", value=0.0):
    return ref.separable_filter(_image.to_unit(x), tx, ty, border, value)


def layouts(x):
    """``x`` contiguous, channels-last, and as a strided view (every other column of a
    wider image, rows reversed through a flip's copy)."""
    wide = torch.cat([x, x], -1)[..., ::2]
    return {"contiguous": x, "channels_last": x.contiguous(memory_format=torch.channels_last),
            "strided": wide}


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("border", BORDERS)
def test_every_dtype_border_and_layout(dtype, border, gen):
    x = random_image((2, 3, 11, 23), dtype, gen)
    tx, ty = ref.gaussian_taps(9, 2.0), torch.rand(5, generator=gen, dtype=torch.float64) - 0.3
    for name, img in layouts(x).items():
        y = imgfilters.separable_filter(img, tx, ty, border=border, border_value=0.25)
        assert y.is_contiguous(memory_format=torch.channels_last) == (name == "channels_last") or y.shape[1] == 1
        assert_matches(y, reference(img, tx, ty, border, 0.25))


@pytest.mark.parametrize("shape,ksize", [((1, 1), 3), ((1, 1, 1, 1), 63), ((3, 37, 53), 1), ((2, 5, 7), 31),
                                         ((6, 200), 7), ((2, 2, 3, 11, 13), 5)])
def test_odd_shapes_and_filters_larger_than_the_image(shape, ksize, gen):
    x = random_image(shape, torch.float32, gen)
    taps = torch.rand(ksize, generator=gen, dtype=torch.float64)
    for border in BORDERS:
        y = imgfilters.separable_filter(x, taps, border=border, border_value=0.5)
        assert_matches(y, reference(x, taps, taps, border, 0.5))


def test_a_row_of_taps_per_image(gen):
    x = random_image((3, 2, 11, 23), torch.uint8, gen).contiguous(memory_format=torch.channels_last)
    tx, ty = torch.rand(3, 7, generator=gen, dtype=torch.float64), ref.gaussian_taps(5, 1.3)
    y = imgfilters.separable_filter(x, tx, ty, border="replicate")
    assert y.is_contiguous(memory_format=torch.channels_last)
    for b in range(3):
        assert torch.equal(y[b:b + 1], imgfilters.separable_filter(x[b:b + 1], tx[b], ty, border="replicate"))
        assert_matches(y[b:b + 1], reference(x[b:b + 1], tx[b], ty, "replicate"))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_gaussian_box_and_unsharp(dtype, gen):
    x = random_image((2, 3, 30, 41), dtype, gen)
    assert_matches(imgfilters.gaussian_blur(x, [15, 7], [3.0, 1.5]),
                   reference(x, ref.gaussian_taps(15, 3.0), ref.gaussian_taps(7, 1.5)))
    assert_matches(imgfilters.box_blur(x, 5, border="replicate"),
                   reference(x, ref.box_taps(5), ref.box_taps(5), "replicate"))
    for threshold in (0.0, 0.05):
        assert_matches(imgfilters.unsharp_mask(x, 1.2, 0.7, threshold, border="symmetric"),
                       ref.unsharp_mask(_image.to_unit(x), 1.2, 0.7, threshold, "symmetric"))


def test_sample_photo_and_long_filters(gen):
    x = sample("astronaut")[:, :150, :170]
    assert_matches(imgfilters.gaussian_blur(x, 15, 3.0), reference(x, ref.gaussian_taps(15, 3.0),
                                                                 ref.gaussian_taps(15, 3.0)))
    f = x.float() / 255
    tx, ty = ref.gaussian_taps(127, 20.0), ref.gaussian_taps(101, 15.0)
    assert_matches(imgfilters.separable_filter(f, tx, ty), reference(f, tx, ty))


def test_threads_and_bands_do_not_change_the_result(gen):
    x = random_image((1, 2, 97, 45), torch.float32, gen)
    taps = ref.gaussian_taps(11, 2.0)
    before = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            results.append(imgfilters.separable_filter(x, taps))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], results[2])


def test_gradient_runs_the_reference(gen):
    x = random_image((1, 2, 12, 15), torch.float32, gen).requires_grad_()
    taps = ref.gaussian_taps(5, 1.0)
    y = imgfilters.separable_filter(x, taps, border="symmetric")
    g = torch.rand(y.shape, generator=gen)
    (got,) = torch.autograd.grad(y, x, g)
    x64 = x.detach().double().requires_grad_()
    (expected,) = torch.autograd.grad(ref.separable_filter(x64, taps, taps, "symmetric"), x64, g.double())
    assert got.dtype == torch.float32
    assert_gradient_matches(got, expected)


@pytest.mark.parametrize("steps", [
    [v2.ToDtype(torch.float32, scale=True), T.GaussianBlur(5, 1.2), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.1])],
    [v2.ToDtype(torch.float32, scale=False), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.1]), T.BoxBlur(3)],
    [v2.ToDtype(torch.float32, scale=True), T.UnsharpMask(1.0, 0.8), v2.Normalize([0.5], [0.25])],
    [T.BoxBlur(3), v2.ToDtype(torch.uint8, scale=True)],
])
def test_fused_prologue_and_epilogue(steps, gen, monkeypatch):
    x = random_image((2, 3, 19, 23), torch.uint8, gen)
    assert_fused_in_one_engine_pass(steps, x, monkeypatch)
