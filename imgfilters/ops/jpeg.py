"""The JPEG round trip of ``imgfilters.reference.jpeg`` as a custom op: each image of a
batch encoded and decoded at its own quality, one launch, nothing allocated but the
output; ``imgfilters.degrade.jpeg`` calls it (its default codec).

Inputs are ``(B, C, H, W)`` batches, C 1 (grey) or 3 (RGB), of any kernel dtype (uint8,
uint16, float16, bfloat16, float32; float64 runs the float64 reference); floating-point
values outside [0, 1] saturate, as a codec's 8-bit input does. The output has the
input's dtype, on 8-bit levels. The kernel equals the reference except where a DCT
coefficient or a decoded sample lies within about 1e-4 of a rounding tie, where float32
may round it the other way (about 1 % of a photo's pixels, by 1-3 levels).
"""
import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import jpeg as kernels
from imgfilters.ops import library
from imgfilters.reference import jpeg as reference

__all__ = ["round_trip"]

CHANNELS = (1, 3)  # what JPEG codes: grey, RGB


def round_trip(img, quality):
    """The JPEG round trip of ``img`` (B, C, H, W), C 1 or 3, at ``quality`` (``qualities``)."""
    check_batch(img)
    return _image.wrap(img, _jpeg_op(img, qualities(quality, img.shape[0], img.device)))


def check_batch(img, name="img"):
    """Raise TypeError/ValueError naming ``name`` unless ``img`` is a batch JPEG takes:
    (B, C, H, W) with C = 1 or 3."""
    _image.check_image(img, name)
    if img.ndim != 4 or img.shape[1] not in CHANNELS:
        raise ValueError(f"{name} must be a (B, C, H, W) batch with C = 1 or 3 (grey or RGB), "
                         f"got shape {tuple(img.shape)}")


def qualities(quality, batch, device):
    """``quality`` as the op takes it, a float32 (batch,) tensor on ``device``: a number (one
    for every image; checked: finite), or a tensor of one value or one per image (its
    values are not read here, which would wait for the device). The op rounds each half up
    and clamps it to 1..100 (NaN: 1)."""
    if isinstance(quality, torch.Tensor):  # (its dtype and shape checked as every per-image parameter's)
        q = _image.sent(_image.per_image(quality, "quality", batch), device)  # (a tensor stays one; no wait)
    else:  # (any finite number: the op clamps it; cached on the device, no copy a call)
        q = _image.on((_image.check_number(quality, "quality"),), device)
    return q.reshape(-1).expand(batch)


@library.op("jpeg", library.same_as_input)
def _jpeg_op(img: Tensor, quality: Tensor) -> Tensor:
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import jpeg as engine
        return engine.round_trip(img, quality)
    if not _image.uses_kernels(img):
        y = reference.round_trip(_image.to_unit(img), quality)
        return _image.in_layout(img, _image.from_unit(y, img.dtype))
    y = _image.new_image(img)
    kernels.launch(img, y, quality, _image.on(reference.TABLES, img.device))
    return y
