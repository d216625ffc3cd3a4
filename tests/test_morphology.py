"""Morphology: the kernels vs the float64 reference and OpenCV, the reference vs OpenCV, scipy
and kornia, OpenCV's structuring elements, gradients, the per-path checks (transform,
fusion, tiling, dask)."""
import cv2
import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.kernels import morphology as kernels
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.ops.morphology import check_kernel, mask_of
from imgfilters.reference import morphology as ref

from helpers import KERNEL_DTYPES, SAMPLES, assert_matches, count_launches, gpu, random_image, sample

CV_BORDER = {"reflect": cv2.BORDER_REFLECT_101, "symmetric": cv2.BORDER_REFLECT, "replicate": cv2.BORDER_REPLICATE,
             "constant": cv2.BORDER_CONSTANT}
CV_OP = {"erode": cv2.MORPH_ERODE, "dilate": cv2.MORPH_DILATE, "opening": cv2.MORPH_OPEN, "closing": cv2.MORPH_CLOSE,
         "gradient": cv2.MORPH_GRADIENT, "tophat": cv2.MORPH_TOPHAT, "blackhat": cv2.MORPH_BLACKHAT}
CV_SHAPE = {"rect": cv2.MORPH_RECT, "cross": cv2.MORPH_CROSS, "ellipse": cv2.MORPH_ELLIPSE}
SCIPY_MODE = {"reflect": "mirror", "symmetric": "reflect", "replicate": "nearest", "constant": "constant"}
ALL_BORDERS = (None,) + BORDERS


def reference(x, op, kernel=3, shape="rect", iterations=1, border=None, value=0.0):
    x4 = _image.as_planes(_image.to_unit(x.detach().cpu()))
    levels = _image.MAX_VALUE.get(x.dtype)
    y = ref.morphology(x4, op, mask_of(*check_kernel(kernel, shape)), iterations, border, value, levels)
    return y.reshape(x.shape)


def opencv(x, op, kernel=3, shape="rect", iterations=1, border=None, value=0.0):
    """cv2.morphologyEx of a (C, H, W) image, plane by plane (its border value in levels)."""
    mask = mask_of(*check_kernel(kernel, shape)).numpy().astype(np.uint8)
    extra = {} if border is None else dict(borderType=CV_BORDER[border],
                                          borderValue=value * _image.MAX_VALUE.get(x.dtype, 1.0))
    return np.stack([cv2.morphologyEx(p.numpy(), CV_OP[op], mask, iterations=iterations, **extra) for p in x])


# ---- structuring elements ------------------------------------------------------------------

def test_structuring_elements_are_opencvs_bit_for_bit(gen):
    sizes = [(k, k) for k in range(1, 64)] + [tuple(s) for s in torch.randint(1, 64, (150, 2), generator=gen).tolist()]
    for kh, kw in sizes:
        for shape in ref.SHAPES:
            expected = cv2.getStructuringElement(CV_SHAPE[shape], (kw, kh)).astype(bool)
            assert np.array_equal(imgfilters.structuring_element(shape, (kh, kw)).numpy(), expected), (shape, kh, kw)


# ---- kernels vs reference and OpenCV -------------------------------------------------------

@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("border", ALL_BORDERS)
def test_every_dtype_and_border(dtype, border, gen, device):
    x = random_image((2, 3, 9, 11), dtype, gen, device)
    op = "erode" if dtype in (torch.uint8, torch.float16) else "dilate"
    shape = "rect" if dtype.is_floating_point else "cross"  # (the lanes' march; the direct taps)
    y = imgfilters.morphology(x, op, 3, shape=shape, border=border, border_value=0.4)
    assert_matches(y, reference(x, op, 3, shape, 1, border, 0.4))


# each of the kernels' plans, with an operation, iterations (2: OpenCV's larger rectangle,
# or two passes) and a border: direct taps, rectangles by direct and van Herk passes (and
# one row or one column), row runs of ellipses, crosses and masks
PLANS = [(3, "rect", "erode", 2, "reflect"), ((5, 5), "ellipse", "gradient", 2, None),
         ((4, 6), "rect", "tophat", 2, "replicate"), (11, "rect", "blackhat", 2, "constant"),
         ((7, 13), "rect", "closing", 1, "symmetric"), ((1, 12), "rect", "gradient", 2, None),
         ((12, 1), "rect", "opening", 2, "reflect"), (9, "cross", "tophat", 1, "replicate"),
         (15, "ellipse", "dilate", 1, None), ("mask", None, "blackhat", 2, "symmetric")]


@pytest.mark.parametrize("kernel,shape,op,iterations,border", PLANS, ids=lambda p: str(p))
def test_every_plan_equals_opencv_on_uint8(kernel, shape, op, iterations, border, gen, device):
    if kernel == "mask":
        kernel, shape = (torch.rand(6, 9, generator=gen) < 0.6).tolist(), "rect"
    x = random_image((2, 13, 17), torch.uint8, gen)
    got = imgfilters.morphology(x.to(device), op, kernel, shape=shape, iterations=iterations, border=border,
                                border_value=102 / 255)
    assert np.array_equal(got.cpu().numpy(), opencv(x, op, kernel, shape, iterations, border, 102 / 255))


@pytest.mark.parametrize("op", ["opening", "closing", "dilate"])
def test_compound_operations_on_uint16_and_float32_equal_opencv(op, gen, device):
    for dtype in (torch.uint16, torch.float32):
        x = random_image((1, 10, 14), dtype, gen)
        got = imgfilters.morphology(x.to(device), op, 5, shape="ellipse", border="replicate")
        assert np.array_equal(got.cpu().numpy(), opencv(x, op, 5, "ellipse", 1, "replicate"))


# the opening and closing (and tophat, blackhat) of float pixels by a rectangle up to 5 x 5
# with the default border: one launch, the first pass's image never stored
# (``kernels.pair``); anchors off centre (a 2 x 2 rectangle twice: a 3 x 3 one anchored at
# its corner), one row or column, the GPU's tiles of lanes in the interpreter (programs
# that cut the plane: their first rows' halo, the lanes past the image). Stored integers
# take two passes, unless a prologue makes them float.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8])
@pytest.mark.parametrize("tiles", [None, (4, 2, 4)])
def test_paired_passes_equal_opencv(dtype, tiles, gen, device, monkeypatch):
    if tiles is not None:
        monkeypatch.setattr(kernels, "interpreting", lambda: False)
        monkeypatch.setattr(kernels.tiles, "TILES", dict(kernels.tiles.TILES, pair=tiles))
    x = random_image((2, 13, 17), dtype, gen)
    for op, kernel, iterations in (("opening", 3, 1), ("closing", (5, 3), 1), ("tophat", (1, 5), 1),
                                   ("blackhat", (4, 1), 1), ("opening", 2, 2), ("closing", 5, 1)):
        with count_launches() as counted:
            got = imgfilters.morphology(x.to(device), op, kernel, iterations=iterations)
        one = {"pair_kernel": 1} if dtype.is_floating_point else {"lanes_kernel": 2}
        assert dict(counted) in ({}, one), counted  # ({}: the CPU engine)
        if dtype == torch.float16:  # (OpenCV has no float16 morphology)
            assert_matches(got, reference(x, op, kernel, "rect", iterations))
        else:
            assert np.array_equal(got.cpu().numpy(), opencv(x, op, kernel, "rect", iterations)), (op, kernel)
    if dtype == torch.uint8:  # fused: a conversion alone keeps the stored integers, a prologue makes floats
        for steps, one in (([v2.ToDtype(torch.float32, scale=True), T.Morphology("opening", 5)], False),
                           ([v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.1, 0.2], [2.0, 0.5]),
                             T.Morphology("opening", 5)], True)):
            fused = imgfilters.fuse(steps)
            with count_launches() as counted:
                got = fused(x.to(device))
            assert fused.launches(torch.uint8) == (1 if one else 2), steps
            assert dict(counted) in ({}, {"pair_kernel": 1} if one else {"lanes_kernel": 2}), counted
            torch.testing.assert_close(got.cpu(), v2.Compose(steps)(x), rtol=0, atol=1e-6)


def test_buffers_after_a_border_value_that_is_no_level_and_windows_wholly_outside(gen, device):
    # 0.3 is no uint8 level: the buffers between passes hold stored levels (each pass as
    # the image's dtype stores it); a one-position mask far from its anchor reads only the
    # border near the edges (the default border: the dtype's largest or smallest value)
    x = random_image((1, 2, 8, 9), torch.uint8, gen, device)
    y = imgfilters.morphology(x, "gradient", 11, shape="ellipse", iterations=2, border="constant", border_value=0.3)
    assert_matches(y, reference(x, "gradient", 11, "ellipse", 2, "constant", 0.3))
    corner = [[True] + [False] * 6]
    got = imgfilters.morphology(x, "blackhat", corner, iterations=2)
    assert np.array_equal(got.cpu().numpy()[0], opencv(x.cpu()[0], "blackhat", corner, "rect", 2))


def test_layouts_keep_their_format(gen, device):
    x = random_image((2, 3, 9, 10), torch.uint8, gen, device)
    cl = x.contiguous(memory_format=torch.channels_last)
    y = imgfilters.erode(cl, 5, shape="ellipse")
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, imgfilters.erode(x, 5, shape="ellipse"))
    view = random_image((2, 3, 12, 20), torch.float32, gen, device)[:, :, 1:10, ::2]  # strided
    assert_matches(imgfilters.dilate(view, (3, 5), border="symmetric"), reference(view, "dilate", (3, 5), "rect", 1,
                                                                                  "symmetric"))
    plane = random_image((7, 9), torch.float32, gen, device)
    assert_matches(imgfilters.morphology(plane, "opening", 3), reference(plane, "opening", 3))
    assert isinstance(imgfilters.erode(tv_tensors.Image(x), 3), tv_tensors.Image)


def test_float64_runs_the_reference(gen):
    x = torch.rand(2, 3, 10, 12, generator=gen, dtype=torch.float64)
    mask = ref.structuring_element("ellipse", (5, 7))
    assert torch.equal(imgfilters.morphology(x, "tophat", mask, iterations=2, border="replicate"),
                       ref.morphology(x, "tophat", mask, 2, "replicate"))


@pytest.mark.parametrize("args,error,match", [
    (dict(op="open"), ValueError, "op"), (dict(kernel=0), ValueError, "kernel"),
    (dict(kernel=64), ValueError, "kernel"),
    (dict(kernel=3.0), TypeError, "kernel"), (dict(kernel=True), TypeError, "kernel"),
    (dict(kernel=(3, 5, 7)), ValueError, "kernel"), (dict(kernel=[[0, 0], [0, 0]]), ValueError, "at least one"),
    (dict(kernel=[[0, 2]]), ValueError, "only 0 and 1"), (dict(kernel=torch.ones(2, 2, 2)), ValueError, "2-D"),
    (dict(kernel=[[1, 1]], shape="ellipse"), ValueError, "shape"), (dict(shape="disk"), ValueError, "shape"),
    (dict(iterations=0), ValueError, "iterations"), (dict(iterations=1.5), TypeError, "iterations"),
    (dict(kernel=63, iterations=20), ValueError, "iterations"), (dict(border="wrap"), ValueError, "border"),
    (dict(border="constant", border_value=float("nan")), ValueError, "border_value")])
def test_bad_arguments_raise_before_launch(args, error, match):
    call = dict(op="opening", kernel=3)
    call.update(args)
    with pytest.raises(error, match=match):
        imgfilters.morphology(torch.rand(1, 3, 8, 8), call.pop("op"), call.pop("kernel"), **call)


# ---- the reference vs its peers ------------------------------------------------------------

def _photo():
    return sample("coffee")[:, 60:100, 80:130]  # (3, 40, 50) uint8


@pytest.mark.parametrize("op", list(CV_OP))
def test_reference_equals_opencv_on_photos_and_random_images(op, gen):
    for k, x in enumerate((_photo(), random_image((2, 19, 23), torch.uint8, gen), sample("camera")[:, :30, :40])):
        for shape, size in (("ellipse", 7), ("cross", (5, 3)), ("rect", 4)):
            border = ALL_BORDERS[k + len(shape) % 2]
            expected = opencv(x, op, size, shape, 2, border, 51 / 255)
            got = _image.from_unit(reference(x, op, size, shape, 2, border, 51 / 255), torch.uint8)
            assert np.array_equal(got.numpy(), expected), (shape, border)
    xf = torch.rand(2, 17, 19, generator=gen, dtype=torch.float32)  # float32: exact too (min and max are)
    expected = opencv(xf, op, 5, "ellipse", 1, "reflect")
    assert np.array_equal(reference(xf, op, 5, "ellipse", 1, "reflect").float().numpy(), expected)


@pytest.mark.parametrize("border", BORDERS)
def test_reference_equals_scipy_grey_morphology(border, gen):
    ndimage = pytest.importorskip("scipy.ndimage")
    mask = torch.tensor([[0, 1, 1, 0, 1], [1, 1, 1, 1, 0], [0, 0, 1, 0, 0]], dtype=torch.bool)
    for x in (_photo().double() / 255, torch.rand(2, 13, 17, generator=gen, dtype=torch.float64)):
        foot = mask.numpy()[None]
        e = ndimage.grey_erosion(x.numpy(), footprint=foot, mode=SCIPY_MODE[border], cval=0.3)
        d = ndimage.grey_dilation(x.numpy(), footprint=foot, mode=SCIPY_MODE[border], cval=0.3)
        np.testing.assert_array_equal(ref.erode(x, mask, 1, border, 0.3).numpy(), e)
        # scipy reflects the footprint for dilation
        np.testing.assert_array_equal(ref.dilate(x, mask.flip(0, 1), 1, border, 0.3).numpy(), d)


@pytest.mark.parametrize("op,kornia_op", [("erode", "erosion"), ("dilate", "dilation"), ("opening", "opening"),
                                          ("closing", "closing"), ("gradient", "gradient"), ("tophat", "top_hat"),
                                          ("blackhat", "bottom_hat")])
def test_reference_equals_kornia_morphology(op, kornia_op, gen):
    kornia = pytest.importorskip("kornia")
    mask = ref.structuring_element("ellipse", (5, 5))  # (symmetric: kornia flips the kernel for dilation)
    for x in (_photo()[None].double() / 255, torch.rand(2, 2, 12, 15, generator=gen, dtype=torch.float64)):
        fn = getattr(kornia.morphology, kornia_op)
        assert torch.equal(ref.morphology(x, op, mask), fn(x, mask.double(), border_type="geodesic"))
        assert torch.equal(ref.morphology(x, op, mask, 1, "constant", 0.4),
                           fn(x, mask.double(), border_type="constant", border_value=0.4))


# ---- autograd ------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["erode", "gradient", "tophat"])
def test_reference_gradcheck(op, gen):
    x = torch.rand(2, 1, 5, 6, generator=gen, dtype=torch.float64, requires_grad=True)  # (no ties)
    assert torch.autograd.gradcheck(lambda a: imgfilters.morphology(a, op, 3, shape="cross", border="reflect"), (x,))


@pytest.mark.parametrize("op,kernel,shape,border", [("opening", 5, "ellipse", "reflect"),
                                                    ("gradient", 11, "rect", "constant"),
                                                    ("blackhat", 3, "cross", None)])
def test_kernel_backward_splits_ties_as_amax(op, kernel, shape, border, gen, device):
    # four levels: most windows hold several equal values, the gradient split among them
    x = ((random_image((1, 2, 7, 9), torch.float32, gen, device) * 3).round() / 3).requires_grad_()
    y = imgfilters.morphology(x, op, kernel, shape=shape, iterations=2, border=border, border_value=0.5)
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, (x,), g)
    xd = x.detach().cpu().double().requires_grad_()
    mask = mask_of(*check_kernel(kernel, shape))
    (expected,) = torch.autograd.grad(ref.morphology(xd, op, mask, 2, border, 0.5), (xd,), g.cpu().double())
    torch.testing.assert_close(gx.cpu().double(), expected, rtol=0, atol=1e-5)


# ---- the other paths -----------------------------------------------------------------------

def test_transform_with_ranges_and_masks(gen, device):
    x = random_image((2, 3, 9, 11), torch.uint8, gen, device)
    assert torch.equal(T.Morphology("gradient", 5, shape="ellipse")(x),
                       imgfilters.morphology(x, "gradient", 5, shape="ellipse"))
    mask = [[1, 0, 1], [0, 1, 0]]
    assert torch.equal(T.Morphology("erode", mask=mask, border="replicate")(x),
                       imgfilters.erode(x, mask, border="replicate"))
    t = T.Morphology("opening", (3, 7), iterations=(1, 2))
    assert {tuple(t.make_params([x]).values()) for _ in range(60)} == {(k, n) for k in (3, 5, 7) for n in (1, 2)}
    binary = Image.open(SAMPLES / "camera.png").crop((0, 0, 12, 10)).convert("1")
    out = T.Morphology("closing", 3)(binary)
    assert out.mode == "1" and out.size == (12, 10)
    for bad in (dict(kernel_size=(5, 4)), dict(kernel_size=(4, 6)), dict(iterations=(2, 1)),
                dict(mask=mask, shape="cross")):
        with pytest.raises(ValueError):
            T.Morphology("erode", **bad)


def test_fused_prologue_and_epilogue(gen, device):
    x = random_image((2, 3, 9, 11), torch.uint8, gen, device)
    norm = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, -0.1])]
    for filt, launches in ((T.Morphology("dilate", 3, border="constant", border_value=0.2), 1),
                           (T.Morphology("tophat", 7, shape="ellipse"), 4)):  # two passes: the run lengths, the runs
        steps = [*norm, filt, v2.Normalize([0.1], [2.0])]
        fused = imgfilters.fuse(steps)
        assert fused.launches(torch.uint8) == launches
        with count_launches() as counted:
            y = fused(x)
        assert sum(counted.values()) == launches, counted
        torch.testing.assert_close(y, v2.Compose(steps)(x), rtol=0, atol=2e-6)


def test_tiled_and_dask_equal_untiled(gen):
    da = pytest.importorskip("dask.array")
    import imgfilters.dask as idask
    x = torch.rand(1, 2, 19, 23, generator=gen, dtype=torch.float64)
    expected = imgfilters.morphology(x, "closing", 5, shape="cross", iterations=2, border="symmetric")
    tiles = imgfilters.tiled(imgfilters.morphology, x, "closing", 5, shape="cross", iterations=2, border="symmetric",
                             tile=5, progress=False)
    mask = [[0, 1, 0], [1, 1, 1], [1, 0, 0]]
    blocks = idask.erode(da.from_array(x.numpy(), chunks=(1, 2, 8, 8)), mask, iterations=2)
    assert torch.equal(tiles, expected)
    assert np.array_equal(blocks.compute(scheduler="threads"), imgfilters.erode(x, mask, iterations=2).numpy())


# ---- GPU only ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kernel,shape", [p[:2] for p in PLANS[:-1]], ids=lambda p: str(p))
def test_every_plan_on_gpu_tiles(dtype, kernel, shape, gen):
    x = random_image((2, 3, 70, 150), dtype, gen, "cuda")
    for op, border in (("erode", None), ("opening", "reflect"), ("tophat", "constant")):
        y = imgfilters.morphology(x, op, kernel, shape=shape, border=border, border_value=0.2)
        assert_matches(y, reference(x, op, kernel, shape, 1, border, 0.2))


@gpu
def test_van_herk_windows_up_to_the_largest_rectangle(gen):
    x = random_image((1, 1, 300, 2100), torch.uint8, gen, "cuda")
    y = imgfilters.dilate(x, 63, iterations=16)  # one pass of a 993 x 993 rectangle
    assert np.array_equal(y.cpu().numpy()[0], opencv(x.cpu()[0], "dilate", 63, "rect", 16))


@gpu
def test_int64_offsets_past_2_31_elements(gen):
    x = torch.zeros(1, 1, 2 ** 16 + 8, 2 ** 15 + 8, dtype=torch.uint8, device="cuda")
    x[..., -20:, -20:] = random_image((20, 20), torch.uint8, gen, "cuda")
    for kernel, shape in ((3, "rect"), (11, "rect"), (9, "ellipse")):
        y = imgfilters.morphology(x, "gradient", kernel, shape=shape)
        assert_matches(y[..., -10:, -10:], reference(x[..., -30:, -30:], "gradient", kernel, shape)[..., -10:, -10:])


def test_rectangles_take_the_separable_path(gen, device):
    """A 15 x 15 rectangle is a row pass on the lanes and a column march, whose cost does
    not grow with the area as a mask's does; the 15 x 15 ellipse runs its five row lengths
    in one launch and its fifteen taps in another. (The times are ``scripts/benchmark.py``'s:
    on 4K RGB uint8 on the H200, 0.110 ms against 0.338. A timed comparison here failed
    with fifteen other workers on the GPU.)"""
    x = random_image((1, 3, 40, 50), torch.uint8, gen).to(device)
    with count_launches() as rect:
        imgfilters.dilate(x, 15)
    with count_launches() as ellipse:
        imgfilters.dilate(x, 15, shape="ellipse")
    assert rect == {"lanes_kernel": 1, "march_kernel": 1}, rect
    assert ellipse == {"runs_kernel": 1, "taps_kernel": 1}, ellipse


def test_kernel_plans_decompose_masks():
    assert kernels.plan((7, 7, 7), 3, 1, 1) == ("rect",)
    assert kernels.plan((2, 7, 2), 3, 1, 1)[0] == "direct"
    assert kernels.plan(((1 << 11) - 1,) * 11, 11, 5, 5) == ("rect",)
    how, lengths, taps = kernels.plan(check_kernel(15, "ellipse")[0], 15, 7, 7)
    assert how == "runs" and lengths == (1, 9, 11, 13, 15) and len(taps) == 15


@pytest.mark.parametrize("kernel,shape,border,size", [(3, "rect", None, (20, 40)),
                                                     ((7, 15), "rect", "reflect", (9, 40)),
                                                     (11, "rect", "reflect", (12, 60)),
                                                     ((13, 1), "rect", None, (60, 12)),
                                                     (5, "ellipse", "reflect", (20, 40)),
                                                     (9, "ellipse", "reflect", (20, 40)),
                                                     (9, "ellipse", "symmetric", (10, 12)),
                                                     ((1, 33), "rect", "symmetric", (3, 240)),
                                                     ((35, 1), "rect", None, (240, 3))])
def test_gpu_tiles_in_the_interpreter(kernel, shape, border, size, gen, device, monkeypatch):
    """The GPU's programs (the interpreter takes one tile per plane unless told), in small
    tiles: tiles that cut the plane, the lanes' tiles (rectangles up to 7 x 15; the row
    passes of larger ones and of the runs, whose buffer is wider than the image: on a
    narrow image its reads lie beyond one fold), the column march's interior and border
    tiles, the direct taps and the runs, van Herk tiles (windows over 31) of fewer outputs
    than positions, an interior one along each axis."""
    monkeypatch.setattr(kernels, "interpreting", lambda: False)
    monkeypatch.setattr(kernels.tiles, "TILES", dict(taps=(4, 16), row_scan=(64, 16), column_scan=(64, 16),
                                                     march=(4, 16), lanes=(4, 2, 4), lanes_raw=(4, 4, 4),
                                                     runs=(4, 2, 4)))
    x = random_image((1, 1, *size), torch.uint8, gen)
    got = imgfilters.morphology(x.to(device), "dilate", kernel, shape=shape, border=border)
    assert np.array_equal(got.cpu().numpy()[0], opencv(x[0], "dilate", kernel, shape, 1, border))
