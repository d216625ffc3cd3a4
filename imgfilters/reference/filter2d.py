"""Float64 definition of the general 2-D filter.

``filter2d(x, k, border)`` for ``x`` of shape ``(B, C, H, W)`` and kernels ``k`` of shape
``(kh, kw)`` (one for the batch) or ``(B, kh, kw)`` (image b filtered by ``k[b]``)::

    y[b, c, i, j] = sum_{u, v} k[b, u, v] * X[b, c, i + u - ry, j + v - rx]

with ``ry = kh // 2``, ``rx = kw // 2`` and ``X`` the image extended by the border
(``reference.borders``): a correlation, taps not flipped, as ``cv2.filter2D`` and
``torch.nn.functional.conv2d``. Inputs and outputs are float64 in unit scale;
differentiable in ``x`` and ``k``.
"""
import torch

from .borders import pad


def filter2d(x, k, border="reflect", border_value=0.0):
    k = torch.as_tensor(k, device=x.device).to(torch.float64)
    kh, kw = k.shape[-2:]
    ry, rx = kh // 2, kw // 2
    h, w = x.shape[-2:]
    xp = pad(x.to(torch.float64), ry, ry, rx, rx, border, border_value)
    taps = k if k.ndim == 2 else k[:, None, None, None]  # (B, 1, 1, 1) per tap: one value per image
    return sum(taps[..., u, v] * xp[..., u:u + h, v:v + w] for u in range(kh) for v in range(kw))
