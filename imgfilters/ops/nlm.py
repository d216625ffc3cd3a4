"""Non-local means denoising with automatic parameters: ``nl_means``.

CUDA tensors run one Triton launch with no memory beyond the output; other CPU tensors run
the CPU engine (``imgfilters/cpu``), or the Triton kernel in Triton's interpreter under
``TRITON_INTERPRET=1``; float64 runs the float64 reference. Every supported dtype is read
and written directly. The filter is not differentiable: its output has no gradient.
"""
from typing import Optional

import torch
from torch import Tensor

from imgfilters import _image
from imgfilters.kernels import nlm as kernels
from imgfilters.ops import library, noise, pointwise
from imgfilters.reference import nlm as reference

__all__ = ["nl_means", "parameters"]

# Buades, Coll and Morel, "Non-Local Means Denoising", IPOL 2011, table of parameters:
# (largest sigma in 0-255 units, patch size, search window side, h / sigma).
GREY_TABLE = ((15, 3, 21, 0.40), (30, 5, 21, 0.40), (45, 7, 35, 0.35), (75, 9, 35, 0.35), (100, 11, 35, 0.30))
COLOUR_TABLE = ((25, 3, 21, 0.55), (55, 5, 35, 0.40), (100, 7, 35, 0.35))


def parameters(sigma, channels):
    """IPOL's row for noise ``sigma`` (unit scale) on an image with ``channels`` channels:
    ``(patch_size, search_radius, h)``, h in unit scale. Three or more channels use the
    colour rows; above sigma = 100/255 the last row holds."""
    table = COLOUR_TABLE if channels >= 3 else GREY_TABLE
    s = 255.0 * float(sigma)
    row = next((r for r in table if s <= r[0]), table[-1])
    return row[1], row[2] // 2, row[3] * float(sigma)


def nl_means(img, h=None, *, sigma=None, patch_size=None, search_radius=None, border="reflect",
             border_value=0.0):
    """Non-local means: each pixel becomes the average of the pixels in its search window,
    weighted by how much their patches look like its own.

    ``out(p) = sum_q w(p,q) I(q) / sum_q w(p,q)`` over the ``(2R+1)^2`` window around p,
    ``w = exp(-max(d^2 - 2 sigma^2, 0) / h^2)``, and ``d^2`` the mean over the ``P x P`` patch
    offsets and all channels of ``(I(p+o) - I(q+o))^2``; patches and windows near the
    edges read the border extension.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` image, 1 to 4 channels, any supported dtype.
        h: filtering strength in unit scale (0.04 on any dtype = 10 on a 0-255 scale); a
            float or a 1-D tensor with one value per image. ``None``: IPOL's factor times
            sigma (table below).
        sigma: the noise standard deviation in unit scale, float or per image; ``None``
            estimates it per image with ``imgfilters.estimate_noise``.
        patch_size: odd patch side P, at most 15 (scikit-image's ``patch_size``).
        search_radius: R, the window is ``(2R+1)^2``, at most 35 (scikit-image's
            ``patch_distance``).
        border, border_value: as in ``imgfilters.separable_filter``.

    Parameters left as ``None`` follow Buades, Coll and Morel, "Non-Local Means
    Denoising", IPOL 2011 (sigma in 0-255 units; search window side = 2R + 1)::

        grey (1-2 channels)                 colour (3-4 channels)
        sigma    patch  window  h            sigma    patch  window  h
        <= 15    3x3    21x21   0.40 sigma   <= 25    3x3    21x21   0.55 sigma
        <= 30    5x5    21x21   0.40 sigma   <= 55    5x5    35x35   0.40 sigma
        <= 45    7x7    35x35   0.35 sigma   <= 100   7x7    35x35   0.35 sigma
        <= 75    9x9    35x35   0.35 sigma
        <= 100   11x11  35x35   0.30 sigma

    In a batch, the patch and window come from the largest sigma, h from each image's own.

    This is the algorithm of ``skimage.restoration.denoise_nl_means(fast_mode=True)``
    (``h``, ``sigma``, ``patch_size`` and ``patch_distance=search_radius``), computed
    exactly: scikit-image's fast mode sums a ``(P-1) x (P-1)`` window while dividing by
    ``P^2`` and drops weights below ``exp(-5)``, so its results differ by up to about a dB
    of PSNR, either way, most with small patches.
    """
    return _image.wrap(img, _nlm_op(img, *_nlm_args(img, h, sigma, patch_size, search_radius, border, border_value)))


def _nlm_args(img, h, sigma, patch_size, search_radius, border, border_value):
    """The op's arguments after the image: the arguments in the order they come, then what
    depends on several of them."""
    _image.check_image(img)
    B, C = _image.as_planes(img).shape[:2]
    if C > kernels.MAX_CHANNELS:
        raise ValueError(f"img has {C} channels; nl_means supports 1 to {kernels.MAX_CHANNELS}")
    estimated = sigma is None
    h = None if h is None else _image.per_image(h, "h", B)
    sigma = None if estimated else _image.per_image(sigma, "sigma", B, positive=False)
    if patch_size is not None:
        patch_size = _image.check_integer(patch_size, "patch_size", 1, kernels.MAX_PATCH, odd=True)
    if search_radius is not None:
        search_radius = _image.check_integer(search_radius, "search_radius", 0, kernels.MAX_RADIUS)
    _image.check_border(border, border_value)
    if estimated:
        noise.check_size(img)
    return h, sigma, patch_size, search_radius, border, float(border_value)


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` that one output tile of ``nl_means`` needs
    (``imgfilters.tiling``): half the patch plus the search radius, the defaults taken
    from the largest ``sigma`` (which the tiling estimates once for the whole image). The
    values of per-image ``h`` and ``sigma`` are checked here, as the op checks them."""
    B = _image.as_planes(a["img"]).shape[0]
    sigma = _image.per_image_values(_image.per_image(a["sigma"], "sigma", B, positive=False), "sigma", B,
                                    positive=False)
    if a["h"] is not None:
        _image.per_image_values(_image.per_image(a["h"], "h", B), "h", B)
    patch_size, search_radius, _ = parameters(float(sigma.max()), channels)
    r = (a["patch_size"] or patch_size) // 2 + (search_radius if a["search_radius"] is None else a["search_radius"])
    return r, r


@library.op("nl_means", library.same_as_input, cpu_engine=True)
def _nlm_op(img: Tensor, h: Optional[Tensor], sigma: Optional[Tensor], patch_size: Optional[int],
            search_radius: Optional[int], border: str, border_value: float, *, fusion=None) -> Tensor:
    """``h`` or ``sigma`` None: automatic (sigma estimated per image, h from the table);
    ``fusion``, a ``pointwise.Fusion``: the launch's prologue and epilogue."""
    x4 = _image.as_planes(img)
    B, C = x4.shape[:2]
    if _image.uses_kernels(img):  # (before the estimate's wait for sigma, while the device works)
        pro, epi, dtype = pointwise.fused_chains(fusion, C, img.device, img.dtype)
        y = _image.new_image(img, dtype=dtype)
    if sigma is None:
        sigma = noise.check_estimated(noise.sigmas(x4).cpu())
    else:
        sigma = _image.per_image_values(sigma, "sigma", B, positive=False)
    auto = [parameters(s, C) for s in sigma.tolist()]
    widest = max(auto, key=lambda p: p[0])
    patch_size = widest[0] if patch_size is None else patch_size
    search_radius = widest[1] if search_radius is None else search_radius
    if h is None:
        # a clean image estimates sigma = 0: keep h positive, so identical patches still count
        h = torch.tensor([max(p[2], 1e-4) for p in auto], dtype=torch.float64)
    else:
        h = _image.per_image_values(h, "h", B)
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import nlm as engine
        return engine.nl_means(img, h.tolist(), sigma.tolist(), patch_size, search_radius,
                               _image.check_border(border), border_value, fusion)
    if not _image.uses_kernels(img):
        y = reference.nl_means(_image.to_unit(x4), h, sigma, patch_size, search_radius, border, border_value)
        return _image.in_layout(img, _image.from_unit(y, img.dtype))
    area = patch_size * patch_size * C
    coef = _image.on(tuple(_image.finite_ratio(-kernels.LOG2E, v * v * area) for v in h.tolist()), img.device)
    floor = _image.on(tuple(2 * s * s * area for s in sigma.tolist()), img.device)
    kernels.launch(x4, _image.as_planes(y), coef, floor, patch_size, search_radius, _image.check_border(border),
                   border_value, pro=pro, epi=epi)
    return y
