"""Float64 definition of the resampling family.

Every mode is separable and linear: along each axis, output pixel ``d`` is a weighted sum of
input pixels, ``y[d] = sum_j W[d, j] x[j]``. ``weights(in_size, out_size, mode, ...)`` builds
the dense ``(out_size, in_size)`` matrix ``W``; ``resize`` applies one along W, then one
along H. Inputs and outputs are float64 ``(..., C, H, W)`` in unit scale; gradients follow
from autograd (``W`` depends only on the sizes).

``resample`` computes each output as the sum of its taps of nonzero weight (``row_taps``:
the nonzero entries of its row of ``W``), in ascending order of input pixel, one product
and one addition at a time. So an output's value depends on its taps alone, not on which
other outputs are computed with it: a tile of the output (``imgfilters.tiling``,
``imgfilters.dask``) equals the whole call's, bit for bit. And a NaN or inf reaches
exactly the outputs that weigh it, combined as IEEE arithmetic does (a NaN gives NaN; an
inf times a positive or negative weight an inf, both signs NaN). A plain product with
``W`` would multiply it by the zeros of every other row and spread it over the whole
plane; ``F.interpolate`` also spreads it to the zero-weight taps it reads (bicubic at an
integer position), one pixel further. The kernels follow this definition.

``s`` below is the coordinate scale: input pixels per output pixel. Without
``align_corners`` it is ``scale`` when given (torch passes ``1 / scale_factor`` when
``F.interpolate`` is called with ``scale_factor``) and ``in / out`` otherwise; with
``align_corners`` it is ``(in - 1) / (out - 1)`` (0 for one output pixel), and ``scale`` is
ignored, as in torch's ``area_pixel_compute_scale``. Index ``d`` runs over output pixels,
``j`` over input pixels, both from 0.

``"nearest"`` (``F.interpolate(mode="nearest")``, OpenCV ``INTER_NEAREST``)
    ``j = min(floor(fl32(d * s32)), in - 1)``, weight 1, where ``s32`` is ``s`` in float32
    (``fl32(in) / fl32(out)``, a float32 division, or ``fl32(scale)``) and ``fl32`` rounds
    to float32: torch's float32 index arithmetic (``compute_scales_value<float>``, then
    ``floorf``), which its float32 and uint8 CPU kernels follow (checked on 700 random
    sizes and factors each). It differs from exact arithmetic where ``d * in / out`` is
    an integer that float32 lands just below. Where torch deviates: its float64 CPU
    kernel computes in float64 for larger planes (the same index except at such ties),
    and for smaller planes its CPU kernel copies (``out == in``) or takes ``d // 2``
    (``out == 2 in``) even when a ``scale_factor`` says otherwise (37 * 1.02 -> 37);
    this definition has no such shortcuts.
``"nearest-exact"`` (``mode="nearest-exact"``, PIL and scikit-image nearest)
    ``j = min(floor(fl32((d + 0.5) * s32)), in - 1)``, ``(d + 0.5) * s32`` exact (it is in
    float64), as torch's ``floorf((dst_index + 0.5) * scale)``. A tie: 16 -> 41, d = 20:
    20.5 * 16 / 41 = 8 exactly, but float32 gives 7.99999 and pixel 7, as torch does.
``"bilinear"``, ``antialias=False`` (``F.interpolate(mode="bilinear")``)
    ``u = s * d`` with align_corners, else ``max(s * (d + 0.5) - 0.5, 0)`` (negative
    source coordinates clamp to 0); ``j0 = min(floor(u), in - 1)``,
    ``t = clamp(u - j0, 0, 1)``, ``j1 = min(j0 + 1, in - 1)``; weights ``1 - t`` on ``j0``
    and ``t`` on ``j1``.
``"bicubic"``, ``antialias=False`` (``F.interpolate(mode="bicubic")``, torch's
    ``UpSample.h``) ``u`` as for bilinear but never clamped; ``j0 = min(floor(u), in - 1)``,
    ``t = clamp(u - j0, 0, 1)``; taps ``j0 - 1 .. j0 + 2`` with weights
    ``k(t + 1), k(t), k(1 - t), k(2 - t)``, ``k`` Keys' cubic convolution with
    ``A = -0.75``::

        k(x) = (A + 2)|x|^3 - (A + 3)|x|^2 + 1          for |x| < 1
        k(x) = A|x|^3 - 5A|x|^2 + 8A|x| - 4A            for 1 <= |x| < 2, else 0

    Taps outside the image are clamped to the edge (replicate), so their weights add up
    on pixel 0 or ``in - 1``. The weights are not renormalised (they sum to 1 already).
``"bilinear"``, ``"bicubic"`` with ``antialias=True``, and ``"lanczos"`` (PIL's
    ``ImagingResample`` in ``Resample.c``; torch's ``_upsample_bilinear2d_aa`` /
    ``_upsample_bicubic2d_aa``, which copy it)::

        f = max(s, 1)                      # the filter stretches when downsampling
        c = s * (d + 0.5)                  # output centre, in input-pixel edges
        xmin = max(floor(c - R * f + 0.5), 0),  xmax = min(floor(c + R * f + 0.5), in)
        W[d, j] = k((j + 0.5 - c) / f) / sum_{xmin <= i < xmax} k((i + 0.5 - c) / f)
        for xmin <= j < xmax, else 0

    with ``k`` and its support ``R``: triangle ``max(1 - |x|, 0)``, R = 1 (bilinear);
    Keys' cubic with ``A = -0.5``, R = 2 (bicubic: PIL's constant, not torch's -0.75);
    Lanczos-3 ``sinc(x) sinc(x / 3)`` for ``|x| < 3``, R = 3 (``sinc(x) = sin(pi x) /
    (pi x)``). Taps that fall outside the image are dropped and the rest renormalised,
    so there is no border extension. With ``align_corners`` torch keeps this formula
    with ``s = (in - 1) / (out - 1)``, and so does this definition. Lanczos exists only
    in this form (PIL's ``Image.LANCZOS``; ``F.interpolate(mode="lanczos",
    antialias=True)`` in torch 2.14); ``antialias=False`` is refused for it, as torch
    and torchvision do.
``"area"`` (``F.interpolate(mode="area")`` = ``adaptive_avg_pool2d``)
    The mean of input pixels ``floor(d * in / out) <= j < ceil((d + 1) * in / out)`` in
    exact integer arithmetic. For an integer downsampling factor this is
    ``cv2.INTER_AREA``. ``scale`` is not used: torch recomputes it from the sizes.
``"matlab"`` (MATLAB ``imresize(..., "bicubic")``; BasicSR
    ``basicsr/utils/matlab_functions.py::imresize``)
    ``c = s * (d + 0.5) - 0.5``; kernel width ``K = 4 * s`` when downsampling
    (``s > 1``) with antialias, else 4; taps
    ``j = floor(c - K / 2) + 0 .. ceil(K) + 1``; ``W[d, j] = k((c - j) / f)``
    with ``f = K / 4`` and ``k`` Keys' cubic with ``A = -0.5``, normalised over the taps
    *before* the border: taps outside ``[0, in)`` read the symmetric extension (the
    edge pixel repeated: -1 -> 0, -2 -> 1, periodic with period ``2 * in``, MATLAB's
    ``aux = [1:in, in:-1:1]``), so their weights add up on the mirrored pixels. Unlike
    the PIL family the border taps keep their weight. BasicSR computes in float32 and
    copies only ``sym_len`` mirrored pixels: it agrees within float32 rounding (checked
    to 2e-6; 1e-15 when run in float64) and raises on images smaller than the kernel
    reach (3 x 2 shrunk by 4), which MATLAB and this definition extend periodically.

Same size: when ``out == in``, bilinear (with or without antialias), antialiased bicubic
and lanczos return the input whatever ``scale`` says, as torch does (37 * 1.02 -> 37 is
a copy); bicubic without antialias, nearest, nearest-exact and matlab still apply ``s``.
"""
import math

import torch

from .borders import border_indices

MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "lanczos", "area", "matlab")

_TORCH_CUBIC_A = -0.75
_PIL_CUBIC_A = -0.5
CPU_BLOCK = 1 << 16  # values a block of outputs holds in ``_apply_taps`` (512 KiB of float64)


def keys_cubic(x, a):
    """Keys' cubic convolution kernel with parameter ``a`` (0 for |x| >= 2)."""
    x = x.abs()
    inner = ((a + 2) * x - (a + 3)) * x * x + 1
    outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return torch.where(x < 1, inner, torch.where(x < 2, outer, torch.zeros_like(x)))


def triangle(x):
    return (1 - x.abs()).clamp(min=0)


def lanczos3(x):
    return torch.where(x.abs() < 3, torch.sinc(x) * torch.sinc(x / 3), torch.zeros_like(x))


# PIL-style filters: kernel and support radius (in input pixels, before stretching)
_PIL_FILTERS = {"bilinear": (triangle, 1.0),
                "bicubic": (lambda x: keys_cubic(x, _PIL_CUBIC_A), 2.0),
                "lanczos": (lanczos3, 3.0)}


def coordinate_scale(in_size, out_size, align_corners=False, scale=None):
    """``s``, input pixels per output pixel (module docstring)."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return float(scale) if scale is not None else in_size / out_size


def _nearest(in_size, out_size, d, scale, offset):
    if scale is None:  # a float32 division, as torch's compute_scales_value<float>
        s32 = torch.tensor(float(in_size), dtype=torch.float32) / out_size
    else:
        s32 = torch.tensor(scale, dtype=torch.float32)
    # the product of float32 operands is exact in float64; rounding it to float32 is
    # torch's float32 multiply (nearest) or floorf's conversion (nearest-exact)
    j = torch.floor(((d + offset) * s32.double()).to(torch.float32)).to(torch.int64)
    return j.clamp(max=in_size - 1)[:, None], torch.ones(len(d), 1, dtype=torch.float64)


def _torch_interpolating(in_size, d, s, align_corners, cubic):
    u = s * d if align_corners else s * (d + 0.5) - 0.5
    if not cubic and not align_corners:
        u = u.clamp(min=0)
    j0 = torch.floor(u).to(torch.int64).clamp(max=in_size - 1)
    t = (u - j0).clamp(0, 1)
    if cubic:
        taps = j0[:, None] + torch.arange(-1, 3)
        dist = torch.stack([t + 1, t, 1 - t, 2 - t], dim=1)
        values = keys_cubic(dist, _TORCH_CUBIC_A)
    else:
        taps = torch.stack([j0, j0 + 1], dim=1)
        values = torch.stack([1 - t, t], dim=1)
    return taps.clamp(0, in_size - 1), values


def _pil(in_size, d, s, mode):
    kernel, radius = _PIL_FILTERS[mode]
    stretch = max(s, 1.0)
    support = radius * stretch
    c = s * (d + 0.5)
    xmin = torch.floor(c - support + 0.5).clamp(min=0)[:, None]
    xmax = torch.floor(c + support + 0.5).clamp(max=in_size)[:, None]
    j = xmin + torch.arange(math.ceil(2 * support) + 2, dtype=torch.float64)  # covers xmin .. xmax - 1
    inside = j < xmax
    w = torch.where(inside, kernel((j - c[:, None] + 0.5) / stretch), torch.zeros_like(j))
    total = w.sum(1, keepdim=True)
    cols = torch.where(inside, j, xmin).to(torch.int64)  # taps past xmax: weight 0 on a pixel in range
    return cols, w / torch.where(total == 0, torch.ones_like(total), total)


def _area(in_size, out_size, d):
    d = d.to(torch.int64)
    start = d * in_size // out_size
    end = -((-(d + 1) * in_size) // out_size)
    j = start[:, None] + torch.arange(-(-in_size // out_size) + 1)
    inside = j < end[:, None]
    values = inside.to(torch.float64) / (end - start).to(torch.float64)[:, None]
    return torch.where(inside, j, start[:, None]), values


def _matlab(in_size, d, s, antialias):
    width = 4.0 * s if (antialias and s > 1) else 4.0
    stretch = width / 4.0
    c = s * (d + 0.5) - 0.5
    left = torch.floor(c - width / 2).to(torch.int64)
    taps = left[:, None] + torch.arange(math.ceil(width) + 2)
    w = keys_cubic((c[:, None] - taps) / stretch, _PIL_CUBIC_A)
    w = w / w.sum(1, keepdim=True)
    before, after = max(-int(taps.min()), 0), max(int(taps.max()) - in_size + 1, 0)
    return border_indices(in_size, before, after, "symmetric")[taps + before], w


def taps(in_size, out_size, mode, start=0, stop=None, *, antialias, align_corners=False, scale=None):
    """The taps of output pixels ``start .. stop - 1`` of ``mode`` along one axis:
    ``(cols, values)``, two ``(stop - start, K)`` tensors, output pixel ``start + i`` being
    ``sum_k values[i, k] * x[cols[i, k]]`` (repeated columns add; every column is in
    ``[0, in_size)``, zero weights included). Arguments as in ``weights``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if in_size < 1 or out_size < 1:
        raise ValueError(f"sizes must be positive, got {in_size} -> {out_size}")
    d = torch.arange(start, out_size if stop is None else stop, dtype=torch.float64)
    if mode in ("nearest", "nearest-exact"):
        return _nearest(in_size, out_size, d, scale, 0.5 if mode == "nearest-exact" else 0.0)
    s = coordinate_scale(in_size, out_size, align_corners, scale)
    if mode == "area":
        return _area(in_size, out_size, d)
    if mode == "matlab":
        return _matlab(in_size, d, s, antialias)
    if mode == "lanczos" and not antialias:
        raise ValueError("lanczos is defined with antialias=True only")
    if out_size == in_size and (mode != "bicubic" or antialias):
        return d.to(torch.int64)[:, None], torch.ones(len(d), 1, dtype=torch.float64)
    if antialias:
        return _pil(in_size, d, s, mode)
    return _torch_interpolating(in_size, d, s, align_corners, cubic=mode == "bicubic")


def row_taps(in_size, out_size, mode, start=0, stop=None, *, antialias, align_corners=False, scale=None):
    """The rows ``start .. stop - 1`` of ``weights`` as taps: ``(cols, values)``, two
    ``(stop - start, K)`` tensors, each row's columns ascending and distinct but for taps
    of weight 0 (``taps`` with repeated columns summed, in tap order). Row ``d`` depends
    on ``d`` alone, not on the span: a span's rows are the whole axis's, bit for bit."""
    cols, values = taps(in_size, out_size, mode, start, stop, antialias=antialias, align_corners=align_corners,
                        scale=scale)
    order = cols.argsort(dim=1, stable=True)
    cols, values = cols.gather(1, order), values.gather(1, order)
    for k in range(1, cols.shape[1]):  # a repeated column: its weights summed onto its last tap
        same = cols[:, k] == cols[:, k - 1]
        values[:, k] = torch.where(same, values[:, k - 1] + values[:, k], values[:, k])
        values[:, k - 1] = torch.where(same, 0.0, values[:, k - 1])
    return cols, values


def weights(in_size, out_size, mode, *, antialias, align_corners=False, scale=None):
    """The float64 ``(out_size, in_size)`` matrix of ``mode`` along one axis.

    ``scale`` is the coordinate scale ``s`` (input pixels per output pixel) when it is not
    ``in_size / out_size``: torch uses ``1 / scale_factor`` when ``F.interpolate`` gets a
    ``scale_factor``, and MATLAB ``1 / scale`` when ``imresize`` gets a scale. Formulas and
    sources: the module docstring. ``antialias`` selects the PIL-style path for bilinear
    and bicubic, widens the MATLAB kernel when downsampling, must be True for lanczos and
    is not used by nearest, nearest-exact and area (torchvision ignores it there too).
    """
    cols, values = row_taps(in_size, out_size, mode, antialias=antialias, align_corners=align_corners, scale=scale)
    return torch.zeros(out_size, in_size, dtype=torch.float64).scatter_add_(1, cols, values)


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def resize(x, size, mode, antialias, align_corners=False, scale=None, *, intermediate_clamp=False):
    """``x`` (..., H, W) float64 resampled to ``size = (out_h, out_w)``: ``Wh @ x @ Ww^T``.

    ``scale``: None, or the coordinate scale ``s`` per axis (a float for both, or
    ``(s_h, s_w)``), as in ``weights``. ``resize(x, size, m, aa, ac)`` equals
    ``F.interpolate(x, size, mode=m, antialias=aa, align_corners=ac)`` for nearest,
    nearest-exact, bilinear, bicubic, lanczos (antialias) and area, and
    ``F.interpolate(x, scale_factor=f, ...)`` with ``scale = 1 / f``.

    ``intermediate_clamp``: resample along W first and clamp that result to [0, 1] before
    resampling along H. This is what PIL (``Image.resize``) and torch's native CPU uint8
    path (behind ``torchvision.transforms.v2.functional.resize`` on uint8) compute: their
    intermediate image is uint8. It changes only results with overshoot (bicubic,
    lanczos) near saturated pixels, there by up to ~10 levels on the sample photos;
    float inputs to ``F.interpolate`` and torchvision (and uint8 on CUDA, which torchvision
    converts to float) are not clamped between passes.
    """
    spans = [row_taps(n, m, mode, antialias=antialias, align_corners=align_corners, scale=s)
             for n, m, s in zip(x.shape[-2:], size, _pair(scale))]
    return resample(x, *spans, intermediate_clamp=intermediate_clamp)


def resample(x, rows, cols, *, intermediate_clamp=False):
    """``x`` (..., h, w) resampled by the taps ``rows`` along H and ``cols`` along W (each a
    ``row_taps`` pair, its columns counted from ``x``'s first row or column): along W,
    clamped to [0, 1] with ``intermediate_clamp``, then along H (``resize``). On any device
    and float dtype; a tile of the output is this on its source crop."""
    y = _apply_taps(x, *cols, -1)
    if intermediate_clamp:
        y = y.clamp(0, 1)
    return _apply_taps(y, *rows, -2)


def _apply_taps(x, cols, values, axis):
    """``x`` resampled along ``axis`` (-1 or -2) by ``(cols, values)``: each output the sum
    of its taps of nonzero weight in ascending column order, a product and an addition at
    a time (module docstring): the same arithmetic whatever else is computed with it. The
    axis goes first, so that each tap gathers whole rows, and the taps of weight 0 read
    an appended row of zeros (0 * inf would be NaN). On the CPU the outputs go in blocks
    of about CPU_BLOCK values, whose taps' products and sums stay in the cache."""
    rows = x.movedim(axis, 0)
    rows = torch.cat([rows, rows.new_zeros((1, *rows.shape[1:]))])
    cols = torch.where(values != 0, cols, x.shape[axis]).to(x.device)
    values = values.to(x.device, x.dtype).reshape(*values.shape, *(1,) * (x.ndim - 1))
    step = max(1, CPU_BLOCK // rows[0].numel()) if x.device.type == "cpu" else len(cols)
    blocks = []
    for start in range(0, len(cols), step):
        c, v = cols[start:start + step], values[start:start + step]
        y = None
        for k in range(c.shape[1]):
            term = rows.index_select(0, c[:, k]) * v[:, k]
            y = term if y is None else y + term
        blocks.append(y)
    return (blocks[0] if len(blocks) == 1 else torch.cat(blocks)).movedim(0, axis)


def imresize(x, out_size=None, *, scale=None, antialias=True):
    """MATLAB ``imresize(x, scale)`` / ``imresize(x, [out_h, out_w])``, bicubic.

    Give exactly one of ``out_size`` (``(out_h, out_w)``; the scale per axis is then
    ``out / in``) and ``scale`` (MATLAB's magnification: a float for both axes or a pair;
    the output is ``ceil(in * scale)`` and the mapping uses ``scale`` itself, as MATLAB and
    BasicSR do). ``antialias`` widens the kernel when downsampling (MATLAB's default).
    """
    if (out_size is None) == (scale is None):
        raise ValueError("give exactly one of out_size and scale")
    in_h, in_w = x.shape[-2:]
    if scale is None:
        (out_h, out_w), (s_h, s_w) = out_size, (None, None)
    else:
        m_h, m_w = _pair(scale)
        out_h, out_w = math.ceil(in_h * m_h), math.ceil(in_w * m_w)
        s_h, s_w = 1.0 / m_h, 1.0 / m_w
    return resize(x, (out_h, out_w), "matlab", antialias, scale=(s_h, s_w))


def resized_size(height, width, size, max_size=None):
    """Output ``(h, w)`` of ``torchvision.transforms.v2.functional.resize``.

    ``size``: ``(h, w)``; an int or ``[int]``, the shorter side, the longer one scaled to
    ``int(size * long / short)`` (truncated) and, when that exceeds ``max_size``, both
    rescaled to ``long = max_size``, ``short = int(max_size * short / long)``; or ``None``
    with ``max_size``: the longer side becomes ``max_size``. Square images keep
    ``h, w = size``. Mirrors torchvision's ``_compute_resized_output_size``.
    """
    short, long = (width, height) if width <= height else (height, width)
    if size is None:
        if not isinstance(max_size, int):
            raise ValueError(f"max_size must be an integer when size is None, got {max_size}")
        new_short, new_long = int(max_size * short / long), max_size
    elif isinstance(size, int) or len(size) == 1:
        requested = size if isinstance(size, int) else size[0]
        new_short, new_long = requested, int(requested * long / short)
        if max_size is not None:
            if max_size <= requested:
                raise ValueError(f"max_size = {max_size} must be strictly greater than the "
                                 f"requested size for the smaller edge size = {size}")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
    else:
        if max_size is not None:
            raise ValueError("max_size is only allowed with an int size (the shorter side)")
        return int(size[0]), int(size[1])
    return (new_long, new_short) if width <= height else (new_short, new_long)
