"""Resampling kernels against the float64 reference and their peers (torchvision,
F.interpolate, PIL), gradients, bad arguments."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as tvf
from PIL import Image
from torchvision.transforms import InterpolationMode

import imgfilters
from imgfilters import _image
from imgfilters.reference import resample as ref

from helpers import KERNEL_DTYPES, assert_matches, count_compiles, count_launches, gpu, random_image, sample

F64 = dict(dtype=torch.float64)


def unit(x):
    return _image.to_unit(_image.as_planes(x.cpu()))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
@pytest.mark.parametrize("size", [(29, 40), (5, 7), (1, 1), (110, 9)])
def test_upsample_equals_interpolate(mode, size, gen, device):
    x = random_image((1, 3, 13, 17), torch.float32, gen, device)  # (one image: the interpreter's cost is per plane)
    for ac in (False, True) if mode in ("bilinear", "bicubic") else (False,):
        y = imgfilters.upsample(x, size=size, mode=mode, align_corners=ac)
        kw = dict(align_corners=ac) if mode in ("bilinear", "bicubic") else {}
        assert_matches(y, F.interpolate(x.cpu().double(), size=size, mode=mode, **kw))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
@pytest.mark.parametrize("factor", [1.7, 0.45, (2.0, 3.0), 9.3])
def test_upsample_by_scale_factor(mode, factor, gen, device):
    x = random_image((1, 2, 11, 14), torch.float32, gen, device)
    y = imgfilters.upsample(x, scale_factor=factor, mode=mode)
    assert_matches(y, F.interpolate(x.cpu().double(), scale_factor=factor, mode=mode))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest", "area"])
@pytest.mark.parametrize("factor", [2, 4, (1, 2), (4, 1), (2, 3)])
def test_integer_factors_equal_interpolate(mode, factor, gen, device):
    # the constant-phase kernel (factors 1, 2, 4 per axis; 3 takes the general one), and
    # sizes small enough that the replicated borders meet (one image: the interpreter's cost
    # is per plane)
    for shape in ((1, 2, 7, 10), (1, 1, 2, 1)):
        x = random_image(shape, torch.float32, gen, device)
        y = imgfilters.upsample(x, scale_factor=factor, mode=mode)
        assert_matches(y, F.interpolate(x.cpu().double(), scale_factor=factor, mode=mode))


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
def test_integer_factors_over_several_segments_and_strips(mode, gen, device, monkeypatch):
    # the row slide with small programs (the interpreter's default is one per plane): each
    # segment starts mid-image, where its window of rows above must be read, not assumed
    from imgfilters.kernels import resample as kernels
    monkeypatch.setattr(kernels.phases, "strip_tile", lambda x, steps, lanes, strip: (16, 5, 1, *strip[3:]))
    x = random_image((1, 2, 13, 37), torch.float32, gen, device).requires_grad_()
    y = imgfilters.upsample(x, scale_factor=2, mode=mode)
    assert_matches(y, F.interpolate(x.detach().cpu().double(), scale_factor=2, mode=mode))
    g = torch.randn(y.shape, generator=gen).to(device)
    (ours,) = torch.autograd.grad(y, x, g)  # the adjoint kernel, also segmented
    x64 = x.detach().cpu().double().requires_grad_()
    (theirs,) = torch.autograd.grad(F.interpolate(x64, scale_factor=2, mode=mode), x64, g.cpu().double())
    assert (ours.cpu().double() - theirs).abs().max() <= 1e-5


# The interpreter takes the wider loads too, which no plan does (tiles.STRIPS: 4 bytes) and whose
# uint8 variants compiled for 90-100 s each on the H200 (the GPU suite's longest tests).
PHASE_LOADS = [(4, False)] if torch.cuda.is_available() else [(4, False), (8, True), (16, False)]


@pytest.mark.parametrize("load_bytes,pre", PHASE_LOADS)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_phase_kernel_lanes_per_thread_and_prefetch(load_bytes, pre, dtype, gen, device, monkeypatch):
    # several lanes a thread (as many source pixels as fill load_bytes, one load and one
    # store a row, where the lanes divide by them: uint8's 16 halve to 8) and the next step's
    # rows loaded ahead, over strips of 4 threads (the last one partly past the end) and
    # segments of 5 steps (the last partial)
    from imgfilters.kernels import resample as kernels
    monkeypatch.setattr(kernels.phases, "strip_tile", lambda x, steps, lanes, strip: (4, 5, 1, load_bytes, pre))
    launched, launch_phases = [], kernels.launch_phases
    monkeypatch.setattr(kernels, "launch_phases", lambda *a: launched.append(launch_phases(*a)))
    plans, plan = [], kernels.phases_plan.__wrapped__  # (derived anew: the strip is patched)
    monkeypatch.setattr(kernels.phases, "phases_plan", lambda *a: plans.append(plan(*a)) or plans[-1])
    # One plane, and per S the fewest lanes (source columns) that S divides (uint8's 16 do
    # not), that fill more than one strip of 4 S threads (uint8's 16: one partial strip, S = 8
    # with PRE takes several) and that Lanczos' plan allows (14): the interpreter's cost is
    # per program and grows with the lanes and steps a program walks. Steps: 7 (bicubic),
    # 14 (Lanczos, whose plan needs them: 3 edge steps a side), 11 of 4 rows (MATLAB's 1 / 4,
    # one lane a thread whatever load_bytes: once per dtype and PRE).
    s = min(load_bytes // dtype.itemsize, 8)
    lanes = 24 if load_bytes // dtype.itemsize == 16 else {1: 14, 2: 14, 4: 20, 8: 40}[s]
    clamp = dtype in _image.MAX_VALUE
    cases = [((7, lanes), lambda img: imgfilters.resize(img, (14, 2 * lanes), "bicubic", antialias=False),  # noqa: E731
              lambda img: ref.resize(img, (14, 2 * lanes), "bicubic", False, intermediate_clamp=clamp), s),  # noqa: E731
             ((14, lanes), lambda img: imgfilters.resize(img, (28, 2 * lanes), "lanczos"),  # noqa: E731  (edge lanes, mixed)
              lambda img: ref.resize(img, (28, 2 * lanes), "lanczos", True, intermediate_clamp=clamp), s)]  # noqa: E731
    if load_bytes != 16:
        cases.append(((44, 40), lambda img: imgfilters.imresize(img, 0.25),  # noqa: E731  (4 rows a step)
                      lambda img: ref.resize(img, (11, 10), "matlab", True, scale=(4.0, 4.0),  # noqa: E731
                                             intermediate_clamp=clamp), 1))
    for size, call, expect, lanes_a_thread in cases:
        x = random_image((1, 1, *size), dtype, gen, device)
        y = call(x)
        assert plans[-1].tile.kwargs["S"] == lanes_a_thread, plans[-1]
        assert_matches(y, expect(unit(x)).reshape(y.shape))
        if not clamp:
            bad = x.clone()
            h, w = size
            bad[0, 0, 0, 0], bad[0, 0, h // 2, w // 2], bad[0, 0, h // 2, w // 2 + 1] = (
                float("nan"), float("inf"), -float("inf"))
            y, expected = call(bad).cpu().double(), expect(unit(bad)).reshape(y.shape)
            for test in (torch.isnan, torch.isposinf, torch.isneginf):
                assert torch.equal(test(y), test(expected)), test.__name__
    assert len(launched) == len(cases) * (1 if clamp else 2)


# (mode, antialias, factor, source rows): the rows, a multiple of 12, are the fewest that
# still take the phase kernel (its plan needs 2 (M + E) + 2 steps: interior steps between
# the edge ones), as the interpreter's cost grows with the steps a program walks; the
# columns stay 60 (nearly free).
PHASE_RATIOS = [
    ("bilinear", True, 2, 12), ("bicubic", True, 2, 12), ("lanczos", True, 2, 24), ("matlab", True, 2, 12),
    ("bicubic", False, 4, 12), ("area", False, 0.5, 12), ("bilinear", False, 0.5, 12),
    ("nearest-exact", False, 0.5, 12), ("bicubic", True, 0.5, 24), ("lanczos", True, 0.5, 36),
    ("matlab", True, 0.25, 48), ("bicubic", True, 0.25, 48), ("lanczos", True, (2, 0.5), 24),
    ("bicubic", False, 4 / 3, 24), ("bilinear", False, (4 / 3, 1 / 3), 24), ("lanczos", True, 2 / 3, 36),
    ("matlab", True, 2 / 3, 24), ("bicubic", True, (1 / 3, 4 / 3), 36)]


@pytest.mark.parametrize("mode,aa,factor,rows", PHASE_RATIOS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_ratios_of_every_mode_take_the_phase_kernel(mode, aa, factor, rows, dtype, gen, device, monkeypatch):
    """Growing by 2 or 4, shrinking by 2, 3 or 4 and the ratios 4 / 3 and 2 / 3, every mode:
    constant weights inside and the reference's own near the edges (torch's clamped taps,
    MATLAB's mirrored ones, the antialiased modes' renormalised ones), NaN and inf staying
    where they are read. One plane (the interpreter's cost is per program)."""
    from imgfilters.kernels import resample as kernels
    launched, launch_phases = [], kernels.launch_phases
    monkeypatch.setattr(kernels, "launch_phases", lambda *a: launched.append(launch_phases(*a)))
    fy, fx = factor if isinstance(factor, tuple) else (factor, factor)
    x = random_image((1, 1, rows, 60), dtype, gen, device)
    size = (round(rows * fy), round(60 * fx))
    clamp = dtype in _image.MAX_VALUE
    if mode == "matlab":
        call = lambda img: imgfilters.imresize(img, scale=(fy, fx))  # noqa: E731
        expect = lambda img: ref.resize(img, size, "matlab", True, scale=(1 / fy, 1 / fx),  # noqa: E731
                                        intermediate_clamp=clamp)
    else:
        call = lambda img: imgfilters.resize(img, size, mode, antialias=aa)  # noqa: E731
        expect = lambda img: ref.resize(img, size, mode, aa, intermediate_clamp=clamp)  # noqa: E731
    y = call(x)
    assert len(launched) == 1
    assert_matches(y, expect(unit(x)).reshape(y.shape))
    if clamp:
        return
    bad = x.clone()
    mid = rows // 2 - 1
    bad[0, 0, 0, 0], bad[0, 0, mid, 30], bad[0, 0, mid, 31] = float("nan"), float("inf"), -float("inf")
    if aa or mode != "bicubic":  # (torch's bicubic sums a clamped edge tap once per tap, weights of both
        bad[0, 0, rows - 1, 59] = float("inf")  # signs: an inf in the corner gives NaN there, as in torch)
    y, expected = call(bad).cpu().double(), expect(unit(bad)).reshape(y.shape)
    for test in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(test(y), test(expected)), test.__name__
    finite = expected.isfinite()
    assert (y[finite] - expected[finite]).abs().max() <= 1e-5


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_integer_factor_dtypes_layouts_and_fused_steps(dtype, gen, device):
    from torchvision.transforms import v2

    from imgfilters import transforms as T
    x = random_image((1, 3, 6, 9), dtype, gen, device)  # (one image: the interpreter's cost is per plane)
    y = imgfilters.resize(x, (12, 36), "bicubic", antialias=False)
    assert_matches(y, ref.resize(unit(x), (12, 36), "bicubic", False, intermediate_clamp=dtype in _image.MAX_VALUE))
    cl = x.to(memory_format=torch.channels_last)
    assert torch.equal(imgfilters.resize(cl, (12, 36), "bicubic", antialias=False), y)
    view = random_image((3, 14, 30), dtype, gen, device)[:, 3:13:2, 1:25]
    assert torch.equal(imgfilters.upsample(view, 2.0, mode="bilinear"),
                       imgfilters.upsample(view.contiguous(), 2.0, mode="bilinear"))
    steps = [v2.Lambda(lambda t: t), T.Upsample(2, mode="bicubic"), v2.ToDtype(torch.float32, scale=True),
             v2.Normalize([0.4] * 3, [0.2] * 3)]
    expected = v2.Compose(steps)(x)
    fused = imgfilters.fuse(v2.Compose(steps[1:]))
    assert fused.launches(dtype) == 1
    # (unfused, a half-precision image is rounded before Normalize's x5 on values up to 3)
    ulp = {torch.float16: 2 ** -11, torch.bfloat16: 2 ** -8}.get(dtype, 1e-6)
    assert (fused(x) - expected).abs().max() <= 5 * 3 * ulp + 1e-5


@pytest.mark.parametrize("interp", [InterpolationMode.BILINEAR, InterpolationMode.BICUBIC,
                                    InterpolationMode.NEAREST, InterpolationMode.NEAREST_EXACT])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_equals_torchvision_float_and_uint8(interp, antialias, gen, device):
    # one image of 3 planes (the interpreter's cost is per program, one a plane here)
    x = random_image((1, 3, 21, 26), torch.float32, gen, device)
    u8 = random_image((1, 3, 21, 26), torch.uint8, gen, device)
    for size in ((31, 40), (9, 13), [12], (42, 52)):
        y = imgfilters.resize(x, size, interp, antialias=antialias)
        assert (y.cpu() - tvf.resize(x.cpu(), size, interp, antialias=antialias)).abs().max() <= 1e-5
        yu = imgfilters.resize(u8, size, interp, antialias=antialias)
        assert yu.dtype == torch.uint8
        assert (yu.cpu().int() - tvf.resize(u8.cpu(), size, interp, antialias=antialias).int()).abs().max() <= 1


@pytest.mark.parametrize("interp", ["bilinear", "bicubic", "nearest-exact"])
def test_one_pixel_outputs_and_factors_above_8(interp, gen, device):
    x = random_image((3, 5, 6), torch.float32, gen, device)
    for size in ((1, 1), (1, 4), (47, 61)):
        for aa in (True, False):
            y = imgfilters.resize(x, size, interp, antialias=aa)
            # (torchvision before 0.27 takes only the enum; ours takes the string too)
            expected = tvf.resize(x.cpu(), size, InterpolationMode(interp), antialias=aa)
            assert (y.cpu() - expected).abs().max() <= 1e-5


def test_resize_size_rules_and_max_size(gen, device):
    x = random_image((3, 30, 45), torch.float32, gen, device)
    assert imgfilters.resize(x, 20).shape == tvf.resize(x.cpu(), [20]).shape == (3, 20, 30)
    assert imgfilters.resize(x, 20, max_size=25).shape == tvf.resize(x.cpu(), [20], max_size=25).shape
    assert imgfilters.resize(x, None, max_size=40).shape == tvf.resize(x.cpu(), None, max_size=40).shape


@pytest.mark.parametrize("name", ["astronaut", "camera"])
@pytest.mark.parametrize("size", [(61, 53), (150, 111)])
def test_lanczos_equals_pil_on_photos(name, size, device):
    img = sample(name)[:, 60:156, 70:166].contiguous()
    y = imgfilters.resize(img.to(device), size, "lanczos")
    arr = img.permute(1, 2, 0).numpy()
    pil = Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr).resize(size[::-1], Image.LANCZOS)
    theirs = torch.from_numpy(np.array(pil)).reshape(size[0], size[1], -1).permute(2, 0, 1)
    assert (y.cpu().int() - theirs.int()).abs().max() <= 1


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("mode", ["lanczos", "area", "bicubic"])
def test_every_dtype_against_the_reference(dtype, mode, gen, device):
    x = random_image((1, 3, 19, 23), dtype, gen, device)  # (one image: the interpreter's cost is per plane)
    for size in ((37, 50), (10, 13)):
        y = imgfilters.resize(x, size, mode)
        aa = mode != "area"
        expected = ref.resize(unit(x), size, mode, aa, intermediate_clamp=dtype in _image.MAX_VALUE)
        assert_matches(y, expected.reshape(*x.shape[:-2], *size))


@pytest.mark.parametrize("mode,aa", [("bilinear", True), ("bicubic", False), ("lanczos", True)])
def test_positions_far_from_the_origin_stay_exact(mode, aa, gen, device):
    """Output columns up to 1430: a source position formed in float32 is off by up to
    i ulps of the step there (the weights and outputs by ~5e-5); the kernel forms them
    in float64."""
    x = random_image((1, 1, 8, 1000), torch.float32, gen, device)
    y = imgfilters.resize(x, (8, 1430), mode, antialias=aa)
    assert_matches(y, ref.resize(unit(x), (8, 1430), mode, aa).reshape(y.shape))
    y = imgfilters.imresize(x, size=(8, 1430))
    assert_matches(y, ref.imresize(unit(x), (8, 1430)))


@pytest.mark.parametrize("size,scale", [((7, 9), None), (None, 0.25), (None, 2.0), (None, (0.5, 1.5))])
def test_imresize_equals_the_matlab_reference(size, scale, gen, device):
    x = random_image((2, 1, 24, 30), torch.float32, gen, device)
    y = imgfilters.imresize(x, scale=scale, size=size)
    assert_matches(y, ref.imresize(unit(x), size, scale=scale))


def test_channels_last_views_batches_and_input_untouched(gen, device):
    x = random_image((2, 3, 16, 20), torch.uint8, gen, device).to(memory_format=torch.channels_last)
    before = x.clone()
    y = imgfilters.resize(x, (33, 41), "bicubic")
    assert y.is_contiguous(memory_format=torch.channels_last) and torch.equal(x, before)
    five = random_image((2, 2, 3, 9, 11), torch.float32, gen, device)
    assert torch.equal(imgfilters.upsample(five, size=(20, 5), mode="bilinear")[1, 0],
                       imgfilters.upsample(five[1, 0], size=(20, 5), mode="bilinear"))
    view = random_image((3, 30, 40), torch.float32, gen, device)[:, 5:25:2, 3:33]
    assert torch.equal(imgfilters.resize(view, (17, 13)), imgfilters.resize(view.contiguous(), (17, 13)))


@pytest.mark.parametrize("call", [
    lambda x: imgfilters.resize(x, (9, 13), "bicubic"),
    lambda x: imgfilters.resize(x, (4, 5), "lanczos"),
    lambda x: imgfilters.upsample(x, scale_factor=2.5, mode="bicubic", align_corners=True),
    lambda x: imgfilters.upsample(x, size=(3, 20), mode="area"),
    lambda x: imgfilters.imresize(x, scale=0.5),
    lambda x: imgfilters.upsample(x, scale_factor=2.0, mode="bicubic"),  # the constant-phase adjoint
    lambda x: imgfilters.upsample(x, scale_factor=(1.0, 2.0), mode="bilinear"),
    lambda x: imgfilters.upsample(x, scale_factor=4.0, mode="nearest"),  # (factor 4: the matrix products)
])
def test_gradients_equal_interpolates(call, gen, device):
    x = random_image((1, 2, 8, 10), torch.float32, gen, device).requires_grad_()
    y = call(x)
    g = torch.randn(y.shape, generator=gen).to(device)
    (ours,) = torch.autograd.grad(y, x, g)
    x64 = x.detach().cpu().double().requires_grad_()
    y64 = call(x64)  # float64 runs the reference: autograd through its matrices
    (theirs,) = torch.autograd.grad(y64, x64, g.cpu().double())
    assert (ours.cpu().double() - theirs).abs().max() <= 1e-5


def test_reference_gradient_is_interpolates():
    x = torch.rand(1, 1, 6, 7, **F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: imgfilters.upsample(t, size=(11, 4), mode="bicubic"), (x,))
    g = torch.rand(1, 1, 11, 4, **F64)
    (a,) = torch.autograd.grad(imgfilters.upsample(x, size=(11, 4), mode="bicubic"), x, g)
    (b,) = torch.autograd.grad(F.interpolate(x, size=(11, 4), mode="bicubic"), x, g)
    assert torch.allclose(a, b)


# (mode, source height and width, gradient layout): widths down to 2 (the first and the last
# column in one thread) and that no S divides; "strided" and "channels-last" (two planes of
# one image) gradients have a column stride of 2 (no vector loads), and their cases run
# with int64 offsets
ADJOINT_CASES = [("bicubic", (2, 2), "contiguous"), ("bicubic", (4, 5), "strided"),
                 ("bicubic", (3, 19), "channels-last"), ("bilinear", (5, 6), "contiguous"),
                 ("nearest", (4, 9), "strided"), ("area", (3, 3), "contiguous")]


@pytest.mark.parametrize("factor", [(2, 2), (1, 2), (2, 1), (1, 1)])
@pytest.mark.parametrize("columns", [1, 4])
def test_adjoint_kernel_columns_per_thread_borders_and_strides(factor, columns, gen, device, monkeypatch):
    # the integer-factor gradient kernel with `columns` source columns a thread, over strips
    # of 2 threads (programs of the first, middle and last columns, the last partly past
    # the end) and segments of 3 rows, against F.interpolate's float64 gradient
    from imgfilters.kernels import resample as kernels
    from imgfilters.ops import resample as ops
    monkeypatch.setattr(kernels.phases, "strip_tile", lambda x, steps, lanes, strip: (2, 3, 1, columns))
    launched, launch_adjoint = [], kernels.launch_adjoint
    monkeypatch.setattr(kernels, "launch_adjoint", lambda *a: launched.append(launch_adjoint(*a)))
    fy, fx = factor
    for mode, (h, w), layout in ADJOINT_CASES:
        wide = layout != "contiguous"
        monkeypatch.setattr(kernels.adjoint, "needs_int64", lambda *t, wide=wide: wide)
        size = (fy * h, fx * w)
        if layout == "contiguous":
            g = torch.randn(1, 1, *size, generator=gen)
        elif layout == "strided":
            g = torch.randn(1, 1, size[0], 2 * size[1] + 1, generator=gen)[..., 1::2]
        else:
            g = torch.randn(1, *size, 2, generator=gen).permute(0, 3, 1, 2)
        ours = ops.adjoint(g.to(device), (h, w), size, mode, False, False, (1 / fy, 1 / fx))
        x64 = torch.zeros(*g.shape[:2], h, w, **F64, requires_grad=True)
        (theirs,) = torch.autograd.grad(F.interpolate(x64, scale_factor=factor, mode=mode), x64, g.double())
        assert (ours.cpu().double() - theirs).abs().max() <= 1e-5, (mode, h, w, layout)
    assert len(launched) == len(ADJOINT_CASES)


@pytest.mark.parametrize("call,error,match", [
    (lambda x: imgfilters.resize(x, 0), ValueError, "size"),
    (lambda x: imgfilters.resize(x, (4, -1)), ValueError, "size"),
    (lambda x: imgfilters.resize(x, 2.5), TypeError, "size"),
    (lambda x: imgfilters.resize(x, 4, "cubic"), ValueError, "interpolation"),
    (lambda x: imgfilters.resize(x, 4, InterpolationMode.BOX), ValueError, "interpolation"),
    (lambda x: imgfilters.resize(x, 4, max_size=3), ValueError, "max_size"),
    (lambda x: imgfilters.upsample(x), ValueError, "exactly one"),
    (lambda x: imgfilters.upsample(x, 2.0, (4, 4)), ValueError, "exactly one"),
    (lambda x: imgfilters.upsample(x, 0.0), ValueError, "scale_factor"),
    (lambda x: imgfilters.upsample(x, 0.01), ValueError, "output size"),
    (lambda x: imgfilters.upsample(x, 2.0, mode="lanczos"), ValueError, "mode"),
    (lambda x: imgfilters.upsample(x, 2.0, mode="nearest", align_corners=True), ValueError, "align_corners"),
    (lambda x: imgfilters.imresize(x), ValueError, "exactly one"),
    (lambda x: imgfilters.resize(x.int(), 4), TypeError, "dtype"),
    # outputs larger than the device's memory fail at once, naming what made them
    (lambda x: imgfilters.upsample(x, scale_factor=1e6), ValueError, "scale_factor gives .* GiB"),
    (lambda x: imgfilters.resize(x, 10 ** 7), ValueError, "size gives .* GiB"),
    (lambda x: imgfilters.imresize(x, scale=(1e6, 1e3)), ValueError, "scale gives .* GiB"),
])
def test_bad_arguments(call, error, match):
    x = torch.rand(2, 3, 8, 8)
    with pytest.raises(error, match=match):
        call(x)


@gpu
def test_new_sizes_never_recompile(gen, monkeypatch):
    # random resizes (the degradation pipelines) meet a new size every call: each used to
    # compile a new variant (about a second) when its sizes or strides changed from or to
    # multiples of 16
    x = random_image((2, 3, 100, 130), torch.float32, gen, "cuda")
    imgfilters.resize(x, (77, 91), "bicubic", antialias=True)
    imgfilters.resize(x, (40, 50), "bicubic", antialias=True)  # (downscales by 2 take two passes)
    compiles = count_compiles(monkeypatch)
    for shape, size in (((2, 3, 100, 130), (48, 64)), ((1, 3, 64, 128), (77, 91)), ((3, 3, 97, 33), (160, 50))):
        x = random_image(shape, torch.float32, gen, "cuda")
        y = imgfilters.resize(x, size, "bicubic", antialias=True)
        assert_matches(y, ref.resize(unit(x), size, "bicubic", True).reshape(y.shape))
    assert not compiles, compiles


# ---- the two-pass path (downscales by 2 or more) ---------------------------------------------

TWO_PASS_MODES = [("bilinear", True), ("bicubic", True), ("lanczos", True), ("area", False), ("matlab", True)]


def _two_pass_call(mode, aa, size):
    if mode == "matlab":
        return lambda img: imgfilters.imresize(img, size=size)
    return lambda img: imgfilters.resize(img, size, mode, antialias=aa)


@pytest.mark.parametrize("mode,aa", TWO_PASS_MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_two_pass_path_against_the_reference(mode, aa, dtype, gen, device, monkeypatch):
    """The row pass into a float32 intermediate, then the column pass (forced here; by
    default downscales by 2 or more on the GPU take it): every mode of
    ``resample_kernel``, uint8 with the clamped row pass, a batch of planes, a strided
    view, NaN and inf reaching exactly the outputs that weigh them. Two planes a call (the
    interpreter's cost is per plane: one program a pass)."""
    from imgfilters.kernels import resample as kernels
    monkeypatch.setattr(kernels.tiles, "TWO_PASS", True)
    size = (9, 13)
    call = _two_pass_call(mode, aa, size)
    clamp = dtype in _image.MAX_VALUE
    expect = lambda img: ref.resize(unit(img), size, mode, aa, intermediate_clamp=clamp)  # noqa: E731
    x = random_image((2, 1, 41, 58), dtype, gen, device)
    with count_launches() as launches:
        y = call(x)
    assert launches["resample_rows_kernel"] == launches["resample_columns_kernel"] == 1, launches
    assert not launches["resample_kernel"], launches
    assert_matches(y, expect(x).reshape(y.shape))
    monkeypatch.setattr(kernels.tiles, "TWO_PASS", False)  # the one-pass kernel: the same values
    one_pass = call(x)
    tol = 1 if clamp else 1e-6
    assert (y.cpu().double() - one_pass.cpu().double()).abs().max() <= tol
    monkeypatch.setattr(kernels.tiles, "TWO_PASS", True)
    view = random_image((2, 50, 70), dtype, gen, device)[:, 4:45, 3:61]  # (row stride 70, not 58)
    assert torch.equal(call(view), call(view.contiguous()))
    if clamp:
        return
    # NaN and inf reach the outputs that the one-pass kernel gives them (the reference's too,
    # except where a float32 weight at the edge of a tap's support rounds to 0 or MATLAB's
    # mirrored taps read an edge pixel twice with weights of both signs)
    bad = x.clone()
    bad[0, 0, 0, 0], bad[0, 0, 20, 30], bad[0, 0, 20, 31] = float("nan"), float("inf"), -float("inf")
    bad[1, 0, 40, 57], bad[1, 0, 10, 5], bad[1, 0, 30, 40] = float("inf"), -float("inf"), float("inf")
    y = call(bad).cpu().double()
    monkeypatch.setattr(kernels.tiles, "TWO_PASS", False)
    one_pass = call(bad).cpu().double()
    for test in (torch.isnan, torch.isposinf, torch.isneginf):
        assert test(y).any() and torch.equal(test(y), test(one_pass)), test.__name__
    expected = expect(bad).reshape(y.shape)
    finite = expected.isfinite() & y.isfinite()
    assert (y[finite] - expected[finite]).abs().max() <= 1e-5


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_two_pass_path_with_prologue_and_epilogue(dtype, gen, device, monkeypatch):
    # the prologue goes into the row pass, the epilogue into the column pass
    from torchvision.transforms import v2

    from imgfilters import transforms as T
    from imgfilters.kernels import resample as kernels
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.25]),
             T.Resize((11, 8), "bicubic"), v2.Normalize([0.5] * 3, [2.0] * 3)]
    x = random_image((1, 3, 47, 39), dtype, gen, device)  # (one image: the interpreter's cost is per plane)
    fused = imgfilters.fuse(steps)
    monkeypatch.setattr(kernels.tiles, "TWO_PASS", True)
    with count_launches() as launches:
        y = fused(x)
    assert sum(launches.values()) == 2 and launches["resample_rows_kernel"] == 1, launches
    unfused = v2.Compose(steps)(x)
    assert (y - unfused).abs().max() <= 2e-5 * max(1.0, unfused.abs().max().item())
    monkeypatch.setattr(kernels.tiles, "TWO_PASS", False)
    assert (y - fused(x)).abs().max() <= 2e-5 * max(1.0, unfused.abs().max().item())


def test_two_pass_path_only_where_the_intermediate_fits(gen, device, monkeypatch):
    # the float32 intermediate (B, C, H, WO) never takes more memory than the input
    from imgfilters.kernels import resample as kernels
    monkeypatch.setattr(kernels.tiles, "TWO_PASS", True)
    x = random_image((1, 2, 30, 40), torch.uint8, gen, device)
    for size, two in (((7, 10), True), ((7, 11), False), ((50, 10), True)):
        with count_launches() as launches:
            y = imgfilters.resize(x, size, "bilinear", antialias=True)
        assert bool(launches["resample_rows_kernel"]) == two, (size, launches)
        expected = ref.resize(unit(x), size, "bilinear", True, intermediate_clamp=True)
        assert_matches(y, expected.reshape(y.shape))


@gpu
def test_downscales_by_2_take_two_passes(gen, monkeypatch):
    x = random_image((1, 3, 400, 640), torch.uint8, gen, "cuda")
    for size, two in (((56, 56), True), ((300, 500), False), ((150, 170), False)):  # (the last: 4 WO > W)
        with count_launches() as launches:
            y = imgfilters.resize(x, size, "bilinear", antialias=True)
        assert bool(launches["resample_rows_kernel"]) == two, (size, launches)
        assert_matches(y, ref.resize(unit(x), size, "bilinear", True, intermediate_clamp=True).reshape(y.shape))
    x = random_image((1, 3, 1500, 2600), torch.float32, gen, "cuda")  # a large output too
    with count_launches() as launches:
        y = imgfilters.resize(x, (700, 1250), "bicubic", antialias=True)
    assert launches["resample_rows_kernel"] == 1, launches
    assert_matches(y, ref.resize(unit(x), (700, 1250), "bicubic", True).reshape(y.shape))
    x = random_image((1, 3, 400, 640), torch.float32, gen, "cuda")
    imgfilters.resize(x, (40, 50), "bicubic", antialias=True)
    compiles = count_compiles(monkeypatch)  # random sizes recompile neither pass
    for shape, size in (((1, 3, 401, 650), (50, 61)), ((2, 1, 333, 517), (31, 47)), ((1, 2, 320, 256), (16, 32))):
        x = random_image(shape, torch.float32, gen, "cuda")
        with count_launches() as launches:
            y = imgfilters.resize(x, size, "bicubic", antialias=True)
        assert launches["resample_columns_kernel"] == 1, launches
        assert_matches(y, ref.resize(unit(x), size, "bicubic", True).reshape(y.shape))
    assert not compiles, compiles
