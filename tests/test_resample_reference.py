"""Resampling family: the float64 reference against its peers (torch, torchvision, PIL,
OpenCV) and against MATLAB's imresize worked out by hand."""
import math

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as TF

from imgfilters import _image
from imgfilters.reference import resample as ref

from helpers import SAMPLE_NAMES, sample

# (mode, antialias, align_corners) as F.interpolate takes them
TORCH_MODES = [("nearest", False, None), ("nearest-exact", False, None),
               ("bilinear", False, False), ("bilinear", False, True),
               ("bilinear", True, False), ("bilinear", True, True),
               ("bicubic", False, False), ("bicubic", False, True),
               ("bicubic", True, False), ("bicubic", True, True),
               ("lanczos", True, False), ("area", False, None)]
TV_MODES = {"nearest": InterpolationMode.NEAREST, "nearest-exact": InterpolationMode.NEAREST_EXACT,
            "bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}


def _interpolate_has_lanczos():
    try:
        F.interpolate(torch.zeros(1, 1, 4, 4), size=(2, 2), mode="lanczos", antialias=True)
        return True
    except (ValueError, NotImplementedError, RuntimeError):
        return False


INTERPOLATE_HAS_LANCZOS = _interpolate_has_lanczos()


def needs_peer(m):
    """Skip a Lanczos case where this torch's F.interpolate has no Lanczos mode (torch 2.11,
    as on the GPU machine); the PIL tests below still check the reference's Lanczos."""
    if m[0] == "lanczos" and not INTERPOLATE_HAS_LANCZOS:
        pytest.skip("this torch's F.interpolate has no mode='lanczos'")


def mode_id(m):
    mode, aa, ac = m
    return f"{mode}{'-aa' if aa else ''}{'-corners' if ac else ''}"


def interpolate(x, mode, antialias, align_corners, size=None, scale_factor=None):
    # torch 2.14 CPU bug: antialiased resampling along H of a contiguous tensor that is (or
    # becomes) 1 pixel wide returns garbage (a 5 x 1 arange -> 7 x 1 zeros); its
    # channels-last path is right, so those cases are compared against that path.
    if antialias and (x.shape[-1] == 1 or (size is not None and size[-1] == 1)):
        x = x.contiguous(memory_format=torch.channels_last)
    out = F.interpolate(x, size=size, scale_factor=scale_factor, mode=mode, antialias=antialias,
                        align_corners=align_corners)
    return out.contiguous()


def as_unit(img):
    return _image.to_unit(img)[None]


def as_uint8(unit):
    return _image.from_unit(unit, torch.uint8)[0]


def max_level_diff(a, b):
    return (a.to(torch.int64) - b.to(torch.int64)).abs().max().item()


# ---- F.interpolate -------------------------------------------------------------------------

@pytest.mark.parametrize("m", TORCH_MODES, ids=mode_id)
@pytest.mark.parametrize("shape,size", [((37, 53), (50, 23)), ((37, 53), (111, 160)),
                                        ((5, 7), (47, 61)), ((61, 47), (5, 7)),
                                        ((37, 53), (1, 1)), ((37, 53), (1, 23)), ((37, 53), (19, 1)),
                                        ((1, 1), (3, 5)), ((37, 53), (37, 53))])
def test_equals_interpolate_by_size(m, shape, size, gen):
    needs_peer(m)
    mode, aa, ac = m
    x = torch.rand(2, 3, *shape, generator=gen, dtype=torch.float64)
    expected = interpolate(x, mode, aa, ac, size=size)
    out = ref.resize(x, size, mode, aa, bool(ac))
    assert out.shape == expected.shape
    assert (out - expected).abs().max() <= 1e-10


@pytest.mark.parametrize("m", TORCH_MODES, ids=mode_id)
@pytest.mark.parametrize("factors", [(1.7, 1.7), (0.43, 2.6), (9.3, 11.1), (0.3, 0.21), (3.0, 0.5)])
def test_equals_interpolate_by_scale_factor(m, factors, gen):
    needs_peer(m)
    mode, aa, ac = m
    x = torch.rand(1, 2, 37, 53, generator=gen, dtype=torch.float64)
    expected = interpolate(x, mode, aa, ac, scale_factor=factors)
    # torch interpolates with 1 / scale_factor, not in / out (area recomputes it)
    scale = (1 / factors[0], 1 / factors[1])
    out = ref.resize(x, expected.shape[-2:], mode, aa, bool(ac), scale=scale)
    assert (out - expected).abs().max() <= 1e-10
    if mode != "area" and not ac and factors != (3.0, 0.5):  # in / out would be wrong
        assert (ref.resize(x, expected.shape[-2:], mode, aa, False) - expected).abs().max() > 1e-3


@pytest.mark.parametrize("m", [m for m in TORCH_MODES if m[0] != "nearest"], ids=mode_id)
def test_a_scale_factor_that_keeps_the_size(m, gen):
    needs_peer(m)
    # 37 * 1.02 -> 37: torch copies for bilinear, antialiased modes and lanczos, but
    # bicubic and nearest-exact still shift by the scale. (torch's nearest copies on small
    # planes and shifts on large ones; the reference always shifts, see its docstring.)
    mode, aa, ac = m
    x = torch.rand(1, 2, 37, 53, generator=gen, dtype=torch.float64)
    expected = interpolate(x, mode, aa, ac, scale_factor=(1.02, 1.6))
    out = ref.resize(x, expected.shape[-2:], mode, aa, bool(ac), scale=(1 / 1.02, 1 / 1.6))
    assert expected.shape[-2] == 37
    assert (out - expected).abs().max() <= 1e-10


@pytest.mark.parametrize("mode,in_size,out_size,d,j", [("nearest-exact", 16, 41, 20, 7),
                                                       ("nearest", 2, 82, 41, 0),
                                                       ("nearest", 3, 9, 3, 1)])
def test_nearest_index_is_computed_in_float32(mode, in_size, out_size, d, j):
    # exact arithmetic would give 8, 1 and 1: float32 lands just below the first two
    w = ref.weights(in_size, out_size, mode, antialias=False)
    assert w[d, j] == 1
    x = torch.arange(in_size, dtype=torch.float32).reshape(1, 1, 1, in_size)
    assert F.interpolate(x, size=(1, out_size), mode=mode)[0, 0, 0, d] == j
    assert TF.resize(x.to(torch.uint8), [1, out_size], TV_MODES[mode])[0, 0, 0, d] == j


# ---- torchvision ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", TV_MODES)
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("size,max_size", [([50, 23], None), ([111, 160], None), (20, None),
                                           ([20], None), (23, 40), (None, 31), (1, None)])
def test_equals_torchvision_resize_on_floats(mode, antialias, size, max_size, gen):
    x = torch.rand(2, 3, 37, 53, generator=gen, dtype=torch.float64)
    expected = TF.resize(x, size, TV_MODES[mode], max_size=max_size, antialias=antialias)
    out_size = ref.resized_size(37, 53, size, max_size)
    aa = antialias and mode in ("bilinear", "bicubic")  # torchvision ignores it for nearest
    out = ref.resize(x, out_size, mode, aa)
    assert out.shape == expected.shape
    assert (out - expected).abs().max() <= 1e-10


@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("mode", TV_MODES)
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("size,max_size", [([87, 121], None), ([411, 353], None), (97, 130), ([33], None)])
def test_equals_torchvision_resize_on_uint8_photos(name, mode, antialias, size, max_size):
    img = sample(name)
    expected = TF.resize(img, size, TV_MODES[mode], max_size=max_size, antialias=antialias)
    out_size = ref.resized_size(*img.shape[-2:], size, max_size)
    aa = antialias and mode in ("bilinear", "bicubic")
    out = as_uint8(ref.resize(as_unit(img), out_size, mode, aa, intermediate_clamp=True))
    assert out.shape == expected.shape
    assert max_level_diff(out, expected) <= 1


def test_uint8_peers_clamp_between_the_passes():
    # Without the intermediate clamp, overshoot next to saturated pixels is carried into the
    # second pass: the reference then differs from torchvision's uint8 path by several levels.
    img = sample("astronaut")
    expected = TF.resize(img, [411, 353], InterpolationMode.BICUBIC, antialias=False)
    unclamped = as_uint8(ref.resize(as_unit(img), (411, 353), "bicubic", False))
    clamped = as_uint8(ref.resize(as_unit(img), (411, 353), "bicubic", False, intermediate_clamp=True))
    assert max_level_diff(unclamped, expected) > 2
    assert max_level_diff(clamped, expected) <= 1


def test_resized_size_is_torchvisions():
    x = torch.zeros(1, 1, 1)
    for h, w in [(37, 53), (53, 37), (40, 40), (1, 300), (256, 255)]:
        for size, max_size in [(20, None), ([20], None), (20, 21), (20, 33), ([9, 70], None),
                               (None, 50), (1, None), (300, 301)]:
            ours = ref.resized_size(h, w, size, max_size)
            if 0 in ours:  # 1 x 300 limited to 21: torchvision computes 0 x 21, then fails
                with pytest.raises(RuntimeError, match="greater than 0"):
                    TF.resize(x.expand(1, h, w), size, max_size=max_size)
                continue
            expected = TF.resize(x.expand(1, h, w), size, max_size=max_size).shape[-2:]
            assert ours == tuple(expected), (h, w, size, max_size)


@pytest.mark.parametrize("size,max_size", [(20, 20), (20, 10), ([20, 30], 40), (None, None)])
def test_resized_size_rejects_what_torchvision_rejects(size, max_size):
    with pytest.raises(ValueError):
        TF.resize(torch.zeros(1, 37, 53), size, max_size=max_size)
    with pytest.raises(ValueError):
        ref.resized_size(37, 53, size, max_size)


# ---- PIL lanczos ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("scale", [0.3, 0.77, 1.7])
def test_lanczos_equals_pil(name, scale):
    img = sample(name)
    h, w = img.shape[-2:]
    size = (round(h * scale), round(w * scale * 0.9))
    arr = img.permute(1, 2, 0).numpy()
    pil = Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr).resize(size[::-1], Image.LANCZOS)
    expected = torch.from_numpy(np.asarray(pil).copy())
    expected = expected[None] if expected.ndim == 2 else expected.permute(2, 0, 1)
    out = as_uint8(ref.resize(as_unit(img), size, "lanczos", True, intermediate_clamp=True))
    assert max_level_diff(out, expected) <= 1


def test_lanczos_requires_antialias():
    with pytest.raises(ValueError, match="antialias"):
        ref.weights(10, 5, "lanczos", antialias=False)


# ---- area ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("factor", [2, 3, 5])
def test_area_equals_cv2_inter_area_for_integer_factors(name, factor):
    img = sample(name)
    h, w = (s - s % factor for s in img.shape[-2:])
    img = img[:, :h, :w]
    arr = np.ascontiguousarray(img.permute(1, 2, 0).numpy())
    cv = cv2.resize(arr, (w // factor, h // factor), interpolation=cv2.INTER_AREA)
    expected = torch.from_numpy(cv.reshape(h // factor, w // factor, -1)).permute(2, 0, 1)
    out = as_uint8(ref.resize(as_unit(img), (h // factor, w // factor), "area", False))
    assert max_level_diff(out, expected) <= 1


def test_area_of_an_integer_factor_is_the_block_mean(gen):
    x = torch.rand(1, 2, 12, 15, generator=gen, dtype=torch.float64)
    blocks = x.reshape(1, 2, 4, 3, 5, 3).mean((3, 5))
    assert torch.allclose(ref.resize(x, (4, 5), "area", False), blocks, rtol=0, atol=1e-14)


# ---- MATLAB imresize -----------------------------------------------------------------------

def keys(x, a=-0.5):
    x = abs(x)
    if x < 1:
        return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
    if x < 2:
        return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
    return 0.0


def matlab_by_hand(values, magnification):
    """1-D MATLAB imresize written out tap by tap: MATLAB's u = x / m + 0.5 (1 - 1 / m)
    (1-based), kernel width 4 / m when shrinking, weights normalised over the taps, taps
    outside read the mirror image (index 0 -> 1, -1 -> 2 in 1-based terms)."""
    n = len(values)
    m = magnification
    width = 4 / m if m < 1 else 4
    out = []
    for x in range(1, math.ceil(n * m) + 1):
        u = x / m + 0.5 * (1 - 1 / m)
        left = math.floor(u - width / 2)
        taps = range(left, left + math.ceil(width) + 2)
        w = [keys((u - j) * min(m, 1)) for j in taps]
        mirrored = [j if 1 <= j <= n else (1 - j if j < 1 else 2 * n + 1 - j) for j in taps]
        out.append(sum(wi * values[j - 1] for wi, j in zip(w, mirrored)) / sum(w))
    return out


def test_matlab_by_hand_on_a_ramp():
    ramp = [float(i) for i in range(16)]
    x = torch.tensor(ramp, dtype=torch.float64).reshape(1, 1, 1, 16)
    down = ref.imresize(x, scale=(1, 0.5))[0, 0, 0].tolist()
    up = ref.imresize(x, scale=(1, 2))[0, 0, 0].tolist()
    assert down == pytest.approx(matlab_by_hand(ramp, 0.5), abs=1e-12)
    assert up == pytest.approx(matlab_by_hand(ramp, 2), abs=1e-12)
    # Keys' cubic (A = -0.5) at quarter steps: k(0.25) = 111/128, k(0.75) = 29/128,
    # k(1.25) = -9/128, k(1.75) = -3/128. Downscaling by 2 stretches the kernel to width 8;
    # output 0 is centred at 0.5 (0-based) with taps -3 .. 4, which read 2, 1, 0, 0 .. 4.
    k = {0.25: 111 / 128, 0.75: 29 / 128, 1.25: -9 / 128, 1.75: -3 / 128}
    first = (k[1.75] * 2 + k[1.25] * 1 + k[0.75] * 0 + k[0.25] * 0
             + k[0.25] * 1 + k[0.75] * 2 + k[1.25] * 3 + k[1.75] * 4) / 2
    assert first == 0.44921875 and down[0] == pytest.approx(first, abs=1e-14)
    # away from the borders a ramp stays a ramp: output d sits at 2 d + 0.5
    assert down[2:6] == pytest.approx([4.5, 6.5, 8.5, 10.5], abs=1e-12)
    # upscaling by 2: output 0 is centred at -0.25 with taps -2 .. 1 reading 1, 0, 0, 1
    assert up[0] == pytest.approx(k[1.75] * 1 + k[0.75] * 0 + k[0.25] * 0 + k[1.25] * 1, abs=1e-14)
    assert up[0] == -0.09375
    assert up[4:28] == pytest.approx([0.5 * d - 0.25 for d in range(4, 28)], abs=1e-12)


@pytest.mark.parametrize("shape,scale", [((37, 53), 0.25), ((37, 53), 1 / 3), ((20, 30), 2.5),
                                         ((3, 2), 0.25), ((2, 5), 4)])
def test_matlab_keeps_a_constant_and_its_rows_sum_to_one(shape, scale, gen):
    c = torch.rand(1, generator=gen, dtype=torch.float64)
    x = c.expand(1, 2, *shape)
    out = ref.imresize(x, scale=scale)
    assert out.shape[-2:] == tuple(math.ceil(s * scale) for s in shape)
    assert (out - c).abs().max() <= 1e-14
    for n in shape:
        w = ref.weights(n, math.ceil(n * scale), "matlab", antialias=True, scale=1 / scale)
        assert (w.sum(1) - 1).abs().max() <= 1e-14


def test_matlab_size_and_scale_agree_when_the_scale_is_exact(gen):
    x = torch.rand(1, 3, 40, 24, generator=gen, dtype=torch.float64)
    assert torch.allclose(ref.imresize(x, (10, 6)), ref.imresize(x, scale=0.25), rtol=0, atol=1e-14)
    with pytest.raises(ValueError):
        ref.imresize(x, (10, 6), scale=0.25)


# ---- every mode ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode,antialias", [(m, aa) for m in ref.MODES for aa in (True, False)
                                            if aa or m != "lanczos"])
@pytest.mark.parametrize("sizes", [(37, 50), (53, 23), (5, 61), (61, 5), (9, 1), (1, 7), (13, 13)])
def test_weight_rows_sum_to_one(mode, antialias, sizes):
    w = ref.weights(*sizes, mode, antialias=antialias)
    assert w.shape == sizes[::-1]
    assert (w.sum(1) - 1).abs().max() <= 1e-12


@pytest.mark.parametrize("mode", ["bicubic", "lanczos", "matlab"])
def test_reference_gradcheck(mode, gen):
    x = torch.rand(1, 2, 7, 9, generator=gen, dtype=torch.float64, requires_grad=True)
    for size in [(3, 4), (11, 13)]:
        assert torch.autograd.gradcheck(lambda v, size=size: ref.resize(v, size, mode, True), (x,))


def test_gradient_equals_interpolate(gen):
    x = torch.rand(1, 2, 17, 23, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.randn(1, 2, 8, 30, generator=gen, dtype=torch.float64)
    (ours,) = torch.autograd.grad(ref.resize(x, (8, 30), "bicubic", True), x, g)
    (theirs,) = torch.autograd.grad(F.interpolate(x, (8, 30), mode="bicubic", antialias=True), x, g)
    assert (ours - theirs).abs().max() <= 1e-10
