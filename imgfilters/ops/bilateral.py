"""Bilateral and joint bilateral filtering (edge-preserving smoothing).

Inputs are ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16, float16,
bfloat16 or float32 (float64 runs the float64 reference); the output keeps the dtype and
memory format. CUDA tensors run one Triton launch; CPU tensors run the float64 reference,
or the Triton kernel in Triton's interpreter under ``TRITON_INTERPRET=1``.

Units: ``sigma_color`` is in unit intensity scale (integers are read as value / max), so
the same value works for uint8 and float images: OpenCV's ``sigmaColor=25.5`` on a uint8
image is ``sigma_color=0.1``. ``sigma_space`` and ``radius`` are in pixels.

Gradients flow to ``img`` and ``guide`` for floating-point inputs: the backward pass
recomputes the forward sums and gathers their transposes in two launches, saving only the
inputs (no per-tap weights).
"""
import operator

import torch

from imgfilters import _image
from imgfilters.kernels import bilateral as kernels
from imgfilters.ops import pointwise
from imgfilters.reference import bilateral as reference
from imgfilters.reference.borders import fold

__all__ = ["bilateral", "joint_bilateral", "joint_bilateral_upsample"]

WINDOWS = ("square", "disk")
DISTANCES = ("l2", "l1")
MAX_CHANNELS = 16


def bilateral(img, sigma_color=0.1, sigma_space=1.5, *, radius=None, window="square", color_distance="l2",
              border="reflect", border_value=0.0):
    """Bilateral filter: each output pixel is the average of its window weighted by
    ``exp(-|p-q|^2 / (2 sigma_space^2)) * exp(-D(p,q)^2 / (2 sigma_color^2))``.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` image, at most 16 channels.
        sigma_color: range sigma in unit scale (0.1 on any dtype = 25.5 in OpenCV's uint8
            units); a float, or a 1-D tensor with one value per image of the batch.
        sigma_space: spatial sigma in pixels; a float or a per-image 1-D tensor.
        radius: window radius; ``None`` means ``ceil(2 * max(sigma_space))`` (OpenCV's
            default for ``d <= 0`` is ``round(1.5 * sigma_space)``). At most 32.
        window: ``"square"`` ((2r+1)^2 taps, as kornia) or ``"disk"`` (dx^2+dy^2 <= r^2,
            as OpenCV and CV-CUDA).
        color_distance: ``"l2"`` (Euclidean over the channels) or ``"l1"`` (sum of absolute
            channel differences: OpenCV's and kornia's definition).
        border, border_value: as in ``imgfilters.separable_filter``.

    With ``color_distance="l1"``, a square window and reflect border this equals
    ``kornia.filters.bilateral_blur``; with ``"l1"`` and ``"disk"`` it is
    ``cv2.bilateralFilter(img, 2 * radius + 1, 255 * sigma_color, sigma_space,
    borderType=cv2.BORDER_REFLECT_101)`` on uint8 within one grey level.
    """
    return _bilateral(img, None, sigma_color, sigma_space, radius, window, color_distance, border, border_value)


def joint_bilateral(img, guide, sigma_color=0.1, sigma_space=1.5, *, radius=None, window="square",
                    color_distance="l2", border="reflect", border_value=0.0):
    """Joint (cross) bilateral filter: the range weight comes from ``guide``, the values
    from ``img``. ``guide`` has the same H and W, any number of channels (up to 16) and a
    batch equal to ``img``'s or 1 (shared by every image). Otherwise as ``bilateral``;
    equals ``kornia.filters.joint_bilateral_blur`` with ``"l1"``, square window, reflect.
    """
    _image.check_image(guide, "guide")
    return _bilateral(img, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value)


def joint_bilateral_upsample(lowres, guide, sigma_color=0.1, sigma_space=1.0, *, radius=None, window="square",
                             color_distance="l2", border="reflect", border_value=0.0):
    """Joint bilateral upsampling (Kopf et al. 2007): upsample ``lowres`` (a depth map,
    features, a low-resolution result) to the size of ``guide``, weighting each
    low-resolution sample by its distance to the output pixel and by how much the guide
    differs between them.

    Args:
        lowres: ``(..., C, h, w)`` tensor, up to 16 channels.
        guide: ``(..., Cg, H, W)`` high-resolution guide, up to 16 channels, batch equal to
            ``lowres``'s or 1.
        sigma_color: range sigma in unit scale (as in ``bilateral``); float or per image.
        sigma_space: spatial sigma in *low-resolution* pixels; float or per image.
        radius: window radius in low-resolution pixels around the sample nearest to each
            output pixel; ``None`` means ``ceil(2 * max(sigma_space))``.
        window, color_distance, border, border_value: as in ``bilateral``; the border
            extends the low-resolution grid.

    Low-resolution samples sit at their true fractional positions (half-pixel centres,
    as ``F.interpolate(align_corners=False)``), and the guide value of a sample is the
    guide resampled bilinearly at its centre. The output has ``lowres``'s leading dims and
    channels, the guide's H and W, and ``lowres``'s dtype. One launch, no memory beyond the
    output, where ``unfold``-based versions need the window times the output.
    """
    _image.check_image(lowres, "lowres")
    _image.check_image(guide, "guide")
    code = _image.check_border(border, border_value)
    window, color_distance = _check_modes(window, color_distance)
    low4, g4 = _image.as_planes(lowres), _image.as_planes(guide)
    B, C, h, w = low4.shape
    _check_guide(lowres, guide, low4, g4, "lowres", same_size=False)
    sc = _image.per_image(sigma_color, "sigma_color", B)
    ss = _image.per_image(sigma_space, "sigma_space", B)
    radius = _check_radius(radius, ss)
    H, W = g4.shape[-2:]
    out_shape = (*lowres.shape[:-2], H, W)
    if not _image.uses_kernels(lowres):
        y = reference.joint_bilateral_upsample(_image.to_unit(low4), _image.to_unit(g4).expand(B, -1, -1, -1),
                                               sc, ss, radius, window, color_distance, border, border_value)
        return _image.like_input(lowres, _image.from_unit(y, lowres.dtype), out_shape)
    params = (_coefficients(sc, lowres.device), _coefficients(ss, lowres.device), radius, window == "disk",
              color_distance == "l1", code, float(border_value))
    return _image.like_input(lowres, _Upsample.apply(lowres, guide, params), out_shape)


def _check_modes(window, color_distance):
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
    if color_distance not in DISTANCES:
        raise ValueError(f"color_distance must be one of {DISTANCES}, got {color_distance!r}")
    return window, color_distance


def _check_guide(img, guide, x4, g4, name, same_size=True):
    if guide.device != img.device:
        raise ValueError(f"guide is on {guide.device}, {name} on {img.device}")
    if (same_size and g4.shape[-2:] != x4.shape[-2:]) or g4.shape[0] not in (1, x4.shape[0]):
        need = f"{name}'s H and W and " if same_size else ""
        batch = "a batch of 1" if x4.shape[0] == 1 else f"a batch of {x4.shape[0]} or 1"
        raise ValueError(f"guide must have {need}{batch}, got shape {tuple(guide.shape)} for {name} "
                         f"{tuple(img.shape)}")
    for n, t in ((name, x4), ("guide", g4)):
        if t.shape[1] > MAX_CHANNELS:
            raise ValueError(f"{n} has {t.shape[1]} channels; at most {MAX_CHANNELS} are supported")


def _check_radius(radius, sigma_space):
    if radius is None:
        radius = reference.default_radius(float(sigma_space.max()))
        if radius > kernels.MAX_RADIUS:
            raise ValueError(f"sigma_space={float(sigma_space.max()):g} gives a default radius of {radius} "
                             f"(ceil(2 * sigma_space)), above the maximum {kernels.MAX_RADIUS}: pass radius")
    try:
        radius = operator.index(radius)  # ints, numpy and 0-d torch integers; not floats or bools
    except TypeError:
        radius = None
    if radius is None or isinstance(radius, bool) or not 0 <= radius <= kernels.MAX_RADIUS:
        raise ValueError(f"radius must be an integer in [0, {kernels.MAX_RADIUS}]")
    return radius


def _bilateral(img, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value):
    _image.check_image(img)
    code = _image.check_border(border, border_value)
    window, color_distance = _check_modes(window, color_distance)
    x4 = _image.as_planes(img)
    B = x4.shape[0]
    g4 = x4 if guide is None else _image.as_planes(guide)
    _check_guide(img, x4 if guide is None else guide, x4, g4, "img")
    sc = _image.per_image(sigma_color, "sigma_color", B)
    ss = _image.per_image(sigma_space, "sigma_space", B)
    radius = _check_radius(radius, ss)

    if not _image.uses_kernels(img):
        y = reference.bilateral(_image.to_unit(x4), _image.to_unit(g4).expand(B, -1, -1, -1), sc, ss, radius,
                                window, color_distance, border, border_value)
        return _image.like_input(img, _image.from_unit(y, img.dtype))
    params = (_coefficients(sc, img.device), _coefficients(ss, img.device), radius, window == "disk",
              color_distance == "l1", code, border, float(border_value))
    return _image.like_input(img, _Bilateral.apply(img, guide, params))


def _coefficients(sigma, device):
    """-log2(e) / (2 sigma^2) per image: the exponent's coefficient for exp2, kept finite in
    float32 (an infinite one would give -inf * 0 = NaN at the centre tap)."""
    return _image.on((-kernels.LOG2E.value / (2 * sigma * sigma)).clamp(min=-1e30), device)


class _Bilateral(torch.autograd.Function):
    """Forward: one kernel launch. Backward (float inputs): recompute the output and the
    weight sums (one launch), gather the transposed sums on the border-extended grid (one
    launch, no atomics, no per-tap storage), fold the border back onto the pixels."""

    @staticmethod
    def forward(ctx, img, guide, params):
        color, space, radius, disk, l1, code, border, border_value = params
        ctx.save_for_backward(img, guide)
        ctx.params = params
        x4 = _image.as_planes(img)
        pro, epi, dtype = pointwise.fused_chains(x4.shape[1], img.device, img.dtype)
        y4 = _image.new_planes(x4, dtype)
        kernels.launch(x4, x4 if guide is None else _image.as_planes(guide), y4, color, space, radius, disk, l1,
                       guide is not None, code, border_value, pro=pro, epi=epi)
        return y4.reshape(img.shape)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        img, guide = ctx.saved_tensors
        color, space, radius, disk, l1, code, border, border_value = ctx.params
        joint = guide is not None
        x4 = _image.as_planes(img)
        g4 = _image.as_planes(guide) if joint else x4
        B, C, H, W = x4.shape
        f32 = dict(dtype=torch.float32, device=img.device)
        out = torch.empty(B, C, H, W, **f32)
        den = torch.empty(B, 1, H, W, **f32)
        kernels.launch(x4, g4, out, color, space, radius, disk, l1, joint, code, border_value, den=den)
        extended = (H + 2 * radius, W + 2 * radius)
        zv = torch.empty(B, C, *extended, **f32)
        zg = torch.empty(B, g4.shape[1], *extended, **f32)
        g = _image.as_planes(grad).float().contiguous()
        kernels.launch_backward(x4, g4, g, out, den, zv, zg, color, space, radius, disk, l1, joint, code,
                                border_value)
        d_value = fold(zv, H, W, radius, radius, border)
        d_guide = fold(zg, H, W, radius, radius, border)
        if not joint:
            return (d_value + d_guide).reshape(img.shape).to(img.dtype), None, None
        return d_value.reshape(img.shape).to(img.dtype), _guide_gradient(d_guide, guide, ctx), None


def _guide_gradient(d_guide, guide, ctx):
    """Per-image float32 guide gradients (B, CG, H, W) as the guide's: summed over the
    batch when one guide served every image; None unless the guide needs it."""
    if not ctx.needs_input_grad[1]:
        return None
    if _image.as_planes(guide).shape[0] == 1 and d_guide.shape[0] > 1:
        d_guide = d_guide.sum(0, keepdim=True)
    return d_guide.reshape(guide.shape).to(guide.dtype)


class _Upsample(torch.autograd.Function):
    """Backward in one launch: the forward sums are recomputed per output pixel, then the
    transposed terms are scattered to the low-resolution samples with atomics (each is
    shared by many outputs) and gathered at the guide pixels; the part that reaches the
    guide through its bilinear resampling goes back through ``F.interpolate``'s adjoint."""

    @staticmethod
    def forward(ctx, low, guide, params):
        color, space, radius, disk, l1, code, border_value = params
        ctx.save_for_backward(low, guide)
        ctx.params = params
        low4, g4 = _image.as_planes(low), _image.as_planes(guide)
        layout = torch.channels_last if _image.is_channels_last(low4) else torch.contiguous_format
        y4 = torch.empty(*low4.shape[:2], *g4.shape[-2:], dtype=low.dtype, device=low.device, memory_format=layout)
        kernels.launch_upsample(low4, g4, y4, color, space, radius, disk, l1, code, border_value)
        return y4

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        low, guide = ctx.saved_tensors
        color, space, radius, disk, l1, code, border_value = ctx.params
        low4, g4 = _image.as_planes(low), _image.as_planes(guide)
        B, C, h, w = low4.shape
        CG, H, W = g4.shape[1:]
        f32 = dict(dtype=torch.float32, device=low.device)
        d_low = torch.zeros(B, C, h, w, **f32)
        d_glow = torch.zeros(B, CG, h, w, **f32)
        d_guide = torch.empty(B, CG, H, W, **f32)
        go = grad.reshape(B, C, H, W).float().contiguous()
        kernels.launch_upsample(low4, g4, go, color, space, radius, disk, l1, code, border_value,
                                backward=(go, d_low, d_glow, d_guide))
        with torch.enable_grad():  # the bilinear resampling is linear: its adjoint at any point
            probe = torch.zeros(B, CG, H, W, **f32, requires_grad=True)
            resampled = torch.nn.functional.interpolate(probe, size=(h, w), mode="bilinear", align_corners=False)
            (through_samples,) = torch.autograd.grad(resampled, probe, d_glow)
        return (d_low.reshape(low.shape).to(low.dtype), _guide_gradient(d_guide + through_samples, guide, ctx),
                None)
