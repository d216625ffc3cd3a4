"""The CPU engine's filter2d against the float64 reference: every dtype, border, layout,
per-image kernels, fused prologue and epilogue, gradients."""
import pytest
import torch
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.reference import filter2d as ref

from helpers import (KERNEL_DTYPES, assert_fused_in_one_engine_pass, assert_gradient_matches, assert_matches,
                     random_image, sample)

pytestmark = pytest.mark.usefixtures("cpu_engine")


def reference(x, k, border="reflect", value=0.0):
    x4 = _image.as_planes(_image.to_unit(x.detach()))
    return ref.filter2d(x4, k.detach(), border, value).reshape(x.shape)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("border", BORDERS)
def test_every_dtype_border_and_layout_with_per_image_kernels(dtype, border, gen):
    x = random_image((2, 3, 11, 14), dtype, gen)
    k = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64) / 6
    for img in (x, x.contiguous(memory_format=torch.channels_last), torch.cat([x, x], -1)[..., 1::2]):
        y = imgfilters.filter2d(img, k, border=border, border_value=0.7)
        assert y.is_contiguous(memory_format=torch.channels_last) == _image.is_channels_last(img)
        assert_matches(y, reference(img, k, border, 0.7))


@pytest.mark.parametrize("ksize", [(1, 1), (3, 9), (21, 21), (63, 31)])
def test_kernel_sizes_and_kernels_larger_than_the_image(ksize, gen):
    x = random_image((3, 2, 9, 12), torch.float32, gen)
    k = torch.rand(*ksize, generator=gen, dtype=torch.float64)
    k /= k.sum()
    for border in BORDERS:
        assert_matches(imgfilters.filter2d(x, k, border=border, border_value=0.1), reference(x, k, border, 0.1))


def test_sample_photo_uint8():
    x = sample("coffee")[None, :, :90, :120]
    k = torch.rand(1, 7, 7, generator=torch.Generator().manual_seed(3))
    k /= k.sum()
    assert_matches(imgfilters.filter2d(x, k), reference(x, k))


def test_gradients_to_image_and_kernel(gen):
    x = random_image((2, 3, 10, 13), torch.float32, gen).requires_grad_()
    k = torch.randn(2, 5, 3, generator=gen).requires_grad_()
    y = imgfilters.filter2d(x, k, border="replicate")
    g = torch.randn(y.shape, generator=gen)
    gx, gk = torch.autograd.grad(y, (x, k), g)
    xd, kd = x.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    gxr, gkr = torch.autograd.grad(ref.filter2d(xd, kd, "replicate"), (xd, kd), g.double())
    assert_gradient_matches(gx, gxr)
    assert_gradient_matches(gk, gkr)


def test_fused_prologue_and_epilogue(gen, monkeypatch):
    x = random_image((2, 3, 15, 17), torch.uint8, gen)
    k = torch.rand(5, 5, generator=gen)
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.1]),
             T.Filter2D(k, border="constant", border_value=0.3), v2.Normalize([0.1], [2.0])]
    assert_fused_in_one_engine_pass(steps, x, monkeypatch)
