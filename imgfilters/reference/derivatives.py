"""Float64 definition of the derivative filters: Sobel, Scharr and the Laplacian.

The taps are OpenCV's (``cv2.getDerivKernels``, ``cv2.Laplacian``): a derivative of
order ``d`` with aperture ``k`` is the binomial smoothing ``[1, 1]`` convolved ``k - 1 - d``
times, then the difference ``[-1, 1]`` ``d`` times (``k = 3``, ``d = 1``: ``[-1, 0, 1]``
along the derivative and ``[1, 2, 1]`` across it). Aperture 1 means no smoothing: the
3-tap difference along the derivative (``[-1, 0, 1]`` or ``[1, -2, 1]``) and a single
tap across it. Scharr's 3x3 is ``[-1, 0, 1]`` along and ``[3, 10, 3]`` across. The
Laplacian of aperture 1 is ``[[0, 1, 0], [1, -4, 1], [0, 1, 0]]``; larger apertures sum
the second Sobel derivatives along x and along y.

Filters are correlations over the image extended by the border, as
``reference.separable.separable_filter`` and ``reference.filter2d.filter2d`` (which these
call): ``sobel(x, 1, 0)`` equals ``cv2.Sobel(x, cv2.CV_64F, 1, 0)`` on float images,
``kornia.filters.spatial_gradient`` up to its normalisation. Inputs and outputs are
float64 in unit scale.
"""
import torch

from .filter2d import filter2d
from .separable import separable_filter

MAX_APERTURE = 31  # OpenCV's bound for Sobel and Laplacian apertures
SCHARR = -1  # the aperture that selects Scharr's taps (``cv2.FILTER_SCHARR``)


def derivative_taps(order: int, aperture: int) -> torch.Tensor:
    """1-D taps of the derivative of ``order`` (0: smoothing) with an odd ``aperture``, or
    Scharr's (``aperture=SCHARR``, order 0 or 1)."""
    if aperture == SCHARR:
        taps = [3.0, 10.0, 3.0] if order == 0 else [-1.0, 0.0, 1.0]
        return torch.tensor(taps, dtype=torch.float64)
    if aperture == 1:
        aperture = 1 if order == 0 else 3
    taps = [1.0]
    for step in [1.0] * (aperture - 1 - order) + [-1.0] * order:  # times (1 + z) or (z - 1)
        taps = [(taps[i] if i < len(taps) else 0.0) * step + (taps[i - 1] if i > 0 else 0.0)
                for i in range(len(taps) + 1)]
    return torch.tensor(taps, dtype=torch.float64)


def sobel_taps(dx: int, dy: int, aperture: int, scale: float = 1.0):
    """(taps along x, taps along y) of the derivative ``d^(dx+dy) / dx^dx dy^dy``, the
    ``scale`` folded into the x taps."""
    return derivative_taps(dx, aperture) * scale, derivative_taps(dy, aperture)


def laplacian_kernel(aperture: int, scale: float = 1.0) -> torch.Tensor:
    """The 2-D kernel of ``cv2.Laplacian`` for an odd ``aperture`` (1: the 5-point
    stencil), times ``scale``."""
    if aperture == 1:
        k = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    else:
        smooth, second = derivative_taps(0, aperture), derivative_taps(2, aperture)
        k = torch.outer(smooth, second) + torch.outer(second, smooth)
    return k * scale


def sobel(x, dx, dy, aperture=3, scale=1.0, border="reflect", border_value=0.0):
    """Sobel (or Scharr, ``aperture=SCHARR``) derivative of ``x`` (``(..., H, W)``)."""
    tx, ty = sobel_taps(dx, dy, aperture, scale)
    return separable_filter(x, tx, ty, border, border_value)


def laplacian(x, aperture=1, scale=1.0, border="reflect", border_value=0.0):
    """Laplacian of ``x`` (``(B, C, H, W)``)."""
    return filter2d(x, laplacian_kernel(aperture, scale), border, border_value)


def gradient_taps(aperture: int, scale: float = 1.0):
    """(smoothing taps, derivative taps) of one length for ``gradient_magnitude``: Sobel's
    of an odd ``aperture`` (1: the 3-tap difference, the smoothing padded to
    ``[0, 1, 0]``) or Scharr's (``aperture=SCHARR``), the ``scale`` folded into the
    derivative."""
    smooth, derivative = derivative_taps(0, aperture), derivative_taps(1, aperture) * scale
    if smooth.numel() < derivative.numel():
        smooth = torch.nn.functional.pad(smooth, (1, 1))
    return smooth, derivative


def gradient_magnitude(x, aperture=3, scale=1.0, border="reflect", border_value=0.0, direction=False):
    """``sqrt(gx^2 + gy^2)`` of ``x`` (``(..., H, W)``), gx and gy its first Sobel (or
    Scharr) derivatives along x and y, as ``cv2.magnitude`` of two ``cv2.Sobel`` results;
    with ``direction``, ``torch.stack`` of it and ``atan2(gy, gx)`` (radians in
    [-pi, pi], ``cv2.phase`` up to its range [0, 2 pi)). The magnitude's gradient is 0
    where the magnitude is (its subgradient, as ``torch.linalg.vector_norm``'s); the
    direction carries none."""
    smooth, derivative = gradient_taps(aperture, scale)
    gx = separable_filter(x, derivative, smooth, border, border_value)
    gy = separable_filter(x, smooth, derivative, border, border_value)
    magnitude = torch.linalg.vector_norm(torch.stack([gx, gy]), dim=0)
    return torch.stack([magnitude, torch.atan2(gy.detach(), gx.detach())]) if direction else magnitude
