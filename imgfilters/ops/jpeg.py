"""The JPEG round trip of ``imgfilters.reference.jpeg`` as a custom op: each image of a
batch encoded and decoded at its own quality, one launch, nothing allocated but the
output; ``imgfilters.degrade.jpeg`` calls it (its default codec).

Inputs are ``(B, C, H, W)`` batches, C 1 (grey) or 3 (RGB), of any kernel dtype (uint8,
uint16, float16, bfloat16, float32; float64 runs the float64 reference); floating-point
values outside [0, 1] saturate, as a codec's 8-bit input does. The output has the
input's dtype, on 8-bit levels.
"""
import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import jpeg as kernels
from imgfilters.ops import library
from imgfilters.reference import jpeg as reference

__all__ = ["round_trip"]


def round_trip(img, quality):
    """The JPEG round trip of ``img`` (B, C, H, W), C 1 or 3, at ``quality``: a number, or
    one per image ((B,) tensor or sequence); rounded (half up) and clamped to 1..100."""
    _image.check_image(img)
    if img.ndim != 4 or img.shape[1] not in (1, 3):
        raise ValueError(f"JPEG takes (B, C, H, W) batches with C = 1 or 3, got {tuple(img.shape)}")
    q = torch.as_tensor(quality, dtype=torch.float32, device=img.device)
    if q.ndim > 1 or q.ndim == 1 and q.shape[0] != img.shape[0]:
        raise ValueError(f"quality must be a number or one per image ({img.shape[0]}), got shape {tuple(q.shape)}")
    return _image.wrap(img, _jpeg_op(img, q.expand(img.shape[0])))


@library.op("jpeg", library.same_as_input)
def _jpeg_op(img: Tensor, quality: Tensor) -> Tensor:
    if not _image.uses_kernels(img):
        y = reference.round_trip(_image.to_unit(img), quality)
        return _image.in_layout(img, _image.from_unit(y, img.dtype))
    y = _image.new_image(img)
    kernels.launch(img, y, quality, kernels.base_tables(img.device, reference.LUMA_TABLE, reference.CHROMA_TABLE))
    return y
