"""The CPU engine's pointwise chains: the kernels' tests (every dtype in and out, rounding,
saturation, every step, layouts) run again on the engine."""
import pytest
import torch

import imgfilters
from imgfilters import _image
from imgfilters.ops import pointwise as pw

from helpers import KERNEL_DTYPES, assert_matches, random_image
from test_core import (  # noqa: F401
    test_chain_matches_plain_torch,
    test_chain_on_channels_last_and_views,
    test_dtype_conversion_scales_rounds_and_saturates,
    test_integer_store_rounds_half_to_even,
    test_load_store_round_trip_is_exact,
    test_pointwise_rejects_bad_arguments,
    test_views_whose_leading_dims_cannot_merge,
)

pytestmark = pytest.mark.usefixtures("cpu_engine")


@pytest.fixture
def device():
    """The kernels' tests above, on CPU tensors (the engine) whatever the machine has."""
    return "cpu"


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_every_step_and_dtype(dtype, gen):
    x = random_image((2, 3, 7, 9), dtype, gen)
    steps = [pw.scale(1.1), pw.normalize([0.1, 0.2, 0.3], [0.5, 1.5, 2.0]), pw.clamp(-0.5, 0.9), pw.gamma(1.7),
             pw.srgb_to_linear(), pw.linear_to_srgb(), pw.quantize(255)]
    for out in (torch.float32, dtype):
        y = imgfilters.pointwise(x, steps, dtype=out)
        assert_matches(y, pw.reference_chain(steps, _image.to_unit(x)), out)


def test_float64_output_runs_the_reference(gen):
    x = random_image((1, 2, 5, 6), torch.uint8, gen)
    y = imgfilters.pointwise(x, [pw.gamma(2.0)], dtype=torch.float64)
    assert torch.equal(y, pw.reference_chain([pw.gamma(2.0)], _image.to_unit(x)))
