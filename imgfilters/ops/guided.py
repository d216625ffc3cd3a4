"""The guided filter (He, Sun and Tang 2010/2013) and the fast guided filter (He and Sun
2015): ``guided_filter``. The definition, with the formulas cited, is
``reference/guided.py``.

Inputs are ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16, float16,
bfloat16 or float32, the result in the image's dtype and memory format; float64 runs the
float64 definition. Elsewhere the filter is composed of the library's own launches in
float32 unit scale. On the kernels' path: one launch for the local linear models
(``kernels/guided.py``: the window means of the guide, the image and their products as
sliding sums in registers, the colour guide's 3 x 3 systems solved in closed form) and one
launch for the output (``kernels/sliding.py``: the box means of the models applied to the
guide), through the custom ops ``guided_models`` and ``guided_output`` (in an eager call
without gradients, band by band of rows: ``_bands``); the fast guided filter takes the
box means as an op of their own (``guided_box``) and its output's launch upsamples them
bilinearly in place (``guided_apply``). Each op has its backward: the output's gradient
to the means and the guide (one launch; at full size the box's, which sums the means
again rather than read them), the box's adjoint, and the models' gradient to the image,
the guide and a tensor ``eps`` (the window sums recomputed in one launch, the box's
adjoint of the means' gradients, one launch for the terms' products). Elsewhere (the CPU
engine runs CPU tensors' box sums) torch arithmetic in the same order of operations: one
``box_blur`` over the stacked guide, image and products; the models; the second box; a
bilinear ``resize`` of its means for ``subsample`` > 1; autograd differentiates it.
"""
import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import guided as kernels
from imgfilters.kernels import sliding
from imgfilters.ops import library, resample, separable
from imgfilters.reference import guided as reference

__all__ = ["guided_filter"]

MAX_RADIUS = separable.kernels.MAX_RADIUS


def guided_filter(img, guide=None, radius=4, eps=1e-2, *, subsample=1, border="reflect"):
    """Edge-preserving smoothing: in each ``(2 radius + 1)^2`` window the result is a
    linear function of the guide fitted to the image, averaged over the windows that hold
    each pixel (He et al.; as ``kornia.filters.guided_blur(guide, img, 2 * radius + 1,
    eps, border, subsample)``).

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        guide: ``(..., 1, H, W)`` (a grey guide: one linear model per channel of ``img``)
            or ``(..., 3, H, W)`` (a colour guide: the 3 x 3 covariance of each window,
            solved exactly), the leading dims ``img``'s or 1 (one guide for the batch);
            any supported dtype, unit scale. None: the image guides itself (1 or 3
            channels).
        radius: the window's radius, 1 to 63.
        eps: the regularisation (edges whose variance is well above it are kept), > 0: a
            number or a tensor of one value per image (a tensor that requires grad gets
            its gradient).
        subsample: the fast guided filter's factor s >= 1: the models are fitted on the
            image and guide subsampled by s with radius ``radius / s`` and their means
            upsampled bilinearly.
        border: ``"reflect"`` (default), ``"symmetric"``, ``"replicate"`` or
            ``"constant"`` (zeros, as kornia).

    Returns:
        A tensor of ``img``'s shape, dtype and memory format. A NaN or inf in the image or
        the guide reaches the outputs within ``2 * radius`` of it (the windows of the
        windows that read it), as the float64 definition's.
    """
    x4, g4, radius, eps, subsample = _guided_args(img, guide, radius, eps, subsample, border)
    B, C, H, W = x4.shape
    if img.dtype == torch.float64:
        y = reference.guided_filter(x4, g4.to(torch.float64), radius, eps, subsample, border)
        return _image.wrap(img, y.reshape(img.shape))
    on_kernels = _image.uses_kernels(x4)
    # (the models' kernel reads the image and the guide in their own dtypes and strides)
    x = x4 if on_kernels else _image.to_unit(x4, torch.float32, copy=False)
    g = (g4 if on_kernels else _image.to_unit(g4, torch.float32, copy=False)).expand(B, *g4.shape[1:])
    if subsample > 1:
        r = reference.subsampled_radius(radius, subsample)
        ab = _models(reference.subsampled(x, subsample), reference.subsampled(g, subsample), r, eps, border,
                     on_kernels)
        means = _box_op(ab, r, border) if on_kernels else _box(ab, r, border)
        if not on_kernels:  # (the output's launch upsamples them in place)
            means = resample.resize(means, [H, W], "bilinear", antialias=False)
    elif on_kernels and library.direct((x4, g4, eps)):
        return _image.wrap(img, _banded(x, g, img, radius, eps, border, _bands(H, g.shape[1])))
    elif on_kernels:
        return _image.wrap(img, _output_op(_models_op(x, g, eps, radius, border), g, img, radius, border))
    else:
        means = _box(_models(x, g, radius, eps, border, False), radius, border)
    if on_kernels:
        return _image.wrap(img, _apply_op(means, g, img))
    G = g.shape[1]
    mean_a, mean_b = means[:, :G * C].unflatten(1, (G, C)), means[:, G * C:]
    y = (mean_a * g[:, :, None]).sum(1) + mean_b
    return _image.wrap(img, _image.in_layout(img, _image.from_unit(y, img.dtype).reshape(img.shape)))


def _guided_args(img, guide, radius, eps, subsample, border):
    """(image planes, guide planes (B or 1, 1 or 3, H, W), radius, eps (a number or a
    (B, 1, 1, 1) float32 tensor), subsample), checked in order."""
    _image.check_image(img)
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    if guide is None:
        if C not in (1, 3):
            raise ValueError(f"guide=None lets the image guide itself, which needs 1 or 3 channels; img has {C}")
        g4 = x4
    else:
        _image.check_image(guide, "guide")
        if guide.device != img.device:
            raise ValueError(f"guide must be on img's device ({img.device}), got {guide.device}")
        if guide.ndim < 3 or guide.shape[-3] not in (1, 3) or guide.shape[-2:] != img.shape[-2:]:
            raise ValueError(f"guide must be (..., 1 or 3, {H}, {W}) like img, got {tuple(guide.shape)}")
        g4 = _image.as_planes(guide)
        if g4.shape[0] not in (1, B):
            raise ValueError(f"guide must hold one image or one per image of img ({B}), got {g4.shape[0]}")
    radius, subsample = check_options(radius, subsample, border)
    if isinstance(eps, torch.Tensor):
        if eps.numel() not in (1, B) or eps.is_complex() or not eps.is_floating_point():
            raise ValueError(f"eps must be a number or a float tensor of 1 or {B} values, got {tuple(eps.shape)}")
        if not torch.compiler.is_compiling() and not bool((eps.detach() > 0).all()):
            raise ValueError("eps must be > 0")
        eps = eps.to(img.device, torch.float64 if img.dtype == torch.float64 else torch.float32).reshape(-1, 1, 1, 1)
    else:
        eps = _image.check_number(eps, "eps", low=0.0, low_open=True)
    return x4, g4, radius, eps, subsample


def check_options(radius, subsample, border):
    """``(radius, subsample)``, checked with the border."""
    radius = _image.check_integer(radius, "radius", 1, MAX_RADIUS)
    subsample = _image.check_integer(subsample, "subsample", 1, 2 ** 16)
    _image.check_border(border)
    return radius, subsample


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` one output tile needs (``imgfilters.tiling``): the
    models of the windows around a pixel read the windows around them, twice the radius.
    The fast filter's subsampling grid is set by the whole image's size, so its tiles
    could not equal the whole: refused."""
    radius, subsample = check_options(a["radius"], a["subsample"], a["border"])
    if subsample > 1:
        raise ValueError("guided_filter with subsample > 1 cannot be tiled: its subsampled grid depends on the "
                         "whole image's size")
    return 2 * radius, 2 * radius


MIN_BAND_ROWS = 256  # (a band's launches fill the GPU, and its halo of 2 radius rows costs little)


def _bands(H, G):
    """The output's row bands (first, end) in an eager call without gradients: the models
    (G*C + C planes of float32) take G + 1 times the image's own float32 size; in G + 1
    bands they take once it (plus two halos of ``radius`` rows a band)."""
    n = max(1, min(G + 1, H // MIN_BAND_ROWS))
    edges = [i * H // n for i in range(n + 1)]
    return list(zip(edges[:-1], edges[1:]))


def _banded(x, g, img, radius, eps, border, bands):
    """The guided filter on the kernels, band by band of output rows: each band's models
    at its rows and ``radius`` more on each side (the image's border at the image's
    edges), and the launch of their box means applied to the guide into the band of the
    result."""
    out = _image.new_image(img)
    y = _image.as_planes(out)
    H = x.shape[-2]
    e = _eps_vector(eps, x.device)
    for y0, y1 in bands:
        m0, m1 = max(0, y0 - radius), min(H, y1 + radius)
        ab = kernels.models(x, g, e, radius, border, (m0, m1))
        sliding.box(ab, radius, border, rows=(y0 - m0, y1 - m0), guide=g[:, :, y0:y1], out=y[:, :, y0:y1])
        del ab  # (before the next band's models are allocated)
    return out


def _box(x, r, border):
    return separable.box_blur(x, 2 * r + 1, border=border, border_value=0.0)


def _box_adjoint(grad, r, border):
    """The gradient to the planes of ``sliding.box(planes, r, border)`` for its output's
    gradient ``grad`` (B, P, H, W): the box means of the zero-extended ``grad`` (a box is
    its own adjoint over zeros), their margins folded back onto the pixels the border read
    them from."""
    grad = grad.float().contiguous()
    gx = sliding.box(grad, r, "constant")
    if border != "constant":
        def margin(out, oy, ox):
            sliding.box(grad, r, "constant", (oy, oy + out.shape[-2]), (ox, ox + out.shape[-1]), out=out)
        separable.fold_margins(gx, margin, r, r, border)
    return gx


def _models(x, g, r, eps, border, on_kernels):
    """The local linear models (``reference.coefficients``) as stacked float32 planes
    (B, G*C + C, H, W): ``a`` (g major), then ``b``. ``on_kernels``: one launch of
    ``kernels.guided.models`` on the image and guide as they are (the custom op
    ``guided_models``); else torch arithmetic on their float32 unit-scale planes, from one
    box launch over the stacked guide, image and products."""
    if on_kernels:
        return _models_op(x, g, eps, r, border)
    B, C = x.shape[:2]
    G = g.shape[1]
    if G == 1:
        products = [g, g * g, x, g * x]
    else:
        pairs = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
        products = [g, torch.stack([g[:, i] * g[:, j] for i, j in pairs], 1), x,
                    (g[:, :, None] * x[:, None]).flatten(1, 2)]
    means = _box(torch.cat(products, 1), r, border)
    mean_g, means = means[:, :G], means[:, G:]
    corr_g, means = (means[:, :1], means[:, 1:]) if G == 1 else (means[:, :6], means[:, 6:])
    mean_x, corr_gx = means[:, :C], means[:, C:].unflatten(1, (G, C))
    cov = corr_gx - mean_g[:, :, None] * mean_x[:, None]  # (B, G, C, H, W)
    if G == 1:
        a = cov / (corr_g - mean_g * mean_g + eps)[:, :, None]
    else:
        e = eps[:, 0] if torch.is_tensor(eps) else eps  # (B, 1, 1) against the (B, H, W) entries
        s00, s01, s02, s11, s12, s22 = (corr_g[:, k] - mean_g[:, i] * mean_g[:, j] + (e if i == j else 0.0)
                                        for k, (i, j) in enumerate(pairs))
        # the inverse of the symmetric 3 x 3 matrix by its adjugate (Cramer's rule)
        c00, c01, c02 = s11 * s22 - s12 * s12, s02 * s12 - s01 * s22, s01 * s12 - s02 * s11
        c11, c12, c22 = s00 * s22 - s02 * s02, s01 * s02 - s00 * s12, s00 * s11 - s01 * s01
        det = s00 * c00 + s01 * c01 + s02 * c02
        inverse = torch.stack([torch.stack(row, 1) for row in ((c00, c01, c02), (c01, c11, c12), (c02, c12, c22))], 1)
        a = (inverse[:, :, :, None] * cov[:, None]).sum(2) / det[:, None, None]  # (B, 3, C, H, W)
    b = mean_x - (a * mean_g[:, :, None]).sum(1)
    return torch.cat([a.flatten(1, 2), b], 1)


def _stacked(img, guide, eps, radius: int, border: str):
    B, C, H, W = img.shape
    return img.new_empty(B, (guide.shape[1] + 1) * C, H, W, dtype=torch.float32)


def _eps_vector(eps, device):
    """``eps`` (a number, or a tensor of one value or one per image) as the kernels'
    float32 device vector."""
    return _image.on((eps,), device) if isinstance(eps, float) else eps.reshape(-1).to(device, torch.float32)


def _models_backward(grad, img, guide, eps, radius, border):
    """The gradients to the image, the guide and ``eps`` (None for a number) of the models'
    planes for their gradient ``grad``: the window means' gradients (the window sums
    recomputed), their box's adjoint, the terms' products differentiated."""
    eps_grad = isinstance(eps, Tensor)
    d_means, d_eps = kernels.models_vjp(img, guide, _eps_vector(eps, img.device), grad, radius, border, eps_grad)
    dx, dg = kernels.terms_vjp(_box_adjoint(d_means, radius, border), img, guide)
    if not eps_grad:
        return dx, dg, None
    return dx, dg, (d_eps if eps.numel() == d_eps.numel() else d_eps.sum()).reshape(eps.shape)


@library.op("guided_models", _stacked, grads=("img", "guide", "eps"), backward=_models_backward)
def _models_op(img: Tensor, guide: Tensor, eps: Tensor, radius: int, border: str) -> Tensor:
    """``kernels.guided.models`` of the (B, C, H, W) image and (B, G, H, W) guide (``eps`` a
    number, or a tensor of one value or one per image)."""
    return kernels.models(img, guide, _eps_vector(eps, img.device), radius, border)


def _apply_backward(grad, means, guide, img):
    """The gradients to the means and the guide of ``guided_apply`` for its output's
    gradient ``grad``; the means' through the bilinear upsampling's adjoint when smaller."""
    d_means, d_guide = kernels.apply_vjp(_image.as_planes(grad), means.contiguous(), guide)
    if d_means.shape[-2:] != means.shape[-2:]:
        d_means = resample.bilinear_adjoint(d_means, means.shape[-2:])
    return d_means, d_guide


@library.op("guided_apply", lambda means, guide, img: _image.new_image(img), grads=("means", "guide"),
            backward=_apply_backward)
def _apply_op(means: Tensor, guide: Tensor, img: Tensor) -> Tensor:
    """``mean_a . guide + mean_b`` as a new image of ``img``'s shape, dtype and layout (the
    ``means`` upsampled bilinearly to it when smaller)."""
    out = _image.new_image(img)
    kernels.apply(means.contiguous(), guide, _image.as_planes(out))
    return out


def _output_backward(grad, ab, guide, img, radius, border):
    """The gradients to the models and the guide of ``guided_output`` for its output's
    gradient ``grad``: to the means and the guide in one launch (the means summed again
    on the way), then the box's adjoint."""
    d_means, d_guide = sliding.box_vjp(ab, guide, _image.as_planes(grad), radius, border)
    return _box_adjoint(d_means, radius, border), d_guide


@library.op("guided_output", lambda ab, guide, img, radius, border: _image.new_image(img), grads=("ab", "guide"),
            backward=_output_backward)
def _output_op(ab: Tensor, guide: Tensor, img: Tensor, radius: int, border: str) -> Tensor:
    """The output from the models ``ab`` (``guided_models``): their box means applied to the
    guide in one launch (``kernels.sliding.box``), a new image of ``img``'s shape, dtype
    and layout."""
    out = _image.new_image(img)
    sliding.box(ab, radius, border, guide=guide, out=_image.as_planes(out))
    return out


@library.op("guided_box", lambda ab, radius, border: torch.empty_like(ab), grads=("ab",),
            backward=lambda grad, ab, radius, border: _box_adjoint(grad, radius, border), linear=True)
def _box_op(ab: Tensor, radius: int, border: str) -> Tensor:
    """The box means of the models ``ab`` (the fast guided filter's, before their upsampling)."""
    return sliding.box(ab, radius, border)
