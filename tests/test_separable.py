"""Separable family: kernels vs the float64 reference, and the reference vs its peers."""
import math

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torchvision.transforms.v2 import functional as F

import imgfilters
from imgfilters import _image
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.reference import separable as ref

from helpers import (KERNEL_DTYPES, SAMPLE_NAMES, assert_gradient_matches, assert_matches, gpu, random_image,
                     sample)

CV_BORDER = {"reflect": cv2.BORDER_REFLECT_101, "symmetric": cv2.BORDER_REFLECT,
             "replicate": cv2.BORDER_REPLICATE, "constant": cv2.BORDER_CONSTANT}


def reference(x, tx, ty, border="reflect", value=0.0):
    return ref.separable_filter(_image.to_unit(x.cpu()), tx, ty, border, value)


# ---- kernels vs reference ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("border", BORDERS)
def test_every_dtype_and_border(dtype, border, gen, device):
    # 5 rows (a radius-2 column filter: the middle row meets neither border) and 2 planes:
    # the interpreter's cost grows with the planes and the rows each one's strip walks
    x = random_image((1, 2, 5, 53), dtype, gen, device)
    tx, ty = ref.gaussian_taps(9, 2.0), torch.rand(5, generator=gen, dtype=torch.float64) - 0.3
    y = imgfilters.separable_filter(x, tx, ty, border=border, border_value=0.25)
    assert_matches(y, reference(x, tx, ty, border, 0.25))


@pytest.mark.parametrize("shape,ksize", [((1, 1), 3), ((1, 1, 1, 1), 63), ((3, 37, 53), 1),
                                         ((2, 5, 7), 31), ((1, 4, 3, 9), 15), ((6, 200), 7),
                                         ((2, 2, 3, 11, 13), 5)])
@pytest.mark.parametrize("border", BORDERS)
def test_odd_shapes_and_kernels_larger_than_the_image(shape, ksize, border, gen, device):
    x = random_image(shape, torch.float32, gen, device)
    taps = torch.rand(ksize, generator=gen, dtype=torch.float64)
    y = imgfilters.separable_filter(x, taps, border=border, border_value=0.5)
    assert_matches(y, reference(x, taps, taps, border, 0.5))


def test_longest_kernel(gen, device):
    x = random_image((1, 2, 40, 70), torch.float32, gen, device)
    tx = ref.gaussian_taps(127, 20.0)
    ty = ref.gaussian_taps(101, 15.0)
    assert_matches(imgfilters.separable_filter(x, tx, ty), reference(x, tx, ty))


def test_wide_and_short_filter_takes_taps_from_l1(gen, device):
    # 81 taps along x (too many for registers, too wide for the products), 3 along y; one
    # plane of 5 rows (the middle ones meet neither border; the interpreter's cost grows with
    # the planes and the rows), 150 columns (inside ones whose taps meet neither border)
    from imgfilters.kernels import separable as kernels
    assert not kernels.strip_config(40, 1)["HREG"] and 40 not in kernels.PRODUCT_RADII
    x = random_image((1, 1, 5, 150), torch.float32, gen, device)
    tx, ty = ref.gaussian_taps(81, 12.0), torch.rand(3, generator=gen, dtype=torch.float64)
    for border in BORDERS:
        assert_matches(imgfilters.separable_filter(x, tx, ty, border=border, border_value=0.5),
                       reference(x, tx, ty, border, 0.5))


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_wide_filters_run_as_banded_products(dtype, gen, device):
    # radii 20 and 28 (PRODUCT_RADII): several tiles each way, interior and border tiles, a
    # view whose columns start off the vector alignment, and an epilogue (unsharp masking);
    # in the interpreter, whose cost is per plane, two planes for float32 and one for the
    # other dtypes (a plane's offset does not depend on the dtype)
    from imgfilters.kernels import separable as kernels
    assert 20 in kernels.PRODUCT_RADII and 28 in kernels.PRODUCT_RADII
    shape = (1, 2, 301, 517) if device == "cuda" else (1, 2 if dtype == torch.float32 else 1, 70, 150)
    x = random_image(shape, dtype, gen, device)[..., 1:, 3:]
    tx, ty = ref.gaussian_taps(41, 7.0), torch.rand(57, generator=gen, dtype=torch.float64) - 0.2
    for border in BORDERS:
        assert_matches(imgfilters.separable_filter(x, tx, ty, border=border, border_value=0.5),
                       reference(x, tx, ty, border, 0.5))
    y = imgfilters.unsharp_mask(x, 7.0, 0.8, 0.01)  # radius ceil(3 sigma) = 21
    assert_matches(y, ref.unsharp_mask(_image.to_unit(x.cpu()), 7.0, 0.8, 0.01))


def test_tiles_across_a_larger_image(gen, device):
    # several tiles in both directions, interior and border tiles, uint8 edge rounding (the
    # interpreter takes one tile: there a smaller image, at a fifth of the cost per row)
    x = random_image((1, 2, 300, 600) if device == "cuda" else (1, 2, 60, 120), torch.uint8, gen, device)
    tx, ty = ref.gaussian_taps(15, 3.0), ref.gaussian_taps(21, 4.0)
    assert_matches(imgfilters.separable_filter(x, tx, ty, border="constant", border_value=1.0),
                   reference(x, tx, ty, "constant", 1.0))


def test_channels_last_is_kept_without_copy(gen, device):
    x = random_image((2, 3, 30, 41), torch.float16, gen, device).to(memory_format=torch.channels_last)
    y = imgfilters.gaussian_blur(x, 7, 1.5)
    assert y.is_contiguous(memory_format=torch.channels_last)
    taps = ref.gaussian_taps(7, 1.5)
    assert_matches(y, reference(x, taps, taps))


def test_non_contiguous_views(gen, device):
    # (small: the interpreter's cost grows with the planes and their rows)
    base = random_image((3, 3, 20, 24), torch.float32, gen, device)
    taps = ref.gaussian_taps(5, 1.0)
    for view in (base[:, 1:3, 3:17, 5:20], base.transpose(-1, -2), base[::2, :, ::3, ::2]):
        assert_matches(imgfilters.separable_filter(view, taps), reference(view, taps, taps))


def test_views_whose_leading_dims_cannot_merge(gen, device):
    x = random_image((3, 2, 2, 9, 11), torch.float32, gen, device).transpose(0, 1)
    taps = ref.gaussian_taps(5, 1.0)
    assert_matches(imgfilters.gaussian_blur(x, 5, 1.0), reference(x, taps, taps))
    assert_matches(imgfilters.unsharp_mask(x, 1.0), ref.unsharp_mask(_image.to_unit(x.cpu()), 1.0, 1.0, 0.0))


def test_tv_tensors_keep_their_type(gen, device):
    from torchvision import tv_tensors
    x = tv_tensors.Image(random_image((3, 12, 14), torch.uint8, gen, device))
    y = imgfilters.gaussian_blur(x, 3)
    assert isinstance(y, tv_tensors.Image)


def test_taps_changed_after_the_forward_do_not_change_the_gradient(gen, device):
    x = random_image((1, 1, 10, 12), torch.float32, gen, device).requires_grad_()
    taps = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)
    y = imgfilters.separable_filter(x, taps)
    taps.mul_(10)
    (gx,) = torch.autograd.grad(y.sum(), x)
    (gr,) = torch.autograd.grad(imgfilters.separable_filter(x, [0.25, 0.5, 0.25]).sum(), x)
    assert torch.allclose(gx, gr)


def test_reference_path_keeps_layout_and_rounds_like_the_kernels(gen, monkeypatch):
    x = random_image((2, 3, 20, 24), torch.uint8, gen).to(memory_format=torch.channels_last)
    kernel = imgfilters.gaussian_blur(x, 7, 1.5)
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # CPU tensors now take the float64 reference
    monkeypatch.setenv("IMGFILTERS_CPU_ENGINE", "0")  # (not the CPU engine)
    plain = imgfilters.gaussian_blur(x, 7, 1.5)
    assert plain.is_contiguous(memory_format=torch.channels_last)
    assert (plain.int() - kernel.int()).abs().max() <= 1


def test_input_is_not_modified(gen, device):
    x = random_image((1, 3, 20, 20), torch.uint8, gen, device)
    before = x.clone()
    imgfilters.unsharp_mask(x, 1.0, 2.0)
    imgfilters.gaussian_blur(x, 5)
    assert torch.equal(x, before)


@settings(max_examples=12, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(1, 70), kx=st.integers(0, 12), ky=st.integers(0, 12),
       border=st.sampled_from(BORDERS), dtype=st.sampled_from(KERNEL_DTYPES), seed=st.integers(0, 2 ** 31))
def test_hypothesis_sweep(h, w, kx, ky, border, dtype, seed):
    from conftest import DEVICE
    gen = torch.Generator().manual_seed(seed)
    x = random_image((2, h, w), dtype, gen, DEVICE)
    tx = torch.rand(2 * kx + 1, generator=gen, dtype=torch.float64)
    ty = torch.rand(2 * ky + 1, generator=gen, dtype=torch.float64)
    tx, ty = tx / tx.sum(), ty / ty.sum()
    assert_matches(imgfilters.separable_filter(x, tx, ty, border=border, border_value=0.3),
                   reference(x, tx, ty, border, 0.3))


# ---- gaussian, box, unsharp: kernels vs peers ------------------------------------------------

@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_gaussian_blur_equals_torchvision_on_samples(name, dtype, device):
    # whole photos on the GPU; the interpreter, whose cost is per row of a strip, gets a band
    # (24 rows: those of the middle meet neither border at 15 x 15)
    x = sample(name) if device == "cuda" else sample(name)[:, :24]
    x = x if dtype == torch.uint8 else x.float() / 255
    x = x.to(device)
    for ksize, sigma in [(5, None), ([9, 3], [2.5, 0.7]), (15, 3.0)]:
        ours = imgfilters.gaussian_blur(x, ksize, sigma)
        theirs = F.gaussian_blur(x, ksize if isinstance(ksize, list) else [ksize, ksize], sigma)
        if dtype == torch.uint8:
            assert (ours.int() - theirs.int()).abs().max() <= 1
            assert (ours != theirs).float().mean() < 0.01
        else:
            assert (ours - theirs).abs().max() <= 1e-5


def test_gaussian_blur_equals_torchvision_on_random_batches(gen, device):
    x = random_image((2, 3, 12, 40), torch.float32, gen, device)  # (12 rows: 11 x 11 meets neither border from one)
    for ksize in (3, 7, 11):
        assert (imgfilters.gaussian_blur(x, ksize) - F.gaussian_blur(x, [ksize, ksize])).abs().max() <= 1e-5
    # keyword call with torchvision's parameter name
    assert torch.equal(imgfilters.gaussian_blur(inpt=x, kernel_size=3), imgfilters.gaussian_blur(x, 3))


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_reference_separable_equals_opencv_on_samples(name, gen):
    x = sample(name)[0].to(torch.float64) / 255
    tx = torch.rand(7, generator=gen, dtype=torch.float64)
    ty = torch.rand(11, generator=gen, dtype=torch.float64)
    for border in BORDERS:
        cv = cv2.sepFilter2D(x.numpy(), cv2.CV_64F, tx.numpy(), ty.numpy(), borderType=CV_BORDER[border])
        np.testing.assert_allclose(ref.separable_filter(x, tx, ty, border).numpy(), cv, atol=1e-12)


def test_reference_separable_equals_kornia(gen):
    kornia = pytest.importorskip("kornia")
    x = torch.rand(2, 3, 25, 33, generator=gen, dtype=torch.float64)
    tx = torch.rand(7, generator=gen, dtype=torch.float64)
    ty = torch.rand(5, generator=gen, dtype=torch.float64)
    for border, kb in [("reflect", "reflect"), ("replicate", "replicate"), ("constant", "constant")]:
        k = kornia.filters.filter2d_separable(x, tx[None], ty[None], border_type=kb)
        assert torch.allclose(ref.separable_filter(x, tx, ty, border), k, atol=1e-12)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_box_blur_equals_opencv_on_samples(name, device):
    # a band of 48 rows in the interpreter, whose cost is per row of a strip
    x = (sample(name)[0] if device == "cuda" else sample(name)[0, :48]).to(device)
    ours = imgfilters.box_blur(x, [7, 5])
    cv = cv2.blur(x.cpu().numpy(), (7, 5), borderType=cv2.BORDER_REFLECT_101)
    assert np.abs(ours.cpu().numpy().astype(int) - cv.astype(int)).max() <= 1
    assert_matches(ours, reference(x, ref.box_taps(7), ref.box_taps(5)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.bfloat16])
def test_unsharp_mask_matches_reference(dtype, gen, device):
    # (one image of 17 rows: a radius-5 window of the middle ones meets neither border; the
    # interpreter's cost grows with the planes and their rows)
    x = random_image((1, 3, 17, 40), dtype, gen, device)
    y = imgfilters.unsharp_mask(x, 1.5, 0.8, 0.05, border="symmetric")
    assert_matches(y, ref.unsharp_mask(_image.to_unit(x.cpu()), 1.5, 0.8, 0.05, "symmetric"))


def test_reference_unsharp_mask_is_torchvision_blur_plus_detail(gen):
    x = torch.rand(3, 30, 30, generator=gen, dtype=torch.float64)
    sigma, amount = 1.2, 1.5
    k = 2 * math.ceil(3 * sigma) + 1
    blur = F.gaussian_blur(x, [k, k], [sigma, sigma])
    assert torch.allclose(ref.unsharp_mask(x, sigma, amount, 0.0), x + amount * (x - blur), atol=1e-12)
    thresholded = ref.unsharp_mask(x, sigma, amount, 0.1)
    small = (x - blur).abs() < 0.1
    assert small.any() and (~small).any()
    assert torch.equal(thresholded[small], x[small])


# ---- autograd ------------------------------------------------------------------------------

@pytest.mark.parametrize("border", BORDERS)
def test_reference_gradcheck(border, gen):
    x = torch.rand(1, 2, 6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    tx, ty = torch.rand(5, generator=gen, dtype=torch.float64), torch.rand(9, generator=gen, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda v: ref.separable_filter(v, tx, ty, border), (x,))


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("ky", [13, 35])  # 35: taller than the interpreter's strip kernel (margin folds)
def test_kernel_backward_matches_reference(border, ky, gen, device):
    x = random_image((1, 3, 19, 26), torch.float32, gen, device).requires_grad_()  # (the cost is per plane)
    tx, ty = torch.rand(7, generator=gen, dtype=torch.float64), torch.rand(ky, generator=gen, dtype=torch.float64)
    y = imgfilters.separable_filter(x, tx, ty, border=border)
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, x, g)
    xd = x.detach().cpu().double().requires_grad_()
    (gr,) = torch.autograd.grad(ref.separable_filter(xd, tx, ty, border), xd, g.cpu().double())
    assert_gradient_matches(gx, gr)


def test_unsharp_backward_matches_reference(gen, device):
    x = random_image((1, 2, 21, 17), torch.float32, gen, device).requires_grad_()
    y = imgfilters.unsharp_mask(x, 1.0, 1.5, 0.02)
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, x, g)
    xd = x.detach().cpu().double().requires_grad_()
    (gr,) = torch.autograd.grad(ref.unsharp_mask(xd, 1.0, 1.5, 0.02), xd, g.cpu().double())
    assert_gradient_matches(gx, gr)


def test_half_precision_gradient_keeps_dtype(gen, device):
    x = random_image((1, 1, 12, 12), torch.bfloat16, gen, device).requires_grad_()
    (gx,) = torch.autograd.grad(imgfilters.gaussian_blur(x, 5).float().sum(), x)
    assert gx.dtype == torch.bfloat16
    xd = x.detach().cpu().double().requires_grad_()
    taps = ref.gaussian_taps(5, 1.1)
    (gr,) = torch.autograd.grad(ref.separable_filter(xd, taps, taps).sum(), xd)
    assert gr.std() > 0.05  # reflect-101 weighs edge pixels differently: not a constant
    assert_matches(gx, gr)


# ---- a row of taps per image (GaussianBlur(per_sample=True)) --------------------------------

def _per_image(x, tx, ty, **kw):
    """Each image of the batch filtered alone with its own row of taps."""
    x4 = _image.as_planes(x)
    return torch.cat([imgfilters.separable_filter(x4[b:b + 1], tx[b], ty[b], **kw)
                      for b in range(x4.shape[0])]).reshape(x.shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
@pytest.mark.parametrize("kx,ky", [(5, 3), (9, 35), (41, 41)])  # the strip, the scratch kernel (in the
def test_taps_per_image_in_one_launch(dtype, kx, ky, gen, device):  # interpreter), the banded products
    from helpers import count_launches
    x = random_image((3, 1, 9, 23) if kx < 41 else (2, 1, 70, 70), dtype, gen, device)
    B = x.shape[0]
    tx = torch.rand(B, kx, generator=gen, dtype=torch.float64)
    ty = torch.rand(B, ky, generator=gen, dtype=torch.float64) - 0.2
    for border in ("reflect", "constant"):
        with count_launches() as launches:
            y = imgfilters.separable_filter(x, tx, ty, border=border, border_value=0.25)
        assert sum(launches.values()) == 1, launches
        assert torch.equal(y, _per_image(x, tx, ty, border=border, border_value=0.25))
        for b in range(B):
            assert_matches(y[b:b + 1], reference(x[b:b + 1], tx[b], ty[b], border, 0.25))


def test_taps_per_image_of_a_batch_of_5_dims_and_channels_last(gen, device):
    x = random_image((2, 3, 2, 10, 12), torch.float32, gen, device)
    tx, ty = ref.gaussian_taps(5, torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5, 3.0])), ref.gaussian_taps(3, 1.0)
    y = imgfilters.separable_filter(x, tx, ty)
    assert torch.equal(y, _per_image(x, tx, ty.expand(6, -1)))
    xc = random_image((6, 3, 10, 12), torch.float32, gen, device).contiguous(memory_format=torch.channels_last)
    yc = imgfilters.separable_filter(xc, tx, ty)
    assert yc.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(yc, _per_image(xc.contiguous(), tx, ty.expand(6, -1)))


def test_reference_gaussian_taps_rows_are_each_sigmas_taps():
    sigmas = torch.tensor([0.1, 0.7, 2.0, 9.5], dtype=torch.float64)
    rows = ref.gaussian_taps(7, sigmas)
    for row, s in zip(rows, sigmas.tolist()):
        assert torch.equal(row, ref.gaussian_taps(7, s))


@pytest.mark.parametrize("ky", [5, 35])  # 35: the margin folds (interpreter)
def test_taps_per_image_backward_matches_each_image_alone(ky, gen, device):
    x = random_image((2, 2, 13, 16), torch.float32, gen, device).requires_grad_()
    tx, ty = torch.rand(2, 7, generator=gen, dtype=torch.float64), torch.rand(2, ky, generator=gen, dtype=torch.float64)
    y = imgfilters.separable_filter(x, tx, ty, border="symmetric")
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, x, g)
    for b in range(2):
        xd = x[b:b + 1].detach().cpu().double().requires_grad_()
        (gr,) = torch.autograd.grad(ref.separable_filter(xd, tx[b], ty[b], "symmetric"), xd, g[b:b + 1].cpu().double())
        assert_gradient_matches(gx[b:b + 1], gr)


def test_taps_per_image_on_the_float64_path(gen):
    x = random_image((3, 2, 8, 9), torch.float64, gen)
    tx = torch.rand(3, 5, generator=gen, dtype=torch.float64)
    y = imgfilters.separable_filter(x, tx, [0.25, 0.5, 0.25])
    for b in range(3):
        assert torch.equal(y[b:b + 1], ref.separable_filter(x[b:b + 1], tx[b], torch.tensor([0.25, 0.5, 0.25],
                                                                                              dtype=torch.float64)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_unsharp_mask_per_image_in_one_launch(dtype, gen, device):
    """A sigma and an amount per image: one launch, each image as unsharp_mask of its own
    values (its own radius: the rows are zero beyond it)."""
    from helpers import count_launches
    x = random_image((3, 1, 9, 12), dtype, gen, device)
    sigma, amount = torch.tensor([0.4, 1.3, 0.9]), torch.tensor([0.5, -0.3, 1.5])
    with count_launches() as launches:
        y = imgfilters.unsharp_mask(x, sigma, amount, 0.01, border="symmetric")
    assert sum(launches.values()) == 1, launches
    for b in range(3):
        alone = imgfilters.unsharp_mask(x[b:b + 1], sigma[b].item(), amount[b].item(), 0.01, border="symmetric")
        # (the same sums with zero taps beside them: float32 may round the last bit apart)
        assert (y[b:b + 1].float() - alone.float()).abs().max() <= (1 if dtype == torch.uint8 else 1e-6)
        assert_matches(y[b:b + 1], ref.unsharp_mask(_image.to_unit(x[b:b + 1].cpu()), sigma[b].item(),
                                                     amount[b].item(), 0.01, "symmetric"))
    one = torch.tensor([1.3], dtype=torch.float64)  # one value: the shared-taps launch
    assert torch.equal(imgfilters.unsharp_mask(x, one, 0.7), imgfilters.unsharp_mask(x, 1.3, 0.7))


def test_unsharp_mask_per_image_backward_and_float64(gen, device):
    x = random_image((2, 1, 9, 11), torch.float32, gen, device).requires_grad_()
    sigma, amount = torch.tensor([0.6, 1.2]), torch.tensor([1.5, 0.4])
    y = imgfilters.unsharp_mask(x, sigma, amount)
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, x, g)
    xd = x.detach().cpu().double().requires_grad_()
    y64 = imgfilters.unsharp_mask(xd, sigma, amount)  # the float64 path, image by image
    (gr,) = torch.autograd.grad(y64, xd, g.cpu().double())
    assert_matches(y, y64)
    assert_gradient_matches(gx, gr)
    for b in range(2):
        assert torch.equal(y64[b:b + 1], ref.unsharp_mask(xd[b:b + 1], sigma[b].item(), amount[b].item(), 0.0))


# ---- bad arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("call,error,match", [
    (lambda x: imgfilters.gaussian_blur(x.numpy(), 3), TypeError, "img must be a torch.Tensor"),
    (lambda x: imgfilters.gaussian_blur(x.int(), 3), TypeError, "dtype"),
    (lambda x: imgfilters.gaussian_blur(x.bool(), 3), TypeError, "dtype"),
    (lambda x: imgfilters.gaussian_blur(x[0, 0, 0], 3), ValueError, r"\(\.\.\., C, H, W\)"),
    (lambda x: imgfilters.gaussian_blur(x[:, :0], 3), ValueError, "empty"),
    (lambda x: imgfilters.gaussian_blur(x, 4), ValueError, "kernel_size"),
    (lambda x: imgfilters.gaussian_blur(x, [3, 0]), ValueError, "kernel_size"),
    (lambda x: imgfilters.gaussian_blur(x, 129), ValueError, "kernel_size"),
    (lambda x: imgfilters.gaussian_blur(x, 3.0), TypeError, "kernel_size"),
    (lambda x: imgfilters.gaussian_blur(x, [3, 3, 3]), ValueError, "kernel_size"),
    (lambda x: imgfilters.gaussian_blur(x, [3]), ValueError, "kernel_size"),
    (lambda x: imgfilters.separable_filter(x, None), TypeError, "kernel_x"),
    (lambda x: imgfilters.gaussian_blur(x, 3, -1.0), ValueError, "sigma"),
    (lambda x: imgfilters.gaussian_blur(x, 3, float("nan")), ValueError, "sigma"),
    (lambda x: imgfilters.gaussian_blur(x, 3, "1"), TypeError, "sigma"),
    (lambda x: imgfilters.gaussian_blur(x, 3, border="wrap"), ValueError, "border"),
    (lambda x: imgfilters.gaussian_blur(x, 3, border="constant", border_value=float("inf")), ValueError,
     "border_value"),
    (lambda x: imgfilters.separable_filter(x, [1.0, 2.0]), ValueError, "kernel_x"),
    (lambda x: imgfilters.separable_filter(x, [[[1.0]]]), ValueError, "kernel_x"),
    (lambda x: imgfilters.separable_filter(x, torch.ones(2, 3)), ValueError,
     r"kernel_x .*one row of taps per image \(1\)"),
    (lambda x: imgfilters.separable_filter(x, [1.0], torch.ones(1, 4)), ValueError, "kernel_y"),
    (lambda x: imgfilters.separable_filter(x, [1.0], [float("nan")] * 3), ValueError, "kernel_y"),
    (lambda x: imgfilters.separable_filter(x, [1.0] * 129), ValueError, "kernel_x"),
    (lambda x: imgfilters.box_blur(x, 2), ValueError, "kernel_size"),
    (lambda x: imgfilters.unsharp_mask(x, 0.0), ValueError, "sigma"),
    (lambda x: imgfilters.unsharp_mask(x, 1.0, 1.0, -0.1), ValueError, "threshold"),
    (lambda x: imgfilters.unsharp_mask(x, 50.0), ValueError, "sigma"),
    (lambda x: imgfilters.unsharp_mask(x, torch.ones(2)), ValueError, r"sigma .*one value per image \(1\)"),
    (lambda x: imgfilters.unsharp_mask(x, 1.0, torch.ones(3)), ValueError, "amount"),
    (lambda x: imgfilters.unsharp_mask(x, torch.tensor([50.0])), ValueError, "sigma"),
    (lambda x: imgfilters.unsharp_mask(x, torch.tensor([-1.0])), ValueError, "sigma"),
    (lambda x: imgfilters.unsharp_mask(x, 1.0, torch.tensor([float("nan")])), ValueError, "amount"),
    # the taps get no gradient: refused, not silently dropped
    (lambda x: imgfilters.separable_filter(x, torch.ones(3, requires_grad=True)), ValueError, "kernel_x requires grad"),
])
def test_bad_arguments_raise_before_launch(call, error, match):
    x = torch.rand(1, 3, 8, 8)
    with pytest.raises(error, match=match):
        call(x)


def test_float64_runs_the_reference(gen):
    x = torch.rand(2, 3, 10, 12, generator=gen, dtype=torch.float64)
    taps = ref.gaussian_taps(5, 1.0)
    assert torch.equal(imgfilters.gaussian_blur(x, 5, 1.0), ref.separable_filter(x, taps, taps))


# ---- GPU only ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.float16])
def test_full_hd_batch_matches_reference_on_gpu(dtype, gen, monkeypatch):
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    x = random_image((2, 3, 1080, 1920), dtype, gen, "cuda")
    taps = ref.gaussian_taps(15, 3.0)
    y = imgfilters.gaussian_blur(x, 15, 3.0)
    expected = ref.separable_filter(_image.to_unit(x), taps.cuda(), taps.cuda())
    assert_matches(y, expected)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_peak_extra_memory_is_at_most_the_output(dtype, gen):
    x = random_image((1, 3, 2160, 3840), dtype, gen, "cuda")
    imgfilters.gaussian_blur(x, 15, 3.0)  # compile and tune first
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    y = imgfilters.gaussian_blur(x, 15, 3.0)
    torch.cuda.synchronize()
    out_bytes = y.numel() * y.element_size()
    assert torch.cuda.max_memory_allocated() - base <= 2 * out_bytes  # the output + scratch <= output


STRIP_TILES = [dict(HREG=True, S=4, T=64, SEG=64, CH=8, num_warps=2),
               dict(HREG=True, S=2, T=32, SEG=128, CH=8, num_warps=1),
               dict(HREG=True, S=1, T=128, SEG=32, CH=8, num_warps=4),
               dict(HREG=False, S=1, T=128, SEG=128, CH=8, num_warps=4),
               dict(HREG=False, S=2, T=64, SEG=64, CH=4, num_warps=2)]


@gpu
@pytest.mark.parametrize("tile", range(len(STRIP_TILES)))
@pytest.mark.parametrize("ksize", [1, 15, 63])
def test_every_strip_tile(tile, ksize, gen):
    from imgfilters.kernels import separable as kernels
    if STRIP_TILES[tile]["HREG"] and ksize > 40:
        pytest.skip("taps from registers are for narrow filters (strip_config)")
    x = random_image((2, 3, 301, 517), torch.float32, gen, "cuda")
    tx = ref.gaussian_taps(ksize, ksize / 5 + 0.5)
    ty = ref.gaussian_taps(ksize + 4 if ksize < 63 else 61, 3.0)
    for border in (0, 3):  # reflect, and the adjoint's constant border (its shifted grid: the backward tests)
        y = torch.empty_like(x)
        kernels.launch(x, y, tx.float().cuda(), ty.float().cuda(), border=border, tile=STRIP_TILES[tile])
        assert_matches(y, ref.separable_filter(x.double(), tx.cuda(), ty.cuda(), BORDERS[border]))


@gpu
@pytest.mark.parametrize("tile", range(3))
def test_every_scratch_tile(tile, gen):
    from imgfilters.kernels import separable as kernels
    x = random_image((2, 3, 301, 517), torch.float32, gen, "cuda")
    tx, ty = ref.gaussian_taps(15, 3.0), ref.gaussian_taps(2 * kernels.RING_MAX + 3, 12.0)
    y = torch.empty_like(x)
    kernels.launch(x, y, tx.float().cuda(), ty.float().cuda(), tile=kernels.TILES[tile])
    assert_matches(y, ref.separable_filter(x.double(), tx.cuda(), ty.cuda()))


@gpu
def test_a_captured_graph_replays_after_400_other_sigmas(gen):
    x = random_image((1, 3, 256, 256), torch.float32, gen, "cuda")
    expected = imgfilters.gaussian_blur(x, [15, 15], [3.0, 3.0])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = imgfilters.gaussian_blur(x, [15, 15], [3.0, 3.0])
    for s in torch.linspace(0.5, 6.0, 400).tolist():  # more tap sets than the constant cache holds
        imgfilters.gaussian_blur(x, [15, 15], [s, s])
        torch.empty(1000, device="cuda")
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, expected)


@gpu
@pytest.mark.parametrize("border", BORDERS)
def test_backward_of_many_strips_matches_reference(border, gen):
    """The one-launch adjoint adds margins into edge pixels from several programs."""
    x = random_image((2, 3, 301, 517), torch.float32, gen, "cuda").requires_grad_()
    for kx, ky in ((15, 15), (5, 9), (31, 3)):
        tx, ty = torch.rand(kx, generator=gen, dtype=torch.float64), torch.rand(ky, generator=gen, dtype=torch.float64)
        g = torch.randn(x.shape, generator=gen).cuda()
        (gx,) = torch.autograd.grad(imgfilters.separable_filter(x, tx, ty, border=border), x, g)
        xd = x.detach().cpu().double().requires_grad_()
        (gr,) = torch.autograd.grad(ref.separable_filter(xd, tx, ty, border), xd, g.cpu().double())
        assert (gx.cpu().double() - gr).abs().max() <= 1e-5 * gr.abs().max()
