"""The CPU engine's morphology against the float64 reference and OpenCV: every dtype, border,
layout, plan, operation, fused prologue and epilogue, gradients."""
import numpy as np
import pytest
import torch
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.reference import morphology as ref

from helpers import (KERNEL_DTYPES, assert_fused_in_one_engine_pass, assert_gradient_matches, assert_matches,
                     random_image, sample)
from test_morphology import ALL_BORDERS, PLANS, opencv, reference

pytestmark = pytest.mark.usefixtures("cpu_engine")


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_every_dtype_border_and_layout(dtype, gen):
    x = random_image((2, 3, 11, 14), dtype, gen)
    for k, img in enumerate((x, x.contiguous(memory_format=torch.channels_last), torch.cat([x, x], -1)[..., 1::2])):
        for border in ALL_BORDERS:
            op = ("erode", "dilate", "gradient")[k]
            y = imgfilters.morphology(img, op, 5, shape="ellipse", border=border, border_value=0.4)
            assert y.is_contiguous(memory_format=torch.channels_last) == _image.is_channels_last(img)
            assert_matches(y, reference(img, op, 5, "ellipse", 1, border, 0.4))


@pytest.mark.parametrize("kernel,shape,op,iterations,border", PLANS, ids=lambda p: str(p))
def test_every_plan_equals_opencv(kernel, shape, op, iterations, border, gen):
    if kernel == "mask":
        kernel, shape = (torch.rand(6, 9, generator=gen) < 0.6).tolist(), "rect"
    for dtype in (torch.uint8, torch.float32):
        x = random_image((2, 13, 17), dtype, gen)
        got = imgfilters.morphology(x, op, kernel, shape=shape, iterations=iterations, border=border,
                                    border_value=102 / 255)
        assert np.array_equal(got.numpy(), opencv(x, op, kernel, shape, iterations, border, 102 / 255))


def test_sample_photo_and_large_rectangles_equal_opencv():
    x = sample("coffee")[:, :90, :120]
    for op, kernel, shape, iterations in (("tophat", 15, "ellipse", 1), ("dilate", 31, "rect", 3),
                                          ("closing", (3, 21), "cross", 2)):
        got = imgfilters.morphology(x, op, kernel, shape=shape, iterations=iterations, border="reflect")
        assert np.array_equal(got.numpy(), opencv(x, op, kernel, shape, iterations, "reflect"))


def test_a_gradient_on_the_engine_path_is_the_references(gen):
    # (the engine computes no gradient: a float32 CPU tensor that requires grad gets the
    # float64 definition's, ``library._reference_vjp``)
    x = ((random_image((2, 3, 10, 13), torch.float32, gen) * 3).round() / 3).requires_grad_()
    y = imgfilters.morphology(x, "opening", 3, shape="cross", border="replicate")
    assert torch.equal(y.detach(), imgfilters.morphology(x.detach(), "opening", 3, shape="cross", border="replicate"))
    g = torch.randn(y.shape, generator=gen)
    (gx,) = torch.autograd.grad(y, (x,), g)
    xd = x.detach().double().requires_grad_()
    mask = ref.structuring_element("cross", (3, 3))
    (expected,) = torch.autograd.grad(ref.morphology(xd, "opening", mask, 1, "replicate"), (xd,), g.double())
    assert_gradient_matches(gx, expected)


def test_fused_prologue_and_epilogue(gen, monkeypatch):
    x = random_image((2, 3, 15, 17), torch.uint8, gen)
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, -0.1]),
             T.Morphology("erode", 5, shape="ellipse", border="constant", border_value=0.3),
             v2.Normalize([0.1], [2.0])]
    assert_fused_in_one_engine_pass(steps, x, monkeypatch)
    tophat = [*steps[:2], T.Morphology("tophat", 3), steps[3]]
    fused = imgfilters.fuse(tophat)
    torch.testing.assert_close(fused(x), v2.Compose(tophat)(x), rtol=0, atol=2e-6)
