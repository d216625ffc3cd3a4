"""Real-ESRGAN's degradations on the images' device: random blur kernels per image, random
resize, noise, JPEG, the final sinc filter, and the whole second-order pipeline.

Blind super-resolution training (Real-ESRGAN, Wang et al. 2021) makes each low-resolution
input from its ground truth on the fly: blur with a random kernel, resize by a random
scale, add Gaussian or Poisson noise, JPEG-compress, twice over, then a final sinc filter.
BasicSR does this with kernels made per image on the CPU (numpy) and a grouped
``F.conv2d`` per batch. Here the kernels are made for the whole batch at once on the
device from a ``torch.Generator`` (same formulas: ``imgfilters.reference.degrade``), the
blurs are one ``imgfilters.filter2d`` launch with per-image kernels, and everything
stays on the images' device except the JPEG bytes (``torchvision.io``: nvjpeg on CUDA).

Images are ``(B, C, H, W)`` (or ``(C, H, W)``) tensors in unit scale: float32, float16,
bfloat16, or uint8/uint16 (the steps run in float32; the result comes back in the input's
dtype). Every transform is a ``torchvision.transforms.v2``
transform; with ``seed=`` its draws are reproducible (its own generators), else it uses
torch's global generators. Defaults are Real-ESRGAN's published training options
(``options/train_realesrgan_x4plus.yml``).
"""
import math
import warnings

import torch
from torchvision.transforms import v2

from imgfilters import _image
from imgfilters.ops.filter2d import filter2d
from imgfilters.ops.resample import upsample
from imgfilters.reference import degrade as reference

__all__ = ["KERNEL_KINDS", "sample_kernel_params", "sample_sinc_params", "make_kernels", "random_kernels",
           "add_gaussian_noise", "add_poisson_noise", "jpeg", "RandomKernelBlur", "RandomResize", "RandomNoise",
           "RandomJPEG", "SincFilter", "RealESRGANDegradation"]

KERNEL_KINDS = reference.KINDS + ("sinc", "pulse")  # codes 0..7 of a parameter set's "kind"
SINC, PULSE = 6, 7
KERNEL_SIZES = tuple(range(7, 22, 2))  # Real-ESRGAN: odd sizes 7 .. 21, padded to 21
KERNEL_PROB = (0.45, 0.25, 0.12, 0.03, 0.12, 0.03)  # over reference.KINDS
PAD_TO = 21


# ---- random kernels ------------------------------------------------------------------------

def _range(value, name, low=None, high=None):
    """A validated (low, high) pair of floats."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a (low, high) pair of numbers, got {value!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"{name} must be a finite (low, high) range with low <= high, got {value!r}")
    if (low is not None and lo < low) or (high is not None and hi > high):
        raise ValueError(f"{name} must lie in [{low}, {high}], got {value!r}")
    return lo, hi


def _probabilities(value, n, name):
    p = torch.as_tensor(value, dtype=torch.float64)
    if p.shape != (n,) or not torch.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"{name} must be {n} non-negative numbers with a positive sum, got {value!r}")
    return p / p.sum()


def _sizes(value):
    sizes = tuple(int(k) for k in value)
    if not sizes or any(k < 1 or k % 2 == 0 or k > PAD_TO for k in sizes):
        raise ValueError(f"kernel_sizes must be odd sizes from 1 to {PAD_TO}, got {value!r}")
    return sizes


def _uniform(u, bounds):
    return bounds[0] + u * (bounds[1] - bounds[0])


def sample_kernel_params(batch, *, generator=None, device=None, kernel_sizes=KERNEL_SIZES, kernel_prob=KERNEL_PROB,
                         sinc_prob=0.1, sigma=(0.2, 3.0), rotation=(-math.pi, math.pi), betag=(0.5, 4.0),
                         betap=(1.0, 2.0)):
    """Draw one blur kernel's parameters per image, as Real-ESRGAN's dataset does
    (``random_mixed_kernels`` or, with probability ``sinc_prob``, ``circular_lowpass_kernel``).

    Returns a dict of ``(batch,)`` tensors on ``device`` (the generator's by default):
    ``kind`` (int64 code into ``KERNEL_KINDS``), ``size`` (int64), ``sigma_x``,
    ``sigma_y``, ``theta``, ``beta``, ``cutoff`` (float32; the ones a kind does not use
    hold placeholders). Sizes are drawn uniformly from ``kernel_sizes``; the kind from
    ``kernel_prob`` (over ``reference.KINDS``); sigmas from ``sigma`` (isotropic kinds:
    sigma_y = sigma_x, theta = 0), theta from ``rotation``; beta uniform in
    ``(betag[0], 1)`` or ``(1, betag[1])`` with equal odds (``betap`` for plateaus); the
    sinc cutoff uniform in ``(pi/3, pi)`` for sizes below 13, else ``(pi/5, pi)``.
    """
    sizes, prob = _sizes(kernel_sizes), _probabilities(kernel_prob, len(reference.KINDS), "kernel_prob")
    sinc_prob = _image.check_number(sinc_prob, "sinc_prob", low=0.0, high=1.0)
    sigma = _range(sigma, "sigma", low=1e-6)
    rotation, betag, betap = _range(rotation, "rotation"), _range(betag, "betag", low=1e-6), _range(betap, "betap",
                                                                                                  low=1e-6)
    device = torch.device(device) if device is not None else (generator.device if generator is not None
                                                              else torch.device("cpu"))
    u = torch.rand(9, batch, generator=generator, device=device)
    size_table = torch.tensor(sizes, device=device)
    size = size_table[(u[0] * len(sizes)).long().clamp(max=len(sizes) - 1)]
    cum = prob.cumsum(0)[:-1].to(device, torch.float32)
    kind = (u[1][:, None] >= cum[None, :]).sum(1)
    kind = torch.where(u[2] < sinc_prob, torch.full_like(kind, SINC), kind)
    iso = (kind == 0) | (kind == 2) | (kind == 4)
    sx = _uniform(u[3], sigma)
    sy = torch.where(iso, sx, _uniform(u[4], sigma))
    theta = torch.where(iso, torch.zeros_like(sx), _uniform(u[5], rotation))
    low_half = u[6] < 0.5
    beta_g = torch.where(low_half, _uniform(u[7], (betag[0], 1.0)), _uniform(u[7], (1.0, betag[1])))
    beta_p = torch.where(low_half, _uniform(u[7], (betap[0], 1.0)), _uniform(u[7], (1.0, betap[1])))
    beta = torch.where((kind == 2) | (kind == 3), beta_g, torch.where((kind == 4) | (kind == 5), beta_p,
                                                                      torch.ones_like(sx)))
    low_cut = torch.where(size < 13, math.pi / 3, math.pi / 5)
    cutoff = low_cut + u[8] * (math.pi - low_cut)
    return dict(kind=kind, size=size, sigma_x=sx, sigma_y=sy, theta=theta, beta=beta, cutoff=cutoff)


def sample_sinc_params(batch, *, generator=None, device=None, prob=0.8, cutoff=(math.pi / 3, math.pi),
                       kernel_sizes=KERNEL_SIZES):
    """Real-ESRGAN's final sinc filter per image: with probability ``prob`` a circular
    low-pass kernel (cutoff uniform in ``cutoff``, size from ``kernel_sizes``), else the
    identity (``pulse``). Same dict as ``sample_kernel_params``."""
    sizes = _sizes(kernel_sizes)
    prob = _image.check_number(prob, "prob", low=0.0, high=1.0)
    cutoff = _range(cutoff, "cutoff", low=1e-6)
    device = torch.device(device) if device is not None else (generator.device if generator is not None
                                                              else torch.device("cpu"))
    u = torch.rand(3, batch, generator=generator, device=device)
    size = torch.tensor(sizes, device=device)[(u[0] * len(sizes)).long().clamp(max=len(sizes) - 1)]
    kind = torch.where(u[1] < prob, SINC, PULSE)
    ones = torch.ones_like(u[0])
    return dict(kind=kind, size=size, sigma_x=ones, sigma_y=ones, theta=0 * ones, beta=ones,
                cutoff=_uniform(u[2], cutoff))


def make_kernels(params, size=PAD_TO):
    """The ``(batch, size, size)`` float32 kernels of a parameter dict, on its device, in a
    handful of batched torch operations: every kind evaluated on the size x size grid,
    the image's kind selected, cells beyond its own kernel size zeroed (BasicSR's
    padding to 21), normalised to sum 1."""
    kind, k = params["kind"], params["size"]
    dev = kind.device
    ax = torch.arange(-(size // 2), size // 2 + 1, device=dev, dtype=torch.float32)
    y, x = ax[:, None], ax[None, :]
    col = lambda t: t.to(torch.float32)[:, None, None]
    c, s = torch.cos(col(params["theta"])), torch.sin(col(params["theta"]))
    u, v = c * x + s * y, -s * x + c * y
    q = u * u / col(params["sigma_x"]) ** 2 + v * v / col(params["sigma_y"]) ** 2
    qb = q ** col(params["beta"])
    kk = kind[:, None, None]
    w = torch.where((kk == 4) | (kk == 5), 1.0 / (qb + 1.0), torch.exp(-0.5 * qb))  # beta = 1 for Gaussians
    r = torch.sqrt(x * x + y * y).expand(1, size, size)
    cut = col(params["cutoff"])
    safe = torch.where(r > 0, r, torch.ones_like(r))
    sinc = torch.where(r > 0, cut * torch.special.bessel_j1(cut * safe) / (2 * math.pi * safe),
                       cut * cut / (4 * math.pi))
    w = torch.where(kk == SINC, sinc, w)
    w = torch.where(kk == PULSE, (r == 0).to(torch.float32), w)
    half = col(k // 2)
    w = w * ((x.abs() <= half) & (y.abs() <= half))
    return w / w.sum((1, 2), keepdim=True)


def random_kernels(batch, *, generator=None, device=None, size=PAD_TO, **options):
    """``make_kernels(sample_kernel_params(batch, ...), size)``: one Real-ESRGAN blur
    kernel per image, ``(batch, size, size)`` float32 on the generator's device."""
    return make_kernels(sample_kernel_params(batch, generator=generator, device=device, **options), size)


# ---- noise and JPEG ------------------------------------------------------------------------

def _gray(x):
    """ITU-R 601 luma of RGB (B, 3, H, W) as (B, 1, H, W); other channel counts: the mean."""
    if x.shape[1] == 3:
        return 0.299 * x[:, :1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:]
    return x.mean(1, keepdim=True)


def add_gaussian_noise(x, sigma, gray, *, generator=None, clip=True):
    """BasicSR's ``generate_gaussian_noise_pt``: ``x + n`` with ``n ~ N(0, (sigma/255)^2)``
    per pixel, ``sigma`` per image (0..255 units); where ``gray`` (per image) is true, the
    same noise for every channel (BasicSR draws one grey field for the whole batch; here
    each image has its own). ``x`` is a float (B, C, H, W) batch; clipped to [0, 1]."""
    b, c, h, w = x.shape
    s = (sigma.to(x.dtype) / 255.0).view(b, 1, 1, 1)
    noise = torch.randn(b, c + 1, h, w, generator=generator, device=x.device, dtype=x.dtype)
    noise = torch.where(gray.view(b, 1, 1, 1), noise[:, :1], noise[:, 1:]) * s
    out = x + noise
    return out.clamp(0, 1) if clip else out


def _levels(x):
    """BasicSR's Poisson 'vals' per image: 2 ** ceil(log2(distinct values of x rounded to
    8 bits)), counted with a histogram on the device (BasicSR's torch.unique per image
    synchronises with the host once per image)."""
    b = x.shape[0]
    q = (x * 255.0).round().clamp(0, 255).reshape(b, -1).long()
    ones = torch.ones((), device=x.device, dtype=torch.int32).expand(q.shape)
    hist = torch.zeros(b, 256, device=x.device, dtype=torch.int32).scatter_add_(1, q, ones)
    n = (hist > 0).sum(1).clamp(min=1).to(torch.float32)
    return torch.exp2(torch.ceil(torch.log2(n))).view(b, 1, 1, 1)


def add_poisson_noise(x, scale, gray, *, generator=None, clip=True):
    """BasicSR's ``generate_poisson_noise_pt``: the image rounded to 8 bits, ``vals`` its
    distinct levels rounded up to a power of two, noise ``poisson(x * vals) / vals - x``
    times ``scale`` (per image); where ``gray`` (per image) is true, the noise of the luma
    for every channel."""
    b = x.shape[0]
    xr = (x * 255.0).round().clamp(0, 255) / 255.0
    vals = _levels(xr)
    noise = torch.poisson(xr * vals, generator=generator) / vals - xr
    g = (_gray(x) * 255.0).round().clamp(0, 255) / 255.0
    gvals = _levels(g)
    gnoise = torch.poisson(g * gvals, generator=generator) / gvals - g
    noise = torch.where(gray.view(b, 1, 1, 1), gnoise, noise) * scale.to(x.dtype).view(b, 1, 1, 1)
    out = x + noise
    return out.clamp(0, 1) if clip else out


def jpeg(x, quality):
    """JPEG-compress and decode each image of a float (B, C, H, W) batch in [0, 1] (C = 1 or
    3) at its integer ``quality`` (per image, 1..100), through ``torchvision.io`` (nvjpeg
    for CUDA tensors, libjpeg on the CPU): one encode call per distinct quality, one
    decode call. Returns float32 in [0, 1] on ``x``'s device."""
    from torchvision.io import decode_jpeg, encode_jpeg
    b = x.shape[0]
    u8 = (x.clamp(0, 1) * 255.0).round().to(torch.uint8)
    q = [int(v) for v in quality.tolist()]  # one small transfer: the encoder takes a Python int
    encoded = [None] * b
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchvision >= 0.29 deprecates its codecs for TorchCodec
        for level in sorted(set(q)):
            idx = [i for i in range(b) if q[i] == level]
            for i, e in zip(idx, _on_gpu_or_cpu(encode_jpeg, [u8[i] for i in idx], quality=level)):
                encoded[i] = e.cpu()
        if x.is_cuda:
            decoded = _on_gpu_or_cpu(lambda data, device: decode_jpeg(data, device=device), encoded, device=x.device)
        else:
            decoded = decode_jpeg(encoded)
    return torch.stack([d.to(x.device) for d in decoded]).to(torch.float32) / 255.0


def _on_gpu_or_cpu(codec, images, **kwargs):
    """``codec(images, **kwargs)``; where torchvision was built without nvjpeg (a
    RuntimeError), the same on the CPU."""
    try:
        return codec(images, **kwargs)
    except RuntimeError:
        if "device" in kwargs:
            kwargs["device"] = "cpu"
        return codec([i.cpu() for i in images], **kwargs)


# ---- transforms ----------------------------------------------------------------------------

class _Degradation(v2.Transform):
    """Shared: reproducible draws (``seed``), the batch as float (B, C, H, W)."""

    def __init__(self, seed=None):
        super().__init__()
        self.seed = seed
        self._generators = {}

    def generator(self, device):
        """This transform's generator on ``device`` (None: torch's global one)."""
        if self.seed is None:
            return None
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device not in self._generators:
            self._generators[device] = torch.Generator(device).manual_seed(self.seed)
        return self._generators[device]

    def _choice(self, n, weights=None):
        """A batch-level choice among n (host-side, from the CPU generator)."""
        w = torch.ones(n, dtype=torch.float64) if weights is None else torch.as_tensor(weights, dtype=torch.float64)
        return int(torch.multinomial(w, 1, generator=self.generator("cpu")).item())

    def _uniform(self, bounds):
        return _uniform(torch.rand((), generator=self.generator("cpu"), dtype=torch.float64).item(), bounds)

    def transform(self, inpt, params):
        if not isinstance(inpt, torch.Tensor) or _not_image(inpt):
            return inpt
        _image.check_image(inpt)
        if inpt.ndim not in (3, 4):
            raise ValueError(f"degradations take (B, C, H, W) or (C, H, W) images, got {tuple(inpt.shape)}")
        x = inpt.as_subclass(torch.Tensor)
        batch = x if x.ndim == 4 else x[None]
        if batch.dtype != torch.float32:  # the pipeline runs in float32 (torch.poisson, the codecs)
            batch = _image.to_unit(batch, torch.float32, copy=False)
        out = self.degrade(batch)
        out = out if x.ndim == 4 else out[0]
        if not inpt.is_floating_point():
            out = _image.from_unit(out, inpt.dtype)
        return _image.wrap(inpt, out.to(inpt.dtype))


def _not_image(t):
    from imgfilters.transforms import not_an_image
    return not_an_image(t)


class RandomKernelBlur(_Degradation):
    """Blur each image with its own random kernel (``sample_kernel_params``'s options and
    defaults: Real-ESRGAN's first blur; its second uses ``sigma=(0.2, 1.5)``), one
    ``filter2d`` launch for the batch, reflect border (BasicSR's ``filter2D``)."""

    def __init__(self, *, kernel_sizes=KERNEL_SIZES, kernel_prob=KERNEL_PROB, sinc_prob=0.1, sigma=(0.2, 3.0),
                 rotation=(-math.pi, math.pi), betag=(0.5, 4.0), betap=(1.0, 2.0), seed=None):
        super().__init__(seed)
        self.options = dict(kernel_sizes=kernel_sizes, kernel_prob=kernel_prob, sinc_prob=sinc_prob, sigma=sigma,
                            rotation=rotation, betag=betag, betap=betap)
        sample_kernel_params(1, **self.options)  # validates now, not at the first call

    def degrade(self, x):
        k = random_kernels(x.shape[0], generator=self.generator(x.device), device=x.device, **self.options)
        return filter2d(x, k)


class SincFilter(_Degradation):
    """Real-ESRGAN's final sinc filter: per image, with probability ``prob``, a circular
    low-pass kernel, else the image unchanged; one ``filter2d`` launch for the batch."""

    def __init__(self, prob=0.8, cutoff=(math.pi / 3, math.pi), *, kernel_sizes=KERNEL_SIZES, seed=None):
        super().__init__(seed)
        self.options = dict(prob=prob, cutoff=cutoff, kernel_sizes=kernel_sizes)
        sample_sinc_params(1, **self.options)

    def degrade(self, x):
        params = sample_sinc_params(x.shape[0], generator=self.generator(x.device), device=x.device, **self.options)
        return filter2d(x, make_kernels(params))


RESIZE_MODES = ("area", "bilinear", "bicubic")


class RandomResize(_Degradation):
    """Resize the batch by a random scale (one draw a batch, as Real-ESRGAN): up, down or
    keep with probabilities ``resize_prob``, the scale uniform in ``(1, range[1])`` up or
    ``(range[0], 1)`` down, the mode drawn from ``modes`` (``imgfilters.upsample``, which
    is ``F.interpolate``'s arithmetic). ``size_base``: an (h, w) the scale multiplies
    instead of the input's size (Real-ESRGAN's second resize scales the final size)."""

    def __init__(self, resize_prob=(0.2, 0.7, 0.1), resize_range=(0.15, 1.5), modes=RESIZE_MODES, *,
                 size_base=None, seed=None):
        super().__init__(seed)
        self.resize_prob = _probabilities(resize_prob, 3, "resize_prob").tolist()
        self.resize_range = _range(resize_range, "resize_range", low=1e-6)
        if not modes or any(m not in RESIZE_MODES for m in modes):
            raise ValueError(f"modes must be a non-empty subset of {RESIZE_MODES}, got {modes!r}")
        self.modes, self.size_base = tuple(modes), size_base

    def degrade(self, x):
        way = self._choice(3, self.resize_prob)
        scale = (self._uniform((1.0, self.resize_range[1])) if way == 0 else
                 self._uniform((self.resize_range[0], 1.0)) if way == 1 else 1.0)
        mode = self.modes[self._choice(len(self.modes))]
        if self.size_base is None:  # (every mode at scale 1 is the identity)
            return x if scale == 1.0 else upsample(x, scale, mode=mode)
        size = [max(1, int(self.size_base[0] * scale)), max(1, int(self.size_base[1] * scale))]
        return upsample(x, size=size, mode=mode)


class RandomNoise(_Degradation):
    """Per image: Gaussian noise (probability ``gaussian_prob``, sigma uniform in
    ``sigma_range``, 0..255 units) or Poisson noise (scale uniform in ``poisson_scale_range``),
    grey (the same for every channel) with probability ``gray_prob``; clipped to [0, 1].
    BasicSR's ``random_add_gaussian_noise_pt`` / ``random_add_poisson_noise_pt``."""

    def __init__(self, gaussian_prob=0.5, sigma_range=(1.0, 30.0), poisson_scale_range=(0.05, 3.0), gray_prob=0.4,
                 *, seed=None):
        super().__init__(seed)
        self.gaussian_prob = _image.check_number(gaussian_prob, "gaussian_prob", low=0.0, high=1.0)
        self.gray_prob = _image.check_number(gray_prob, "gray_prob", low=0.0, high=1.0)
        self.sigma_range = _range(sigma_range, "sigma_range", low=0.0)
        self.poisson_scale_range = _range(poisson_scale_range, "poisson_scale_range", low=0.0)

    def degrade(self, x):
        b, g = x.shape[0], self.generator(x.device)
        u = torch.rand(3, b, generator=g, device=x.device)
        gray = u[1] < self.gray_prob
        if self._uniform((0.0, 1.0)) < self.gaussian_prob:  # one kind a batch, as Real-ESRGAN
            return add_gaussian_noise(x, _uniform(u[0], self.sigma_range), gray, generator=g)
        return add_poisson_noise(x, _uniform(u[2], self.poisson_scale_range), gray, generator=g)


class RandomJPEG(_Degradation):
    """JPEG-compress each image at its own quality, uniform in ``quality`` and rounded
    (``jpeg``: ``torchvision.io``'s codecs, nvjpeg on CUDA). Returns float32 (integer
    inputs: their dtype)."""

    def __init__(self, quality=(30, 95), *, seed=None):
        super().__init__(seed)
        self.quality = _range(quality, "quality", low=1, high=100)

    def degrade(self, x):
        q = _uniform(torch.rand(x.shape[0], generator=self.generator(x.device), device=x.device), self.quality)
        return jpeg(x, q.round()).to(x.dtype)


class RealESRGANDegradation(_Degradation):
    """Real-ESRGAN's second-order degradation: ``t(gt)`` returns ``(lq, gt)``, ``lq`` of
    size ``(H // scale, W // scale)``.

    Blur (``RandomKernelBlur``) -> resize (up 20 %, down 70 %, keep 10 %, scale in
    (0.15, 1.5)) -> noise (Gaussian sigma 1..30 or Poisson 0.05..3, grey 40 %) -> JPEG
    (30..95); with probability ``second_blur_prob`` a second blur (sigma 0.2..1.5) ->
    resize relative to the final size (30/40/30 %, 0.3..1.2) -> noise (1..25, 0.05..2.5)
    -> in either order (even odds) JPEG (30..95) and [resize to the final size + the sinc
    filter (80 %)]; finally rounded to 8-bit levels and clipped. Batch-level choices
    (resize ways, modes, orders) are drawn once a batch, everything else per image, as in
    Real-ESRGAN's ``feed_data``. The ground truth's USM sharpening (Real-ESRGAN sharpens
    the ground truth it degrades) is left to the caller (``imgfilters.unsharp_mask``).
    """

    def __init__(self, scale=4, *, second_blur_prob=0.8, seed=None):
        super().__init__(seed)
        if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
            raise ValueError(f"scale must be a positive integer, got {scale!r}")
        self.scale = scale
        self.second_blur_prob = _image.check_number(second_blur_prob, "second_blur_prob", low=0.0, high=1.0)
        self.blur1 = RandomKernelBlur(seed=seed)
        self.blur2 = RandomKernelBlur(sigma=(0.2, 1.5), seed=None if seed is None else seed + 1)
        self.resize1 = RandomResize(seed=None if seed is None else seed + 2)
        self.noise1 = RandomNoise(seed=None if seed is None else seed + 3)
        self.noise2 = RandomNoise(sigma_range=(1.0, 25.0), poisson_scale_range=(0.05, 2.5),
                                  seed=None if seed is None else seed + 4)
        self.jpeg1 = RandomJPEG(seed=None if seed is None else seed + 5)
        self.jpeg2 = RandomJPEG(seed=None if seed is None else seed + 6)
        self.sinc = SincFilter(seed=None if seed is None else seed + 7)
        self.resize2 = RandomResize((0.3, 0.4, 0.3), (0.3, 1.2), seed=None if seed is None else seed + 8)
        self.resize_final = RandomResize((0.0, 0.0, 1.0), seed=None if seed is None else seed + 9)

    def forward(self, *inputs):
        gt = inputs[0] if len(inputs) == 1 else inputs
        if not isinstance(gt, torch.Tensor):
            raise TypeError(f"RealESRGANDegradation takes one image batch, got {type(gt).__name__}")
        return self.transform(gt, {}), gt

    def degrade(self, gt):
        h, w = gt.shape[-2:]
        if h < self.scale or w < self.scale:
            raise ValueError(f"images of {h} x {w} are smaller than the scale {self.scale}")
        final = (h // self.scale, w // self.scale)
        out = self.jpeg1.degrade(self.noise1.degrade(self.resize1.degrade(self.blur1.degrade(gt))))
        if self._uniform((0.0, 1.0)) < self.second_blur_prob:
            out = self.blur2.degrade(out)
        self.resize2.size_base = self.resize_final.size_base = final
        out = self.noise2.degrade(self.resize2.degrade(out))
        if self._uniform((0.0, 1.0)) < 0.5:
            out = self.jpeg2.degrade(self.sinc.degrade(self.resize_final.degrade(out)))
        else:
            out = self.sinc.degrade(self.resize_final.degrade(self.jpeg2.degrade(out)))
        return ((out * 255.0).round().clamp(0, 255) / 255.0).to(gt.dtype)
