"""filter2d: the kernels vs the float64 reference, the reference vs OpenCV and F.conv2d."""
import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torchvision import tv_tensors
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms
from imgfilters.kernels import filter2d as kernels
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.reference import filter2d as ref

from helpers import KERNEL_DTYPES, assert_matches, count_compiles, gpu, random_image, sample

CV_BORDER = {"reflect": cv2.BORDER_REFLECT_101, "symmetric": cv2.BORDER_REFLECT,
             "replicate": cv2.BORDER_REPLICATE, "constant": cv2.BORDER_CONSTANT}


def reference(x, k, border="reflect", value=0.0):
    x4 = _image.as_planes(_image.to_unit(x.detach().cpu()))
    return ref.filter2d(x4, k.detach().cpu(), border, value).reshape(x.shape)


# ---- kernels vs reference ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("border", BORDERS)
def test_every_dtype_and_border_with_per_image_kernels(dtype, border, gen, device):
    x = random_image((2, 3, 11, 14), dtype, gen, device)
    k = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64) / 6
    y = imgfilters.filter2d(x, k, border=border, border_value=0.7)
    assert_matches(y, reference(x, k, border, 0.7))


@pytest.mark.parametrize("ksize", [(1, 1), (3, 9), (31, 31)])
def test_kernel_sizes_up_to_31_and_larger_than_the_image(ksize, gen, device):
    x = random_image((1, 2, 9, 12), torch.float32, gen, device)
    k = torch.rand(*ksize, generator=gen, dtype=torch.float64)
    k /= k.sum()
    assert_matches(imgfilters.filter2d(x, k), reference(x, k))


def test_wide_kernel_on_an_image_larger_than_one_interpreted_tile(gen, device):
    # 21 x 21 taps (padded to 32 x 32) on 37 x 45 pixels: over Triton's tensor limit in one
    # interpreted tile, so the interpreter's kernel tiles the plane (the GPU's strips anyway)
    x = random_image((2, 1, 37, 45), torch.float32, gen, device)
    k = torch.rand(2, 21, 21, generator=gen, dtype=torch.float64)
    k /= k.sum((1, 2), keepdim=True)
    assert_matches(imgfilters.filter2d(x, k), reference(x, k))


def test_per_image_kernels_equal_a_loop_of_single_image_calls(gen, device):
    x = random_image((3, 2, 10, 13), torch.float32, gen, device)
    k = torch.randn(3, 7, 5, generator=gen).to(device)
    y = imgfilters.filter2d(x, k)
    for b in range(3):
        assert torch.equal(y[b:b + 1], imgfilters.filter2d(x[b:b + 1], k[b]))


def test_layouts_keep_their_format(gen, device):
    x = random_image((2, 3, 9, 10), torch.uint8, gen, device)
    k = torch.rand(2, 3, 5, generator=gen)
    cl = x.contiguous(memory_format=torch.channels_last)
    y = imgfilters.filter2d(cl, k)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, imgfilters.filter2d(x, k))
    view = random_image((2, 3, 12, 20), torch.float32, gen, device)[:, :, 1:10, ::2]  # strided
    assert_matches(imgfilters.filter2d(view, k), reference(view, k))
    x5 = random_image((2, 1, 2, 7, 8), torch.float32, gen, device)  # leading dims flatten to 2 images
    assert_matches(imgfilters.filter2d(x5, k), reference(x5, k))
    plane = random_image((7, 9), torch.float32, gen, device)
    assert_matches(imgfilters.filter2d(plane, k[0]), reference(plane, k[0]))
    img = tv_tensors.Image(x)
    assert isinstance(imgfilters.filter2d(img, k), tv_tensors.Image)


@pytest.mark.parametrize("tile,border", [(dict(T=4, S=2, P=2, SEG=8, PRE=1, num_warps=1), "reflect"),
                                         (dict(T=2, S=4, P=3, SEG=4, PRE=0, num_warps=1), "constant")])
def test_strip_kernel_interior_and_border_strips(tile, border, gen, device):
    """The GPU's strip kernel (the interpreter runs a per-plane one unless told): narrow
    strips give interior and border strips, short segments several segments a plane."""
    x = random_image((1, 1, 6, 13), torch.float32, gen, device)
    k = torch.randn(1, 3, 3, generator=gen).to(device)
    y = torch.empty_like(x)
    kernels.launch(x, y, k, border=_image.check_border(border), border_value=0.25, tile=tile)
    assert_matches(y, reference(x, k[0], border, 0.25))


def test_input_and_kernel_are_not_modified(gen, device):
    x = random_image((1, 3, 8, 9), torch.float32, gen, device)
    k = torch.rand(3, 3, generator=gen).to(device)
    x0, k0 = x.clone(), k.clone()
    imgfilters.filter2d(x, k)
    assert torch.equal(x, x0) and torch.equal(k, k0)


def test_transform_and_fusion(gen, device):
    x = random_image((2, 3, 9, 11), torch.uint8, gen, device)
    k = torch.rand(3, 5, generator=gen, dtype=torch.float64)
    t = transforms.Filter2D(k)
    assert torch.equal(t(x), imgfilters.filter2d(x, k))
    pipeline = [v2.ToDtype(torch.float32, scale=True), t, v2.Normalize([0.5] * 3, [0.2] * 3)]
    fused = imgfilters.fuse(pipeline)
    assert fused.launches(torch.uint8) == 1
    assert (fused(x) - v2.Compose(pipeline)(x)).abs().max() <= 1e-5


# ---- the reference vs its peers ------------------------------------------------------------

@pytest.mark.parametrize("border", BORDERS)
def test_reference_equals_opencv_filter2d_on_a_sample(border, gen):
    img = sample("coffee")[:, :40, :50]
    k = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    x = img.double() / 255
    if border == "constant":  # OpenCV's filter2D has no border value: pad with it, filter the interior
        padded = cv2.copyMakeBorder(x.permute(1, 2, 0).numpy(), 3, 3, 2, 2, cv2.BORDER_CONSTANT, value=(0.4,) * 3)
        expected = cv2.filter2D(padded, -1, k.numpy())[3:-3, 2:-2]
    else:
        expected = cv2.filter2D(x.permute(1, 2, 0).numpy(), -1, k.numpy(), borderType=CV_BORDER[border])
    got = ref.filter2d(x[None], k, border, 0.4)[0].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_reference_equals_grouped_conv2d(gen):
    x = torch.rand(3, 2, 12, 15, generator=gen, dtype=torch.float64)
    k = torch.randn(3, 5, 7, generator=gen, dtype=torch.float64)
    w = k[:, None].repeat_interleave(2, 0)  # (B*C, 1, kh, kw)
    expected = F.conv2d(F.pad(x, (3, 3, 2, 2), mode="reflect").reshape(1, 6, 16, 21), w, groups=6).reshape(x.shape)
    torch.testing.assert_close(ref.filter2d(x, k), expected, rtol=0, atol=1e-12)


# ---- autograd ------------------------------------------------------------------------------

@pytest.mark.parametrize("border", BORDERS)
def test_reference_gradcheck_image_and_kernel(border, gen):
    x = torch.rand(2, 1, 5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 3, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: imgfilters.filter2d(a, b, border=border, border_value=0.3), (x, k))


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("per_image", [True, False])
def test_kernel_backward_matches_reference(border, per_image, gen, device):
    x = random_image((2, 3, 10, 13), torch.float32, gen, device).requires_grad_()
    k = torch.randn(*((2,) if per_image else ()), 5, 3, generator=gen).to(device).requires_grad_()
    y = imgfilters.filter2d(x, k, border=border, border_value=0.2)
    g = torch.randn(y.shape, generator=gen).to(device)
    gx, gk = torch.autograd.grad(y, (x, k), g)
    xd, kd = x.detach().cpu().double().requires_grad_(), k.detach().cpu().double().requires_grad_()
    gxr, gkr = torch.autograd.grad(ref.filter2d(xd, kd, border, 0.2), (xd, kd), g.cpu().double())
    assert gk.shape == k.shape and gx.shape == x.shape
    assert (gx.cpu().double() - gxr).abs().max() <= 1e-5 * gxr.abs().max()
    assert (gk.cpu().double() - gkr).abs().max() <= 1e-5 * gkr.abs().max()


# ---- bad arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,error,match", [
    (torch.ones(4, 3), ValueError, "odd"),
    (torch.ones(3, 65), ValueError, "odd and at most 63"),
    (torch.ones(3, 3, 3), ValueError, "one per image: img holds 2 images, kernel has 3"),
    (torch.ones(3), ValueError, r"\(kh, kw\) or \(B, kh, kw\)"),
    (torch.ones(3, 3, dtype=torch.complex64), TypeError, "real numbers"),
    ("abc", TypeError, "kernel must be"),
])
def test_bad_kernels_raise_before_launch(kernel, error, match):
    with pytest.raises(error, match=match):
        imgfilters.filter2d(torch.rand(2, 3, 8, 8), kernel)


def test_float64_runs_the_reference(gen):
    x = torch.rand(2, 3, 10, 12, generator=gen, dtype=torch.float64)
    k = torch.rand(2, 3, 3, generator=gen, dtype=torch.float64)
    assert torch.equal(imgfilters.filter2d(x, k), ref.filter2d(x, k))


# ---- GPU only ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.bfloat16])
@pytest.mark.parametrize("ksize", [5, 21, 31])
def test_batch_matches_reference_on_gpu_autotuned(dtype, ksize, gen, monkeypatch):
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    x = random_image((4, 3, 200, 300), dtype, gen, "cuda")
    k = torch.randn(4, ksize, ksize, generator=gen).cuda() / ksize
    y = imgfilters.filter2d(x, k, border="symmetric")
    assert_matches(y, ref.filter2d(_image.to_unit(x), k, "symmetric"))


@gpu
@pytest.mark.parametrize("tile", range(len(kernels.ALL_TILES)))
def test_every_tile(tile, gen):
    x = random_image((2, 3, 150, 333), torch.float32, gen, "cuda")
    k = torch.randn(2, 9, 7, generator=gen).cuda() / 8
    for border in (0, 3):
        y = torch.empty_like(x)
        kernels.launch(x, y, k, border=border, tile=kernels.ALL_TILES[tile])
        assert_matches(y, ref.filter2d(x.double(), k, BORDERS[border]))


@gpu
def test_int64_offsets_past_2_31_elements(gen):
    x = torch.zeros(1, 1, 2 ** 16 + 8, 2 ** 15 + 8, dtype=torch.uint8, device="cuda")
    x[..., -20:, -20:] = random_image((20, 20), torch.uint8, gen, "cuda")
    k = torch.rand(3, 5, generator=gen).cuda() / 15
    y = imgfilters.filter2d(x, k)
    assert_matches(y[..., -20:, -20:], reference(x[..., -24:, -24:], k)[..., -20:, -20:])


@gpu
def test_new_sizes_never_recompile(gen, monkeypatch):
    # a blur after a random resize (the degradation pipelines) meets a new size every call
    k = torch.randn(2, 7, 7, generator=gen).cuda() / 7
    imgfilters.filter2d(random_image((2, 3, 100, 130), torch.float32, gen, "cuda"), k)
    compiles = count_compiles(monkeypatch)
    for shape in ((2, 3, 64, 128), (2, 3, 97, 33), (2, 1, 160, 48)):
        x = random_image(shape, torch.float32, gen, "cuda")
        assert_matches(imgfilters.filter2d(x, k), reference(x, k))
    assert not compiles, compiles
