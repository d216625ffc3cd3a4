"""The median filter: ``median_blur``.

Inputs are ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16, float16,
bfloat16 or float32 (float64 runs the float64 reference); the output keeps the dtype and
memory format. CUDA tensors run one Triton launch (``kernels/median/``: selection
networks over sorted columns for 3x3 and 5x5, over the window for 7x7, a radix select per
pixel beyond; no sort); other CPU
tensors run the CPU engine (``imgfilters/cpu/median.py``), or the Triton kernel in
Triton's interpreter under ``TRITON_INTERPRET=1``.

Gradients (floating-point inputs) route each output's gradient to the pixel its median
was read from (``reference.median``: ties by the middle rank of a stable sort of the
window); on the kernel path one launch of the kernel in its ``ARG`` mode finds those
positions, then one ``index_put_`` adds the gradients through the border.
"""

import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import median as kernels
from imgfilters.ops import library, pointwise
from imgfilters.reference import median as reference
from imgfilters.reference.borders import border_indices

__all__ = ["median_blur"]

MAX_SIZE = kernels.MAX_SIZE


def median_blur(img, kernel_size, *, border="reflect", border_value=0.0):
    """The median of each pixel's ``kernel_size x kernel_size`` window.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        kernel_size: odd window side, 1 to 31 (1 returns the image).
        border: ``"reflect"`` (default, reflect-101), ``"symmetric"``, ``"replicate"``
            (``cv2.medianBlur``'s) or ``"constant"`` (``border_value``, unit scale).

    Returns:
        A tensor of ``img``'s shape, dtype and memory format: each value one of its
        window's values, exactly (no rounding). An output whose window holds a NaN is NaN.
        Time grows with ``kernel_size ** 2`` (and 32 rounds for floats against 8 for uint8).
    """
    return _image.wrap(img, _median_op(img, *_median_args(img, kernel_size, border, border_value)))


def _median_args(img, kernel_size, border, border_value):
    """The op's arguments after the image, checked in order."""
    k = check_size(kernel_size)
    _image.check_image(img)
    _image.check_border(border, border_value)
    return k, border, float(border_value)


def check_size(kernel_size):
    """An odd window side from 1 to ``MAX_SIZE``; a clear error otherwise."""
    return _image.check_integer(kernel_size, "kernel_size", 1, MAX_SIZE, odd=True)


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` that one output tile needs (``imgfilters.tiling``):
    the window's reach, ``kernel_size // 2``."""
    r = check_size(a["kernel_size"]) // 2
    return r, r


def _run(img, k, border, border_value, fusion=None):
    """One launch (with ``fusion``'s prologue and epilogue, a ``pointwise.Fusion``)."""
    x4 = _image.as_planes(img)
    pro, epi, dtype = pointwise.fused_chains(fusion, x4.shape[1], img.device, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    kernels.launch(x4, _image.as_planes(y), k, border=_image.check_border(border), border_value=border_value,
                   pro=pro, epi=epi)
    return y


def _backward(grad, img, k, border, border_value):
    """d img on the kernel path: each output's gradient added to the pixel its median's
    window position reads (none for a constant border's positions outside the image)."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    pos = torch.empty(B, C, H, W, dtype=torch.int32, device=img.device)
    kernels.launch(x4, pos, k, border=_image.check_border(border), border_value=border_value, arg=True)
    r = k // 2
    pos = pos.long()
    rows = border_indices(H, r, r, border).to(img.device)[torch.arange(H, device=img.device)[:, None] + pos // k]
    cols = border_indices(W, r, r, border).to(img.device)[torch.arange(W, device=img.device)[None, :] + pos % k]
    g = _image.as_planes(grad).float()
    read = (rows >= 0) & (cols >= 0)
    planes = torch.arange(B * C, device=img.device).reshape(B, C, 1, 1).expand(B, C, H, W)
    d = torch.zeros(B * C, H, W, dtype=torch.float32, device=img.device)
    d.index_put_((planes[read], rows[read], cols[read]), g[read], accumulate=True)
    return d.reshape(img.shape)


@library.op("median_blur", library.same_as_input, grads=("img",), backward=_backward, cpu_engine=True)
def _median_op(img: Tensor, kernel_size: int, border: str, border_value: float, *, fusion=None) -> Tensor:
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import median as engine
        return engine.median_blur(img, kernel_size, _image.check_border(border), border_value, fusion)
    if not _image.uses_kernels(img):
        y = reference.median_blur(_image.to_unit(_image.as_planes(img)), kernel_size, border, border_value)
        return _image.in_layout(img, _image.from_unit(y.reshape(img.shape), img.dtype))
    return _run(img, kernel_size, border, border_value, fusion)
