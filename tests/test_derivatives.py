"""Sobel, Scharr and Laplacian: taps and float64 definitions against OpenCV and kornia; the
kernels (one launch of the separable or the 2-D kernel, the store typed as the result's
dtype) and the CPU engine against the definition; gradients, transforms, tiles, Dask."""
import cv2
import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import tv_tensors

import imgfilters
from imgfilters import transforms as T
from imgfilters.reference import derivatives as ref

from helpers import KERNEL_DTYPES, assert_gradient_matches, assert_matches, random_image, sample

CV_BORDER = {"reflect": cv2.BORDER_REFLECT_101, "symmetric": cv2.BORDER_REFLECT,
             "replicate": cv2.BORDER_REPLICATE, "constant": cv2.BORDER_CONSTANT}
# (function, its arguments, OpenCV's call on an HWC float64 array with a border)
CASES = {
    "sobel dx": (imgfilters.sobel, dict(dx=1, dy=0), lambda a, b: cv2.Sobel(a, cv2.CV_64F, 1, 0, borderType=b)),
    "sobel dx dy 5": (imgfilters.sobel, dict(dx=1, dy=1, ksize=5, scale=0.5),
                      lambda a, b: cv2.Sobel(a, cv2.CV_64F, 1, 1, ksize=5, scale=0.5, borderType=b)),
    "sobel dyy 1": (imgfilters.sobel, dict(dx=0, dy=2, ksize=1),
                    lambda a, b: cv2.Sobel(a, cv2.CV_64F, 0, 2, ksize=1, borderType=b)),
    "sobel dxxx 7": (imgfilters.sobel, dict(dx=3, dy=0, ksize=7),
                     lambda a, b: cv2.Sobel(a, cv2.CV_64F, 3, 0, ksize=7, borderType=b)),
    "scharr dy": (imgfilters.scharr, dict(dx=0, dy=1), lambda a, b: cv2.Scharr(a, cv2.CV_64F, 0, 1, borderType=b)),
    "laplacian 1": (imgfilters.laplacian, dict(), lambda a, b: cv2.Laplacian(a, cv2.CV_64F, borderType=b)),
    "laplacian 5": (imgfilters.laplacian, dict(ksize=5, scale=2.0),
                    lambda a, b: cv2.Laplacian(a, cv2.CV_64F, ksize=5, scale=2.0, borderType=b)),
}


def dask_device():
    """Where ``imgfilters.dask`` filters its blocks: the GPU when there is one."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def assert_untiled(chunked, whole):
    """The README's promise for tiles and Dask chunks: the untiled result, exactly on the
    CPU; on the GPU within float32 rounding (a block's size can pick another kernel
    variant, whose FMAs contract the same taps in another order)."""
    whole = whole.cpu().numpy()
    if dask_device() == "cpu":
        assert np.array_equal(chunked, whole)
    else:
        np.testing.assert_allclose(chunked, whole, rtol=0, atol=2 * np.finfo(np.float32).eps * np.abs(whole).max())


def definition(fn, x, **kw):
    """The float64 definition of ``fn(x, **kw)`` (x in unit scale, (B, C, H, W))."""
    kw = dict(kw)
    args = {k: kw.pop(k) for k in ("border", "border_value") if k in kw}
    if fn is imgfilters.laplacian:
        return ref.laplacian(x, kw.get("ksize", 1), kw.get("scale", 1.0), **args)
    aperture = ref.SCHARR if fn is imgfilters.scharr else kw.get("ksize", 3)
    return ref.sobel(x, kw["dx"], kw["dy"], aperture, kw.get("scale", 1.0), **args)


@pytest.mark.parametrize("order, aperture", [(0, 1), (1, 1), (2, 1), (0, 3), (1, 3), (2, 3), (1, 5), (3, 5),
                                             (4, 7), (2, 9), (5, 15), (0, ref.SCHARR), (1, ref.SCHARR)])
def test_taps_are_opencvs(order, aperture):
    if aperture == ref.SCHARR:
        expected = cv2.getDerivKernels(order, 1 - order, cv2.FILTER_SCHARR)[0]
    else:
        expected = cv2.getDerivKernels(order, 1, aperture)[0]
    assert ref.derivative_taps(order, aperture).tolist() == expected.ravel().tolist()


@pytest.mark.parametrize("border", CV_BORDER)
@pytest.mark.parametrize("name", CASES)
def test_definition_equals_opencv(name, border, gen):
    fn, kw, cv = CASES[name]
    photo = sample("coffee")[:, 100:140, 200:250].double() / 255  # a photo's edges and a random image
    for x in (photo, torch.rand(1, 23, 17, generator=gen, dtype=torch.float64)):
        got = definition(fn, x[None], **kw, border=border)[0]
        expected = cv(x.permute(1, 2, 0).numpy().copy(), CV_BORDER[border])
        expected = torch.from_numpy(expected.reshape(*x.shape[1:], -1)).permute(2, 0, 1)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_definition_equals_kornias_spatial_gradient(gen):
    kornia = pytest.importorskip("kornia")
    x = torch.rand(2, 3, 13, 17, generator=gen, dtype=torch.float64)
    grad = kornia.filters.spatial_gradient(x, mode="sobel", order=1, normalized=False)  # (B, C, 2, H, W), replicate
    for i, (dx, dy) in enumerate([(1, 0), (0, 1)]):
        torch.testing.assert_close(ref.sobel(x, dx, dy, border="replicate"), grad[:, :, i], rtol=0, atol=1e-12)


# (each dtype through one of the three: the interpreter takes seconds a call)
SIGNED = [(imgfilters.sobel, dict(dx=1, dy=1)), (imgfilters.scharr, dict(dx=1, dy=0, border="constant",
                                                                         border_value=0.3)),
          (imgfilters.laplacian, dict(ksize=3, border="symmetric"))]


@pytest.mark.parametrize("i, dtype", list(enumerate(KERNEL_DTYPES)))
def test_every_dtype_gives_a_signed_result(i, dtype, gen, device):
    fn, kw = SIGNED[i % len(SIGNED)]
    x = random_image((2, 3, 6, 12), dtype, gen, device)
    y = fn(x, **kw)
    assert y.dtype == (torch.float32 if not dtype.is_floating_point else dtype) and (y < 0).any()
    assert_matches(y, definition(fn, imgfilters._image.to_unit(x.cpu()), **kw))


def test_integer_result_dtype_saturates_as_opencvs_same_depth(gen, device):
    x = random_image((1, 3, 6, 12), torch.uint8, gen, device)
    y = imgfilters.sobel(x, 1, 0, dtype=torch.uint8)
    expected = cv2.Sobel(x[0].permute(1, 2, 0).cpu().numpy(), -1, 1, 0, borderType=cv2.BORDER_REFLECT_101)
    assert y.dtype == torch.uint8 and torch.equal(y[0].permute(1, 2, 0).cpu(), torch.from_numpy(expected))


def test_a_float64_result_is_the_definitions(gen, device):
    x = random_image((1, 2, 7, 9), torch.uint8, gen, device)
    y = imgfilters.laplacian(x, 3, dtype=torch.float64)
    assert y.dtype == torch.float64
    torch.testing.assert_close(y.cpu(), definition(imgfilters.laplacian, imgfilters._image.to_unit(x.cpu()), ksize=3),
                               rtol=0, atol=1e-12)


def test_channels_last_and_strided_views(gen, device):
    x = random_image((2, 3, 8, 14), torch.float32, gen, device).to(memory_format=torch.channels_last)
    y = imgfilters.sobel(x, 0, 1, ksize=5)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert_matches(y, definition(imgfilters.sobel, x.cpu().double(), dx=0, dy=1, ksize=5))
    view = x[:, :, 1:7, ::2]
    assert_matches(imgfilters.laplacian(view), definition(imgfilters.laplacian, view.cpu().double()))


def test_engine_on_cpu_tensors(cpu_engine, gen):
    x = random_image((2, 3, 17, 21), torch.uint8, gen)
    for fn, kw, _ in CASES.values():
        assert_matches(fn(x, **kw), definition(fn, imgfilters._image.to_unit(x), **kw))
    assert imgfilters.sobel(x, 1, 0, dtype=torch.float64).dtype == torch.float64


def test_gradients(gen, device):
    x64 = torch.rand(1, 2, 6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: imgfilters.sobel(t, 1, 1, border="symmetric"), (x64,))
    assert torch.autograd.gradcheck(lambda t: imgfilters.laplacian(t, 3, border="replicate"), (x64,))
    x = random_image((2, 3, 6, 12), torch.float32, gen, device).requires_grad_()
    g = torch.rand(2, 3, 6, 12, generator=gen).to(device)
    for fn, kw in ((imgfilters.scharr, dict(dx=0, dy=1)), (imgfilters.laplacian, dict(ksize=1, border="constant"))):
        got, = torch.autograd.grad(fn(x, **kw), x, g)
        xr = x.detach().cpu().double().requires_grad_()
        expected, = torch.autograd.grad(definition(fn, xr, **kw), xr, g.cpu().double())
        assert_gradient_matches(got, expected)


def test_transforms(gen):
    x = tv_tensors.Image(random_image((3, 9, 11), torch.uint8, gen))
    y = T.Sobel(1, 0, 3)(x)
    assert isinstance(y, tv_tensors.Image) and y.dtype == torch.float32
    assert torch.equal(y, imgfilters.sobel(x, 1, 0, 3))
    assert torch.equal(T.Laplacian(3, dtype=torch.float16)(x), imgfilters.laplacian(x, 3, dtype=torch.float16))
    assert torch.equal(T.Scharr(0, 1)(x), imgfilters.scharr(x, 0, 1))
    with pytest.raises(TypeError, match="PIL"):
        T.Sobel()(Image.new("L", (4, 4)))


@pytest.mark.parametrize("call, message", [
    (lambda x: imgfilters.sobel(x, 0, 0), "not both 0"),
    (lambda x: imgfilters.sobel(x, -1, 1), "dx must be an integer in"),
    (lambda x: imgfilters.sobel(x, 3, 0, ksize=3), "at most 2"),
    (lambda x: imgfilters.sobel(x, 1, 0, ksize=4), "ksize must be an odd integer in"),
    (lambda x: imgfilters.sobel(x, 1.0, 0), "dx must be an integer"),
    (lambda x: imgfilters.scharr(x, 1, 1), "scharr takes"),
    (lambda x: imgfilters.laplacian(x, 33), "ksize must be an odd integer in"),
    (lambda x: imgfilters.laplacian(x, dtype="float32"), "dtype must be"),
    (lambda x: imgfilters.sobel(x, scale=float("nan")), "scale"),
    (lambda x: T.Sobel(dx=-1), "dx must be an integer in"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call(torch.zeros(1, 1, 4, 4))


def test_tiles_and_dask_chunks_equal_the_whole(cpu_engine, gen):
    x = random_image((1, 3, 30, 34), torch.uint8, gen)
    for fn, kw, _ in CASES.values():
        whole = fn(x, **kw)
        assert torch.equal(imgfilters.tiled(fn, x, tile=(8, 16), device="cpu", **kw), whole)
    da = pytest.importorskip("dask.array")
    import imgfilters.dask as idask
    d = idask.sobel(da.from_array(x.numpy(), chunks=(1, 3, 10, 12)), 1, 1, ksize=5).compute()
    assert_untiled(d, imgfilters.sobel(x.to(dask_device()), 1, 1, ksize=5))


# ---- gradient_magnitude ------------------------------------------------------------------------

def angle_error(got, expected):
    """The angular distance between two direction tensors, in radians."""
    d = (got.detach().cpu().double() - expected) % (2 * np.pi)
    return torch.minimum(d, 2 * np.pi - d)


@pytest.mark.parametrize("border", CV_BORDER)
@pytest.mark.parametrize("ksize, operator", [(1, "sobel"), (3, "sobel"), (5, "sobel"), (3, "scharr")])
def test_gradient_definition_equals_opencvs_magnitude_and_phase(ksize, operator, border, gen):
    x = torch.cat([sample("coffee")[:, 100:140, 200:250].double() / 255,
                   torch.rand(3, 40, 50, generator=gen, dtype=torch.float64)])
    aperture = ref.SCHARR if operator == "scharr" else ksize
    magnitude, direction = ref.gradient_magnitude(x[None], aperture, 0.5, border, 0.25, direction=True)
    a = x.permute(1, 2, 0).numpy().copy()
    if border == "constant":  # (OpenCV's Sobel pads with 0: shift the image by the border value instead)
        a -= 0.25
    gx = cv2.Sobel(a, cv2.CV_64F, 1, 0, ksize=ksize if operator == "sobel" else -1, scale=0.5,
                   borderType=CV_BORDER[border])
    gy = cv2.Sobel(a, cv2.CV_64F, 0, 1, ksize=ksize if operator == "sobel" else -1, scale=0.5,
                   borderType=CV_BORDER[border])
    chw = lambda t: torch.from_numpy(t).permute(2, 0, 1)  # noqa: E731
    torch.testing.assert_close(magnitude[0], chw(cv2.magnitude(gx, gy)), rtol=0, atol=1e-12)
    strong = magnitude[0] > 1e-6  # (where the direction is defined by more than rounding)
    assert angle_error(direction[0], chw(np.arctan2(gy, gx)))[strong].max() < 1e-9
    assert angle_error(direction[0], chw(cv2.phase(gx, gy)))[strong].max() < np.radians(0.3)  # (its accuracy)


def test_gradient_definition_equals_kornias_sobel(gen):
    kornia = pytest.importorskip("kornia")
    x = torch.rand(2, 3, 13, 17, generator=gen, dtype=torch.float64)
    expected = kornia.filters.sobel(x, normalized=False, eps=0.0)  # replicate border
    torch.testing.assert_close(ref.gradient_magnitude(x, 3, border="replicate"), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("i, dtype", list(enumerate(KERNEL_DTYPES)))
def test_gradient_magnitude_and_direction_in_one_call(i, dtype, gen, device):
    # (7 x 7 taps sum to 1280 in magnitude: a float32 result's rounding reaches 1e-5 of it)
    border, ksize = [("reflect", 3), ("constant", 5), ("replicate", 1), ("symmetric", 7), ("reflect", 3)][i % 5]
    x = random_image((2, 3, 9, 14), dtype, gen, device)
    magnitude, direction = imgfilters.gradient_magnitude(x, ksize, direction=True, border=border, border_value=0.3)
    expected = ref.gradient_magnitude(imgfilters._image.to_unit(x.cpu()), ksize, 1.0, border, 0.3, direction=True)
    out = torch.float32 if not dtype.is_floating_point else dtype
    assert magnitude.dtype == direction.dtype == out
    assert_matches(magnitude, expected[0])
    strong = expected[0] > 1e-2
    tolerance = max(1e-5, np.pi * torch.finfo(out).eps)  # (angles up to pi, stored in the dtype)
    assert angle_error(direction, expected[1])[strong].max() < tolerance
    assert_matches(imgfilters.gradient_magnitude(x, ksize, border=border, border_value=0.3), expected[0])


@pytest.mark.parametrize("ksize,border,size", [(3, "reflect", (9, 21)), (5, "constant", (7, 13)),
                                               (7, "symmetric", (3, 5)), (3, "replicate", (1, 2))])
def test_gradient_lanes_in_small_tiles(ksize, border, size, gen, device, monkeypatch):
    """The GPU's programs (the interpreter takes one program a plane unless told), in small
    tiles: programs that cut the plane along both axes, lanes past the image's width, rows
    through the border, and images narrower than the window (no single fold)."""
    from imgfilters.kernels import gradient
    monkeypatch.setattr(gradient, "interpreting", lambda: False)
    monkeypatch.setattr(gradient, "TILE", (4, 2, 3))
    x = random_image((1, 2, *size), torch.float32, gen, device)
    magnitude, direction = imgfilters.gradient_magnitude(x, ksize, direction=True, border=border, border_value=0.3)
    expected = ref.gradient_magnitude(x.cpu().double(), ksize, 1.0, border, 0.3, direction=True)
    assert_matches(magnitude, expected[0])
    strong = expected[0] > 1e-2
    assert angle_error(direction, expected[1])[strong].max() < 1e-5


def test_gradient_engine_and_layouts(cpu_engine, gen):
    x = random_image((2, 3, 19, 23), torch.uint8, gen).to(memory_format=torch.channels_last)
    for ksize, operator in ((3, "sobel"), (3, "scharr"), (5, "sobel")):
        aperture = ref.SCHARR if operator == "scharr" else ksize
        magnitude, direction = imgfilters.gradient_magnitude(x, ksize, operator=operator, direction=True, scale=2.0)
        expected = ref.gradient_magnitude(imgfilters._image.to_unit(x), aperture, 2.0, direction=True)
        assert magnitude.is_contiguous(memory_format=torch.channels_last)
        assert direction.is_contiguous(memory_format=torch.channels_last)
        assert_matches(magnitude, expected[0])
        assert angle_error(direction, expected[1])[expected[0] > 1e-2].max() < 1e-5
    view = x.float()[:, :, 2:15, ::2]
    assert_matches(imgfilters.gradient_magnitude(view), ref.gradient_magnitude(view.double()))


def test_gradient_magnitude_gradients(gen, device):
    x64 = torch.rand(1, 2, 6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: imgfilters.gradient_magnitude(t, 3, border="symmetric"), (x64,))
    x = random_image((2, 3, 8, 12), torch.float32, gen, device)
    x[0, 0, :, :6] = 0.5  # a flat patch: magnitude 0, whose gradient is 0
    x.requires_grad_()
    g = torch.rand(2, 3, 8, 12, generator=gen).to(device)
    got, = torch.autograd.grad(imgfilters.gradient_magnitude(x, 5, border="constant", border_value=0.2), x, g)
    xr = x.detach().cpu().double().requires_grad_()
    expected, = torch.autograd.grad(ref.gradient_magnitude(xr, 5, 1.0, "constant", 0.2), xr, g.cpu().double())
    assert torch.isfinite(got).all()
    assert_gradient_matches(got, expected)
    magnitude, direction = imgfilters.gradient_magnitude(x, direction=True)
    got, = torch.autograd.grad((magnitude * g).sum() + direction.sum(), x)  # (the direction carries none)
    expected, = torch.autograd.grad(imgfilters.gradient_magnitude(x), x, g)
    torch.testing.assert_close(got, expected)


def test_gradient_transform_tiles_and_dask(cpu_engine, gen):
    x = random_image((1, 3, 30, 34), torch.uint8, gen)
    whole = imgfilters.gradient_magnitude(x, 5)
    assert torch.equal(T.GradientMagnitude(5)(x), whole)
    assert torch.equal(imgfilters.tiled(imgfilters.gradient_magnitude, x, 5, tile=(8, 16), device="cpu"), whole)
    with pytest.raises(TypeError, match="returns 2 images"):
        imgfilters.tiled(imgfilters.gradient_magnitude, x, direction=True)
    da = pytest.importorskip("dask.array")
    import imgfilters.dask as idask
    d = idask.gradient_magnitude(da.from_array(x.numpy(), chunks=(1, 3, 10, 12)), operator="scharr").compute()
    assert_untiled(d, imgfilters.gradient_magnitude(x.to(dask_device()), operator="scharr"))


@pytest.mark.parametrize("call, message", [
    (lambda x: imgfilters.gradient_magnitude(x, 4), "ksize must be an odd integer in"),
    (lambda x: imgfilters.gradient_magnitude(x, 5, operator="scharr"), "scharr's aperture is 3"),
    (lambda x: imgfilters.gradient_magnitude(x, operator="prewitt"), "operator must be"),
    (lambda x: imgfilters.gradient_magnitude(x, direction=1), "direction must be True or False"),
    (lambda x: T.GradientMagnitude(ksize=0), "ksize must be an odd integer in"),
])
def test_gradient_bad_arguments_are_named(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call(torch.zeros(1, 1, 4, 4))
