"""Float64 definition of morphology: erosion, dilation and what is built from them.

A structuring element is a boolean ``kh x kw`` mask (at least one True) with its anchor
at ``(kh // 2, kw // 2)``, OpenCV's default anchor. With ``X`` the image extended by the
border (``reference.borders``; OpenCV's default border, ``border=None`` here, is the
constant ``+inf`` for erosion and ``-inf`` for dilation: the border never wins)::

    erode(X)[i, j]  = min over mask[u, v] of X[i + u - kh // 2, j + v - kw // 2]
    dilate(X)[i, j] = max over the same positions

(``cv2.erode``/``cv2.dilate``: both read the mask as it is, not reflected). ``iterations``
applies the pass that many times, the border again each time, except that a mask that
is all True (a rectangle) with ``iterations > 1`` becomes one pass of the rectangle
``kh + (n - 1)(kh - 1)`` by ``kw + (n - 1)(kw - 1)`` anchored at ``n`` times the anchor:
what OpenCV does (``morphOp`` in ``modules/imgproc/src/morph.dispatch.cpp``), equal to the
``n`` passes inside the image and for the default border, not near the edges for the
others. The compound operations (``cv2.morphologyEx``), each pass with ``iterations``::

    opening  = dilate(erode(X))        closing  = erode(dilate(X))
    gradient = dilate(X) - erode(X)    tophat   = X - opening
    blackhat = closing - X

in unit scale. Integer images store every pass's result in their dtype, rounded and
saturated (``levels``: what chained ``cv2`` calls do; a window that lies wholly in the
default border gives the dtype's largest or smallest value, not an infinity), and the
difference the same way (OpenCV's saturating subtraction: a negative tophat of a uint8
image is 0).

NaN: an output whose window (the mask's positions, through the border) holds a NaN is NaN
(``torch.amin``/``amax``, ``kornia.morphology``); infinities are ordered values.

Gradient: ``amin``/``amax`` over the window's values, so each output's gradient goes to
the positions that hold its value, split evenly among ties (as ``torch.amax``); positions
of a constant border read no pixel (dropped).

``structuring_element(shape, (kh, kw))`` is OpenCV's ``getStructuringElement`` for
``"rect"``, ``"cross"`` and ``"ellipse"``, bit for bit.

Peers: ``cv2.erode``, ``cv2.dilate``, ``cv2.morphologyEx`` (integer images exactly;
``borderType`` ``BORDER_REFLECT_101`` = reflect, ``BORDER_REFLECT`` = symmetric,
``BORDER_REPLICATE`` = replicate, ``BORDER_CONSTANT`` with ``borderValue`` = constant, the
default ``morphologyDefaultBorderValue()`` = ``border=None``), ``scipy.ndimage.grey_erosion``
/ ``grey_dilation`` with ``footprint`` (scipy reflects the footprint for dilation: an
odd symmetric mask agrees), ``kornia.morphology`` (its ``border_type="geodesic"`` is
``border=None``, its ``"constant"`` with ``border_value``; it flips the kernel for
dilation as scipy does).
"""
import math

import torch

from .borders import pad

SHAPES = ("rect", "cross", "ellipse")
OPS = ("erode", "dilate", "opening", "closing", "gradient", "tophat", "blackhat")


def structuring_element(shape, size):
    """OpenCV's ``getStructuringElement(shape, (kw, kh))`` as a ``(kh, kw)`` bool tensor,
    ``size = (kh, kw)``, anchor at the centre (``element_spans``)."""
    kh, kw = size
    m = torch.zeros(kh, kw, dtype=torch.bool)
    for i, (j1, j2) in enumerate(element_spans(shape, size)):
        m[i, j1:j2] = True
    return m


def element_spans(shape, size):
    """The columns ``j1 .. j2 - 1`` that row ``i`` of OpenCV's element holds, for each row
    (plain Python: ``torch.compile`` traces it as constants). The ellipse's row ``i`` spans
    ``c - dx .. c + dx`` with ``dx = round(c * sqrt((r^2 - (i - r)^2) / r^2))`` (round half
    to even, as ``saturate_cast<int>``), ``r = kh // 2``, ``c = kw // 2``; the cross is its
    middle row and column."""
    kh, kw = size
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    spans = []
    r, c = kh // 2, kw // 2
    inv_r2 = 1.0 / (r * r) if r else 0.0
    for i in range(kh):
        j1, j2 = 0, 0
        if shape == "rect" or (kh == 1 and kw == 1) or (shape == "cross" and i == r):
            j2 = kw
        elif shape == "cross":
            j1, j2 = c, c + 1
        elif abs(i - r) <= r:
            dx = round(c * math.sqrt((r * r - (i - r) ** 2) * inv_r2))
            j1, j2 = max(c - dx, 0), min(c + dx + 1, kw)
        spans.append((j1, j2))
    return spans


def passes(mask, iterations):
    """The masks of the passes one erosion or dilation makes: OpenCV's rule (the module
    docstring): an all-True mask with ``iterations > 1`` is one larger rectangle."""
    kh, kw = mask.shape
    if iterations > 1 and bool(mask.all()):
        n = iterations
        big = (kh + (n - 1) * (kh - 1), kw + (n - 1) * (kw - 1))
        return [(torch.ones(big, dtype=torch.bool), (kh // 2 * n, kw // 2 * n))]
    return [(mask, (kh // 2, kw // 2))] * iterations


def morph_pass(x, mask, anchor, dilate, border=None, border_value=0.0):
    """One erosion (or dilation) of ``x`` (``(..., H, W)``, float64) by ``mask`` anchored
    at ``anchor``, differentiable (``amin``/``amax`` over the stacked window positions)."""
    kh, kw = mask.shape
    ay, ax = anchor
    h, w = x.shape[-2:]
    if border is None:
        border, border_value = "constant", -math.inf if dilate else math.inf
    xp = pad(x.to(torch.float64), ay, kh - 1 - ay, ax, kw - 1 - ax, border, border_value)
    taps = [xp[..., u:u + h, v:v + w] for u, v in mask.nonzero().tolist()]
    stack = torch.stack(taps, -1)
    return stack.amax(-1) if dilate else stack.amin(-1)


def quantize(y, levels):
    """``y`` as an image of ``levels`` levels stores it (None: as it is)."""
    return y if levels is None else (y * levels).round().clamp(0, levels) / levels


def erode(x, mask, iterations=1, border=None, border_value=0.0, levels=None, dilate=False):
    for m, anchor in passes(mask, iterations):
        x = quantize(morph_pass(x, m, anchor, dilate, border, border_value), levels)
    return x


def dilate(x, mask, iterations=1, border=None, border_value=0.0, levels=None):
    return erode(x, mask, iterations, border, border_value, levels, dilate=True)


def morphology(x, op, mask, iterations=1, border=None, border_value=0.0, levels=None):
    """``op`` (``OPS``) of ``x`` (float64, unit scale) by ``mask``; ``levels`` (255 or
    65535 for integer images, else None) quantizes every pass's result as the image's
    dtype stores it."""
    x = x.to(torch.float64)
    args = (mask, iterations, border, border_value, levels)
    if op == "erode":
        return erode(x, *args)
    if op == "dilate":
        return dilate(x, *args)
    if op == "opening":
        return dilate(erode(x, *args), *args)
    if op == "closing":
        return erode(dilate(x, *args), *args)
    if op == "gradient":
        return dilate(x, *args) - erode(x, *args)
    if op == "tophat":
        return x - dilate(erode(x, *args), *args)
    if op == "blackhat":
        return erode(dilate(x, *args), *args) - x
    raise ValueError(f"op must be one of {OPS}, got {op!r}")
