"""The CPU engine's median_blur against the float64 reference and OpenCV: every dtype, border,
layout, window sizes, fused prologue and epilogue, gradients."""
import cv2
import numpy as np
import pytest
import torch
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.reference import median as ref

from helpers import (KERNEL_DTYPES, assert_fused_in_one_engine_pass, assert_gradient_matches, assert_matches,
                     random_image, sample)

pytestmark = pytest.mark.usefixtures("cpu_engine")


def reference(x, k, border="reflect", value=0.0):
    x4 = _image.as_planes(_image.to_unit(x.detach()))
    return ref.median_blur(x4, k, border, value).reshape(x.shape)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("border", BORDERS)
def test_every_dtype_border_and_layout(dtype, border, gen):
    x = random_image((2, 3, 11, 14), dtype, gen)
    for img in (x, x.contiguous(memory_format=torch.channels_last), torch.cat([x, x], -1)[..., 1::2]):
        for value in (0.4, 0.2):  # (0.2 = 51/255: the stored values as keys for uint8 too)
            y = imgfilters.median_blur(img, 5, border=border, border_value=value)
            assert y.is_contiguous(memory_format=torch.channels_last) == _image.is_channels_last(img)
            assert_matches(y, reference(img, 5, border, value))


@pytest.mark.parametrize("k", [1, 3, 7, 15, 31])
def test_window_sizes_and_windows_larger_than_the_image(k, gen):
    for dtype in (torch.uint8, torch.float32):
        x = random_image((2, 2, 9, 12), dtype, gen)
        for border in BORDERS:
            assert_matches(imgfilters.median_blur(x, k, border=border, border_value=0.1),
                           reference(x, k, border, 0.1))


@pytest.mark.parametrize("k", [3, 5, 9])
def test_sample_photo_equals_opencv(k):
    x = sample("coffee")[:, :90, :120]
    expected = cv2.medianBlur(x.permute(1, 2, 0).contiguous().numpy(), k)
    got = imgfilters.median_blur(x, k, border="replicate")
    assert np.array_equal(got.permute(1, 2, 0).numpy(), expected)


def test_a_gradient_on_the_engine_path_is_the_references(gen):
    # (the engine computes no gradient: a float32 CPU tensor that requires grad gets the
    # float64 definition's, ``library._reference_vjp``; this checks the routing, the forward
    # is checked above)
    x = random_image((2, 3, 10, 13), torch.float32, gen).requires_grad_()
    y = imgfilters.median_blur(x, 3, border="replicate")
    assert torch.equal(y.detach(), imgfilters.median_blur(x.detach(), 3, border="replicate"))
    g = torch.randn(y.shape, generator=gen)
    (gx,) = torch.autograd.grad(y, (x,), g)
    xd = x.detach().double().requires_grad_()
    (expected,) = torch.autograd.grad(ref.median_blur(xd, 3, "replicate"), (xd,), g.double())
    assert_gradient_matches(gx, expected)


def test_fused_prologue_and_epilogue(gen, monkeypatch):
    x = random_image((2, 3, 15, 17), torch.uint8, gen)
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, -0.1]),
             T.MedianBlur(5, border="constant", border_value=0.3), v2.Normalize([0.1], [2.0])]
    assert_fused_in_one_engine_pass(steps, x, monkeypatch)
