"""Float64 definition of the guided filter (He, Sun and Tang, "Guided Image Filtering",
ECCV 2010 / TPAMI 2013) and of the fast guided filter (He and Sun, arXiv:1505.00996, 2015).

In a window ``w_k`` of ``(2r + 1)^2`` pixels around each pixel ``k`` the output is a
linear function of the guide, ``q_i = a_k . I_i + b_k``, fitted by ridge regression to the
input ``p`` (TPAMI 2013, eqs. 5-6 for a grey guide, 19-20 for a colour guide):

- grey guide: ``a_k = cov_k(I, p) / (var_k(I) + eps)``, per channel of ``p``;
- colour guide (3 channels): ``a_k = (Sigma_k + eps U)^-1 cov_k(I, p)``, ``Sigma_k`` the
  guide's 3 x 3 covariance in the window, one 3-vector per channel of ``p``;
- ``b_k = mean_k(p) - a_k . mean_k(I)``;

and every pixel averages the models of the windows that hold it (eq. 8):
``q_i = mean_i(a) . I_i + mean_i(b)``. Every mean is a box mean over the window of the
image extended by the border (``"constant"``: zeros), as ``kornia.filters.guided_blur``
(TPAMI's own code divides by the count of pixels inside the image instead).

The fast filter (``subsample`` s > 1) fits ``a`` and ``b`` on the image and guide
subsampled by s (pixels ``subsample_indices``, kornia's choice) with radius
``subsampled_radius(r, s)``, upsamples ``mean(a)`` and ``mean(b)`` bilinearly
(``F.interpolate``, ``align_corners=False``) to the full size, and applies them to the
full-size guide.

``eps`` is a number or one value per image (a tensor of B values). Inputs are float64
unit-scale ``(B, C, H, W)`` images; the guide is ``(B or 1, 1 or 3, H, W)``.
Differentiable in the image, the guide and a tensor ``eps``.
"""
import torch
import torch.nn.functional as F

from .borders import pad


def box_mean(x, r, border):
    """The mean of ``x`` (``(..., H, W)``) over ``(2r + 1)^2`` windows of ``x`` extended by
    ``border`` (``"constant"``: zeros)."""
    h, w = x.shape[-2:]
    xp = pad(x, r, r, r, r, border, 0.0)
    rows = sum(xp[..., u:u + h, :] for u in range(2 * r + 1))
    return sum(rows[..., v:v + w] for v in range(2 * r + 1)) / (2 * r + 1) ** 2


def subsample_indices(n, s, device=None):
    """The pixels an axis of ``n`` keeps when subsampled by ``s``: ``max(n // s, 1)`` of
    them, pixel i the one nearest ``(i + 0.5) * n / m - s / 2`` (ties up), where the
    bilinear upsample puts it back less the offset of every s-th pixel: ``s * i`` when s
    divides n (as ``kornia.filters.guided_blur``)."""
    m = max(n // s, 1)
    i = torch.arange(m, device=device)
    return ((2 * i + 1) * n + m * (1 - s)).div(2 * m, rounding_mode="floor").clamp(0, n - 1)


def subsampled_radius(r, s):
    """The window radius on the image subsampled by ``s``: ``r / s`` rounded half up, at
    least 1 (``r / s`` exactly when s divides r, the window kornia uses then)."""
    return max(1, (r + s // 2) // s)


def subsampled(x, s):
    """The pixels of ``x`` (..., H, W) that ``subsample_indices`` keeps: along an axis that
    s divides, every s-th from the first (a view: no copy, no launch); along another, a
    copy by ``index_select``."""
    for axis in (-2, -1):
        n = x.shape[axis]
        if n % s == 0:
            x = x[..., ::s, :] if axis == -2 else x[..., ::s]
        else:
            x = x.index_select(axis, subsample_indices(n, s, x.device))
    return x


def coefficients(p, guide, r, eps, border):
    """``(a, b)`` of the local linear models: ``a`` ``(B, G, C, H, W)`` (G the guide's
    channels: ``a[:, g, c]`` the weight of guide channel g for output channel c), ``b``
    ``(B, C, H, W)``."""
    B, C = p.shape[:2]
    G = guide.shape[1]
    guide = guide.expand(B, *guide.shape[1:])
    eps = torch.as_tensor(eps, dtype=p.dtype, device=p.device).reshape(-1, 1, 1, 1)
    mean_i = box_mean(guide, r, border)  # (B, G, H, W)
    mean_p = box_mean(p, r, border)  # (B, C, H, W)
    cov_ip = box_mean(guide[:, :, None] * p[:, None], r, border) - mean_i[:, :, None] * mean_p[:, None]  # (B,G,C,H,W)
    if G == 1:
        var_i = box_mean(guide * guide, r, border) - mean_i * mean_i  # (B, 1, H, W)
        a = cov_ip / (var_i + eps)[:, :, None]
    else:
        sigma = box_mean(guide[:, :, None] * guide[:, None], r, border) - mean_i[:, :, None] * mean_i[:, None]
        sigma = sigma + eps[..., None] * torch.eye(G, dtype=p.dtype, device=p.device)[None, :, :, None, None]
        # (B, H, W, G, G) @ (B, H, W, G, C)
        a = torch.linalg.solve(sigma.permute(0, 3, 4, 1, 2), cov_ip.permute(0, 3, 4, 1, 2)).permute(0, 3, 4, 1, 2)
    b = mean_p - (a * mean_i[:, :, None]).sum(1)
    return a, b


def guided_filter(x, guide, r, eps, subsample=1, border="reflect"):
    """The guided filter of ``x`` by ``guide`` (the module docstring's definition)."""
    B, C, H, W = x.shape
    guide = guide.expand(B, *guide.shape[1:])
    if subsample > 1:
        a, b = coefficients(subsampled(x, subsample), subsampled(guide, subsample), subsampled_radius(r, subsample),
                            eps, border)
        h, w = b.shape[-2:]
        mean_a = box_mean(a, subsampled_radius(r, subsample), border).reshape(B, -1, h, w)
        mean_b = box_mean(b, subsampled_radius(r, subsample), border)
        mean_a = F.interpolate(mean_a, size=(H, W), mode="bilinear", align_corners=False).reshape(B, -1, C, H, W)
        mean_b = F.interpolate(mean_b, size=(H, W), mode="bilinear", align_corners=False)
    else:
        a, b = coefficients(x, guide, r, eps, border)
        mean_a, mean_b = box_mean(a, r, border), box_mean(b, r, border)
    return (mean_a * guide[:, :, None]).sum(1) + mean_b
