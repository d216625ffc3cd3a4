"""Separable convolution: any separable filter, gaussian and box blur, unsharp masking.

All functions take ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16,
float16, bfloat16 or float32 (float64 runs the float64 reference), keep the dtype and the
memory format, and never modify the input. CUDA tensors run one Triton kernel launch
(both 1-D passes fused, no intermediate image); other CPU tensors run the CPU engine
(``imgfilters/cpu``), or the Triton kernels in Triton's interpreter under
``TRITON_INTERPRET=1``.

Borders (``border=``): ``"reflect"`` (default; reflect-101, torch's "reflect", OpenCV's
BORDER_REFLECT_101), ``"symmetric"`` (edge pixel repeated, OpenCV's BORDER_REFLECT),
``"replicate"`` and ``"constant"`` (``border_value``, in unit scale: 1.0 is white for
every dtype). Filters wider than the image are fine: the reflection repeats.

Gradients flow to the image for floating-point inputs (not to the taps).

``separable_filter`` also takes a row of taps per image (``(B, K)`` tensors, B the images
of the batch): one launch filters every image with its own taps, which is how
``transforms.GaussianBlur(per_sample=True)`` blurs each image with its own sigma.
"""
import functools
import numbers
from typing import List

import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import separable as kernels
from imgfilters.ops import library, pointwise
from imgfilters.reference import separable as reference
from imgfilters.reference.borders import border_indices

__all__ = ["separable_filter", "gaussian_blur", "box_blur", "unsharp_mask"]

MAX_TAPS = 2 * kernels.MAX_RADIUS + 1


def separable_filter(img, kernel_x, kernel_y=None, *, border="reflect", border_value=0.0):
    """Correlate ``img`` with the separable kernel ``outer(kernel_y, kernel_x)``.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        kernel_x: 1-D taps along W (sequence or tensor), odd length up to 127. The centre
            tap is at index ``len // 2`` and taps are not flipped (a correlation, as
            ``cv2.sepFilter2D``, ``kornia.filters.filter2d_separable`` and
            ``torch.nn.functional.conv2d``). A ``(B, K)`` tensor gives each of the B
            images of the batch (the dimensions before C and H and W, flattened) its own
            row of taps, in one launch.
        kernel_y: taps along H (1-D, or a row per image); ``None`` means the same as
            ``kernel_x``.
        border: ``"reflect"``, ``"symmetric"``, ``"replicate"`` or ``"constant"``.
        border_value: the constant border's value, unit scale.

    Returns:
        A tensor of ``img``'s shape, dtype and memory format.
    """
    return _image.wrap(img, _separable_op(img, *_separable_args(img, kernel_x, kernel_y, border, border_value)))


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
    return _image.wrap(inpt, _gaussian_op(inpt, *_gaussian_args(inpt, kernel_size, sigma, border, border_value)))


def box_blur(img, kernel_size, *, border="reflect", border_value=0.0):
    """Mean over a ``ky x kx`` box (``kernel_size`` int or ``[kx, ky]``, odd), as
    ``cv2.blur`` with ``BORDER_REFLECT_101`` and ``kornia.filters.box_blur``."""
    return _image.wrap(img, _box_op(img, *_box_args(img, kernel_size, border, border_value)))


def unsharp_mask(img, sigma=1.0, amount=1.0, threshold=0.0, *, border="reflect", border_value=0.0):
    """Sharpen: ``img + amount * (img - blur)`` where ``|img - blur| >= threshold``.

    The blur is a gaussian of ``sigma`` with radius ``ceil(3 * sigma)``; the difference,
    the threshold and the sum are the blur kernel's epilogue, so this is one pass.
    ``threshold`` is in unit scale (PIL's ``UnsharpMask`` threshold of 3 levels is
    3/255). ``amount`` is PIL's ``percent / 100`` and skimage's ``amount``. Float results
    are not clipped; integer results saturate.

    ``sigma`` and ``amount`` may also be 1-D tensors of one value per image (the B images
    of the batch, the dimensions before C, H and W flattened): still one launch, each
    image blurred with its own radius (its row of taps zero beyond it), so that image b's
    result is ``unsharp_mask(img[b], sigma[b], amount[b])``'s.
    """
    return _image.wrap(img, _unsharp_op(img, *_unsharp_args(img, sigma, amount, threshold, border, border_value)))


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` that one output tile of the family's filter
    ``name`` needs (``imgfilters.tiling``): half the taps along each axis; ``a`` holds the
    call's arguments by name."""
    if name == "separable_filter":
        tx = _check_taps(a["kernel_x"], "kernel_x")
        ty = tx if a["kernel_y"] is None else _check_taps(a["kernel_y"], "kernel_y")
        return ty.shape[-1] // 2, tx.shape[-1] // 2
    if name in ("gaussian_blur", "box_blur"):
        kx, ky = _kernel_sizes(a["kernel_size"])
        return ky // 2, kx // 2
    r = _unsharp_reach(a["sigma"])
    return r, r


# ---- the ops' arguments (after the image) from the public functions', checked in order ------

def _separable_args(img, kernel_x, kernel_y, border, border_value):
    tx = _check_taps(kernel_x, "kernel_x")
    ty = tx if kernel_y is None else _check_taps(kernel_y, "kernel_y")
    _check(img, border, border_value)
    batch = _image.as_planes(img).shape[0] if img.ndim >= 2 else 1
    for t, name in ((tx, "kernel_x"), (ty, "kernel_y")):
        if t.ndim == 2 and t.shape[0] != batch:
            raise ValueError(f"{name} as a 2-D tensor must hold one row of taps per image ({batch}), "
                             f"got shape {tuple(t.shape)}")
    return tx, ty, border, float(border_value)


def _gaussian_args(inpt, kernel_size, sigma, border, border_value):
    kx, ky = _kernel_sizes(kernel_size)
    if sigma is None:
        sx, sy = (0.3 * ((k - 1) * 0.5 - 1) + 0.8 for k in (kx, ky))
    else:
        sx, sy = _pair(sigma, "sigma", float)
        for s in (sx, sy):
            _image.check_number(s, "sigma", low=0.0, low_open=True)
    _check(inpt, border, border_value)
    return [kx, ky], [sx, sy], border, float(border_value)


def _box_args(img, kernel_size, border, border_value):
    kx, ky = _kernel_sizes(kernel_size)
    _check(img, border, border_value)
    return [kx, ky], border, float(border_value)


def _unsharp_args(img, sigma, amount, threshold, border, border_value):
    """A number stays a Python float (checked here); a tensor of per-image values is
    checked inside the op, where reading its values cannot break a compiled graph."""
    batch = _image.as_planes(img).shape[0] if isinstance(img, torch.Tensor) and img.ndim >= 2 else 1
    sigma = _image.per_image(sigma, "sigma", batch)
    amount = _image.per_image(amount, "amount", batch, positive=None)
    threshold = _image.check_number(threshold, "threshold", low=0.0)
    if isinstance(sigma, float):
        _unsharp_reach(sigma)
    _check(img, border, border_value)
    return sigma, amount, threshold, border, float(border_value)


def _unsharp_reach(sigma):
    """The radius of the widest blur of ``sigma`` (a number, or a tensor of one value per
    image), with the values checked and the radius held to the kernels' limit."""
    if isinstance(sigma, torch.Tensor):
        largest = max(_image.per_image_floats(sigma, "sigma", sigma.numel()))
    else:
        largest = _image.check_number(sigma, "sigma", low=0.0, low_open=True)
    r = reference.unsharp_radius(largest)
    if r > kernels.MAX_RADIUS:
        raise ValueError(f"sigma must be <= {kernels.MAX_RADIUS / 3:.1f}, got {largest}")
    return r


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
    """A private float64 CPU copy of odd-length taps, 1-D or a row per image (a copy: the backward pass must see
    the taps of the forward even if the caller changes theirs in between). That they are
    finite is checked inside the op (``_finite_taps``). Taps that require grad are
    refused: gradients flow to the image only, and a silently missing one is worse."""
    if isinstance(taps, torch.Tensor) and taps.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{name} requires grad, but the taps get no gradient (only the image does): "
                         f"pass {name}.detach()")
    try:
        t = torch.as_tensor(taps.detach() if isinstance(taps, torch.Tensor) else taps)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be a sequence or tensor of numbers, got {type(taps).__name__}") from None
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.to("cpu", torch.float64, copy=True)
    if t.ndim not in (1, 2) or t.shape[-1] % 2 == 0 or t.shape[-1] > MAX_TAPS or t.numel() == 0:
        raise ValueError(f"{name} must be 1-D (or 2-D, a row per image) with an odd length <= {MAX_TAPS}, "
                         f"got shape {tuple(t.shape)}")
    return t


def _finite_taps(taps, name):
    if not torch.isfinite(taps).all():
        raise ValueError(f"{name} must be finite")
    return taps


def _check(img, border, border_value):
    _image.check_image(img)
    _image.check_border(border, border_value)


# Taps made from plain values are kept as tuples of floats: the kernels take them as a
# device vector from the constant cache (``_image.on``), which a tensor would first have to
# be read back into (2 us of host time a call).
@functools.lru_cache(maxsize=256)
def _gaussian(size, sigma):
    return tuple(reference.gaussian_taps(size, sigma).tolist())


def _as_tensor(taps):
    """Taps as a float64 CPU tensor (the reference's and the CPU engine's)."""
    return taps if isinstance(taps, torch.Tensor) else torch.tensor(taps, dtype=torch.float64)


def _filter(img, tx, ty, border, border_value, fusion=None):
    """The separable filter of ``img``: the reference, or one launch (with ``fusion``'s
    prologue and epilogue, a ``pointwise.Fusion``). Taps with a row per image run as one
    launch on the kernels, image by image on the CPU engine and the reference."""
    if _per_image(tx) or _per_image(ty):
        tx, ty = _rows(tx, ty)
        if not _image.uses_kernels(img) or _image.uses_cpu_engine(img):
            x4 = _image.as_planes(img)
            y = torch.cat([_filter(x4[b:b + 1], tx[b], ty[b], border, border_value, fusion)
                           for b in range(x4.shape[0])])
            return _image.in_layout(img, y)
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import separable as engine
        return engine.separable_filter(img, _as_tensor(tx), _as_tensor(ty), _image.check_border(border),
                                       border_value, fusion)
    if not _image.uses_kernels(img):
        y = reference.separable_filter(_image.to_unit(img), _as_tensor(tx), _as_tensor(ty), border, border_value)
        return _image.in_layout(img, _image.from_unit(y, img.dtype))
    return _run(img, tx, ty, _image.check_border(border), border_value, fusion=fusion)


def _per_image(taps):
    return isinstance(taps, torch.Tensor) and taps.ndim == 2


def _rows(tx, ty):
    """Taps of which one has a row per image: both as (B, K) tensors."""
    batch = (tx if _per_image(tx) else ty).shape[0]
    return tuple(t if _per_image(t) else _as_tensor(t).expand(batch, -1) for t in (tx, ty))


def _on(taps, device):
    """Taps as float32 on ``device``: shared ones from ``_image.on``'s cache; rows per image
    (a transform's fresh draws on nearly every call, for which that cache, keyed by the
    values, would cost more host time than the kernel) copied asynchronously
    (``_image.sent``), unless a CUDA graph is being captured (its replays read them after
    this call: ``_image.on`` keeps them)."""
    if _per_image(taps) and not (taps.device != device and torch.cuda.is_current_stream_capturing()):
        return _image.sent(taps, device)
    return _image.on(taps, device)


def _length(taps):
    return taps.shape[-1] if isinstance(taps, torch.Tensor) else len(taps)


def _run(img, tx, ty, code, border_value, epi=pointwise.NO_CHAIN, fusion=None):
    """One launch; ``epi`` runs before ``fusion``'s epilogue."""
    x4 = _image.as_planes(img)
    pro, (steps, args), dtype = pointwise.fused_chains(fusion, x4.shape[1], img.device, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    dx = _on(tx, img.device)
    kernels.launch(x4, _image.as_planes(y), dx, dx if ty is tx else _on(ty, img.device), border=code,
                   border_value=border_value, pro=pro, epi=(epi[0] + steps, epi[1] + args))
    return y


def _adjoint(grad, tx, ty, border, shape):
    """Gradient w.r.t. the image of ``separable_filter`` for output gradient ``grad``: the
    flipped filter over the zero-extended gradient, z, with the border extension folded
    back onto the pixels it read. The constant border reads no pixel: z's interior is the
    result, one launch. The other borders: one launch of the strip kernel over z's whole
    extended grid that adds each value where the border read it from
    (``kernels.launch_adjoint``). Filters taller than the strip kernel takes: z's interior
    launched straight into the result, its margins folded onto it (``fold_margins``)."""
    if _per_image(tx) or _per_image(ty):
        tx, ty = _rows(tx, ty)
    rx, ry = (_length(tx) - 1) // 2, (_length(ty) - 1) // 2
    g4 = _image.as_planes(grad)
    B, C, H, W = g4.shape
    fx, fy = (_on(t.flip(-1) if isinstance(t, torch.Tensor) else t[::-1], grad.device) for t in (tx, ty))
    zero = _image.check_border("constant")
    if border != "constant" and kernels.strip_fits(ry, grad):
        gx = torch.zeros(B, C, H, W, dtype=torch.float32, device=grad.device)
        kernels.launch_adjoint(g4, gx, fx, fy, _image.check_border(border))
        return gx.reshape(shape)
    gx = torch.empty(B, C, H, W, dtype=torch.float32, device=grad.device)
    kernels.launch(g4, gx, fx, fy, border=zero)
    if border != "constant":
        fold_margins(gx, lambda out, oy, ox: kernels.launch(g4, out, fx, fy, oy=oy, ox=ox, border=zero), rx, ry,
                     border)
    return gx.reshape(shape)


def fold_margins(gx, z, rx, ry, border):
    """Add into ``gx`` (B, C, H, W), an adjoint's values at the pixels, its values at the
    margins of the grid extended by ``ry`` rows and ``rx`` columns, folded back onto the
    pixels that ``border`` read there: ``z(out, oy, ox)`` writes the values of ``out``'s
    rows and columns from (oy, ox) of the extended grid. The top and bottom margin rows
    (their whole width) are folded along x, then along y; the left and right margin
    columns beside the image rows along x."""
    B, C, H, W = gx.shape
    if ry > 0:
        zr = torch.empty(B, C, 2 * ry, W + 2 * rx, dtype=torch.float32, device=gx.device)
        z(zr[:, :, :ry], -ry, -rx)
        z(zr[:, :, ry:], H, -rx)
        if rx > 0:
            at, src = _margin_indices(W, rx, border, gx.device)
            at = torch.where(at < rx, at, at + W)  # zr's columns span the whole extended width
            zr.narrow(-1, rx, W).index_add_(-1, src, zr.index_select(-1, at))
        at, src = _margin_indices(H, ry, border, gx.device)
        gx.index_add_(-2, src, zr.narrow(-1, rx, W).index_select(-2, at))
    if rx > 0:
        zc = torch.empty(B, C, H, 2 * rx, dtype=torch.float32, device=gx.device)
        z(zc[..., :rx], 0, -rx)
        z(zc[..., rx:], 0, W)
        at, src = _margin_indices(W, rx, border, gx.device)
        gx.index_add_(-1, src, zc.index_select(-1, at))


@functools.lru_cache(maxsize=256)
def _margin_indices(n, r, mode, device):
    """For an axis of n pixels extended by r on both sides: where each margin position
    lies in the 2*r margin positions (before, then after), and the pixel it was read from;
    constant-border positions (which read no pixel) left out."""
    src = border_indices(n, r, r, mode)
    margin = torch.cat([src[:r], src[r + n:]])
    at = torch.nonzero(margin >= 0).flatten()
    return at.to(device), margin[at].to(device)


# ---- the custom ops (imgfilters.ops.library): gradients flow to the image only -------------

def _gaussian_taps(kernel_size, sigma):
    return _gaussian(kernel_size[0], sigma[0]), _gaussian(kernel_size[1], sigma[1])


@functools.lru_cache(maxsize=256)
def _box(size):
    return tuple(reference.box_taps(size).tolist())


def _box_taps(kernel_size):
    return _box(kernel_size[0]), _box(kernel_size[1])


@library.op("separable_filter", library.same_as_input, grads=("img",), linear=True, cpu_engine=True,
            backward=lambda grad, img, tx, ty, border, bv: _adjoint(grad, tx, ty, border, img.shape))
def _separable_op(img: Tensor, kernel_x: Tensor, kernel_y: Tensor, border: str, border_value: float, *,
                  fusion=None) -> Tensor:
    # (the same taps along both axes are checked once: per-image rows cost a check each call)
    ty = kernel_y if kernel_y is kernel_x else _finite_taps(kernel_y, "kernel_y")
    return _filter(img, _finite_taps(kernel_x, "kernel_x"), ty, border, border_value, fusion)


@library.op("gaussian_blur", library.same_as_input, grads=("img",), linear=True, cpu_engine=True,
            backward=lambda grad, img, ks, sigma, border, bv: _adjoint(grad, *_gaussian_taps(ks, sigma), border,
                                                                       img.shape))
def _gaussian_op(img: Tensor, kernel_size: List[int], sigma: List[float], border: str,
                 border_value: float, *, fusion=None) -> Tensor:
    return _filter(img, *_gaussian_taps(kernel_size, sigma), border, border_value, fusion)


@library.op("box_blur", library.same_as_input, grads=("img",), linear=True, cpu_engine=True,
            backward=lambda grad, img, ks, border, bv: _adjoint(grad, *_box_taps(ks), border, img.shape))
def _box_op(img: Tensor, kernel_size: List[int], border: str, border_value: float, *, fusion=None) -> Tensor:
    return _filter(img, *_box_taps(kernel_size), border, border_value, fusion)


def _unsharp_taps(sigma):
    return _gaussian(2 * reference.unsharp_radius(sigma) + 1, sigma)


def _unsharp_rows(sigmas):
    """(B, 2R + 1) float64 rows of taps for a sigma per image: row b is ``_unsharp_taps``'s
    gaussian of radius r_b = ``unsharp_radius(sigma_b)``, zero beyond it, R the largest
    r_b (the same arithmetic as ``reference.gaussian_taps``, row by row)."""
    s = torch.tensor(sigmas, dtype=torch.float64)[:, None]
    radii = torch.tensor([reference.unsharp_radius(v) for v in sigmas], dtype=torch.float64)[:, None]
    r = int(radii.max())
    x = torch.arange(-r, r + 1, dtype=torch.float64)
    pdf = torch.where(x.abs() <= radii, torch.exp(-0.5 * (x / s) ** 2), 0.0)
    return pdf / pdf.sum(-1, keepdim=True)


def _unsharp_params(img, sigma, amount):
    """The op's ``sigma`` and ``amount``: two floats when the batch shares them (numbers,
    or tensors of one value or all equal), else two tuples of a value per image; checked."""
    if isinstance(sigma, float) and isinstance(amount, float):
        return sigma, amount
    batch = _image.as_planes(img).shape[0]
    sigmas = _image.per_image_floats(sigma, "sigma", batch)
    amounts = _image.per_image_floats(amount, "amount", batch, positive=None)
    _unsharp_reach(max(sigmas))  # (the values are checked: only the widest radius is left to hold)
    if len(set(sigmas)) == 1 and len(set(amounts)) == 1:
        return sigmas[0], amounts[0]
    return sigmas, amounts


def _unsharp_backward(grad, img, sigma, amount, threshold, border, border_value):
    """y = x + a * m * (x - blur(x)), m = |x - blur(x)| >= t (piecewise constant), so
    dx = g * (1 + a m) - blur^T(a m g); per image, its own taps and amount."""
    sigma, amount = _unsharp_params(img, sigma, amount)
    if isinstance(sigma, float):
        taps = _unsharp_taps(sigma)
    else:
        taps = _unsharp_rows(sigma)
        amount = torch.tensor(amount, dtype=torch.float32, device=grad.device)[:, None, None, None]
    x, g = _image.as_planes(img).float(), _image.as_planes(grad).float()
    detail = x - _run(x, taps, taps, _image.check_border(border), border_value)
    am_g = amount * (detail.abs() >= threshold) * g
    return (g + am_g - _adjoint(am_g, taps, taps, border, am_g.shape)).reshape(img.shape)


@library.op("unsharp_mask", library.same_as_input, grads=("img",), backward=_unsharp_backward, cpu_engine=True)
def _unsharp_op(img: Tensor, sigma: Tensor, amount: Tensor, threshold: float, border: str,
                border_value: float, *, fusion=None) -> Tensor:
    sigma, amount = _unsharp_params(img, sigma, amount)
    if not _image.uses_kernels(img) or _image.uses_cpu_engine(img):
        if isinstance(sigma, float):
            return _unsharp_one(img, sigma, amount, threshold, border, border_value, fusion)
        x4 = _image.as_planes(img)  # the CPU engine and the float64 path: image by image
        y = torch.cat([_unsharp_one(x4[b:b + 1], sigma[b], amount[b], threshold, border, border_value, fusion)
                       for b in range(x4.shape[0])])
        return _image.in_layout(img, y.reshape(img.shape))
    if isinstance(sigma, float):
        taps = _unsharp_taps(sigma)
        return _run(img, taps, taps, _image.check_border(border), border_value,
                    epi=((kernels.unsharp,), ((amount, threshold),)), fusion=fusion)
    rows = _unsharp_rows(sigma)
    amounts = _on(torch.tensor(amount, dtype=torch.float64)[:, None], img.device)  # (B, 1): a row per image
    return _run(img, rows, rows, _image.check_border(border), border_value,
                epi=((kernels.unsharp_per_image,), ((amounts, threshold),)), fusion=fusion)


def _unsharp_one(img, sigma, amount, threshold, border, border_value, fusion):
    """Unsharp masking with one sigma and amount on the CPU engine or the float64 path."""
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import separable as engine
        taps = _as_tensor(_unsharp_taps(sigma))
        return engine.separable_filter(img, taps, taps, _image.check_border(border), border_value, fusion,
                                       unsharp=(amount, threshold))
    y = reference.unsharp_mask(_image.to_unit(img), sigma, amount, threshold, border, border_value)
    return _image.in_layout(img, _image.from_unit(y, img.dtype))
