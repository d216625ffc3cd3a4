"""Float64 definitions of Real-ESRGAN's blur kernels, one kernel at a time.

The formulas of BasicSR's ``basicsr/data/degradations.py`` (Wang et al., Real-ESRGAN,
2021), written for one kernel of odd size ``k`` on the grid ``x, y = -k//2 .. k//2``
(``x`` along columns, ``y`` along rows):

- covariance ``Sigma = R diag(sx^2, sy^2) R^T`` with ``R`` the rotation by ``theta``
  (isotropic: ``sy = sx``, ``theta = 0``), and ``Q(x, y) = [x y] Sigma^-1 [x y]^T``;
- Gaussian ``exp(-Q / 2)``; generalized Gaussian ``exp(-Q^beta / 2)``; plateau
  ``1 / (Q^beta + 1)``; each normalised to sum 1;
- circular low-pass (``circular_lowpass_kernel``): ``cutoff J1(cutoff r) / (2 pi r)`` at
  radius ``r > 0``, ``cutoff^2 / (4 pi)`` at the centre, normalised to sum 1.

``pad_to(kernel, size)`` centres a kernel in a ``size x size`` one with zeros (BasicSR
pads every blur kernel to 21 x 21).
"""
import math

import torch

KINDS = ("iso", "aniso", "generalized_iso", "generalized_aniso", "plateau_iso", "plateau_aniso")


def grid(k):
    """(x, y) coordinates of a k x k kernel, float64, x along columns."""
    ax = torch.arange(-(k // 2), k // 2 + 1, dtype=torch.float64)
    y, x = torch.meshgrid(ax, ax, indexing="ij")
    return x, y


def quadratic_form(k, sx, sy, theta):
    """Q(x, y) = [x y] Sigma^-1 [x y]^T on the k x k grid."""
    x, y = grid(k)
    c, s = math.cos(theta), math.sin(theta)
    u = c * x + s * y  # coordinates along the rotated axes: R^T [x y]
    v = -s * x + c * y
    return u * u / sx ** 2 + v * v / sy ** 2


def mixed_kernel(kind, k, sx, sy=None, theta=0.0, beta=1.0):
    """One kernel of ``kind`` (one of ``KINDS``): size k, sigmas, rotation, shape beta."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind.endswith("iso") and not kind.endswith("aniso"):
        sy, theta = sx, 0.0
    q = quadratic_form(k, sx, sy, theta)
    if kind.startswith("generalized"):
        w = torch.exp(-0.5 * q ** beta)
    elif kind.startswith("plateau"):
        w = 1.0 / (q ** beta + 1.0)
    else:
        w = torch.exp(-0.5 * q)
    return w / w.sum()


def bessel_j1(x, n=256):
    """J1(x) in float64 to rounding error for |x| < 100, by Bessel's integral
    J1(x) = 1/(2 pi) int_0^{2 pi} cos(t - x sin t) dt with the trapezoid rule, exact to
    rounding for an analytic periodic integrand with n well above |x| (torch's
    ``special.bessel_j1`` is off by up to 3e-7)."""
    t = torch.arange(n, dtype=torch.float64) * (2 * math.pi / n)
    return torch.cos(t - x[..., None] * torch.sin(t)).mean(-1)


def circular_lowpass_kernel(cutoff, k):
    """The sinc (circular low-pass) kernel of cutoff frequency ``cutoff`` (radians)."""
    x, y = grid(k)
    r = torch.sqrt(x * x + y * y)
    safe = torch.where(r > 0, r, torch.ones_like(r))
    w = cutoff * bessel_j1(cutoff * safe) / (2 * math.pi * safe)
    w = torch.where(r > 0, w, torch.full_like(w, cutoff ** 2 / (4 * math.pi)))
    return w / w.sum()


def pad_to(kernel, size):
    """``kernel`` centred in a size x size kernel of zeros."""
    p = (size - kernel.shape[-1]) // 2
    return torch.nn.functional.pad(kernel, (p, p, p, p))
