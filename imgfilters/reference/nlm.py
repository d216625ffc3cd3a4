"""Float64 definition of non-local means (pixelwise, uniform patch weights).

``nl_means(x, h, sigma, patch_size, search_radius, border)``::

    out[b, :, p] = sum_q w(p, q) X~[b, :, q] / sum_q w(p, q)
    w(p, q)      = exp(-max(d2(p, q) - 2 sigma^2, 0) / h^2)
    d2(p, q)     = mean over the P x P patch offsets o and the C channels of
                   (X~[b, c, p + o] - X~[b, c, q + o])^2

with q over the (2R+1)^2 search window around p, and X~ the image extended by the border
(``reference.borders``), so patches and windows near the edges read the extension. This
is the algorithm of scikit-image's ``denoise_nl_means(fast_mode=True)`` (Darbon et al.
2008; Froment, IPOL 2014) without its approximations: scikit-image sums a (P-1) x (P-1)
window while dividing by P^2, and drops weights below exp(-5).

``h`` and ``sigma`` are floats or 1-D tensors with one value per image. Inputs are float64
(B, C, H, W) in unit scale.
"""
import torch
import torch.nn.functional as F

from .borders import pad


def nl_means(x, h, sigma, patch_size, search_radius, border="reflect", border_value=0.0):
    B, C, H, W = x.shape
    f, R = patch_size // 2, search_radius
    per_image = lambda v: torch.as_tensor(v, dtype=torch.float64, device=x.device).reshape(-1, 1, 1, 1)
    # h^2 of a tiny h would underflow to 0 (0/0 at the centre tap); the smallest normal stands in
    h2, floor = (per_image(h) ** 2).clamp(min=torch.finfo(torch.float64).tiny), 2 * per_image(sigma) ** 2
    ext = pad(x, R + f, R + f, R + f, R + f, border, border_value)
    centre = ext[..., R:R + H + 2 * f, R:R + W + 2 * f]
    num = torch.zeros_like(x)
    den = torch.zeros(B, 1, H, W, dtype=x.dtype, device=x.device)
    for dy in range(-R, R + 1):
        for dx in range(-R, R + 1):
            shifted = ext[..., R + dy:R + dy + H + 2 * f, R + dx:R + dx + W + 2 * f]
            diff2 = ((centre - shifted) ** 2).mean(-3, keepdim=True)
            d2 = F.avg_pool2d(diff2, patch_size, stride=1)
            w = torch.exp(-(d2 - floor).clamp(min=0) / h2)
            num += w * shifted[..., f:f + H, f:f + W]
            den += w
    return num / den
