"""Float64 definition of the separable-convolution family.

``separable_filter(x, tx, ty, border)``::

    y[..., i, j] = sum_{u, v} ty[u] * tx[v] * X[..., i + u - ry, j + v - rx]

with ``rx = len(tx) // 2``, ``ry = len(ty) // 2`` and ``X`` the image extended by the
border (``reference.borders``). A correlation with the centre tap at index ``len // 2``:
taps are not flipped, as in OpenCV ``sepFilter2D``, kornia ``filter2d_separable`` and
``torch.nn.functional.conv2d``. Inputs and outputs are float64 in unit scale.

``gaussian_taps`` is torchvision's ``_get_gaussian_kernel1d``: samples of
exp(-x^2 / (2 sigma^2)) at x = -k//2 .. k//2, normalised to sum 1. With border "reflect",
``gaussian_blur`` equals ``torchvision.transforms.v2.functional.gaussian_blur``
(torchvision pads with torch's "reflect", which is reflect-101).
"""
import math

import torch

from .borders import pad


def separable_filter(x, tx, ty, border="reflect", border_value=0.0):
    tx = torch.as_tensor(tx, dtype=torch.float64, device=x.device)
    ty = torch.as_tensor(ty, dtype=torch.float64, device=x.device)
    rx, ry = len(tx) // 2, len(ty) // 2
    h, w = x.shape[-2:]
    xp = pad(x.to(torch.float64), ry, ry, rx, rx, border, border_value)
    rows = sum(ty[u] * xp[..., u:u + h, :] for u in range(len(ty)))
    return sum(tx[v] * rows[..., v:v + w] for v in range(len(tx)))


def gaussian_taps(size: int, sigma) -> torch.Tensor:
    """torchvision's sampled, normalised gaussian of ``size`` taps; ``sigma`` a float, or a
    1-D tensor of sigmas giving a row of taps each (the same arithmetic row by row)."""
    half = (size - 1) * 0.5
    x = torch.linspace(-half, half, size, dtype=torch.float64)
    if isinstance(sigma, torch.Tensor):
        x = x / sigma.to("cpu", torch.float64)[:, None]
    else:
        x = x / sigma
    pdf = torch.exp(-0.5 * x ** 2)
    return pdf / pdf.sum(-1, keepdim=True)


def box_taps(size: int) -> torch.Tensor:
    return torch.full((size,), 1.0 / size, dtype=torch.float64)


def unsharp_radius(sigma: float) -> int:
    """Radius of the unsharp-mask blur: ceil(3 sigma), at least 1."""
    return max(1, math.ceil(3.0 * sigma))


def unsharp_mask(x, sigma, amount, threshold, border="reflect", border_value=0.0):
    """``x + amount * (x - blur)`` where ``|x - blur| >= threshold``, else ``x``; blur is a
    gaussian of ``sigma`` with radius ``unsharp_radius(sigma)``. Not clipped (integer
    outputs saturate when stored)."""
    taps = gaussian_taps(2 * unsharp_radius(sigma) + 1, sigma)
    detail = x - separable_filter(x, taps, taps, border, border_value)
    return torch.where(detail.abs() >= threshold, x + amount * detail, x)
