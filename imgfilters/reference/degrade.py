"""Float64 definitions of Real-ESRGAN's blur kernels, one kernel at a time, and of their
random parameters.

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

Random parameters (``kernel_params``, ``sinc_params``): Real-ESRGAN's dataset draws each
with Python's ``random``; here each is a function of the image's uniforms in [0, 1), so
that the kernels (``kernels/degrade.py``) and these definitions can be fed the same numbers.
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
    """``kernel`` centred in a size x size kernel of zeros (cropped to it when larger)."""
    p = (size - kernel.shape[-1]) // 2
    return torch.nn.functional.pad(kernel, (p, p, p, p))


SINC, PULSE = len(KINDS), len(KINDS) + 1  # the kind codes after KINDS': circular low-pass, identity
PARAMS = ("kind", "size", "sigma_x", "sigma_y", "theta", "beta", "cutoff")  # a parameter set, in this order


def _choice(u, values):
    """``values[floor(u * n)]`` for each uniform: each of the n values with probability 1/n."""
    n = len(values)
    return torch.tensor(values)[(u * n).long().clamp(max=n - 1)]


def uniform(u, bounds):
    """Uniform in [low, high) from uniforms in [0, 1): ``bounds = (low, high)``."""
    return bounds[0] + u * (bounds[1] - bounds[0])


def kernel_params(u, kernel_sizes, kernel_prob, sinc_prob, sigma, rotation, betag, betap):
    """Real-ESRGAN's ``random_mixed_kernels`` or, with probability ``sinc_prob``, its
    ``circular_lowpass_kernel``, from the uniforms ``u`` (9, B) float64: a dict of (B,)
    tensors named ``PARAMS`` (kind and size int64, the others float64; those a kind does
    not use hold placeholders).

    Row 0: the size, from ``kernel_sizes``; row 1: the kind, by the probabilities
    ``kernel_prob`` over ``KINDS`` (summing to 1); row 2: ``SINC`` instead when below
    ``sinc_prob``; rows 3, 4: sigma_x, sigma_y in ``sigma`` (isotropic kinds: sigma_y =
    sigma_x, theta = 0); row 5: theta in ``rotation``; row 6: beta below 1 or above, even
    odds; row 7: beta in ``(betag[0], 1)`` or ``(1, betag[1])`` (``betap`` for plateaus, 1
    for Gaussians); row 8: the cutoff in ``(pi/3, pi)`` for sizes below 13, else ``(pi/5, pi)``.
    """
    size = _choice(u[0], kernel_sizes)
    cumulative = torch.tensor(kernel_prob, dtype=torch.float64).cumsum(0)[:-1]
    kind = (u[1][:, None] >= cumulative).sum(1)
    kind = torch.where(u[2] < sinc_prob, SINC, kind)
    iso = (kind == 0) | (kind == 2) | (kind == 4)
    sigma_x = uniform(u[3], sigma)
    sigma_y = torch.where(iso, sigma_x, uniform(u[4], sigma))
    theta = torch.where(iso, 0.0, uniform(u[5], rotation))
    below = u[6] < 0.5
    beta_g = torch.where(below, uniform(u[7], (betag[0], 1.0)), uniform(u[7], (1.0, betag[1])))
    beta_p = torch.where(below, uniform(u[7], (betap[0], 1.0)), uniform(u[7], (1.0, betap[1])))
    beta = torch.where((kind == 2) | (kind == 3), beta_g, torch.where((kind == 4) | (kind == 5), beta_p, 1.0))
    low_cut = torch.where(size < 13, math.pi / 3, math.pi / 5)
    cutoff = low_cut + u[8] * (math.pi - low_cut)
    return dict(kind=kind, size=size, sigma_x=sigma_x, sigma_y=sigma_y, theta=theta, beta=beta, cutoff=cutoff)


def sinc_params(u, prob, cutoff, kernel_sizes):
    """Real-ESRGAN's final sinc filter from the uniforms ``u`` (3, B) float64, as
    ``kernel_params``' dict: row 0 the size, from ``kernel_sizes``; row 1 ``SINC`` when
    below ``prob``, else ``PULSE`` (the identity); row 2 the cutoff in ``cutoff``."""
    ones = torch.ones_like(u[0])
    return dict(kind=torch.where(u[1] < prob, SINC, PULSE), size=_choice(u[0], kernel_sizes), sigma_x=ones,
                sigma_y=ones, theta=0 * ones, beta=ones, cutoff=uniform(u[2], cutoff))


def kernels(params, size=21):
    """The (B, n, n) float64 kernels of a parameter dict (``kernel_params``'), n = 2 * (size
    // 2) + 1: each image's kernel of its own size, centred with zeros around it (or cropped
    to n), normalised to sum 1."""
    n = 2 * (size // 2) + 1
    values = {name: params[name].tolist() for name in PARAMS}
    out = []
    for kind, k, sx, sy, theta, beta, cutoff in zip(*(values[name] for name in PARAMS)):
        kind, k = int(kind), int(k)
        if kind == SINC:
            w = circular_lowpass_kernel(cutoff, k)
        elif kind == PULSE:
            w = pad_to(torch.ones(1, 1, dtype=torch.float64), k)
        else:
            w = mixed_kernel(KINDS[kind], k, sx, sy, theta, beta)
        w = pad_to(w, n)
        out.append(w / w.sum())
    return torch.stack(out) if out else torch.zeros(0, n, n, dtype=torch.float64)
