"""Bilateral and joint bilateral filtering (edge-preserving smoothing).

Inputs are ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16, float16,
bfloat16 or float32 (float64 runs the float64 reference); the output keeps the dtype and
memory format. CUDA tensors run one Triton launch; other CPU tensors run the CPU engine
(``imgfilters/cpu``), or the Triton kernel in Triton's interpreter under
``TRITON_INTERPRET=1``.

Units: ``sigma_color`` is in unit intensity scale (integers are read as value / max), so
the same value works for uint8 and float images: OpenCV's ``sigmaColor=25.5`` on a uint8
image is ``sigma_color=0.1``. ``sigma_space`` and ``radius`` are in pixels.

Gradients flow to ``img`` and ``guide`` for floating-point inputs: the backward pass
recomputes the forward sums and gathers their transposes in two launches, saving only the
inputs (no per-tap weights).
"""
import operator
from typing import Optional

import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import bilateral as kernels
from imgfilters.ops import library, pointwise
from imgfilters.reference import bilateral as reference

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
    args = _arguments(img, None, sigma_color, sigma_space, radius, window, color_distance, border, border_value,
                      joint=False)
    return _image.wrap(img, _bilateral_op(img, *args))


def joint_bilateral(img, guide, sigma_color=0.1, sigma_space=1.5, *, radius=None, window="square",
                    color_distance="l2", border="reflect", border_value=0.0):
    """Joint (cross) bilateral filter: the range weight comes from ``guide``, the values
    from ``img``. ``guide`` has the same H and W, any number of channels (up to 16) and a
    batch equal to ``img``'s or 1 (shared by every image). Otherwise as ``bilateral``;
    equals ``kornia.filters.joint_bilateral_blur`` with ``"l1"``, square window, reflect.
    """
    args = _arguments(img, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value)
    return _image.wrap(img, _joint_op(img, guide, *args))


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
    channels, the guide's H and W, and ``lowres``'s dtype: a guide smaller than ``lowres``
    along an axis downsamples along it, by the same rule. One launch, no memory beyond the
    output, where ``unfold``-based versions need the window times the output.
    """
    args = _arguments(lowres, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value,
                      name="lowres", same_size=False)
    return _image.wrap(lowres, _upsample_op(lowres, guide, *args))


def _arguments(img, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value,
               name="img", same_size=True, joint=True):
    """The ops' arguments after the image(s), checked as far as shapes, dtypes and Python
    values go (tensors' values are checked inside the op, by ``_Params``)."""
    _image.check_image(img, name)
    if joint:  # the joint filters need their guide; None is not "no guide" (that is ``bilateral``)
        _image.check_image(guide, "guide")
    radius = check_options(radius, window, color_distance, border, border_value)
    x4 = _image.as_planes(img)
    g4 = x4 if guide is None else _image.as_planes(guide)
    if guide is not None and guide.device != img.device:
        raise ValueError(f"guide is on {guide.device}, {name} on {img.device}")
    if (same_size and g4.shape[-2:] != x4.shape[-2:]) or g4.shape[0] not in (1, x4.shape[0]):
        need = f"{name}'s H and W and " if same_size else ""
        batch = "a batch of 1" if x4.shape[0] == 1 else f"a batch of {x4.shape[0]} or 1"
        raise ValueError(f"guide must have {need}{batch}, got shape {tuple(guide.shape)} for {name} "
                         f"{tuple(img.shape)}")
    for n, t in ((name, x4), ("guide", g4)):
        if t.shape[1] > MAX_CHANNELS:
            raise ValueError(f"{n} has {t.shape[1]} channels; at most {MAX_CHANNELS} are supported")
    return (_image.per_image(sigma_color, "sigma_color", x4.shape[0]),
            _image.per_image(sigma_space, "sigma_space", x4.shape[0]), radius, window, color_distance, border,
            float(border_value))


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` that one output tile of ``bilateral`` or
    ``joint_bilateral`` needs (``imgfilters.tiling``): the window radius. ``a`` holds the
    call's arguments by name, checked as far as shapes and Python values go; the values of
    per-image sigmas and the default radius are checked here, as the op checks them."""
    x4 = _image.as_planes(a["img"])
    sigmas = (_image.per_image(a[k], k, x4.shape[0]) for k in ("sigma_color", "sigma_space"))
    radius = _Params(x4, *sigmas, a["radius"]).radius
    return radius, radius


def check_options(radius, window, color_distance, border, border_value):
    """Check the family's options that are plain Python values (the transforms check them
    when they are made); returns the radius as an int, or None."""
    _image.check_border(border, border_value)
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
    if color_distance not in DISTANCES:
        raise ValueError(f"color_distance must be one of {DISTANCES}, got {color_distance!r}")
    if radius is not None:
        try:
            radius = operator.index(radius)  # ints, numpy and 0-d torch integers; not floats or bools
        except TypeError:
            radius = None
        if radius is None or isinstance(radius, bool) or not 0 <= radius <= kernels.MAX_RADIUS:
            raise ValueError(f"radius must be an integer in [0, {kernels.MAX_RADIUS}]")
    return radius


class _Params:
    """The checked per-image sigmas (tuples of floats) and the radius, inside an op."""

    def __init__(self, x4, sigma_color, sigma_space, radius):
        batch = x4.shape[0]
        self.colors = _image.per_image_floats(sigma_color, "sigma_color", batch)
        self.spaces = _image.per_image_floats(sigma_space, "sigma_space", batch)
        if radius is None:
            radius = reference.default_radius(max(self.spaces))
            if radius > kernels.MAX_RADIUS:
                raise ValueError(f"sigma_space={max(self.spaces):g} gives a default radius of {radius} "
                                 f"(ceil(2 * sigma_space)), above the maximum {kernels.MAX_RADIUS}: pass radius")
        self.radius = radius

    def reference_args(self):
        """``color, space`` of the float64 references: float64 CPU tensors."""
        return torch.tensor(self.colors, dtype=torch.float64), torch.tensor(self.spaces, dtype=torch.float64)

    def color_peak(self):
        """The largest -log2(e) / (2 sigma_color^2) of the batch, a number (the scale of the
        kernel's exponent: ``kernels.expands``; inf where the sigma's square underflows)."""
        sigma = min(self.colors)
        return kernels.LOG2E.value / 2 / sigma / sigma

    def kernel_args(self, device, window, color_distance):
        """``color, space, radius, disk, l1`` of the kernels' launchers."""
        return (_coefficients(self.colors, device), _coefficients(self.spaces, device), self.radius,
                window == "disk", color_distance == "l1")


def _coefficients(sigmas, device):
    """-log2(e) / (2 sigma^2) per image: the exponent's coefficient for exp2, kept finite in
    float32 (an infinite one would give -inf * 0 = NaN at the centre tap). In Python
    floats: tensor operations cost microseconds of host time each."""
    return _image.on(tuple(_image.finite_ratio(-kernels.LOG2E.value, 2 * s * s) for s in sigmas), device)


def _filter(img, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value,
            fusion=None):
    """Bilateral (``guide`` None) or joint bilateral: the CPU engine, the reference, or one
    launch (with ``fusion``'s prologue and epilogue, a ``pointwise.Fusion``)."""
    x4 = _image.as_planes(img)
    g4 = x4 if guide is None else _image.as_planes(guide)
    p = _Params(x4, sigma_color, sigma_space, radius)
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import bilateral as engine
        return engine.bilateral(img, guide, p.colors, p.spaces, p.radius, window, color_distance,
                                _image.check_border(border), border_value, fusion)
    if not _image.uses_kernels(img):
        B = x4.shape[0]
        y = reference.bilateral(_image.to_unit(x4), _image.to_unit(g4).expand(B, -1, -1, -1), *p.reference_args(),
                                p.radius, window, color_distance, border, border_value)
        return _image.in_layout(img, _image.from_unit(y, img.dtype))
    pro, epi, dtype = pointwise.fused_chains(fusion, x4.shape[1], img.device, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    kernels.launch(x4, g4, _image.as_planes(y), *p.kernel_args(img.device, window, color_distance), guide is not None,
                   _image.check_border(border), border_value, pro=pro, epi=epi, color_peak=p.color_peak())
    return y


def _backward(grad, img, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value):
    """Two launches, no per-tap storage: the forward sums recomputed into the per-pixel
    terms A = grad / DEN and -(A . Y), then the gradients gathered on the border-extended
    grid and folded back onto the pixels as they are stored. Returns (d img, d guide as
    the guide)."""
    joint = guide is not None
    x4 = _image.as_planes(img)
    g4 = _image.as_planes(guide) if joint else x4
    B, C, H, W = x4.shape
    p = _Params(x4, sigma_color, sigma_space, radius)
    args = p.kernel_args(img.device, window, color_distance)
    code = _image.check_border(border)
    f32 = dict(dtype=torch.float32, device=img.device)
    ab = torch.empty(B, C + 1, H, W, **f32)
    ab[:, :C].copy_(_image.as_planes(grad))
    kernels.launch(x4, g4, ab, *args, joint, code, border_value, adjoint=True)
    d_img = torch.zeros(B, C, H, W, **f32)
    d_guide = torch.zeros(B, g4.shape[1], H, W, **f32) if joint else None
    kernels.launch_backward(x4, g4, ab, d_img, d_guide, *args, joint, code, border_value)
    return d_img.reshape(img.shape), _as_guide(d_guide, guide) if joint else None


def _as_guide(d_guide, guide):
    """Per-image float32 guide gradients (B, CG, H, W) as the guide's: summed over the
    batch when one guide served every image."""
    if _image.as_planes(guide).shape[0] == 1 and d_guide.shape[0] > 1:
        d_guide = d_guide.sum(0, keepdim=True)
    return d_guide.reshape(guide.shape)


def _upsample_backward(grad, low, guide, sigma_color, sigma_space, radius, window, color_distance, border,
                       border_value):
    """One launch: the forward sums are recomputed per output pixel, then the transposed
    terms are scattered to the low-resolution samples with atomics (each is shared by many
    outputs) and gathered at the guide pixels; the part that reaches the guide through its
    bilinear resampling goes back through the transposed resampling."""
    low4, g4 = _image.as_planes(low), _image.as_planes(guide)
    B, C, h, w = low4.shape
    CG, H, W = g4.shape[1:]
    p = _Params(low4, sigma_color, sigma_space, radius)
    f32 = dict(dtype=torch.float32, device=low.device)
    d_low = torch.zeros(B, C, h, w, **f32)
    d_glow = torch.zeros(B, CG, h, w, **f32)
    d_guide = torch.empty(B, CG, H, W, **f32)
    go = grad.reshape(B, C, H, W).float().contiguous()
    kernels.launch_upsample_backward(low4, g4, go, d_low, d_glow, d_guide,
                                     *p.kernel_args(low.device, window, color_distance), _image.check_border(border),
                                     border_value)
    # the guide's bilinear resampling to the samples is linear: its adjoint is torch's own
    # backward kernel of F.interpolate(guide, (h, w), mode="bilinear")
    through_samples = torch.ops.aten.upsample_bilinear2d_backward(d_glow, [h, w], [B, CG, H, W], False, None, None)
    return d_low.reshape(low.shape), _as_guide(d_guide + through_samples, guide)


# ---- the custom ops (imgfilters.ops.library): gradients flow to the image and the guide ---

@library.op("bilateral", library.same_as_input, grads=("img",), cpu_engine=True,
            backward=lambda grad, img, *args: _backward(grad, img, None, *args)[0])
def _bilateral_op(img: Tensor, sigma_color: Tensor, sigma_space: Tensor, radius: Optional[int], window: str,
                  color_distance: str, border: str, border_value: float, *, fusion=None) -> Tensor:
    return _filter(img, None, sigma_color, sigma_space, radius, window, color_distance, border, border_value,
                   fusion)


@library.op("joint_bilateral", lambda img, guide, *args: _image.new_image(img), grads=("img", "guide"),
            backward=_backward)
def _joint_op(img: Tensor, guide: Tensor, sigma_color: Tensor, sigma_space: Tensor, radius: Optional[int],
              window: str, color_distance: str, border: str, border_value: float) -> Tensor:
    return _filter(img, guide, sigma_color, sigma_space, radius, window, color_distance, border, border_value)


def _upsampled(low, guide):
    """The upsampled output's shape: ``low``'s leading dims and channels, the guide's H, W."""
    return (*low.shape[:-2], *guide.shape[-2:])


@library.op("joint_bilateral_upsample", lambda low, guide, *args: _image.new_image(low, _upsampled(low, guide)),
            grads=("lowres", "guide"), backward=_upsample_backward)
def _upsample_op(lowres: Tensor, guide: Tensor, sigma_color: Tensor, sigma_space: Tensor, radius: Optional[int],
                 window: str, color_distance: str, border: str, border_value: float) -> Tensor:
    low4, g4 = _image.as_planes(lowres), _image.as_planes(guide)
    p = _Params(low4, sigma_color, sigma_space, radius)
    if _image.uses_cpu_engine(lowres):
        from imgfilters.cpu import upsample as engine
        return engine.joint_bilateral_upsample(lowres, guide, p.colors, p.spaces, p.radius, window, color_distance,
                                               _image.check_border(border), border_value)
    if not _image.uses_kernels(lowres):
        guide_unit = _image.to_unit(g4).expand(low4.shape[0], -1, -1, -1)
        y = reference.joint_bilateral_upsample(_image.to_unit(low4), guide_unit, *p.reference_args(), p.radius,
                                               window, color_distance, border, border_value)
        return _image.in_layout(lowres, _image.from_unit(y, lowres.dtype), _upsampled(lowres, guide))
    y = _image.new_image(lowres, _upsampled(lowres, guide))
    kernels.launch_upsample(low4, g4, _image.as_planes(y), *p.kernel_args(lowres.device, window, color_distance),
                            _image.check_border(border), border_value)
    return y
