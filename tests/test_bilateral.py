"""Bilateral family: the float64 reference against its peers (kornia, OpenCV)."""

import random

import cv2
import numpy as np
import pytest
import torch
import triton

from imgfilters.reference import bilateral as ref

from helpers import SAMPLE_NAMES, gpu, sample


def unit(t):
    return t.to(torch.float64)[None] / 255


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_reference_equals_kornia_bilateral_blur(name):
    kornia = pytest.importorskip("kornia")
    x = unit(sample(name))[..., :64, :80]
    for radius, sc, ss in [(2, 0.1, 1.5), (4, 0.05, 3.0)]:
        ours = ref.bilateral(x, x, sc, ss, radius, "square", "l1", "reflect")
        k = 2 * radius + 1
        theirs = kornia.filters.bilateral_blur(x, (k, k), sc, (ss, ss), "reflect", "l1")
        assert (ours - theirs).abs().max() <= 1e-5


def test_reference_equals_kornia_joint_bilateral_blur_l2(gen):
    kornia = pytest.importorskip("kornia")
    x = torch.rand(2, 3, 30, 41, generator=gen, dtype=torch.float64)
    guide = torch.rand(2, 1, 30, 41, generator=gen, dtype=torch.float64)
    ours = ref.bilateral(x, guide, 0.2, 2.0, 3, "square", "l2", "reflect")
    theirs = kornia.filters.joint_bilateral_blur(x, guide, (7, 7), 0.2, (2.0, 2.0), "reflect", "l2")
    assert (ours - theirs).abs().max() <= 1e-5


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_reference_disk_l1_equals_opencv_on_uint8(name):
    img = sample(name)
    hwc = img.permute(1, 2, 0).numpy().copy()
    for d, sigma_color_cv, sigma_space in [(5, 25.0, 2.0), (9, 40.0, 3.0)]:
        cv = cv2.bilateralFilter(hwc, d, sigma_color_cv, sigma_space, borderType=cv2.BORDER_REFLECT_101)
        ours = ref.bilateral(unit(img), unit(img), sigma_color_cv / 255, sigma_space, d // 2, "disk", "l1")
        ours = (ours[0] * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
        assert np.abs(ours.astype(int) - cv.reshape(ours.shape).astype(int)).max() <= 1


def test_reference_per_image_sigmas_equal_separate_calls(gen):
    x = torch.rand(3, 2, 17, 19, generator=gen, dtype=torch.float64)
    sc = torch.tensor([0.05, 0.1, 0.3], dtype=torch.float64)
    ss = torch.tensor([1.0, 2.0, 0.7], dtype=torch.float64)
    both = ref.bilateral(x, x, sc, ss, 3)
    for b in range(3):
        one = ref.bilateral(x[b:b + 1], x[b:b + 1], float(sc[b]), float(ss[b]), 3)
        assert torch.allclose(both[b:b + 1], one)


def test_reference_gradcheck_image_and_guide(gen):
    x = torch.rand(1, 2, 6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.rand(1, 1, 6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ref.bilateral(a, b, 0.3, 1.5, 2, "disk", "l2", "symmetric"), (x, g))


# ---- kernels vs reference ------------------------------------------------------------------

import imgfilters  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402
from imgfilters import _image  # noqa: E402
from imgfilters.kernels.core.borders import BORDERS  # noqa: E402

from helpers import KERNEL_DTYPES, assert_gradient_matches, assert_matches, random_image  # noqa: E402


def reference(x, guide, sc, ss, radius, window="square", dist="l2", border="reflect", value=0.0):
    x4 = _image.as_planes(x.cpu())
    g4 = x4 if guide is None else _image.as_planes(guide.cpu())
    y = ref.bilateral(_image.to_unit(x4), _image.to_unit(g4).expand(x4.shape[0], -1, -1, -1), sc, ss, radius,
                      window, dist, border, value)
    return y.reshape(x.shape)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("window,dist", [("square", "l2"), ("disk", "l1")])
def test_every_dtype(dtype, window, dist, gen, device):
    # (the default radius, ceil(2 * 0.9) = 2, on 5 rows, the middle one's window meeting
    # neither border: the interpreter's cost grows with the taps and the rows, neither of
    # which the dtype changes)
    x = random_image((1, 3, 5, 41), dtype, gen, device)
    y = imgfilters.bilateral(x, 0.15, 0.9, window=window, color_distance=dist)
    assert_matches(y, reference(x, None, 0.15, 0.9, 2, window, dist))


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("window,dist", [("square", "l1"), ("disk", "l2")])
def test_every_border(border, window, dist, gen, device):
    x = random_image((1, 2, 7, 31), torch.float32, gen, device)  # (7 rows: the middle row meets neither border)
    y = imgfilters.bilateral(x, 0.2, 2.0, radius=3, window=window, color_distance=dist, border=border,
                             border_value=0.4)
    assert_matches(y, reference(x, None, 0.2, 2.0, 3, window, dist, border, 0.4))


@pytest.mark.parametrize("shape,radius", [((1, 1), 2), ((3, 1, 1), 0), ((2, 5, 7), 6), ((4, 3, 9), 1),
                                          ((2, 2, 1, 6, 5), 2)])
def test_odd_shapes_and_radius_larger_than_the_image(shape, radius, gen, device):
    x = random_image(shape, torch.float32, gen, device)
    y = imgfilters.bilateral(x, 0.3, 1.0, radius=radius)
    assert_matches(y, reference(x, None, 0.3, 1.0, radius))


def test_joint_with_shared_guide_and_per_image_sigmas(gen, device):
    x = random_image((3, 3, 9, 26), torch.uint8, gen, device)  # (9 rows: the interpreter's cost grows with them)
    guide = random_image((1, 1, 9, 26), torch.float16, gen, device)
    sc = torch.tensor([0.05, 0.1, 0.4])
    ss = torch.tensor([1.0, 1.5, 0.8])
    y = imgfilters.joint_bilateral(x, guide, sc, ss, radius=3, color_distance="l1")
    assert_matches(y, reference(x, guide, sc, ss, 3, "square", "l1"))


def test_joint_with_many_guide_channels(gen, device):
    x = random_image((2, 1, 9, 22), torch.float32, gen, device)  # (9 rows: the interpreter's cost grows with them)
    guide = random_image((2, 5, 9, 22), torch.float32, gen, device)
    y = imgfilters.joint_bilateral(x, guide, 0.3, 1.5, window="disk")
    assert_matches(y, reference(x, guide, 0.3, 1.5, 3, "disk"))


def test_channels_last_and_views(gen, device):
    # (12 x 20 and a 7 x 9 view of it: their middle rows' radius-2 windows meet neither
    # border; the interpreter's time grows with the rows)
    x = random_image((2, 3, 12, 20), torch.float32, gen, device).to(memory_format=torch.channels_last)
    y = imgfilters.bilateral(x, 0.1, 1.0)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert_matches(y, reference(x, None, 0.1, 1.0, 2))
    view = x[:, :, 3:10, 1:19:2]
    assert_matches(imgfilters.bilateral(view, 0.1, 1.0), reference(view, None, 0.1, 1.0, 2))


def test_input_is_not_modified(gen, device):
    x = random_image((1, 3, 8, 8), torch.uint8, gen, device)  # (the default radius 3 still under its size)
    before = x.clone()
    imgfilters.bilateral(x)
    assert torch.equal(x, before)


@settings(max_examples=10, deadline=None)
@given(h=st.integers(1, 24), w=st.integers(1, 40), c=st.integers(1, 4), radius=st.integers(0, 4),
       window=st.sampled_from(["square", "disk"]), dist=st.sampled_from(["l1", "l2"]),
       border=st.sampled_from(BORDERS), sc=st.floats(0.02, 1.0), seed=st.integers(0, 2 ** 31))
def test_hypothesis_sweep(h, w, c, radius, window, dist, border, sc, seed):
    from conftest import DEVICE
    gen = torch.Generator().manual_seed(seed)
    x = random_image((1, c, h, w), torch.float32, gen, DEVICE)
    y = imgfilters.bilateral(x, sc, 1.3, radius=radius, window=window, color_distance=dist, border=border,
                             border_value=0.2)
    assert_matches(y, reference(x, None, sc, 1.3, radius, window, dist, border, 0.2))


def test_float64_and_cpu_tensors_are_differentiable_through_the_reference(gen):
    x = torch.rand(1, 2, 8, 9, generator=gen, dtype=torch.float64, requires_grad=True)
    imgfilters.bilateral(x, 0.2, 1.0).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


# Each border once, the two window and distance pairs in turn (border, window and distance
# are separate branches of the kernels); 7 rows, enough that a radius-2 window of a row in
# the middle meets neither border (the interpreter's cost grows with the rows).
BACKWARD_CASES = [("reflect", "square", "l2"), ("symmetric", "disk", "l1"), ("replicate", "square", "l2"),
                  ("constant", "disk", "l1")]
assert {border for border, _, _ in BACKWARD_CASES} == set(BORDERS)


@pytest.mark.parametrize("border,window,dist", BACKWARD_CASES)
def test_kernel_backward_matches_reference(border, window, dist, gen, device):
    # two images with their own sigma_color in the first case, one in the others (an image's
    # offsets and coefficients do not depend on the border; the interpreter's cost is per image)
    sc = torch.tensor([0.2, 0.5] if border == BACKWARD_CASES[0][0] else [0.5])
    x = random_image((len(sc), 3, 7, 17), torch.float32, gen, device).requires_grad_()
    y = imgfilters.bilateral(x, sc, 1.5, radius=2, window=window, color_distance=dist, border=border,
                             border_value=0.3)
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, x, g)
    xd = x.detach().cpu().double().requires_grad_()
    yr = ref.bilateral(xd, xd, sc.double(), 1.5, 2, window, dist, border, 0.3)
    (gr,) = torch.autograd.grad(yr, xd, g.cpu().double())
    assert_gradient_matches(gx, gr)


@pytest.mark.parametrize("dist", ["l1", "l2"])
def test_joint_backward_with_shared_guide(dist, gen, device):
    # two images share the guide: its gradient sums theirs
    x = random_image((2, 2, 7, 14), torch.float32, gen, device).requires_grad_()
    guide = random_image((1, 3, 7, 14), torch.float32, gen, device).requires_grad_()
    y = imgfilters.joint_bilateral(x, guide, 0.3, 1.2, radius=2, window="disk", color_distance=dist)
    g = torch.randn(y.shape, generator=gen).to(device)
    gx, gg = torch.autograd.grad(y, [x, guide], g)
    xd = x.detach().cpu().double().requires_grad_()
    gd = guide.detach().cpu().double().requires_grad_()
    yr = ref.bilateral(xd, gd.expand(2, -1, -1, -1), 0.3, 1.2, 2, "disk", dist)
    rx, rg = torch.autograd.grad(yr, [xd, gd], g.cpu().double())
    assert gg.shape == guide.shape
    assert_gradient_matches(gx, rx)
    assert_gradient_matches(gg, rg)


def test_gradient_only_for_the_guide(gen, device):
    x = random_image((1, 1, 9, 9), torch.float32, gen, device)
    guide = random_image((1, 1, 9, 9), torch.float16, gen, device).requires_grad_()
    (gg,) = torch.autograd.grad(imgfilters.joint_bilateral(x, guide, 0.2).sum(), guide)
    assert gg.dtype == torch.float16 and torch.isfinite(gg).all() and gg.abs().sum() > 0


def gradients_with_tile(monkeypatch, tile, x, guide, sigma_color, radius, window, dist, border, value=0.0):
    """The image's (and the guide's) gradient through the public op, the backward kernel
    forced to ``tile``, and the float64 reference's, for the same random output gradient."""
    import functools
    from imgfilters.kernels import bilateral as kb
    inputs = [x.requires_grad_()] + ([] if guide is None else [guide.requires_grad_()])
    args = (sigma_color, 1.5)
    options = dict(radius=radius, window=window, color_distance=dist, border=border, border_value=value)
    y = imgfilters.bilateral(x, *args, **options) if guide is None else imgfilters.joint_bilateral(x, guide, *args,
                                                                                                   **options)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(5)).to(x.device)
    with monkeypatch.context() as m:
        m.setattr(kb, "launch_backward", functools.partial(kb.launch_backward, tile=tile))
        ours = torch.autograd.grad(y, inputs, g)
    doubles = [t.detach().cpu().double().requires_grad_() for t in inputs]
    yr = ref.bilateral(doubles[0], doubles[-1].expand(x.shape[0], -1, -1, -1), sigma_color, 1.5, radius, window,
                       dist, border, value)
    return ours, torch.autograd.grad(yr, doubles, g.cpu().double())


def test_backward_both_variants_over_several_strips(gen, device, monkeypatch):
    # the interpreter's default is one strip per image: small tiles here, so that several
    # programs fold their border positions into the same pixels (6 x 9 pixels, 10 x 13 with
    # the radius-2 margins: 2 x 2 programs of 5 rows, 4 x 2 of 3, the last blocks partial; the
    # interpreter's time grows with the programs)
    x = random_image((1, 2, 6, 9), torch.float32, gen, device)
    guide = random_image((1, 3, 6, 9), torch.float32, gen, device)
    for tile, g, window, dist, border in [(dict(SLIDE=True, K=5, BW=8, num_warps=1), None, "square", "l2", "reflect"),
                                          (dict(SLIDE=False, K=3, BW=8, num_warps=1), guide, "disk", "l1",
                                           "symmetric")]:
        ours, expected = gradients_with_tile(monkeypatch, tile, x.clone(), None if g is None else g.clone(), 0.3, 2,
                                             window, dist, border)
        for got, want in zip(ours, expected):
            assert_gradient_matches(got, want)


# (radius, joint, window, colour distance): each backward tile on a photo of its own, so
# that the suite's workers compile each variant once (every photo is one of them)
BACKWARD_CASES = [(2, False, "square", "l2"), (4, False, "disk", "l1"), (7, False, "square", "l2"),
                  (3, True, "square", "l2")]


@gpu
@pytest.mark.parametrize("case", range(len(BACKWARD_CASES)))
def test_backward_tiles_match_the_reference_on_photos(case, monkeypatch):
    from imgfilters.kernels import bilateral as kb
    radius, joint, window, dist = BACKWARD_CASES[case]
    name = SAMPLE_NAMES[case % len(SAMPLE_NAMES)]
    x = _image.to_unit(sample(name)[None].cuda()[..., :96, :150]).float()  # partial strips and tiles
    g = x.mean(1, keepdim=True) if joint else None
    tile = kb.plan.backward_tile(3, 1 if joint else 3, radius, joint)
    ours, expected = gradients_with_tile(monkeypatch, tile, x.clone(), None if g is None else g.clone(), 0.1,
                                         radius, window, dist, "reflect")
    for got, want in zip(ours, expected):
        assert_gradient_matches(got, want)


@gpu
def test_tuned_backward_of_half_images_matches_the_reference(gen, monkeypatch):
    # the backward's first pass rewrites its buffer in place: it must not be tuned (timed
    # over and over), which float16 images would do, their buffer's dtype being new
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    x = random_image((1, 3, 64, 80), torch.float16, gen, "cuda").requires_grad_()
    y = imgfilters.bilateral(x, 0.1, 1.5, radius=3)
    g = torch.randn(y.shape, generator=gen).to("cuda", torch.float16)
    (gx,) = torch.autograd.grad(y, x, g)
    xd = x.detach().cpu().double().requires_grad_()
    (gr,) = torch.autograd.grad(ref.bilateral(xd, xd, 0.1, 1.5, 3), xd, g.cpu().double())
    assert (gx.cpu().double() - gr).abs().max() <= 2e-3 * gr.abs().max()  # (float16 gradients)


@pytest.mark.parametrize("call,error,match", [
    (lambda x: imgfilters.bilateral(x, 0.0), ValueError, "sigma_color"),
    (lambda x: imgfilters.bilateral(x, float("nan")), ValueError, "sigma_color"),
    (lambda x: imgfilters.bilateral(x, 0.1, -1.0), ValueError, "sigma_space"),
    (lambda x: imgfilters.bilateral(x, torch.tensor([0.1, 0.2, 0.3])), ValueError, "sigma_color"),
    (lambda x: imgfilters.bilateral(x, radius=2.5), ValueError, "radius"),
    (lambda x: imgfilters.bilateral(x, radius=33), ValueError, "radius"),
    (lambda x: imgfilters.bilateral(x, window="circle"), ValueError, "window"),
    (lambda x: imgfilters.bilateral(x, color_distance="l3"), ValueError, "color_distance"),
    (lambda x: imgfilters.bilateral(x, border="wrap"), ValueError, "border"),
    (lambda x: imgfilters.bilateral(torch.rand(1, 17, 4, 4)), ValueError, "channels"),
    (lambda x: imgfilters.joint_bilateral(x, torch.rand(2, 1, 8, 9)), ValueError, "guide"),
    (lambda x: imgfilters.joint_bilateral(x, torch.rand(3, 1, 8, 8)), ValueError, "guide"),
    (lambda x: imgfilters.joint_bilateral(x, "guide"), TypeError, "guide"),
    (lambda x: imgfilters.joint_bilateral(x, None), TypeError, "guide"),  # not a bilateral filter in disguise
])
def test_bad_arguments_raise_before_launch(call, error, match):
    x = torch.rand(2, 3, 8, 8)
    with pytest.raises(error, match=match):
        call(x)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_full_hd_matches_reference_on_gpu(dtype, gen, monkeypatch):
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    x = random_image((1, 3, 540, 960), dtype, gen, "cuda")
    y = imgfilters.bilateral(x, 0.1, 2.0, radius=4)
    x4 = _image.to_unit(x)
    assert_matches(y, ref.bilateral(x4, x4, 0.1, 2.0, 4))


def launch_tile(x, tile, sigma_color, sigma_space, radius, window, dist, border="reflect", value=0.0):
    """The forward kernel with a given tile (a dict of SLIDE, K, BW, num_warps), EXPANDED
    where ``kb.expands`` allows, as a public call."""
    from imgfilters.kernels import bilateral as kb
    peak = lambda s: kb.LOG2E.value / (2 * s * s)  # noqa: E731
    coeff = lambda s: torch.full((x.shape[0],), -peak(s), device=x.device)  # noqa: E731
    config = triton.Config({k: v for k, v in tile.items() if k != "num_warps"}, num_warps=tile["num_warps"])
    y = torch.empty_like(x)
    kb.launch(x, x, y, coeff(sigma_color), coeff(sigma_space), radius, window == "disk", dist == "l1", False,
              BORDERS.index(border), value, tile=config, color_peak=peak(sigma_color))
    return y


def record_plans(monkeypatch):
    """The forward plans of the launches from here on, each derived anew rather than
    memoised (a test may patch the constants that plans are derived from)."""
    from imgfilters.kernels import bilateral as kb
    plans, derive = [], kb.forward_plan.__wrapped__
    monkeypatch.setattr(kb.plan, "forward_plan", lambda *a: plans.append(derive(*a)) or plans[-1])
    return plans


def test_strips_fill_whole_waves():
    # the strip length of the launches whose tile is not timed: their programs run in
    # waves of what the device holds at once, each about as long as its strip's rows and
    # the window's; the fewest such rows in all, for multiples of STRIP_QUANTUM up to
    # STRIP_ROWS_MAX
    from imgfilters.kernels import bilateral as kb
    from imgfilters.kernels.core.tiling import cdiv
    q = kb.tiles.STRIP_QUANTUM
    cost = lambda H, R, lanes, resident, k: cdiv(lanes * cdiv(H, k), resident) * (k + 2 * R + 1)  # noqa: E731
    rng = random.Random(0)
    cases = [(2160, 7, 30, 396), (1080, 4, 240, 528), (64, 2, 1, 396), (10, 3, 1, 1), (1080, 0, 15000, 528)] + [
        (rng.randint(1, 3000), rng.randint(0, 12), rng.randint(1, 400), rng.randint(1, 600)) for _ in range(100)]
    for H, R, lanes, resident in cases:
        best, k = kb.plan._strip_rows(H, R, lanes, resident)
        top = min(kb.tiles.STRIP_ROWS_MAX, cdiv(H, q) * q)
        assert k % q == 0 and q <= k <= top and best == cost(H, R, lanes, resident, k)
        assert all(best <= cost(H, R, lanes, resident, j) for j in range(q, top + 1, q))
    # 4K at 15 x 15 uint8 (three programs an SM on 132 SMs, 30 column strips): one wave of
    # 13 strips of 168 rows, not 1.3 waves of 17 strips of 128; where the device holds
    # one program at a time, the whole image in one strip
    assert kb.plan._strip_rows(2160, 7, 30, 396)[1] == 168 and kb.plan._strip_rows(100, 3, 4, 1)[1] == 104


def test_forward_tiles_follow_the_radius_and_the_guide():
    # radius up to 2: both unrolled tiles are timed; radius 3 takes one by the image's size,
    # radius 4 one without timing (a new variant's first call compiles each), only the
    # narrow one a candidate with a guide (its vectors would take the wide one to one
    # program an SM); wider windows the run-time column loop's tiles (one where a step
    # takes three offsets; a disk's bands one of their own), and rows where 2R + 1 slots
    # would not fit
    from imgfilters.kernels import bilateral as kb
    from imgfilters.kernels.core.tiling import size_class
    tiles = lambda R, joint=False, C=3, CG=3, hw=(1080, 1920), disk=False: [  # noqa: E731
        dict(c.kwargs, num_warps=c.num_warps, **({} if c.maxnreg is None else dict(maxnreg=c.maxnreg)))
        for c in kb.forward_tiles(dict(
            R=R, C=C, CG=CG, JOINT=joint, UNROLL_DX=kb.unrolls_columns(R), DX_GROUP=kb.column_group(R),
            SIZE_CLASS=size_class(*hw), BANDS=kb.window_bands(R, disk)))]
    assert tiles(1) == tiles(2) == kb.tiles.UNROLLED_TILES
    for joint in (False, True):
        assert tiles(3, joint) == tiles(3, joint, hw=(720, 1280)) == kb.tiles.UNROLLED_TILES[1:]
        assert tiles(3, joint, hw=(2160, 3840)) == tiles(3, joint, hw=(4320, 7680)) == kb.tiles.UNROLLED_TILES[:1]
    assert tiles(4) == kb.tiles.UNROLLED_TILES and tiles(4, joint=True) == kb.tiles.UNROLLED_TILES[1:]
    assert tiles(5) == tiles(6) == kb.tiles.SLIDE_TILES and tiles(7) == kb.tiles.GROUPED_TILES
    assert tiles(4, disk=True) == kb.tiles.UNROLLED_TILES
    assert tiles(5, disk=True) == tiles(7, disk=True) == kb.tiles.BANDED_TILES
    # radius 4 and the grouped column loop: the first candidate, its strips' length to be
    # chosen (radius 4 without a guide reads its columns INSIDE, where the 4-warp tile
    # stalled)
    single = lambda R=4, joint=False, disk=False: kb.plan._single_tile(dict(  # noqa: E731
        R=R, C=3, CG=3, JOINT=joint, UNROLL_DX=kb.unrolls_columns(R), DX_GROUP=kb.column_group(R),
        BANDS=kb.window_bands(R, disk)))
    as_dict = lambda c: dict(c.kwargs, num_warps=c.num_warps)  # noqa: E731
    assert as_dict(single()) == kb.tiles.UNROLLED_TILES[0] and as_dict(single(joint=True)) == kb.tiles.UNROLLED_TILES[1]
    assert as_dict(single(R=7)) == kb.tiles.GROUPED_TILES[0] and single(R=3) is None and single(R=5) is None
    assert single(R=5, disk=True).maxnreg == kb.tiles.BANDED_REGISTERS
    # ... filling the device's waves: 4K on an H200 (132 SMs) in one wave of 168-row
    # strips at 15 x 15 and at 9 x 9 with a guide (three programs an SM), of 128 at 9 x 9
    # (two of 8 warps); 16 x 1080p at 9 x 9 in three waves of 184 (6 strips of 8 columns)
    meta = lambda R, joint=False: dict(R=R, JOINT=joint, UNROLL_DX=kb.unrolls_columns(R), BANDS=())  # noqa: E731
    wave = lambda B, H, W, R, joint=False: kb.plan._filling_waves(  # noqa: E731
        single(R, joint), meta(R, joint), B, H, W, 132).kwargs["K"]
    assert wave(1, 2160, 3840, 7) == 168 and wave(1, 2160, 3840, 4, joint=True) == 168
    assert wave(1, 2160, 3840, 4) == 128 and wave(16, 1080, 1920, 4) == 184
    # ... and the edge columns' programs: the last wave's idle slots (9 of 264 on 4K), at
    # least enough for EDGE_BLOCKS blocks of lanes each (34 for 16 x 1080p, 24 idle)
    edges = lambda B, H, W, R=4: kb.plan._edge_programs(  # noqa: E731
        kb.plan._filling_waves(single(R), meta(R), B, H, W, 132), B, H, W, R,
        kb.plan._resident(single(R), meta(R), 132))
    assert edges(1, 2160, 3840) == 9 and edges(16, 1080, 1920) == 34
    assert all(not t["SLIDE"] for t in tiles(12))


def test_inside_columns_over_several_strips_and_blocks(gen, device, monkeypatch):
    # radius 4 without a guide reads its columns INSIDE (each thread's clamped R from the
    # image's edges), the R columns at each edge stored by programs of their own. Here radii
    # 1 and 2 take it too (the interpreter's time grows with the taps), through both unrolled
    # loops (rows loaded one step ahead or not), with partial strips and column blocks, the
    # right edge's columns in two blocks (radius 2), a second image, every border, edge
    # programs of one block of lanes each, and the backward. 6 x 9 pixels: strips of 4 rows
    # and 2, blocks of 8 columns and 1 (the interpreter's time grows with the programs and
    # their rows), columns 7 and 8 the right edge's at radius 2
    from imgfilters.kernels import bilateral as kb
    meta = dict(R=4, C=2, CG=2, JOINT=False, UNROLL_DX=True, NEAR=True)
    assert kb.reads_inside(meta) and not kb.reads_inside(dict(meta, NEAR=False))
    assert not kb.reads_inside(dict(meta, JOINT=True)) and not kb.reads_inside(dict(meta, R=3))
    tile = dict(SLIDE=True, K=4, BW=8, num_warps=1)
    assert kb.plan._edge_programs(triton.Config(tile), 2, 11, 17, 4, 0) == 2
    monkeypatch.setattr(kb.tiles, "UNROLLED_TUNED_RADIUS", 0)
    monkeypatch.setattr(kb.tiles, "EDGE_BLOCKS", 1)
    plans = record_plans(monkeypatch)
    inside = lambda: sum(p.meta["INSIDE"] for p in plans)  # noqa: E731
    x = random_image((2, 1, 6, 9), torch.float32, gen, device)
    for image, radius, ahead, window, dist, border in [(x, 1, True, "square", "l2", "reflect"),
                                                       (x, 2, False, "disk", "l1", "constant"),
                                                       (x[1:], 2, True, "square", "l2", "symmetric"),
                                                       (x[:1], 1, False, "square", "l1", "replicate")]:
        monkeypatch.setattr(kb.tiles, "PREFETCH_RADIUS", 2 if ahead else 0)
        assert kb.prefetches(radius) == ahead
        y = launch_tile(image, tile, 0.2, 1.5, radius, window, dist, border, 0.3)
        assert_matches(y, reference(image, None, 0.2, 1.5, radius, window, dist, border, 0.3))
    assert inside() == 4
    # ... and the backward's first pass (ADJOINT), whose terms the edge programs store too
    xg = x.clone().requires_grad_()
    sc = torch.tensor([0.2, 0.5])
    y = imgfilters.bilateral(xg, sc, 1.5, radius=2, border="symmetric")
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, xg, g)
    xd = x.detach().cpu().double().requires_grad_()
    (gr,) = torch.autograd.grad(ref.bilateral(xd, xd, sc.double(), 1.5, 2, "square", "l2", "symmetric"), xd,
                                g.cpu().double())
    assert_gradient_matches(gx, gr)
    assert inside() == 6  # (the forward, then the backward's first pass)


def test_expanded_distances_only_where_they_stay_exact():
    # |g|^2 + |c|^2 - 2 g.c loses float32 bits as |g|^2 grows: uint8 guides (one level of
    # tolerance, values in [0, 1]), l2, SLIDE with a column loop of three offsets a step
    # (radius 7 among radii 5 to 8 for RGB), sigma_color not too small, no prologue on the
    # image that guides itself, a constant border inside [0, 1]
    from imgfilters.kernels import bilateral as kb
    peak = lambda s: kb.LOG2E.value / (2 * s * s)  # noqa: E731

    def expands(dtype=torch.uint8, R=7, L1=False, C=3, CG=3, JOINT=False, ADJOINT=False, BORDER=0, pro=(),
                sigma=0.1, value=0.0):
        meta = dict(R=R, L1=L1, C=C, CG=CG, JOINT=JOINT, ADJOINT=ADJOINT, BORDER=BORDER)
        return kb.expands(dtype, meta, bool(pro), kb.peak_fits(CG, peak(sigma)), 0.0 <= value <= 1.0)

    assert expands() and expands(JOINT=True, CG=1) and expands(BORDER=3, value=1.0)
    assert expands(JOINT=True, pro=("a step",))  # (a joint filter's prologue is the image's, not the guide's)
    assert not expands(R=4) and not expands(R=5) and not expands(R=8) and not expands(L1=True)
    assert not expands(ADJOINT=True)
    assert not expands(dtype=torch.float32) and not expands(dtype=torch.uint16) and not expands(pro=("a step",))
    assert not expands(R=13)  # (rows, not SLIDE)
    assert expands(R=13, C=1, CG=1) and not expands(R=16, C=1, CG=1)  # (33 slots of 4 vectors: over SLIDE_VECTORS)
    assert not expands(BORDER=3, value=1.5)
    assert expands(sigma=0.03) and not expands(sigma=0.02)
    assert expands(JOINT=True, CG=2, sigma=0.019) and not expands(JOINT=True, CG=2, sigma=0.018)  # (CG * -COLOR)
    assert not kb.peak_fits(3, None)  # (no peak given: not known to fit)


def test_expanded_distances_match_the_reference(gen, device, monkeypatch):
    # a float image under a uint8 guide shows the weights' error before any rounding to levels;
    # 3 rows (a radius-7 window meets both borders from any row short of 15; the interpreter's
    # time grows with the rows), 24 columns (the middle ones' windows meet neither border)
    plans = record_plans(monkeypatch)
    taken = lambda: [p.meta["EXPANDED"] for p in plans]  # noqa: E731
    x = random_image((2, 2, 3, 24), torch.float32, gen, device)
    guide = random_image((2, 3, 3, 24), torch.uint8, gen, device)
    sc = torch.tensor([0.05, 0.2])
    y = imgfilters.joint_bilateral(x, guide, sc, 1.5, radius=7, border="constant", border_value=0.6)
    assert taken() == [True]
    assert_matches(y, reference(x, guide, sc, 1.5, 7, "square", "l2", "constant", 0.6))
    x = random_image((1, 3, 3, 24), torch.uint8, gen, device)
    y = imgfilters.bilateral(x, 0.1, 2.0, radius=7, window="disk")
    assert taken() == [True, True]
    assert_matches(y, reference(x, None, 0.1, 2.0, 7, "disk"))


def test_both_variants_over_several_strips_and_segments(gen, device, monkeypatch):
    # the interpreter's default is one strip per image: small tiles here, with partial ones;
    # the column offsets unrolled, and (UNROLLED_TAPS 0) a run-time loop, which wider
    # windows take, one offset a step and (radius 1: 3 offsets) three (radius 2 at most
    # here: the interpreter's time grows with the taps). 8 x 11 pixels: strips of 5 rows
    # and 3 (K = 3: 3, 3, 2), blocks of 8 columns and 3, middle rows whose radius-2 window
    # meets neither border (the interpreter's time grows with the programs and their rows)
    from imgfilters.kernels import bilateral as kb
    x = random_image((2, 2, 8, 11), torch.float32, gen, device)
    record_plans(monkeypatch)
    for tile, unrolled_taps, image, radius, window, dist, border in [
            (dict(SLIDE=True, K=5, BW=8, num_warps=1), kb.tiles.UNROLLED_TAPS, x, 2, "square", "l2", "reflect"),
            (dict(SLIDE=True, K=5, BW=8, num_warps=1), 0, x[1:, :1], 2, "disk", "l1", "reflect"),
            (dict(SLIDE=True, K=5, BW=8, num_warps=1), 0, x, 1, "square", "l2", "constant"),
            (dict(SLIDE=False, K=3, BW=8, num_warps=1), kb.tiles.UNROLLED_TAPS, x, 2, "disk", "l1", "constant")]:
        monkeypatch.setattr(kb.tiles, "UNROLLED_TAPS", unrolled_taps)
        assert kb.column_group(radius) == (3 if radius == 1 and unrolled_taps == 0 else 1)
        y = launch_tile(image, tile, 0.2, 1.5, radius, window, dist, border, 0.3)
        assert_matches(y, reference(image, None, 0.2, 1.5, radius, window, dist, border, 0.3))


def _forward_tiles():
    from imgfilters.kernels import bilateral as kb
    return kb.tiles.SLIDE_TILES + kb.tiles.UNROLLED_TILES + kb.tiles.ROW_TILES


@gpu
@pytest.mark.parametrize("tile", range(len(_forward_tiles())))
def test_every_tile_and_both_variants_match_the_reference_on_photos(tile):
    # each tile on a photo of its own (every photo is one of them), so that the suite's
    # workers compile each variant once
    name = SAMPLE_NAMES[tile % len(SAMPLE_NAMES)]
    tile = _forward_tiles()[tile]
    x = sample(name)[None].cuda()[..., :150, :270]  # odd sizes: partial strips and tiles
    x4 = _image.to_unit(x)
    # rows for any window; slide where its slots fit, its column offsets unrolled up to
    # radius 4 (UNROLLED_TAPS) and a run-time loop beyond
    # (uint8 photos: the l2 windows with a run-time column loop take EXPANDED)
    for radius, window, dist in [(2, "square", "l2"), (4, "disk", "l1"), (7, "disk", "l1"),
                                 (7, "square", "l2")] + ([] if tile["SLIDE"] else [(12, "square", "l2")]):
        y = launch_tile(x, tile, 0.1, 2.0, radius, window, dist)
        assert_matches(y, ref.bilateral(x4, x4, 0.1, 2.0, radius, window, dist))


# ---- joint bilateral upsampling --------------------------------------------------------------

def test_reference_upsample_at_scale_one_is_the_joint_filter(gen):
    low = torch.rand(2, 3, 14, 19, generator=gen, dtype=torch.float64)
    guide = torch.rand(2, 1, 14, 19, generator=gen, dtype=torch.float64)
    for window, dist, border in [("square", "l2", "reflect"), ("disk", "l1", "constant")]:
        up = ref.joint_bilateral_upsample(low, guide, 0.2, 1.3, 2, window, dist, border, 0.4)
        assert torch.allclose(up, ref.bilateral(low, guide, 0.2, 1.3, 2, window, dist, border, 0.4))


def test_reference_upsample_of_a_constant_image_is_constant(gen):
    low = torch.full((1, 2, 5, 7), 0.3, dtype=torch.float64)
    guide = torch.rand(1, 3, 20, 21, generator=gen, dtype=torch.float64)
    up = ref.joint_bilateral_upsample(low, guide, 0.1, 1.0, 2)
    assert up.shape == (1, 2, 20, 21) and torch.allclose(up, torch.full_like(up, 0.3))


def test_reference_upsample_with_flat_guide_is_a_fractional_gaussian_interpolation(gen):
    # a constant guide switches the range term off: each output is the normalised gaussian
    # average of the low-resolution samples around its true fractional position
    low = torch.rand(1, 1, 6, 6, generator=gen, dtype=torch.float64)
    guide = torch.zeros(1, 1, 12, 12, dtype=torch.float64)
    up = ref.joint_bilateral_upsample(low, guide, 0.1, 1.0, 3, border="replicate")
    i, j = 5, 8
    u, v = (i + 0.5) / 2 - 0.5, (j + 0.5) / 2 - 0.5  # 2.25, 3.75
    a0, b0 = 2, 4
    num = den = 0.0
    for a in range(a0 - 3, a0 + 4):
        for b in range(b0 - 3, b0 + 4):
            wgt = np.exp(-((u - a) ** 2 + (v - b) ** 2) / 2)
            num += wgt * low[0, 0, min(max(a, 0), 5), min(max(b, 0), 5)].item()
            den += wgt
    assert abs(up[0, 0, i, j].item() - num / den) < 1e-12


def upsample_reference(low, guide, sc, ss, radius, window="square", dist="l2", border="reflect", value=0.0):
    l4, g4 = _image.as_planes(low.cpu()), _image.as_planes(guide.cpu())
    y = ref.joint_bilateral_upsample(_image.to_unit(l4), _image.to_unit(g4).expand(l4.shape[0], -1, -1, -1),
                                     sc, ss, radius, window, dist, border, value)
    return y.reshape(*low.shape[:-2], *guide.shape[-2:])


@pytest.mark.parametrize("sizes", [(6, 7, 12, 14), (5, 9, 17, 23), (8, 8, 8, 8), (9, 8, 5, 6)])
@pytest.mark.parametrize("window,dist,border", [("square", "l2", "reflect"), ("disk", "l1", "constant"),
                                                ("square", "l1", "symmetric"), ("disk", "l2", "replicate")])
def test_upsample_matches_reference(sizes, window, dist, border, gen, device):
    # two images, each with its own guide, at the first sizes; one at the others (an image's
    # offsets do not depend on the scale, and the interpreter's time grows with the images)
    h, w, H, W = sizes
    images = 2 if sizes == (6, 7, 12, 14) else 1
    low = random_image((images, 3, h, w), torch.float32, gen, device)
    guide = random_image((images, 2, H, W), torch.float32, gen, device)
    y = imgfilters.joint_bilateral_upsample(low, guide, 0.2, 1.0, radius=2, window=window, color_distance=dist,
                                            border=border, border_value=0.3)
    assert_matches(y, upsample_reference(low, guide, 0.2, 1.0, 2, window, dist, border, 0.3))


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_upsample_every_dtype(dtype, gen, device):
    # (x4 from 3 rows, the default radius ceil(2 * 0.9) = 2, still under the low image's size:
    # the interpreter's cost grows with the taps and the rows, neither of which the dtype changes)
    low = random_image((1, 1, 3, 11), dtype, gen, device)  # e.g. a depth map
    guide = random_image((1, 3, 12, 44), torch.uint8, gen, device)
    sc = torch.tensor([0.1])
    y = imgfilters.joint_bilateral_upsample(low, guide, sc, 0.9)
    assert y.shape == (1, 1, 12, 44) and y.dtype == dtype
    assert_matches(y, upsample_reference(low, guide, sc, 0.9, 2))


@pytest.mark.parametrize("border", BORDERS)
def test_upsample_backward_matches_reference(border, gen, device):
    # two images share the guide with the reflected border: its gradient sums theirs; one
    # image with the others (the interpreter's cost is per image)
    sc = torch.tensor([0.2, 0.5] if border == "reflect" else [0.5])
    low = random_image((len(sc), 2, 5, 6), torch.float32, gen, device).requires_grad_()
    guide = random_image((1, 3, 13, 15), torch.float32, gen, device).requires_grad_()
    y = imgfilters.joint_bilateral_upsample(low, guide, sc, 1.0, radius=2, border=border, border_value=0.6)
    g = torch.randn(y.shape, generator=gen).to(device)
    gl, gg = torch.autograd.grad(y, [low, guide], g)
    ld = low.detach().cpu().double().requires_grad_()
    gd = guide.detach().cpu().double().requires_grad_()
    yr = ref.joint_bilateral_upsample(ld, gd.expand(len(sc), -1, -1, -1), sc, 1.0, 2, "square", "l2", border, 0.6)
    rl, rg = torch.autograd.grad(yr, [ld, gd], g.cpu().double())
    assert_gradient_matches(gl, rl)
    assert_gradient_matches(gg, rg)


def test_upsample_reference_gradcheck(gen):
    low = torch.rand(1, 1, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    guide = torch.rand(1, 2, 7, 9, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b: ref.joint_bilateral_upsample(a, b, 0.3, 1.0, 1, "disk", "l1", "reflect"), (low, guide))


@pytest.mark.parametrize("call,error,match", [
    (lambda lo, g: imgfilters.joint_bilateral_upsample(lo.numpy(), g), TypeError, "lowres"),
    (lambda lo, g: imgfilters.joint_bilateral_upsample(lo, g[:, :, :, :0]), ValueError, "guide"),
    (lambda lo, g: imgfilters.joint_bilateral_upsample(lo, torch.rand(3, 1, 8, 8)), ValueError, "guide"),
    (lambda lo, g: imgfilters.joint_bilateral_upsample(lo, g, 0.1, 0.0), ValueError, "sigma_space"),
    (lambda lo, g: imgfilters.joint_bilateral_upsample(lo, g, radius=-1), ValueError, "radius"),
    (lambda lo, g: imgfilters.joint_bilateral_upsample(lo, g, window="hex"), ValueError, "window"),
    (lambda lo, g: imgfilters.joint_bilateral_upsample(lo, None), TypeError, "guide"),
])
def test_upsample_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(torch.rand(2, 1, 4, 4), torch.rand(2, 3, 8, 8))


def test_upsample_with_tiny_sigma_color_stays_finite(gen, device):
    # A pixel checkerboard resamples to exactly 0.5 at every 2x sample centre, so every
    # sample differs from every pixel by 0.5: with sigma_color 1e-3 all weights underflow
    # without rescaling (0/0). The range term is then equal for all taps and the result
    # is the spatial-only interpolation, i.e. what a flat guide gives.
    low = random_image((2, 1, 6, 7), torch.float32, gen, device)
    i, j = torch.meshgrid(torch.arange(12), torch.arange(14), indexing="ij")
    checker = ((i + j) % 2).to(torch.float32)[None, None].to(device)
    y = imgfilters.joint_bilateral_upsample(low, checker, 1e-3, 1.0, radius=2)
    flat = imgfilters.joint_bilateral_upsample(low, torch.zeros_like(checker), 1e-3, 1.0, radius=2)
    assert torch.isfinite(y).all()
    # float32 exponents near 1e5 resolve the spatial term to ~0.016: about 1e-3 of error
    assert (y - flat).abs().max() <= 2e-3
    assert (y.cpu().double() - upsample_reference(low, checker, 1e-3, 1.0, 2)).abs().max() <= 2e-3


@pytest.mark.parametrize("sizes", [(2, 4, 41, 7), (26, 5, 11, 3), (52, 3, 22, 4)])
def test_upsample_nearest_sample_ties(sizes, gen, device):
    # these output centres fall exactly halfway between two samples
    h, w, H, W = sizes
    low = random_image((1, 2, h, w), torch.float32, gen, device)
    guide = random_image((1, 3, H, W), torch.float32, gen, device)
    y = imgfilters.joint_bilateral_upsample(low, guide, 0.3, 1.0, radius=2)
    assert_matches(y, upsample_reference(low, guide, 0.3, 1.0, 2))


def test_upsample_positions_stay_exact_on_wide_images(gen, device):
    low = random_image((1, 1, 2, 560), torch.float32, gen, device)
    guide = random_image((1, 1, 3, 2080), torch.float32, gen, device)
    y = imgfilters.joint_bilateral_upsample(low, guide, 0.05, 1.0, radius=1)
    assert_matches(y, upsample_reference(low, guide, 0.05, 1.0, 1))


def _upsample_tiles():
    from imgfilters.kernels import bilateral as kb
    return [kb.tiles.UPSAMPLE_TILE]


@gpu
@pytest.mark.parametrize("tile", range(len(_upsample_tiles())))
def test_every_upsample_tile_matches_the_reference_on_photos(tile):
    # each tile on a photo of its own, so that the suite's workers compile each variant once
    from imgfilters.kernels import bilateral as kb
    from imgfilters.ops.bilateral import _coefficients
    name = SAMPLE_NAMES[tile % len(SAMPLE_NAMES)]
    tile = _upsample_tiles()[tile]
    guide = sample(name)[None].cuda()[..., :150, :270]  # (partial tiles)
    coeff = lambda s: _coefficients((s,), "cuda")  # noqa: E731
    for low in (torch.nn.functional.avg_pool2d(_image.to_unit(guide)[:, :1].float(), 4, ceil_mode=True),
                torch.rand(1, 5, 41, 70, device="cuda")):  # (five channels: two groups of values)
        for radius, window, dist, border in [(2, "square", "l2", 0), (3, "disk", "l1", 3)]:
            y = torch.empty(*low.shape[:2], *guide.shape[-2:], device="cuda")
            kb.launch_upsample(low, guide, y, coeff(0.1), coeff(1.0), radius, window == "disk", dist == "l1",
                               border, 0.25, tile=triton.Config({k: v for k, v in tile.items() if k != "num_warps"},
                                                                num_warps=tile["num_warps"]))
            expected = upsample_reference(low, guide, 0.1, 1.0, radius, window, dist, BORDERS[border], 0.25)
            assert_matches(y, expected)


def test_upsample_keeps_layout_and_tv_tensors(gen, device):
    from torchvision import tv_tensors
    low = random_image((2, 3, 5, 6), torch.uint8, gen, device).to(memory_format=torch.channels_last)
    guide = random_image((2, 1, 10, 12), torch.uint8, gen, device)
    y = imgfilters.joint_bilateral_upsample(low, guide)
    assert y.shape == (2, 3, 10, 12) and y.is_contiguous(memory_format=torch.channels_last)
    assert isinstance(imgfilters.joint_bilateral_upsample(tv_tensors.Image(low[0]), guide[0]), tv_tensors.Image)


def test_second_order_gradients_refuse_instead_of_being_wrong(gen, device):
    x = random_image((1, 1, 8, 8), torch.float32, gen, device).requires_grad_()
    (g,) = torch.autograd.grad(imgfilters.bilateral(x, 0.2, radius=1).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_extreme_sigmas_stay_finite(gen, device):
    x = random_image((1, 3, 9, 9), torch.float32, gen, device)
    for sc, ss in [(1e-20, 1.0), (0.1, 1e-20), (1e-4, 1.0)]:
        y = imgfilters.bilateral(x, sc, ss, radius=2)
        assert torch.isfinite(y).all()
        assert_matches(y, reference(x, None, sc, ss, 2))


def test_radius_accepts_integer_types_and_explains_large_defaults():
    x = torch.rand(1, 1, 6, 6)
    assert imgfilters.bilateral(x, radius=np.int64(1)).shape == x.shape
    assert imgfilters.bilateral(x, radius=torch.tensor(1)).shape == x.shape
    with pytest.raises(ValueError, match="pass radius"):
        imgfilters.bilateral(x, 0.1, 20.0)
