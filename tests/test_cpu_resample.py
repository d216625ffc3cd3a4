"""The CPU engine's resampling: the kernels' tests against the float64 reference and the
peers (F.interpolate, torchvision, PIL, MATLAB's imresize) run again on the engine, and its
own: both pass orders, every mode, dtype and layout, fused steps."""
import pytest
import torch
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.cpu import resample as engine
from imgfilters.reference import resample as ref

from helpers import KERNEL_DTYPES, assert_fused_in_one_engine_pass, assert_matches, random_image, sample
from test_resample import (  # noqa: F401
    test_channels_last_views_batches_and_input_untouched,
    test_every_dtype_against_the_reference,
    test_gradients_equal_interpolates,
    test_imresize_equals_the_matlab_reference,
    test_integer_factors_equal_interpolate,
    test_lanczos_equals_pil_on_photos,
    test_one_pixel_outputs_and_factors_above_8,
    test_positions_far_from_the_origin_stay_exact,
    test_resize_equals_torchvision_float_and_uint8,
    test_resize_size_rules_and_max_size,
    test_upsample_by_scale_factor,
    test_upsample_equals_interpolate,
)

pytestmark = pytest.mark.usefixtures("cpu_engine")


@pytest.fixture
def device():
    """The kernels' tests above, on CPU tensors (the engine) whatever the machine has."""
    return "cpu"


def unit(x):
    return _image.to_unit(_image.as_planes(x))


CASES = [("nearest", False, (23, 9)), ("nearest-exact", False, (40, 31)), ("bilinear", False, (29, 44)),
         ("bilinear", True, (9, 13)), ("bicubic", False, (37, 12)), ("bicubic", True, (8, 50)),
         ("lanczos", True, (30, 11)), ("area", False, (6, 7)), ("matlab", True, (7, 33))]


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("columns_first", [False, True])
def test_every_mode_dtype_layout_and_order(dtype, columns_first, gen, monkeypatch):
    """Both pass orders (forced), every mode up and down, against the reference (whose
    intermediate clamp the integer images' rows-first order follows)."""
    monkeypatch.setattr(engine, "_columns_first", lambda shape, size, kv, kh, ph, keep: columns_first and not keep)
    engine._plan.cache_clear()
    x = random_image((2, 3, 17, 22), dtype, gen)
    for img in (x, x.contiguous(memory_format=torch.channels_last), torch.cat([x, x], -1)[..., ::2]):
        for mode, aa, size in CASES:
            if mode == "matlab":
                y = imgfilters.imresize(img, size=size)
            else:
                y = imgfilters.resize(img, size, mode, antialias=aa)
            assert y.is_contiguous(memory_format=torch.channels_last) == _image.is_channels_last(img)
            expected = ref.resize(unit(img), size, mode, aa, intermediate_clamp=dtype in _image.MAX_VALUE)
            assert_matches(y, expected.reshape(y.shape))
    engine._plan.cache_clear()


def test_the_cheaper_order_is_chosen():
    # upscaling: along W first (fewer rows); downscaling: along H first, unless an integer
    # image's W pass can overshoot (bicubic), which keeps the reference's order for its clamp
    first = lambda shape, size, mode, aa, clamp: engine._plan(  # noqa: E731
        shape, size, mode, aa, False, (shape[0] / size[0], shape[1] / size[1]), clamp, True, 1 / 255)[-1]
    assert not first((100, 100), (200, 200), "bicubic", False, True)
    assert first((400, 400), (100, 100), "bilinear", True, True)
    assert not first((400, 400), (100, 100), "bicubic", True, True)
    assert first((400, 400), (100, 100), "bicubic", True, False)


def test_sample_photo_upscale_and_downscale():
    x = sample("chelsea")[None]
    for size, mode, aa in (((2 * 64, 2 * 80), "bicubic", False), ((40, 51), "bilinear", True)):
        img = x[..., :64, :80] if size[0] > 64 else x
        y = imgfilters.resize(img, size, mode, antialias=aa)
        assert_matches(y, ref.resize(unit(img), size, mode, aa, intermediate_clamp=True).reshape(y.shape))


@pytest.mark.parametrize("resize", [T.Resize((29, 37), "bicubic"), T.Resize((7, 9), antialias=True)])
def test_fused_prologue_and_epilogue(resize, gen, monkeypatch):
    x = random_image((2, 3, 19, 23), torch.uint8, gen)
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.1]), resize,
             v2.Normalize([0.1], [2.0])]
    assert_fused_in_one_engine_pass(steps, x, monkeypatch)
