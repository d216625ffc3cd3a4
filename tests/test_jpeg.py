"""The JPEG round trip: the kernel vs the float64 reference, the reference vs libjpeg (PIL)."""
import io

import numpy as np
import pytest
import torch
from PIL import Image

from imgfilters import _image
from imgfilters.ops import jpeg
from imgfilters.reference import jpeg as ref

from helpers import KERNEL_DTYPES, assert_matches, random_image, sample

# float32 may round a coefficient or a decoded sample the other way than float64 where it
# lies this close to a rounding tie: the reference flags those blocks, the tests skip them
TIE_MARGIN = 5e-4


def assert_matches_outside_ties(out, x, quality):
    expected, ties = ref.round_trip(_image.to_unit(x.cpu()), torch.as_tensor(quality).expand(x.shape[0]),
                                    tie_margin=TIE_MARGIN)
    keep = ~ties.expand_as(expected)
    assert_matches(out.cpu()[keep], expected[keep], out.dtype)
    return keep.double().mean().item()


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("channels", [3, 1])
def test_every_dtype_in_colour_and_grey_equals_the_reference(dtype, channels, gen, device):
    # odd sizes: partial coded units and strips; a quality on each side of 50
    x = random_image((2, channels, 37, 45), torch.uint8, gen, device)
    x = x if dtype == torch.uint8 else _image.from_unit(_image.to_unit(x), dtype)
    q = torch.tensor([23.0, 87.0], device=device)
    y = jpeg.round_trip(x, q)
    assert y.dtype == dtype and y.shape == x.shape
    assert assert_matches_outside_ties(y, x, q.cpu()) > 0.5  # (noise: big coefficients, more near ties)


def test_photo_at_every_scaling_of_the_tables(device):
    # libjpeg's scaling: 5000 // q below 50 (1 -> 5000, 10, 49), 200 - 2 q from 50 (100 -> all 1)
    img = sample("astronaut")[:, 80:144, 100:196]
    quality = torch.tensor([1.0, 10.0, 49.0, 50.0, 75.0, 100.0])
    x = img.expand(6, -1, -1, -1).contiguous().to(device)
    y = jpeg.round_trip(x, quality.to(device))
    assert assert_matches_outside_ties(y, x, quality) > 0.6
    err = (y.cpu().double() - img.double()).abs().mean((1, 2, 3))
    assert (err[:-1] >= err[1:]).all()  # higher quality, closer to the picture


def flat_blocks():
    """Every 8-bit level as a flat 8 x 8 block, stacked: (256 * 8, 8) uint8."""
    return torch.arange(256, dtype=torch.uint8).repeat_interleave(64).reshape(256 * 8, 8)


def test_flat_blocks_round_exact_ties_half_away_from_zero(device):
    # at quality 50 a flat block's DC coefficient over its quantiser (16) is (v - 128) / 2:
    # every odd v - 128 is a tie, exact in float32 too, rounded away from zero as libjpeg does
    x = flat_blocks()[None, None]
    y = jpeg.round_trip(x.to(device), 50).cpu()
    expected = ref.round_trip(x.double() / 255, torch.tensor([50]))
    assert torch.equal(y, _image.from_unit(expected, torch.uint8))
    assert y[0, 0, 8 * 127, 0] == 126 and y[0, 0, 8 * 129, 0] == 130


def test_layouts_and_a_scalar_quality(gen, device):
    x = random_image((2, 3, 24, 40), torch.uint8, gen, device)
    y = jpeg.round_trip(x, 60)
    assert torch.equal(y, jpeg.round_trip(x, torch.tensor([60.0, 60.0], device=device)))
    last = jpeg.round_trip(x.contiguous(memory_format=torch.channels_last), 60)
    assert last.is_contiguous(memory_format=torch.channels_last) and torch.equal(last, y)
    wide = random_image((2, 3, 24, 80), torch.uint8, gen, device)
    assert torch.equal(jpeg.round_trip(wide[..., ::2], 60), jpeg.round_trip(wide[..., ::2].contiguous(), 60))


def test_strips_across_a_wide_image(gen, device):
    # wider than one strip in the interpreter too (256 columns): the chroma's rounding bias
    # and the strips' column offsets carry across
    x = random_image((1, 3, 20, 300), torch.uint8, gen, device)
    assert assert_matches_outside_ties(jpeg.round_trip(x, 45), x, torch.tensor([45.0])) > 0.5


def test_quality_is_rounded_half_up_and_clamped(gen, device):
    x = random_image((2, 1, 16, 16), torch.uint8, gen, device)
    assert torch.equal(jpeg.round_trip(x, 40.5), jpeg.round_trip(x, 41))
    assert torch.equal(jpeg.round_trip(x, -3), jpeg.round_trip(x, 1))
    assert torch.equal(jpeg.round_trip(x, 250), jpeg.round_trip(x, 100))
    assert torch.equal(jpeg.round_trip(x, torch.tensor([70.0])), jpeg.round_trip(x, 70))  # one value for all
    nan = jpeg.round_trip(x, torch.tensor([float("nan"), 90.0], device=device))
    assert torch.equal(nan[:1], jpeg.round_trip(x[:1], 1))


@pytest.mark.parametrize("shape,quality,error,match", [
    ((1, 2, 8, 8), 50, ValueError, "C = 1 or 3"),
    ((3, 8, 8), 50, ValueError, "C = 1 or 3"),
    ((2, 3, 8, 8), torch.tensor([50.0, 60.0, 70.0]), ValueError, "one value per image"),
    ((2, 3, 8, 8), float("nan"), ValueError, "finite"),
    ((2, 3, 8, 8), True, TypeError, "real number"),
    ((2, 3, 8, 8), "50", TypeError, "real number"),
    ((2, 3, 8, 8), torch.tensor([True, False]), TypeError, "real numbers"),
])
def test_bad_input_raises(shape, quality, error, match):
    with pytest.raises(error, match=match):
        jpeg.round_trip(torch.zeros(shape), quality)


# ---- the reference vs libjpeg ----------------------------------------------------------------

def pil_round_trip(img, quality):
    """libjpeg's round trip through PIL: 4:2:0 for colour, its default (smoothed) decode."""
    arr = img.permute(1, 2, 0).numpy() if img.shape[0] == 3 else img[0].numpy()
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=quality, subsampling=2)
    out = torch.from_numpy(np.asarray(Image.open(io.BytesIO(buf.getvalue()))).astype(np.float64))
    return out.permute(2, 0, 1) if out.ndim == 3 else out[None]


def test_reference_equals_libjpeg_on_flat_blocks():
    img = flat_blocks()[None]
    ours = ref.round_trip(img[None].double() / 255, torch.tensor([50]))[0] * 255
    assert torch.equal(ours, pil_round_trip(img, 50))


@pytest.mark.parametrize("quality", [30, 75, 95])
def test_reference_equals_libjpeg_on_a_grey_photo(quality):
    # what remains is libjpeg's integer DCT: a level here and there
    img = sample("camera")
    ours = ref.round_trip(img[None].double() / 255, torch.tensor([quality]))[0] * 255
    diff = (ours - pil_round_trip(img, quality)).abs()
    assert diff.mean() < 0.3 and diff.flatten().quantile(0.99) <= 4


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea"])
@pytest.mark.parametrize("quality", [30, 50, 75])
def test_reference_is_libjpeg_less_its_chroma_smoothing_on_colour_photos(name, quality):
    # libjpeg's decoder interpolates the chroma where the reference repeats it: a level on
    # average, against the several levels JPEG itself changes
    img = sample(name)
    pil = pil_round_trip(img, quality)
    ours = ref.round_trip(img[None].double() / 255, torch.tensor([quality]))[0] * 255
    assert (ours - pil).abs().mean() < min(1.5, 0.35 * (img.double() - pil).abs().mean())
