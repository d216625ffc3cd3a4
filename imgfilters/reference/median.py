"""Float64 definition of the median filter.

``median_blur(x, k, border)`` for ``x`` of shape ``(..., H, W)`` and an odd window side
``k``, ``r = k // 2``::

    y[..., i, j] = the ((k*k - 1) / 2)-th smallest of X[..., i + u - r, j + v - r], 0 <= u, v < k

with ``X`` the image extended by the border (``reference.borders``): the exact median of
the ``k*k`` window values (an odd count: one middle value, no averaging). Infinities are
ordered values (``-inf`` below everything, ``+inf`` above). NaN: an output whose window
holds a NaN is NaN (as ``torch.median``); the others never see it.

Gradient: each output routes its gradient to one window position, the median's. Among
equal values the one chosen is the one at the middle rank of the window sorted stably,
positions in row-major order (row ``u`` first, then column ``v``); through the border its
pixel receives it (a constant border's positions read no pixel: dropped).
``median_index`` gives that position, which the kernels' backward uses too.

Peers: ``cv2.medianBlur`` (uint8 any odd size, float32 sizes 3 and 5; it replicates the
edge pixel: border ``"replicate"``), ``scipy.ndimage.median_filter(size=k)`` (modes
``"mirror"`` = reflect, ``"reflect"`` = symmetric, ``"nearest"`` = replicate,
``"constant"``), ``kornia.filters.median_blur`` (its ``"reflect"``, ``"replicate"`` and
zero ``"constant"`` padding; finite images: it gives NaN for a window holding an inf).
"""
import torch

from .borders import pad


def windows(x, k, border="reflect", border_value=0.0):
    """The ``k*k`` window values of every pixel, ``(..., H, W, k*k)`` float64, row-major."""
    r = k // 2
    h, w = x.shape[-2:]
    xp = pad(x.to(torch.float64), r, r, r, r, border, border_value)
    return xp.unfold(-2, k, 1).unfold(-2, k, 1).reshape(*x.shape[:-2], h, w, k * k)


def median_index(x, k, border="reflect", border_value=0.0):
    """The window position (``u * k + v``) of each output's median, ties broken by a stable
    sort of the window (NaN windows: some position; their output is NaN anyway)."""
    order = windows(x, k, border, border_value).argsort(dim=-1, stable=True)
    return order[..., (k * k - 1) // 2]


def median_blur(x, k, border="reflect", border_value=0.0):
    win = windows(x, k, border, border_value)
    i = win.argsort(dim=-1, stable=True)[..., (k * k - 1) // 2 : (k * k + 1) // 2]
    y = win.gather(-1, i)[..., 0]  # differentiable: the gradient goes to the chosen position
    return torch.where(win.isnan().any(-1), torch.full_like(y, float("nan")), y)
