"""Derivative filters: Sobel, Scharr, the Laplacian and the gradient magnitude, with
OpenCV's taps.

Each is one launch: Sobel and Scharr of the separable kernel (``ops/separable.py``), the
Laplacian of the 2-D one (``ops/filter2d.py``), with taps from
``reference/derivatives.py``; the gradient magnitude (and direction) of its own kernel
(``kernels/gradient.py``; ``cpu/gradient.py`` on the CPU engine), which computes both
derivatives from one read of the window.

A derivative is signed, so the result is float32 for integer and float32 images
(``dtype=`` chooses another; an integer dtype saturates, as OpenCV's ``ddepth=-1``,
within one level of it: exact halves round through the float32 unit scale, not half to
even), float16, bfloat16 and float64 images keep their dtype; a float64 result is the
float64 definition's. Integer images are read in unit scale as everywhere in the library (value / 255 for uint8): the
result is OpenCV's ``cv2.Sobel(img, cv2.CV_32F, ...)`` divided by 255 (pass
``scale=255`` for OpenCV's numbers).

NaN and inf stay in the window that reads them, as for the other filters, but the whole
window: a derivative's zero taps (Sobel's centre column, the Laplacian's corners) still
read the pixel, and IEEE arithmetic makes 0 * NaN and 0 * inf NaN (OpenCV skips zero taps:
its non-finite outputs are fewer; on finite images the results agree).

Gradients flow to the image for floating-point inputs. ``imgfilters.fuse`` runs these
transforms as they are (not fused into a neighbour's launch).
"""
import functools

import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.ops import filter2d as _filter2d, library, pointwise, separable as _separable
from imgfilters.reference import derivatives as reference
from imgfilters.reference.derivatives import MAX_APERTURE, SCHARR

__all__ = ["sobel", "scharr", "laplacian", "gradient_magnitude"]


def sobel(img, dx=1, dy=0, ksize=3, *, scale=1.0, border="reflect", border_value=0.0, dtype=None):
    """The derivative ``d^(dx+dy) img / dx^dx dy^dy`` by Sobel's operator, as ``cv2.Sobel``.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        dx, dy: the orders along x (W) and y (H), >= 0, not both 0, each below ``ksize``
            (with ``ksize=1``: at most 2).
        ksize: the aperture, odd, 1 to 31 (1: no smoothing across the derivative).
        scale: a factor on the result.
        border, border_value: as ``separable_filter``.
        dtype: the result's dtype (default: float32 for integer images, else ``img``'s).

    Returns:
        A tensor of ``img``'s shape and memory format.
    """
    return _image.wrap(img, _derivative_op(img, *sobel_args(img, dx, dy, ksize, scale, border, border_value, dtype)))


def scharr(img, dx=1, dy=0, *, scale=1.0, border="reflect", border_value=0.0, dtype=None):
    """The first derivative along x (``dx=1, dy=0``) or y (``dx=0, dy=1``) by Scharr's
    3x3 operator, as ``cv2.Scharr``; the other arguments as ``sobel``."""
    return _image.wrap(img, _derivative_op(img, *scharr_args(img, dx, dy, scale, border, border_value, dtype)))


def laplacian(img, ksize=1, *, scale=1.0, border="reflect", border_value=0.0, dtype=None):
    """The Laplacian ``d2/dx2 + d2/dy2``, as ``cv2.Laplacian``: ``ksize=1`` the 5-point
    stencil ``[[0, 1, 0], [1, -4, 1], [0, 1, 0]]``, an odd ``ksize`` up to 31 the sum of
    the second Sobel derivatives of that aperture. The other arguments as ``sobel``."""
    return _image.wrap(img, _laplacian_op(img, *laplacian_args(img, ksize, scale, border, border_value, dtype)))


def gradient_magnitude(img, ksize=3, *, operator="sobel", direction=False, scale=1.0, border="reflect",
                       border_value=0.0, dtype=None):
    """The magnitude ``sqrt(gx^2 + gy^2)`` of the gradient, gx and gy the first
    derivatives along x and y by Sobel's (or Scharr's) operator, in one launch: as
    ``cv2.magnitude(cv2.Sobel(img, cv2.CV_32F, 1, 0, ksize), cv2.Sobel(img, cv2.CV_32F,
    0, 1, ksize))``.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        ksize: Sobel's aperture, odd, 1 to 31 (1: the 3-tap difference, no smoothing);
            3 with ``operator="scharr"``.
        operator: ``"sobel"`` or ``"scharr"``.
        direction: also return ``atan2(gy, gx)`` (radians in [-pi, pi], x to the right
            and y down; ``cv2.phase`` gives the same angle in [0, 2 pi)), from the same
            launch. It carries no gradient.
        scale, border, border_value, dtype: as ``sobel`` (the result is float32 for
            integer images by default).

    Returns:
        A tensor of ``img``'s shape and memory format, or ``(magnitude, direction)``.
        Gradients flow to the image through the magnitude (0 where it is 0).
    """
    out = _gradient_op(img, *gradient_args(img, ksize, operator, direction, scale, border, border_value, dtype))
    if direction:
        return _image.wrap(img, out[0]), _image.wrap(img, out[1])
    return _image.wrap(img, out)


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` one output tile needs (``imgfilters.tiling``)."""
    if name == "laplacian":
        r = max(1, _aperture(a["ksize"]) // 2)
        return r, r
    if name == "gradient_magnitude":
        r = len(_gradient_taps(_gradient_aperture(a["ksize"], a["operator"]), 1.0)[0]) // 2
        return r, r
    aperture = SCHARR if name == "scharr" else a["ksize"]
    tx, ty = _taps(*_orders(a["dx"], a["dy"], aperture), 1.0)
    return len(ty) // 2, len(tx) // 2


# ---- arguments ------------------------------------------------------------------------------

def _aperture(ksize):
    return _image.check_integer(ksize, "ksize", 1, MAX_APERTURE, odd=True)


def _orders(dx, dy, aperture):
    """(dx, dy, aperture), checked: the aperture an odd ksize or ``SCHARR``."""
    dx, dy = (_image.check_integer(d, name, 0, MAX_APERTURE - 1) for d, name in ((dx, "dx"), (dy, "dy")))
    if dx + dy == 0:
        raise ValueError(f"dx and dy must be >= 0 and not both 0, got dx={dx}, dy={dy}")
    if aperture == SCHARR:
        if dx + dy != 1:
            raise ValueError(f"scharr takes dx=1, dy=0 or dx=0, dy=1, got dx={dx}, dy={dy}")
    else:
        aperture = _aperture(aperture)
        top = 2 if aperture == 1 else aperture - 1
        if max(dx, dy) > top:
            raise ValueError(f"dx and dy must be at most {top} for ksize={aperture}, got dx={dx}, dy={dy}")
    return dx, dy, aperture


def _gradient_aperture(ksize, operator):
    if operator not in ("sobel", "scharr"):
        raise ValueError(f"operator must be 'sobel' or 'scharr', got {operator!r}")
    if operator == "scharr":
        if ksize != 3:
            raise ValueError(f"scharr's aperture is 3, got ksize={ksize!r}")
        return SCHARR
    return _aperture(ksize)


def _common(img, scale, border, border_value, dtype):
    scale = _image.check_number(scale, "scale")
    _image.check_border(border, border_value)
    if dtype is None:
        dtype = torch.float32 if not img.is_floating_point() else img.dtype
    elif not isinstance(dtype, torch.dtype) or dtype not in (*_image.KERNEL_DTYPES, torch.float64):
        raise TypeError(f"dtype must be one of {[*_image.KERNEL_DTYPES, torch.float64]} or None, got {dtype!r}")
    return float(scale), border, float(border_value), dtype


def sobel_args(img, dx=1, dy=0, ksize=3, scale=1.0, border="reflect", border_value=0.0, dtype=None):
    """The derivative op's arguments after the image, checked in order (the transforms
    check theirs when made)."""
    _image.check_image(img)
    return (*_orders(dx, dy, ksize), *_common(img, scale, border, border_value, dtype))


def scharr_args(img, dx=1, dy=0, scale=1.0, border="reflect", border_value=0.0, dtype=None):
    return sobel_args(img, dx, dy, SCHARR, scale, border, border_value, dtype)


def laplacian_args(img, ksize=1, scale=1.0, border="reflect", border_value=0.0, dtype=None):
    _image.check_image(img)
    return (_aperture(ksize), *_common(img, scale, border, border_value, dtype))


def gradient_args(img, ksize=3, operator="sobel", direction=False, scale=1.0, border="reflect", border_value=0.0,
                  dtype=None):
    _image.check_image(img)
    aperture = _gradient_aperture(ksize, operator)
    if not isinstance(direction, bool):
        raise TypeError(f"direction must be True or False, got {direction!r}")
    return (aperture, *_common(img, scale, border, border_value, dtype), direction)


@functools.lru_cache(maxsize=64)
def _taps(dx, dy, aperture, scale):
    return reference.sobel_taps(dx, dy, aperture, scale)


@functools.lru_cache(maxsize=32)
def _gradient_taps(aperture, scale):
    return reference.gradient_taps(aperture, scale)


@functools.lru_cache(maxsize=32)
def _gradient_taps_on(aperture, scale, device):
    """float32 on ``device`` (one copy per aperture and scale, not one per call)."""
    return tuple(t.to(device, torch.float32) for t in _gradient_taps(aperture, scale))


@functools.lru_cache(maxsize=32)
def _laplacian_kernel(aperture, scale, device):
    """float32 on ``device`` (one copy per kernel, not one per call)."""
    return reference.laplacian_kernel(aperture, scale).to(device, torch.float32)


# ---- the ops: one launch of the separable or the 2-D kernel, its store typed as ``dtype`` ----

def _output(img, *args):
    return _image.new_image(img, dtype=args[-1])


def _typed(img, dtype, run, definition):
    """``run(fusion)`` on the kernels or the CPU engine, with a fusion that only types the
    store as ``dtype``; else (the reference path, or a float64 result, which neither
    stores) ``definition`` (float64, unit scale)."""
    if dtype != torch.float64 and (_image.uses_kernels(img) or _image.uses_cpu_engine(img)):
        return run(pointwise.Fusion((), (), img.dtype, dtype))
    y = definition(_image.to_unit(_image.as_planes(img))).reshape(img.shape)
    return _image.in_layout(img, _image.from_unit(y, dtype))


def _derivative_backward(grad, img, dx, dy, aperture, scale, border, border_value, dtype):
    return _separable._adjoint(grad, *_taps(dx, dy, aperture, scale), border, img.shape)


@library.op("derivative", _output, grads=("img",), linear=True, backward=_derivative_backward)
def _derivative_op(img: Tensor, dx: int, dy: int, aperture: int, scale: float, border: str, border_value: float,
                   dtype: torch.dtype) -> Tensor:
    tx, ty = _taps(dx, dy, aperture, scale)
    return _typed(img, dtype, lambda f: _separable._filter(img, tx, ty, border, border_value, f),
                  lambda x: reference.sobel(x, dx, dy, aperture, scale, border, border_value))


def _laplacian_backward(grad, img, aperture, scale, border, border_value, dtype):
    return _filter2d.image_gradient(grad, _laplacian_kernel(aperture, scale, grad.device), border, img.shape)


@library.op("laplacian", _output, grads=("img",), linear=True, backward=_laplacian_backward)
def _laplacian_op(img: Tensor, aperture: int, scale: float, border: str, border_value: float,
                  dtype: torch.dtype) -> Tensor:
    k = _laplacian_kernel(aperture, scale, img.device)
    return _typed(img, dtype, lambda f: _filter2d._filter2d_op.fused(f, img, k, border, border_value),
                  lambda x: reference.laplacian(x, aperture, scale, border, border_value))


def _gradient_output(img, aperture, scale, border, border_value, dtype, direction):
    """The magnitude, or the magnitude and the direction stacked along a new first axis
    (each in ``img``'s layout)."""
    return _image.new_image(img, shape=(2, *img.shape) if direction else None, dtype=dtype)


def _gradient_backward(grad, img, aperture, scale, border, border_value, dtype, direction):
    """d img through the magnitude: with w = grad / |g| (0 where |g| is 0), the adjoint of
    gx applied to w * gx plus that of gy to w * gy; gx and gy recomputed (two launches)."""
    smooth, derivative = _gradient_taps(aperture, scale)
    as_float = pointwise.Fusion((), (), img.dtype, torch.float32)
    gx = _separable._filter(img, derivative, smooth, border, border_value, as_float).float()
    gy = _separable._filter(img, smooth, derivative, border, border_value, as_float).float()
    magnitude = torch.sqrt(gx * gx + gy * gy)
    w = torch.where(magnitude > 0, (grad[0] if direction else grad).float() / magnitude, 0.0)
    return (_separable._adjoint(w * gx, derivative, smooth, border, img.shape)
            + _separable._adjoint(w * gy, smooth, derivative, border, img.shape))


@library.op("gradient_magnitude", _gradient_output, grads=("img",), backward=_gradient_backward)
def _gradient_op(img: Tensor, aperture: int, scale: float, border: str, border_value: float, dtype: torch.dtype,
                 direction: bool) -> Tensor:
    if dtype == torch.float64 or not (_image.uses_kernels(img) or _image.uses_cpu_engine(img)):
        y = reference.gradient_magnitude(_image.to_unit(_image.as_planes(img)), aperture, scale, border, border_value,
                                         direction)
        shape = (2, *img.shape) if direction else img.shape
        return _image.in_layout(img, _image.from_unit(y, dtype).reshape(shape), shape=shape)
    out = _gradient_output(img, aperture, scale, border, border_value, dtype, direction)
    y = out[0] if direction else out
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import gradient as engine
        smooth, derivative = _gradient_taps(aperture, scale)
        engine.gradient_magnitude(img, y, smooth, derivative, _image.check_border(border), border_value,
                                  out[1] if direction else None)
        return out
    from imgfilters.kernels import gradient as kernels
    kernels.launch(_image.as_planes(img), _image.as_planes(y), *_gradient_taps_on(aperture, scale, img.device),
                   _image.check_border(border), border_value, out.stride(0) if direction else None)
    return out
