"""Real-ESRGAN's degradations on the images' device: random blur kernels per image, random
resize, noise, JPEG, the final sinc filter, and the whole second-order pipeline.

Blind super-resolution training (Real-ESRGAN, Wang et al. 2021) makes each low-resolution
input from its ground truth on the fly: blur with a random kernel, resize by a random
scale, add Gaussian or Poisson noise, JPEG-compress, twice over, then a final sinc filter.
BasicSR does this with kernels made per image on the CPU (numpy) and a grouped
``F.conv2d`` per batch. Here one launch samples and makes the whole batch's kernels on the
device from a ``torch.Generator`` (same formulas: ``imgfilters.reference.degrade``), the
blurs are one ``imgfilters.filter2d`` launch with per-image kernels, the JPEG round trip
one launch of ``imgfilters.ops.jpeg`` (or, with ``codec="torchvision"``, a real encoder
and decoder), and everything stays on the images' device.

Images are ``(B, C, H, W)`` (or ``(C, H, W)``) tensors in unit scale: float32, float16,
bfloat16, or uint8/uint16 (the steps run in float32; the result comes back in the input's
dtype). Every transform is a ``torchvision.transforms.v2``
transform; with ``seed=`` (an integer, or a ``torch.Generator`` that one is drawn from
when the transform is made) its draws are reproducible (its own generators), else it uses
torch's global generators. Defaults are Real-ESRGAN's published training options
(``options/train_realesrgan_x4plus.yml``). A transform refuses at the call an image that
one of its draws could not take: the JPEG steps (``RandomJPEG``, ``RealESRGANDegradation``)
take 1 or 3 channels (grey or RGB), a ``RandomResize`` that scales down (the first resize
of ``RealESRGANDegradation``) images that keep a pixel a side at its lowest scale (7 at
0.15).
"""
import collections.abc
import math
import operator
import random
import warnings

import torch
from torchvision.transforms import v2

from imgfilters import _image
from imgfilters.kernels import add_noise, degrade as kernels
from imgfilters.ops.filter2d import MAX_SIZE, filter2d
from imgfilters.ops.jpeg import CHANNELS as JPEG_CHANNELS, check_batch as check_jpeg_batch, \
    qualities as jpeg_qualities, round_trip as jpeg_round_trip
from imgfilters.ops import resample as _resample
from imgfilters.ops.resample import upsample
from imgfilters.reference import degrade as reference, jpeg as reference_jpeg

__all__ = ["KERNEL_KINDS", "sample_kernel_params", "sample_sinc_params", "make_kernels", "random_kernels",
           "add_gaussian_noise", "add_poisson_noise", "JPEG_CODECS", "jpeg", "RandomKernelBlur", "RandomResize",
           "RandomNoise", "RandomJPEG", "SincFilter", "RealESRGANDegradation"]

KERNEL_KINDS = reference.KINDS + ("sinc", "pulse")  # codes 0..7 of a parameter set's "kind"
SINC, PULSE = reference.SINC, reference.PULSE
KERNEL_SIZES = tuple(range(7, 22, 2))  # Real-ESRGAN: odd sizes 7 .. 21, padded to 21
KERNEL_PROB = (0.45, 0.25, 0.12, 0.03, 0.12, 0.03)  # over reference.KINDS
PAD_TO = 21


# ---- random kernels ------------------------------------------------------------------------

def _integer(value, name, low=None, high=None):
    """``value`` as an int in [low, high]: Python, numpy and 0-d torch integers; not bools
    or floats."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bounds}, got {value}")
    return value


def _range(value, name, low=None, high=None):
    """A validated (low, high) pair of floats."""
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a (low, high) pair of numbers, got {value!r}") from None
    lo, hi = _image.check_number(lo, name), _image.check_number(hi, name)
    if lo > hi:
        raise ValueError(f"{name} must be a finite (low, high) range with low <= high, got {value!r}")
    if (low is not None and lo < low) or (high is not None and hi > high):
        raise ValueError(f"{name} must lie in [{low}, {high}], got {value!r}")
    return lo, hi


def _probabilities(value, n, name):
    try:
        p = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be {n} numbers, got {value!r}") from None
    if p.dtype == torch.bool or p.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {p.dtype}")
    p = p.to(torch.float64)
    if p.shape != (n,) or not torch.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"{name} must be {n} non-negative numbers with a positive sum, got {value!r}")
    return p / p.sum()


def _sizes(value):
    try:
        sizes = tuple(_integer(k, "kernel_sizes") for k in value)
    except TypeError:
        raise TypeError(f"kernel_sizes must be a sequence of integers, got {value!r}") from None
    if not sizes or any(k < 1 or k % 2 == 0 or k > PAD_TO for k in sizes):
        raise ValueError(f"kernel_sizes must be odd sizes from 1 to {PAD_TO}, got {value!r}")
    return sizes


def _mixed_options(kernel_sizes, kernel_prob, sinc_prob, sigma, rotation, betag, betap):
    """``sample_kernel_params``' options, validated, as ``reference.kernel_params`` takes them."""
    sizes, prob = _sizes(kernel_sizes), _probabilities(kernel_prob, len(reference.KINDS), "kernel_prob")
    return dict(kernel_sizes=sizes, kernel_prob=tuple(prob.tolist()),
                sinc_prob=_image.check_number(sinc_prob, "sinc_prob", low=0.0, high=1.0),
                sigma=_range(sigma, "sigma", low=1e-6), rotation=_range(rotation, "rotation"),
                betag=_range(betag, "betag", low=1e-6), betap=_range(betap, "betap", low=1e-6))


# A sampler: the uniforms it takes per image, its float64 definition, its launch.
_MIXED = (9, reference.kernel_params, kernels.launch_mixed)
_SINC = (3, reference.sinc_params, kernels.launch_sinc)


def _sample(sampler, options, batch, generator, device, size=None):
    """``batch`` parameter sets from one ``torch.rand`` of the sampler's uniforms, as the dict
    ``sample_kernel_params`` returns; with ``size``, their ``make_kernels(params, size)``
    instead, sampled and made in one launch on kernel devices."""
    rows, define, launch = sampler
    batch = _integer(batch, "batch", 0)
    if device is None:
        device = generator.device if generator is not None else "cpu"
    u = torch.rand(rows, batch, generator=generator, device=device)
    if not _image.uses_kernels(u):  # the float64 definitions, stored as the kernel stores them
        params = {name: t.to(torch.float32) if t.is_floating_point() else t
                  for name, t in define(u.double(), **options).items()}
        return params if size is None else reference.kernels(params, size).to(torch.float32)
    params = torch.empty(len(reference.PARAMS), batch, device=u.device)
    k = None if size is None else _empty_kernels(batch, size, u.device)
    launch(u, params, k, **dict(options, kernel_sizes=_image.on(options["kernel_sizes"], u.device)))
    if k is not None:
        return k
    return dict(zip(reference.PARAMS, (*params[:2].to(torch.int64), *params[2:])))


def _empty_kernels(batch, size, device):
    """``make_kernels``' output: (batch, n, n) float32, n = 2 * (size // 2) + 1."""
    n = 2 * (size // 2) + 1
    return torch.empty(batch, n, n, device=device)


def _grid_size(size):
    """``size`` of ``make_kernels`` and ``random_kernels``: kernels that ``filter2d`` takes."""
    return _integer(size, "size", 1, MAX_SIZE)


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

    One ``torch.rand(9, batch)`` and ``reference.kernel_params`` of it: on CUDA (and in
    Triton's interpreter) one launch of ``kernels/degrade.py`` in float32, elsewhere the
    float64 definition, rounded to float32.
    """
    options = _mixed_options(kernel_sizes, kernel_prob, sinc_prob, sigma, rotation, betag, betap)
    return _sample(_MIXED, options, batch, generator, device)


# sample_kernel_params' options with their defaults (Real-ESRGAN's), for random_kernels' **options
_MIXED_DEFAULTS = {name: value for name, value in sample_kernel_params.__kwdefaults__.items()
                   if name not in ("generator", "device")}


def sample_sinc_params(batch, *, generator=None, device=None, prob=0.8, cutoff=(math.pi / 3, math.pi),
                       kernel_sizes=KERNEL_SIZES):
    """Real-ESRGAN's final sinc filter per image: with probability ``prob`` a circular
    low-pass kernel (cutoff uniform in ``cutoff``, size from ``kernel_sizes``), else the
    identity (``pulse``). Same dict as ``sample_kernel_params``, from one
    ``torch.rand(3, batch)`` through ``reference.sinc_params``, in the same ways."""
    return _sample(_SINC, _sinc_options(prob, cutoff, kernel_sizes), batch, generator, device)


def _sinc_options(prob, cutoff, kernel_sizes):
    """``sample_sinc_params``' options, validated, as ``reference.sinc_params`` takes them."""
    return dict(kernel_sizes=_sizes(kernel_sizes), prob=_image.check_number(prob, "prob", low=0.0, high=1.0),
                cutoff=_range(cutoff, "cutoff", low=1e-6))


def make_kernels(params, size=PAD_TO):
    """The ``(batch, n, n)`` float32 kernels of a parameter dict on its device, n = 2 *
    (size // 2) + 1 (``size`` when odd, 1 to 63: ``filter2d``'s sizes): each image's kernel
    of its own size centred in the n x n grid with zeros around it (BasicSR pads every
    kernel to 21; a larger one is cropped), normalised to sum 1 (``reference.kernels``).
    On CUDA (and in Triton's interpreter) one launch in float32, elsewhere the float64
    definition, rounded.

    ``params``: ``sample_kernel_params``' dict, or one like it: (batch,) tensors (or
    sequences of numbers) on one device, checked before any work (which waits for a
    device's values): ``kind`` codes 0 to 7 (``KERNEL_KINDS``), ``size`` integers from 1 to
    63, and the values each kind uses finite and at least 1e-6 (``sigma_x``; ``sigma_y``
    of the anisotropic kinds; ``beta`` of the generalized and plateau kinds; ``cutoff`` of
    sinc), ``theta`` of the anisotropic kinds finite. The values a kind does not use are
    placeholders, never read."""
    rows = _given_params(params)
    size = _grid_size(size)
    p = rows.to(torch.float32)
    if not _image.uses_kernels(p):
        return reference.kernels(dict(zip(reference.PARAMS, rows)), size).to(torch.float32)
    k = _empty_kernels(p.shape[1], size, p.device)
    kernels.launch_given(p, k)
    return k


def _given_params(params):
    """``make_kernels``' parameter dict, checked, as the (7, B) float64 rows of
    ``reference.PARAMS`` on its device."""
    if not isinstance(params, collections.abc.Mapping):
        raise TypeError(f"params must be a dict of (batch,) tensors named {', '.join(reference.PARAMS)}, "
                        f"got {type(params).__name__}")
    missing = [name for name in reference.PARAMS if name not in params]
    if missing:
        raise ValueError(f"params lacks {', '.join(missing)} (it needs {', '.join(reference.PARAMS)})")
    rows = []
    for name in reference.PARAMS:
        try:
            t = torch.as_tensor(params[name])
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"params[{name!r}] must be a tensor of numbers, got {type(params[name]).__name__}") \
                from None
        if t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"params[{name!r}] must hold real numbers, got dtype {t.dtype}")
        first = rows[0] if rows else t
        if t.ndim != 1 or t.shape != first.shape or t.device != first.device:
            than = f", params['kind'] {tuple(first.shape)} on {first.device}" if rows else ""
            raise ValueError(f"params' values must be 1-D tensors of one length on one device: "
                             f"params[{name!r}] has shape {tuple(t.shape)} on {t.device}{than}")
        rows.append(t.detach().to(torch.float64))
    rows = torch.stack(rows)
    host = dict(zip(reference.PARAMS, rows.cpu()))  # (the one wait for a device's values)

    def whole(v, low, high):
        return (v >= low) & (v <= high) & (v == v.round())

    kind = host["kind"]
    _refuse_any(host, "kind", ~whole(kind, 0, PULSE), f"kind codes from 0 to {PULSE} (KERNEL_KINDS)")
    _refuse_any(host, "size", ~whole(host["size"], 1, MAX_SIZE), f"integers from 1 to {MAX_SIZE}")
    mixed = kind < SINC
    aniso = mixed & (kind % 2 == 1)
    for name, used in (("sigma_x", mixed), ("sigma_y", aniso), ("beta", mixed & (kind >= 2)), ("cutoff", kind == SINC)):
        ok = torch.isfinite(host[name]) & (host[name] >= 1e-6)
        _refuse_any(host, name, used & ~ok, "finite values of at least 1e-6 where the kind uses them")
    _refuse_any(host, "theta", aniso & ~torch.isfinite(host["theta"]), "finite values where the kind uses them")
    return rows


def _refuse_any(params, name, bad, what):
    """Raise naming the first image where ``bad`` holds."""
    if bad.any():
        i = int(bad.nonzero()[0])
        raise ValueError(f"params[{name!r}] must hold {what}, got {params[name][i].item():g} (image {i})")


def random_kernels(batch, *, generator=None, device=None, size=PAD_TO, **options):
    """``make_kernels(sample_kernel_params(batch, ...), size)``, the same kernels from the
    same generator state, with the sampling and the kernels in one launch: one Real-ESRGAN
    blur kernel per image, ``(batch, n, n)`` float32 on the generator's device, n = 2 *
    (size // 2) + 1."""
    unknown = set(options) - set(_MIXED_DEFAULTS)
    if unknown:
        raise TypeError(f"random_kernels got unknown options {sorted(unknown)}; it takes those of "
                        f"sample_kernel_params: {', '.join(_MIXED_DEFAULTS)}")
    size = _grid_size(size)
    options = _mixed_options(**{**_MIXED_DEFAULTS, **options})
    return _sample(_MIXED, options, batch, generator, device, size)


# ---- noise and JPEG ------------------------------------------------------------------------

def _gray(x):
    """ITU-R 601 luma of RGB (B, 3, H, W) as (B, 1, H, W); other channel counts: the mean."""
    if x.shape[1] == 3:
        return 0.299 * x[:, :1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:]
    return x.mean(1, keepdim=True)


def _noise_args(x, amount, name, gray):
    """The noise functions' arguments, checked: ``x`` a floating-point (B, C, H, W)
    batch; ``amount`` (named ``name``) a number >= 0 or a tensor of one value or one per
    image; ``gray`` a bool or a bool tensor of one value or one per image. Returns
    ``amount`` and ``gray`` as (B or 1, 1, 1, 1) tensors on ``x``'s device."""
    _image.check_image(x, "x")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point batch, got dtype {x.dtype}")
    if x.ndim != 4:
        raise ValueError(f"x must be a (B, C, H, W) batch, got shape {tuple(x.shape)}")
    b = x.shape[0]
    amount = torch.as_tensor(_image.per_image(amount, name, b, positive=False), dtype=torch.float64)
    amount = _image.sent(amount, x.device, x.dtype).reshape(-1, 1, 1, 1)  # (no wait for the GPU)
    if isinstance(gray, bool):
        gray = torch.tensor(gray)
    if not isinstance(gray, torch.Tensor) or gray.dtype != torch.bool:
        raise TypeError(f"gray must be a bool or a bool tensor, got {getattr(gray, 'dtype', type(gray).__name__)}")
    if gray.numel() != 1 and (gray.ndim != 1 or gray.numel() != b):
        raise ValueError(f"gray as a tensor must be 1-D with one value per image ({b}), got shape {tuple(gray.shape)}")
    return amount, _image.sent(gray, x.device, torch.bool).reshape(-1, 1, 1, 1)


def add_gaussian_noise(x, sigma, gray, *, generator=None, clip=True):
    """BasicSR's ``generate_gaussian_noise_pt``: ``x + n`` with ``n ~ N(0, (sigma/255)^2)``
    per pixel, ``sigma`` per image (0..255 units); where ``gray`` (per image) is true, the
    same noise for every channel (BasicSR draws one grey field for the whole batch; here
    each image has its own). ``x`` is a float (B, C, H, W) batch; clipped to [0, 1].
    ``sigma`` and ``gray``: a number (a bool) or a tensor of one value or one per image.
    On the GPU one launch draws and adds the noise (Philox, seeded by one draw of
    ``generator``: the same distribution as ``torch.randn``'s, not its numbers); float64
    and the CPU take ``torch.randn``."""
    sigma, gray = _noise_args(x, sigma, "sigma", gray)
    if _image.uses_kernels(x):
        return _noise_kernel(x, sigma, 1.0 / 255.0, gray, generator, False, clip)
    b, c, h, w = x.shape
    noise = torch.randn(b, c + 1, h, w, generator=generator, device=x.device, dtype=x.dtype)
    noise = torch.where(gray, noise[:, :1], noise[:, 1:]) * (sigma / 255.0)
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
    for every channel. Arguments as ``add_gaussian_noise``'s. On the GPU two launches (the
    levels each image holds, then the noise: Poisson samples by inversion and Hormann's
    transformed rejection, seeded as ``add_gaussian_noise``'s); float64 and the CPU take
    ``torch.poisson``."""
    scale, gray = _noise_args(x, scale, "scale", gray)
    if _image.uses_kernels(x):
        return _noise_kernel(x, scale, 1.0, gray, generator, True, clip)
    xr = (x * 255.0).round().clamp(0, 255) / 255.0
    vals = _levels(xr)
    noise = torch.poisson(xr * vals, generator=generator) / vals - xr
    g = (_gray(x) * 255.0).round().clamp(0, 255) / 255.0
    gvals = _levels(g)
    gnoise = torch.poisson(g * gvals, generator=generator) / gvals - g
    noise = torch.where(gray, gnoise, noise) * scale
    out = x + noise
    return out.clamp(0, 1) if clip else out


def _noise_kernel(x, amount, unit, gray, generator, poisson, clip):
    """The noise functions on the kernels' path (``kernels/add_noise.py``): one launch
    (Poisson: two, and the zeroed flags of the levels), the noise from Philox seeded by one
    draw of ``generator`` on the device (no noise tensor, no wait for the host)."""
    seed = torch.randint(0, 2 ** 62, (1,), generator=generator, device=x.device)
    y = torch.empty_like(x)
    add_noise.add(x, y, amount.reshape(-1), unit, gray.reshape(-1), seed, poisson, clip)
    return y


JPEG_CODECS = ("imgfilters", "torchvision")


def _check_codec(codec):
    if codec not in JPEG_CODECS:
        raise ValueError(f"codec must be one of {JPEG_CODECS}, got {codec!r}")
    return codec


def jpeg(x, quality, codec="imgfilters"):
    """JPEG-compress and decode each image of a (B, C, H, W) batch in unit scale (C = 1 or
    3; any dtype, floats in [0, 1]) at its ``quality`` (one number, or a tensor of one value
    or one per image; rounded half up and clamped to 1..100). Returns float32 in [0, 1], on
    8-bit levels, on ``x``'s device.

    ``codec``: ``"imgfilters"`` (default) runs ``imgfilters.ops.jpeg``: libjpeg's baseline
    round trip (4:2:0 chroma, the standard's tables scaled by quality) with an exact DCT,
    one launch for the batch (float32 on CUDA: a coefficient within about 1e-4 of a rounding
    tie may round the other way than on the CPU's float64). ``"torchvision"`` runs a real
    encoder and decoder, ``torchvision.io`` (nvjpeg for CUDA tensors, libjpeg on the CPU):
    one encode call per distinct quality, one decode call, and the bytes through the host.
    Against libjpeg the first differs by about a level on average, mostly where libjpeg's
    decoder smooths the chroma (``imgfilters.reference.jpeg``)."""
    _check_codec(codec)
    check_jpeg_batch(x, "x")
    if codec == "imgfilters":
        return jpeg_round_trip(_image.to_unit(x, torch.float32, copy=False), quality)
    from torchvision.io import decode_jpeg, encode_jpeg
    b = x.shape[0]
    q = reference_jpeg.integer_qualities(jpeg_qualities(quality, b, x.device)).tolist()  # (the encoder takes ints)
    u8 = (_image.to_unit(x, torch.float32, copy=False).clamp(0, 1) * 255.0).round().to(torch.uint8)
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
    """Shared: reproducible draws (``seed``: None, an integer, or a ``torch.Generator``
    that an integer seed is drawn from once, here), the batch as float (B, C,
    H, W), the image checked before any work (``check``).

    Per-image draws come from torch generators on the images' device; batch-level choices
    (a resize's way and mode, the noise's kind) from a Python ``random.Random`` on the host:
    a torch draw there costs tens of microseconds, as much as a filter's launch. A
    transform's ``degrade(batch, rng)`` gets that ``random.Random`` when it ``chooses``
    (else None)."""

    chooses = False

    def __init__(self, seed=None):
        super().__init__()
        if isinstance(seed, torch.Generator):  # (its state picks the seed: the same state, the same draws)
            seed = int(torch.randint(2 ** 62, (), generator=seed, device=seed.device).item())
        # (torch's generators take seeds from -2**63 to 2**64 - 1; RealESRGANDegradation adds up to 9)
        self.seed = None if seed is None else _integer(seed, "seed", -2 ** 63, 2 ** 63 - 1)
        self._generators = {}
        self._host = None if seed is None else random.Random(self.seed)

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

    def host_random(self):
        """The host's source of batch-level choices: this transform's own (seeded), else a
        ``random.Random`` seeded from torch's global CPU generator (one draw a call, so that
        ``torch.manual_seed`` makes unseeded transforms reproducible too)."""
        if self._host is not None:
            return self._host
        return random.Random(int(torch.randint(0, 2 ** 62, ()).item()))

    def transform(self, inpt, params):
        if not isinstance(inpt, torch.Tensor) or _not_image(inpt):
            return inpt
        _image.check_image(inpt)
        if inpt.ndim not in (3, 4):
            raise ValueError(f"degradations take (B, C, H, W) or (C, H, W) images, got {tuple(inpt.shape)}")
        x = inpt.as_subclass(torch.Tensor)
        self.check(x)
        batch = x if x.ndim == 4 else x[None]
        if batch.dtype != torch.float32:  # the pipeline runs in float32 (torch.poisson, the codecs)
            batch = _image.to_unit(batch, torch.float32, copy=False)
        out = self.degrade(batch, self.host_random() if self.chooses else None)
        out = out if x.ndim == 4 else out[0]
        if not inpt.is_floating_point():
            out = _image.from_unit(out, inpt.dtype)
        return _image.wrap(inpt, out.to(inpt.dtype))

    def check(self, img):
        """Raise ValueError unless every draw of this transform can take ``img``, a (C, H, W)
        or (B, C, H, W) tensor: refused at the call, not in the middle of a pipeline."""


def _batch_choice(rng, n, weights=None):
    """A batch-level choice among n, with ``weights`` (default: equal odds)."""
    return rng.choices(range(n), weights=weights)[0]


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
        # validated once (a call then costs one torch.rand and one launch: random_kernels')
        self.sampling = _mixed_options(kernel_sizes, kernel_prob, sinc_prob, sigma, rotation, betag, betap)

    def degrade(self, x, rng):
        return filter2d(x, _sample(_MIXED, self.sampling, x.shape[0], self.generator(x.device), x.device, PAD_TO))


class SincFilter(_Degradation):
    """Real-ESRGAN's final sinc filter: per image, with probability ``prob``, a circular
    low-pass kernel, else the image unchanged; one ``filter2d`` launch for the batch."""

    def __init__(self, prob=0.8, cutoff=(math.pi / 3, math.pi), *, kernel_sizes=KERNEL_SIZES, seed=None):
        super().__init__(seed)
        self.sampling = _sinc_options(prob, cutoff, kernel_sizes)  # (validated once)

    def degrade(self, x, rng):  # the kernels of sample_sinc_params, sampled and made in one launch
        return filter2d(x, _sample(_SINC, self.sampling, x.shape[0], self.generator(x.device), x.device, PAD_TO))


RESIZE_MODES = ("area", "bilinear", "bicubic")


class RandomResize(_Degradation):
    """Resize the batch by a random scale (one draw a batch, as Real-ESRGAN): up, down or
    keep with probabilities ``resize_prob``, the scale uniform in ``(1, range[1])`` up or
    ``(range[0], 1)`` down, the mode drawn from ``modes`` (``imgfilters.upsample``, which
    is ``F.interpolate``'s arithmetic). ``size_base``: an (h, w) the scale multiplies
    instead of the input's size (Real-ESRGAN's second resize scales the final size)."""

    chooses = True

    def __init__(self, resize_prob=(0.2, 0.7, 0.1), resize_range=(0.15, 1.5), modes=RESIZE_MODES, *,
                 size_base=None, seed=None):
        super().__init__(seed)
        self.resize_prob = _probabilities(resize_prob, 3, "resize_prob").tolist()
        self.resize_range = _range(resize_range, "resize_range", low=1e-6)
        if not self.resize_range[0] <= 1.0 <= self.resize_range[1]:
            raise ValueError(f"resize_range must hold 1 (down to its low, up to its high), got {resize_range!r}")
        if not modes or any(m not in RESIZE_MODES for m in modes):
            raise ValueError(f"modes must be a non-empty subset of {RESIZE_MODES}, got {modes!r}")
        self.modes = tuple(modes)
        self.size_base = None if size_base is None else _resample._pair_of(size_base, "size_base", int)

    def check(self, img):
        """Scaled down without a ``size_base``, each side must keep a pixel (``floor(side *
        scale)``, as ``upsample`` sizes it)."""
        lowest = self.resize_range[0]
        if self.size_base is None and self.resize_prob[1] > 0 and math.floor(min(img.shape[-2:]) * lowest) < 1:
            h, w = img.shape[-2:]
            raise ValueError(f"img of {h} x {w} is too small: a random resize down to {lowest} of its size would "
                             f"leave no pixels (it needs at least {math.ceil(1 / lowest)} a side)")

    def degrade(self, x, rng):
        way = _batch_choice(rng, 3, self.resize_prob)
        scale = (rng.uniform(1.0, self.resize_range[1]) if way == 0 else
                 rng.uniform(self.resize_range[0], 1.0) if way == 1 else 1.0)
        mode = self.modes[_batch_choice(rng, len(self.modes))]
        if self.size_base is None:  # (every mode at scale 1 is the identity)
            return x if scale == 1.0 else upsample(x, scale, mode=mode)
        size = [max(1, int(self.size_base[0] * scale)), max(1, int(self.size_base[1] * scale))]
        return upsample(x, size=size, mode=mode)


class RandomNoise(_Degradation):
    """Per image: Gaussian noise (probability ``gaussian_prob``, sigma uniform in
    ``sigma_range``, 0..255 units) or Poisson noise (scale uniform in ``poisson_scale_range``),
    grey (the same for every channel) with probability ``gray_prob``; clipped to [0, 1].
    BasicSR's ``random_add_gaussian_noise_pt`` / ``random_add_poisson_noise_pt``."""

    chooses = True

    def __init__(self, gaussian_prob=0.5, sigma_range=(1.0, 30.0), poisson_scale_range=(0.05, 3.0), gray_prob=0.4,
                 *, seed=None):
        super().__init__(seed)
        self.gaussian_prob = _image.check_number(gaussian_prob, "gaussian_prob", low=0.0, high=1.0)
        self.gray_prob = _image.check_number(gray_prob, "gray_prob", low=0.0, high=1.0)
        self.sigma_range = _range(sigma_range, "sigma_range", low=0.0)
        self.poisson_scale_range = _range(poisson_scale_range, "poisson_scale_range", low=0.0)

    def degrade(self, x, rng):
        b, g = x.shape[0], self.generator(x.device)
        u = torch.rand(3, b, generator=g, device=x.device)
        gray = u[1] < self.gray_prob
        if rng.random() < self.gaussian_prob:  # one kind a batch, as Real-ESRGAN
            return add_gaussian_noise(x, reference.uniform(u[0], self.sigma_range), gray, generator=g)
        return add_poisson_noise(x, reference.uniform(u[2], self.poisson_scale_range), gray, generator=g)


class RandomJPEG(_Degradation):
    """JPEG-compress each image at its own quality, uniform in ``quality`` and rounded,
    with ``codec`` (``jpeg``'s: ``"imgfilters"``, one launch for the batch, or
    ``"torchvision"``'s encoder and decoder). Returns float32 (integer inputs: their
    dtype)."""

    def __init__(self, quality=(30, 95), *, codec="imgfilters", seed=None):
        super().__init__(seed)
        self.quality = _range(quality, "quality", low=1, high=100)
        self.codec = _check_codec(codec)

    def check(self, img):
        if img.shape[-3] not in JPEG_CHANNELS:
            raise ValueError(f"JPEG takes grey or RGB images: img must have 1 or 3 channels, got {img.shape[-3]} "
                             f"(shape {tuple(img.shape)})")

    def degrade(self, x, rng):
        q = reference.uniform(torch.rand(x.shape[0], generator=self.generator(x.device), device=x.device), self.quality)
        return jpeg(x, q, self.codec)


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
    ``jpeg_codec``: ``RandomJPEG``'s ``codec`` for both JPEG steps (Real-ESRGAN trains
    with BasicSR's DiffJPEG, a JPEG round trip in torch operations, as the default
    ``"imgfilters"`` is one in a kernel).
    """

    chooses = True

    def __init__(self, scale=4, *, second_blur_prob=0.8, jpeg_codec="imgfilters", seed=None):
        super().__init__(seed)
        self.scale = _integer(scale, "scale", 1)
        seed = self.seed  # (its parts' seeds follow it)
        self.second_blur_prob = _image.check_number(second_blur_prob, "second_blur_prob", low=0.0, high=1.0)
        self.blur1 = RandomKernelBlur(seed=seed)
        self.blur2 = RandomKernelBlur(sigma=(0.2, 1.5), seed=None if seed is None else seed + 1)
        self.resize1 = RandomResize(seed=None if seed is None else seed + 2)
        self.noise1 = RandomNoise(seed=None if seed is None else seed + 3)
        self.noise2 = RandomNoise(sigma_range=(1.0, 25.0), poisson_scale_range=(0.05, 2.5),
                                  seed=None if seed is None else seed + 4)
        self.jpeg1 = RandomJPEG(codec=jpeg_codec, seed=None if seed is None else seed + 5)
        self.jpeg2 = RandomJPEG(codec=jpeg_codec, seed=None if seed is None else seed + 6)
        self.sinc = SincFilter(seed=None if seed is None else seed + 7)
        self.resize2 = RandomResize((0.3, 0.4, 0.3), (0.3, 1.2), seed=None if seed is None else seed + 8)
        self.resize_final = RandomResize((0.0, 0.0, 1.0), seed=None if seed is None else seed + 9)

    def forward(self, *inputs):
        gt = inputs[0] if len(inputs) == 1 else inputs
        if not isinstance(gt, torch.Tensor) or _not_image(gt):
            raise TypeError(f"RealESRGANDegradation takes one image batch, got {type(gt).__name__}")
        return self.transform(gt, {}), gt

    def check(self, img):
        h, w = img.shape[-2:]
        if h < self.scale or w < self.scale:
            raise ValueError(f"images of {h} x {w} are smaller than the scale {self.scale}")
        self.resize1.check(img)  # (the later resizes scale the final size)
        self.jpeg1.check(img)

    def degrade(self, gt, rng):
        h, w = gt.shape[-2:]
        final = (h // self.scale, w // self.scale)
        out = self.resize1.degrade(self.blur1.degrade(gt, rng), rng)
        out = self.jpeg1.degrade(self.noise1.degrade(out, rng), rng)
        if rng.random() < self.second_blur_prob:
            out = self.blur2.degrade(out, rng)
        self.resize2.size_base = self.resize_final.size_base = final
        out = self.noise2.degrade(self.resize2.degrade(out, rng), rng)
        if rng.random() < 0.5:
            out = self.jpeg2.degrade(self.sinc.degrade(self.resize_final.degrade(out, rng), rng), rng)
        else:
            out = self.sinc.degrade(self.resize_final.degrade(self.jpeg2.degrade(out, rng), rng), rng)
        return ((out * 255.0).round().clamp(0, 255) / 255.0).to(gt.dtype)
