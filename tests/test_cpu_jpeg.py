"""The CPU engine's JPEG round trip: the kernel's tests against the float64 reference run
again on the engine, and it equals the reference exactly on a photo (float64 too)."""
import pytest
import torch

from imgfilters import _image
from imgfilters.ops import jpeg
from imgfilters.reference import jpeg as ref

from helpers import KERNEL_DTYPES, random_image, sample
from test_jpeg import (  # noqa: F401
    test_flat_blocks_round_exact_ties_half_away_from_zero,
    test_layouts_and_a_scalar_quality,
    test_photo_at_every_scaling_of_the_tables,
    test_strips_across_a_wide_image,
)

pytestmark = pytest.mark.usefixtures("cpu_engine")


@pytest.fixture
def device():
    """The kernel's tests above, on CPU tensors (the engine) whatever the machine has."""
    return "cpu"


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("channels", [3, 1])
def test_every_dtype_in_colour_and_grey_equals_the_reference(dtype, channels, gen):
    # odd sizes: partial coded units; a quality on each side of 50; float values off the
    # 8-bit levels, and outside [0, 1]
    x = random_image((2, channels, 37, 45), dtype, gen)
    if dtype.is_floating_point:
        x = (x.float() * 1.2 - 0.1).to(dtype)
    q = torch.tensor([23.0, 87.0])
    y = jpeg.round_trip(x, q)
    assert y.dtype == dtype and y.shape == x.shape
    # float64 as the reference, but a sum in another order (or fused into an FMA where the
    # CPU has one) may land on the other side of a rounding tie it lies within 1e-9 of
    expected, ties = ref.round_trip(_image.to_unit(x), q, tie_margin=1e-9)
    keep = ~ties.expand_as(y)
    assert torch.equal(y[keep], _image.from_unit(expected, dtype)[keep])
    assert keep.double().mean() > 0.8  # (colour: a chroma block near a tie covers 16 x 16)


@pytest.mark.parametrize("channels", [3, 1])
def test_equals_the_reference_on_a_photo(channels):
    img = sample("chelsea")[:channels, :75, :93]
    x = img.expand(3, -1, -1, -1).contiguous()
    quality = torch.tensor([15.0, 50.0, 92.0])
    y = jpeg.round_trip(x, quality)
    expected = _image.from_unit(ref.round_trip(_image.to_unit(x), quality), torch.uint8)
    assert torch.equal(y, expected)
