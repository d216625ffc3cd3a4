"""Float64 definition of the bilateral family.

``bilateral(x, guide, sigma_color, sigma_space, radius, window, color_distance, border)``::

    out[b, :, p] = sum_q w(p, q) X~[b, :, q] / sum_q w(p, q)
    w(p, q) = exp(-|p - q|^2 / (2 sigma_space^2)) * exp(-D(p, q)^2 / (2 sigma_color^2))

over the window around p: ``"square"``, all (2r+1)^2 offsets, or ``"disk"``, the offsets
with dx^2 + dy^2 <= r^2. ``D`` is the distance between the guide's pixel vectors over all
channels jointly: Euclidean for ``"l2"``, the sum of absolute channel differences for
``"l1"``. ``X~`` and the guide are extended by the border (``reference.borders``); a
constant border supplies ``border_value`` in every channel of both. The plain bilateral
filter is ``guide = x``.

Peers: with ``"l1"``, a square window and the reflect border this is
``kornia.filters.bilateral_blur`` / ``joint_bilateral_blur`` (kornia normalises its
spatial gaussian, which cancels in the ratio); with ``"l1"``, a disk window and reflect
it is ``cv2.bilateralFilter(..., borderType=BORDER_REFLECT_101)`` with
``sigmaColor = 255 * sigma_color`` for uint8 images (OpenCV rounds through lookup tables,
so agreement is within one grey level).

``sigma_color`` and ``sigma_space`` are floats or 1-D tensors with one value per image of
the batch. Inputs are float64 (B, C, H, W) in unit scale; the guide's batch is B or 1.
"""
import math

import torch

from .borders import pad


def default_radius(sigma_space: float) -> int:
    """``radius=None``: ceil(2 * sigma_space), at least 1."""
    return max(1, math.ceil(2.0 * sigma_space))


def window_offsets(radius: int, window: str):
    """The (dy, dx) offsets of the window, row-major."""
    return [(dy, dx) for dy in range(-radius, radius + 1) for dx in range(-radius, radius + 1)
            if window == "square" or dy * dy + dx * dx <= radius * radius]


def _coefficients(sigma_color, sigma_space, device):
    """-1 / (2 sigma^2) for the range and spatial terms, per image, broadcastable."""
    per_image = lambda s: torch.as_tensor(s, dtype=torch.float64, device=device).reshape(-1, 1, 1, 1)
    return -0.5 / per_image(sigma_color) ** 2, -0.5 / per_image(sigma_space) ** 2


def _distance2(diff, color_distance):
    """Squared colour distance of guide differences over the channel dim: (sum |d|)^2 for
    "l1", sum d^2 for "l2"."""
    if color_distance == "l1":
        return diff.abs().sum(-3, keepdim=True) ** 2
    return (diff ** 2).sum(-3, keepdim=True)


def bilateral(x, guide, sigma_color, sigma_space, radius, window="square", color_distance="l2",
              border="reflect", border_value=0.0):
    B, _, H, W = x.shape
    color_coeff, space_coeff = _coefficients(sigma_color, sigma_space, x.device)
    r = radius
    xp = pad(x, r, r, r, r, border, border_value)
    gp = pad(guide, r, r, r, r, border, border_value)
    num = torch.zeros_like(x)
    den = torch.zeros(B, 1, H, W, dtype=x.dtype, device=x.device)
    for dy, dx in window_offsets(r, window):
        diff = gp[..., r + dy:r + dy + H, r + dx:r + dx + W] - guide
        dist2 = _distance2(diff, color_distance)
        w = torch.exp(space_coeff * (dy * dy + dx * dx) + color_coeff * dist2)
        num = num + w * xp[..., r + dy:r + dy + H, r + dx:r + dx + W]
        den = den + w
    return num / den


def sample_positions(n_out: int, n_in: int) -> torch.Tensor:
    """Where output pixel centres fall on an input axis of n_in pixels (half-pixel
    centres, as ``F.interpolate(align_corners=False)``): (i + 0.5) * n_in / n_out - 0.5."""
    return (torch.arange(n_out, dtype=torch.float64) + 0.5) * (n_in / n_out) - 0.5


def joint_bilateral_upsample(low, guide, sigma_color, sigma_space, radius, window="square",
                             color_distance="l2", border="reflect", border_value=0.0):
    """Joint bilateral upsampling (Kopf et al. 2007) with fractional sample positions.

    ``low`` is (B, C, h, w), ``guide`` (B, Cg, H, W); the output is (B, C, H, W)::

        out[p] = sum_q w(p, q) L~[q] / sum_q w(p, q)
        w(p, q) = exp(-|p' - q|^2 / (2 sigma_space^2)) * exp(-D(G[p], G_q)^2 / (2 sigma_color^2))

    p' is the high-resolution pixel p's centre in low-resolution pixel units
    (``sample_positions``), q runs over the window of radius r around the low-resolution
    sample nearest to p', and the spatial distance is measured from p' itself, so samples
    sit at their true fractional positions. G_q is the guide at q's centre: the guide
    resampled bilinearly to (h, w) exactly as ``F.interpolate(guide, (h, w),
    mode="bilinear", align_corners=False)``. L~ and the resampled guide are extended by the
    border outside the low-resolution grid. With h = H and w = W this is ``bilateral``
    with the guide.
    """
    B, C, h, w = low.shape
    H, W = guide.shape[-2:]
    r = radius
    color_coeff, space_coeff = _coefficients(sigma_color, sigma_space, low.device)
    u = sample_positions(H, h).to(low.device)
    v = sample_positions(W, w).to(low.device)
    # nearest sample, floor(u + 0.5), in exact integers (ties are common: 2 -> 41 rows)
    a0 = ((2 * torch.arange(H, device=low.device) + 1) * h) // (2 * H)
    b0 = ((2 * torch.arange(W, device=low.device) + 1) * w) // (2 * W)
    g_low = torch.nn.functional.interpolate(guide, size=(h, w), mode="bilinear", align_corners=False)
    lp = pad(low, r, r, r, r, border, border_value)
    gp = pad(g_low, r, r, r, r, border, border_value)
    taps = []
    for dy, dx in window_offsets(r, window):
        rows, cols = a0 + dy, b0 + dx
        diff = gp[..., rows + r, :][..., cols + r] - guide
        dist2 = _distance2(diff, color_distance)
        space2 = (u - rows)[:, None] ** 2 + (v - cols)[None, :] ** 2
        taps.append((lp[..., rows + r, :][..., cols + r], space_coeff * space2 + color_coeff * dist2))
    # No tap is certain to weigh 1 here (the filter has its centre): weights are taken
    # relative to the largest, which leaves the ratio unchanged and never underflows to 0/0.
    top = torch.stack([e for _, e in taps]).amax(0).detach()
    num = sum(torch.exp(e - top) * values for values, e in taps)
    den = sum(torch.exp(e - top) for _, e in taps)
    return num / den
