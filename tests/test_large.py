"""Every op family on an image past 2**31 elements (GPU only): the kernels index in int64
there (``kernels/core/tiling.py``, ``needs_int64``), a variant the smaller tests never
compile. Each result is compared with the float64 path at the far corner, where the
offsets are largest: the op run on a corner crop large enough that the compared pixels
read only pixels inside it (the crop's own cut edges are farther than the filter reaches).

A single-plane 46400 x 46400 uint8 image holds 2.15e9 elements (2 GiB); the tests that
need a floating-point image (gradients) use float32 (8 GiB). Each holds GPU memory slots
while it runs (the fixtures ``one_slot`` and ``all_slots``): a uint8 test one of SLOTS, a
gradient test all of them, so that the suite's parallel workers never hold more than a
few such images at once. The slots are released in the fixture's teardown, after the
test's tensors are gone and the worker's cached blocks handed back to the GPU (a test
holding them past its slot let other workers' tests run out of memory).
"""
import contextlib
import fcntl
import gc
import math
import os
import tempfile
import time

import pytest
import torch

import imgfilters
from imgfilters import _image
from imgfilters.ops import pointwise as pw
from imgfilters.reference import resample as ref_resample

from helpers import assert_gradient_matches, assert_matches, gpu

pytestmark = gpu

SIDE = 46400  # SIDE ** 2 > 2 ** 31
CROP = 96  # the corner crop the float64 path filters
KEEP = 48  # the corner pixels compared: every filter below reaches less than CROP - KEEP
SLOTS = 4  # uint8 tests at once (about 7 GiB each at most); a gradient test (about 35 GiB) takes all


@contextlib.contextmanager
def gpu_memory_slots(n=1):
    """Hold ``n`` of the suite's SLOTS slot locks (files shared by the workers) meanwhile."""
    folder = os.path.join(tempfile.gettempdir(), "imgfilters-large-tests")
    os.makedirs(folder, exist_ok=True)
    files = [open(os.path.join(folder, str(k)), "a") for k in range(SLOTS)]
    held = []
    try:
        if n == SLOTS:  # all of them, in order (no two takers can deadlock)
            for f in files:
                fcntl.flock(f, fcntl.LOCK_EX)
                held.append(f)
        while len(held) < n:  # the first free one
            for f in files:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held.append(f)
                    break
                except BlockingIOError:
                    continue
            else:
                time.sleep(0.1)
        yield
    finally:
        gc.collect()
        torch.cuda.empty_cache()  # (this worker's cached blocks would hold the image's memory)
        for f in files:
            f.close()  # (releases its lock)


@pytest.fixture
def one_slot():
    with gpu_memory_slots():
        yield


@pytest.fixture
def all_slots():
    with gpu_memory_slots(SLOTS):
        yield


def large_image(gen, dtype=torch.uint8, side=SIDE):
    """A (1, 1, side, side) image, random in its far corner (the rest a smooth ramp, cheap
    to make)."""
    x = torch.empty(1, 1, side, side, dtype=dtype, device="cuda")
    ramp = torch.arange(side, device="cuda") % 251 / 255  # (one column, broadcast: no image-sized temporaries)
    x.copy_(_image.from_unit(ramp.float(), dtype)[:, None].expand(side, side))
    corner = torch.rand(1, 1, 2 * CROP, 2 * CROP, generator=gen, dtype=torch.float64)
    x[..., -2 * CROP:, -2 * CROP:] = _image.from_unit(corner, dtype).to("cuda")
    return x


def corner(t, n=KEEP):
    return t[..., -n:, -n:]


def check_corner(fn, x, *more):
    """``fn(x, *more)`` on the GPU against the float64 path on the far-corner crops."""
    y = fn(x, *more)
    assert y.shape == x.shape and y.dtype == x.dtype
    expected = fn(*(_image.to_unit(corner(t, CROP).cpu()) for t in (x, *more)))
    assert_matches(corner(y), corner(expected))


FILTERS = {
    "gaussian_blur": lambda x: imgfilters.gaussian_blur(x, 15, 3.0),
    "gaussian_blur, banded products": lambda x: imgfilters.gaussian_blur(x, 45, 6.0),
    "box_blur": lambda x: imgfilters.box_blur(x, 9, border="symmetric"),
    "separable_filter, 71 rows (the scratch path)": lambda x: imgfilters.separable_filter(
        x, [1 / 3] * 3, torch.linspace(0, 1, 71).tolist()),
    "unsharp_mask": lambda x: imgfilters.unsharp_mask(x, 1.5, 0.8),
    "filter2d": lambda x: imgfilters.filter2d(x, (torch.arange(35.0).reshape(5, 7) - 17) / 60),
    "bilateral radius 2": lambda x: imgfilters.bilateral(x, 0.1, 1.0, radius=2),
    "bilateral radius 4": lambda x: imgfilters.bilateral(x, 0.1, 2.0, radius=4),
    "bilateral radius 7": lambda x: imgfilters.bilateral(x, 0.1, 3.5, radius=7),
    "bilateral disk l1": lambda x: imgfilters.bilateral(x, 0.1, 2.0, radius=4, window="disk", color_distance="l1"),
    "nl_means": lambda x: imgfilters.nl_means(x, 0.05, sigma=0.02, patch_size=5, search_radius=6),
    "pointwise": lambda x: imgfilters.pointwise(x, [pw.gamma(2.2), pw.clamp(0.1, 0.9)]),
    "median_blur 15 x 15 (nibbles)": lambda x: imgfilters.median_blur(x, 15, border="replicate"),
}


@pytest.mark.parametrize("name", FILTERS)
def test_filters_past_2_31_elements(name, gen, one_slot):
    check_corner(FILTERS[name], large_image(gen))


def test_joint_bilateral_past_2_31_elements(gen, one_slot):
    x = large_image(gen)
    check_corner(lambda a, g: imgfilters.joint_bilateral(a, g, 0.1, 1.5, radius=3), x, x.flip(-2).flip(-1))


def test_guided_filter_past_2_31_elements(gen, all_slots):
    # the grey image guiding itself, on a quarter of the large image: its four stacked box
    # means (float32, 8.6 GB) pass 2**31 elements, where the coefficients kernel indexes in
    # int64; about 35 GB at the peak (all the slots)
    check_corner(lambda a: imgfilters.guided_filter(a, None, 2, 0.01), large_image(gen, side=SIDE // 2))


def test_jpeg_past_2_31_elements(gen, one_slot):
    from imgfilters.ops import jpeg
    from imgfilters.reference import jpeg as ref
    x = large_image(gen)
    y = jpeg.round_trip(x, 70)
    # blocks of 8 x 8 pixels: the crop starts on a block edge (SIDE % 16 == 0); float32
    # may round a value within TIE_MARGIN of a tie the other way (tests/test_jpeg.py)
    expected, ties = ref.round_trip(_image.to_unit(corner(x, CROP).cpu()), torch.tensor([70.0]), tie_margin=5e-4)
    keep = ~corner(ties.expand_as(expected))
    assert keep.double().mean() > 0.5
    assert_matches(corner(y).cpu()[keep], corner(expected)[keep], torch.uint8)


def test_joint_bilateral_upsample_past_2_31_elements(gen, one_slot):
    guide = large_image(gen)
    low = large_image(gen, side=SIDE // 4)
    y = imgfilters.joint_bilateral_upsample(low, guide, 0.1, 1.0, radius=2)
    assert y.shape == guide.shape
    # the far corner of a 4x upsampling reads the low-res image's far corner
    expected = imgfilters.joint_bilateral_upsample(_image.to_unit(corner(low, CROP // 4).cpu()),
                                                   _image.to_unit(corner(guide, CROP).cpu()), 0.1, 1.0, radius=2)
    assert_matches(corner(y), corner(expected))


# (the call, the side of the square input, the corner crop's side, the float64 path on the
# crop: an integer image's, clamped between the passes): sides and crops that keep the
# crop's outputs on the full image's output grid, one case per kernel
RESAMPLING = {
    "upsample x2 bicubic (phase kernel, output past 2**31)": (
        lambda x: imgfilters.upsample(x, 2, mode="bicubic"), SIDE // 2, CROP,
        lambda c: ref_resample.resize(c, (2 * CROP, 2 * CROP), "bicubic", False, scale=0.5, intermediate_clamp=True)),
    "upsample x1.5 bilinear (direct kernel, output past 2**31)": (
        lambda x: imgfilters.upsample(x, 1.5, mode="bilinear"), 30934, CROP,
        lambda c: ref_resample.resize(c, (144, 144), "bilinear", False, scale=1 / 1.5, intermediate_clamp=True)),
    "resize 1/2 antialiased (phase kernel)": (
        lambda x: imgfilters.resize(x, [x.shape[-2] // 2, x.shape[-1] // 2]), SIDE, CROP,
        lambda c: ref_resample.resize(c, (48, 48), "bilinear", True, intermediate_clamp=True)),
    "resize 7/8 lanczos (general kernel)": (
        lambda x: imgfilters.resize(x, [x.shape[-2] * 7 // 8, x.shape[-1] * 7 // 8], "lanczos"), SIDE, CROP,
        lambda c: ref_resample.resize(c, (84, 84), "lanczos", True, intermediate_clamp=True)),
    "resize 3/29 bicubic antialiased (two passes)": (
        lambda x: imgfilters.resize(x, [x.shape[-2] * 3 // 29, x.shape[-1] * 3 // 29], "bicubic"), SIDE, 232,
        lambda c: ref_resample.resize(c, (24, 24), "bicubic", True, intermediate_clamp=True)),
}


@pytest.mark.parametrize("name", RESAMPLING)
def test_resampling_past_2_31_elements(name, gen, one_slot):
    call, side, crop, reference = RESAMPLING[name]
    x = large_image(gen, side=side)
    y = call(x)
    assert max(x.numel(), y.numel()) > 2 ** 31
    # the same factor on the corner crop: its far corner is the image's
    expected = reference(_image.to_unit(corner(x, crop).cpu()))
    n = expected.shape[-1] // 2  # (every kernel here reaches less than half the crop)
    assert_matches(corner(y, n), corner(expected, n))


def test_estimate_noise_past_2_31_elements(one_slot):
    # Gaussian noise of sigma 10 levels on mid grey everywhere: the estimate reads its
    # patches across the whole image, the far corner too
    x = torch.empty(1, 1, SIDE, SIDE, dtype=torch.uint8, device="cuda")
    for r in range(0, SIDE, 4096):
        noise = torch.randn(1, 1, min(4096, SIDE - r), SIDE, device="cuda") * 10 + 128
        x[..., r:r + 4096, :] = noise.round().clamp(0, 255).to(torch.uint8)
    sigma = float(imgfilters.estimate_noise(x)) * 255
    assert abs(sigma - 10) <= 0.2, sigma


DERIVATIVES = {
    "sobel 5x5": lambda x: imgfilters.sobel(x, 1, 1, ksize=5),
    "laplacian": lambda x: imgfilters.laplacian(x, 3),
    "gradient_magnitude and direction": lambda x: imgfilters.gradient_magnitude(x, direction=True),
}


@pytest.mark.parametrize("name", DERIVATIVES)
def test_derivatives_past_2_31_elements(name, gen, all_slots):
    # float32 results of a uint8 image (8.6 GB each: all the slots)
    fn = DERIVATIVES[name]
    x = large_image(gen)
    got, expected = fn(x), fn(_image.to_unit(corner(x, CROP).cpu()))
    got, expected = (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
    assert_matches(corner(got[0]), corner(expected[0]))
    if len(got) > 1:  # the direction: angles compared around the circle
        d = (corner(got[1]).double().cpu() - corner(expected[1])).abs()
        assert float(torch.minimum(d, 2 * math.pi - d).max()) < 1e-4
    del got


GRADIENTS = {
    "gaussian_blur": lambda x: imgfilters.gaussian_blur(x, 9, 2.0),
    "bilateral": lambda x: imgfilters.bilateral(x, 0.2, 1.0, radius=2),
    "upsample": lambda x: imgfilters.upsample(x, 2, mode="bilinear"),
}


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradients_past_2_31_elements(name, gen, all_slots):
    fn = GRADIENTS[name]
    side = SIDE // 2 if name == "upsample" else SIDE  # (the gradient of the output past 2**31)
    x = large_image(gen, torch.float32, side).requires_grad_()
    y = fn(x)
    g = torch.zeros_like(y)
    n = 2 * KEEP if name == "upsample" else KEEP
    g[..., -n:, -n:] = torch.rand(1, 1, n, n, generator=gen).to(g)
    (got,) = torch.autograd.grad(y, x, g)
    # the float64 path's gradient on the corner crop, the same gradient on its corner
    crop = _image.to_unit(corner(x.detach(), CROP).cpu()).requires_grad_()
    yc = fn(crop)
    gc = torch.zeros_like(yc)
    gc[..., -n:, -n:] = g[..., -n:, -n:].double().cpu()
    (expected,) = torch.autograd.grad(yc, crop, gc)
    inner = KEEP // 2  # (the crop's own cut edges fold their border back onto its first pixels)
    assert_gradient_matches(corner(got, inner), corner(expected, inner))
