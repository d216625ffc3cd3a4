"""Separable convolution: any separable filter, gaussian and box blur, unsharp masking.

All functions take ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16,
float16, bfloat16 or float32 (float64 runs the float64 reference), keep the dtype and the
memory format, and never modify the input. CUDA tensors run one Triton kernel launch
(both 1-D passes fused, no intermediate image); CPU tensors run the float64 reference,
or the Triton kernels in Triton's interpreter under ``TRITON_INTERPRET=1``.

Borders (``border=``): ``"reflect"`` (default; reflect-101, torch's "reflect", OpenCV's
BORDER_REFLECT_101), ``"symmetric"`` (edge pixel repeated, OpenCV's BORDER_REFLECT),
``"replicate"`` and ``"constant"`` (``border_value``, in unit scale: 1.0 is white for
every dtype). Filters wider than the image are fine: the reflection repeats.

Gradients flow to the image for floating-point inputs (not to the taps).
"""
import functools
import numbers

import torch

from imgfilters import _image
from imgfilters.kernels import separable as kernels
from imgfilters.ops import pointwise
from imgfilters.reference import separable as reference
from imgfilters.reference.borders import fold

__all__ = ["separable_filter", "gaussian_blur", "box_blur", "unsharp_mask"]

MAX_TAPS = 2 * kernels.MAX_RADIUS + 1


def separable_filter(img, kernel_x, kernel_y=None, *, border="reflect", border_value=0.0):
    """Correlate ``img`` with the separable kernel ``outer(kernel_y, kernel_x)``.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        kernel_x: 1-D taps along W (sequence or tensor), odd length up to 127. The centre
            tap is at index ``len // 2`` and taps are not flipped (a correlation, as
            ``cv2.sepFilter2D``, ``kornia.filters.filter2d_separable`` and
            ``torch.nn.functional.conv2d``).
        kernel_y: taps along H; ``None`` means the same as ``kernel_x``.
        border: ``"reflect"``, ``"symmetric"``, ``"replicate"`` or ``"constant"``.
        border_value: the constant border's value, unit scale.

    Returns:
        A tensor of ``img``'s shape, dtype and memory format.
    """
    tx = _check_taps(kernel_x, "kernel_x")
    ty = tx if kernel_y is None else _check_taps(kernel_y, "kernel_y")
    return _filter(img, tx, ty, border, border_value)


def gaussian_blur(inpt, kernel_size, sigma=None, *, border="reflect", border_value=0.0):
    """Gaussian blur with the signature, defaults and results of
    ``torchvision.transforms.v2.functional.gaussian_blur``.

    Args:
        inpt: ``(..., C, H, W)`` or ``(H, W)`` tensor (torchvision's parameter name).
        kernel_size: odd positive int, or ``[kx, ky]`` (x first, as torchvision), at most
            127.
        sigma: float or ``[sx, sy]`` (or ``[s]``), > 0; ``None`` gives
            ``0.3 * ((k - 1) * 0.5 - 1) + 0.8`` per axis, torchvision's rule.
        border: as in ``separable_filter``; torchvision always uses ``"reflect"``.

    Taps are torchvision's sampled, normalised gaussian. Unlike torchvision the kernel may
    be larger than the image, and uint8 is filtered directly (no float copy); results
    agree within float32 rounding (uint8: within 1, almost always identical).
    """
    kx, ky = _kernel_sizes(kernel_size)
    if sigma is None:
        sx, sy = (0.3 * ((k - 1) * 0.5 - 1) + 0.8 for k in (kx, ky))
    else:
        sx, sy = _pair(sigma, "sigma", float)
        for s in (sx, sy):
            _image.check_number(s, "sigma", low=0.0, low_open=True)
    return _filter(inpt, _gaussian(kx, sx), _gaussian(ky, sy), border, border_value)


def box_blur(img, kernel_size, *, border="reflect", border_value=0.0):
    """Mean over a ``ky x kx`` box (``kernel_size`` int or ``[kx, ky]``, odd), as
    ``cv2.blur`` with ``BORDER_REFLECT_101`` and ``kornia.filters.box_blur``."""
    kx, ky = _kernel_sizes(kernel_size)
    return _filter(img, reference.box_taps(kx), reference.box_taps(ky), border, border_value)


def unsharp_mask(img, sigma=1.0, amount=1.0, threshold=0.0, *, border="reflect", border_value=0.0):
    """Sharpen: ``img + amount * (img - blur)`` where ``|img - blur| >= threshold``.

    The blur is a gaussian of ``sigma`` with radius ``ceil(3 * sigma)``; the difference,
    the threshold and the sum are the blur kernel's epilogue, so this is one pass.
    ``threshold`` is in unit scale (PIL's ``UnsharpMask`` threshold of 3 levels is
    3/255). ``amount`` is PIL's ``percent / 100`` and skimage's ``amount``. Float results
    are not clipped; integer results saturate.
    """
    sigma = _image.check_number(sigma, "sigma", low=0.0, low_open=True)
    amount = _image.check_number(amount, "amount")
    threshold = _image.check_number(threshold, "threshold", low=0.0)
    radius = reference.unsharp_radius(sigma)
    if 2 * radius + 1 > MAX_TAPS:
        raise ValueError(f"sigma must be <= {kernels.MAX_RADIUS / 3:.1f}, got {sigma}")
    taps = _gaussian(2 * radius + 1, sigma)
    _image.check_image(img)
    code = _image.check_border(border, border_value)
    if not _image.uses_kernels(img):
        y = reference.unsharp_mask(_image.to_unit(img), sigma, amount, threshold, border, border_value)
        return _image.like_input(img, _image.from_unit(y, img.dtype))
    return _image.like_input(img, _UnsharpMask.apply(img, taps, code, border, float(border_value), amount,
                                                     threshold))


# ---- helpers -------------------------------------------------------------------------------

def _kernel_sizes(kernel_size):
    """(kx, ky) from an int or a 2-sequence of odd positive ints (torchvision's rule)."""
    if isinstance(kernel_size, (list, tuple)) and len(kernel_size) != 2:
        raise ValueError(f"kernel_size as a sequence must have length 2, got {kernel_size!r}")
    kx, ky = _pair(kernel_size, "kernel_size", int)
    for k in (kx, ky):
        if k <= 0 or k % 2 == 0 or k > MAX_TAPS:
            raise ValueError(f"kernel_size must hold odd positive integers <= {MAX_TAPS}, got {kernel_size!r}")
    return kx, ky


def _pair(value, name, kind):
    """An int/float or a 1- or 2-sequence -> (x, y), torchvision's convention."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            value = (value[0], value[0])
        if len(value) != 2:
            raise ValueError(f"{name} must be a number or a sequence of 1 or 2, got {value!r}")
    else:
        value = (value, value)
    for v in value:
        ok = isinstance(v, numbers.Integral) if kind is int else isinstance(v, numbers.Real)
        if isinstance(v, bool) or not ok:
            raise TypeError(f"{name} must hold {'integers' if kind is int else 'numbers'}, got {value!r}")
    return kind(value[0]), kind(value[1])


def _check_taps(taps, name):
    """A private float64 CPU copy of 1-D odd-length finite taps (a copy: the backward pass
    must see the taps of the forward even if the caller changes theirs in between)."""
    try:
        t = torch.as_tensor(taps.detach() if isinstance(taps, torch.Tensor) else taps)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be a sequence or tensor of numbers, got {type(taps).__name__}") from None
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.to("cpu", torch.float64, copy=True)
    if t.ndim != 1 or t.numel() % 2 == 0 or t.numel() > MAX_TAPS:
        raise ValueError(f"{name} must be 1-D with an odd length <= {MAX_TAPS}, got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite")
    return t


@functools.lru_cache(maxsize=256)
def _gaussian(size, sigma):
    return reference.gaussian_taps(size, sigma)


@functools.lru_cache(maxsize=256)
def _device_taps(taps_key, device):
    return torch.tensor(taps_key, dtype=torch.float32, device=device)


def _on(taps, device):
    """float32 copy of float64 CPU taps on ``device``, cached (taps are small and reused)."""
    return _device_taps(tuple(taps.tolist()), device)


def _filter(img, tx, ty, border, border_value):
    _image.check_image(img)
    code = _image.check_border(border, border_value)
    if not _image.uses_kernels(img):
        y = reference.separable_filter(_image.to_unit(img), tx, ty, border, border_value)
        return _image.like_input(img, _image.from_unit(y, img.dtype))
    return _image.like_input(img, _Separable.apply(img, tx, ty, code, border, float(border_value)))


def _run(img, tx, ty, code, border_value, epi=((), ())):
    """One launch; ``epi`` runs before the fusion context's epilogue (pointwise.fused)."""
    x4 = _image.as_planes(img)
    pro, (steps, args), dtype = pointwise.fused_chains(x4.shape[1], img.device, img.dtype)
    y4 = _image.new_planes(x4, dtype)
    kernels.launch(x4, y4, _on(tx, img.device), _on(ty, img.device), border=code,
                   border_value=border_value, pro=pro, epi=(epi[0] + steps, epi[1] + args))
    return y4.reshape(img.shape)


def _adjoint(grad, tx, ty, border, shape):
    """Gradient w.r.t. the image of ``separable_filter`` for output gradient ``grad``:
    the flipped filter over the zero-extended gradient (one launch into an extended
    float32 buffer), then the border extension folded back onto the pixels it read."""
    rx, ry = (len(tx) - 1) // 2, (len(ty) - 1) // 2
    g4 = _image.as_planes(grad)
    B, C, H, W = g4.shape
    z = torch.empty(B, C, H + 2 * ry, W + 2 * rx, dtype=torch.float32, device=grad.device)
    kernels.launch(g4, z, _on(tx.flip(0), grad.device), _on(ty.flip(0), grad.device),
                   oy=-ry, ox=-rx, border=_image.check_border("constant"))
    return fold(z, H, W, ry, rx, border).reshape(shape).to(grad.dtype)


class _Separable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, img, tx, ty, code, border, border_value):
        ctx.taps, ctx.border, ctx.shape = (tx, ty), border, img.shape
        return _run(img, tx, ty, code, border_value)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        tx, ty = ctx.taps
        return _adjoint(grad, tx, ty, ctx.border, ctx.shape), None, None, None, None, None


class _UnsharpMask(torch.autograd.Function):
    """y = x + a * m * (x - blur(x)), m = |x - blur(x)| >= t (piecewise constant), so
    dx = g * (1 + a m) - blur^T(a m g)."""

    @staticmethod
    def forward(ctx, img, taps, code, border, border_value, amount, threshold):
        ctx.save_for_backward(img)
        ctx.params = (taps, code, border, border_value, amount, threshold)
        return _run(img, taps, taps, code, border_value,
                    epi=((kernels.unsharp,), ((amount, threshold),)))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (img,) = ctx.saved_tensors
        taps, code, border, border_value, amount, threshold = ctx.params
        x = img.float()
        detail = x - _run(x, taps, taps, code, border_value)
        am_g = amount * (detail.abs() >= threshold) * grad.float()
        dx = grad.float() + am_g - _adjoint(am_g, taps, taps, border, img.shape)
        return dx.to(img.dtype), None, None, None, None, None, None
