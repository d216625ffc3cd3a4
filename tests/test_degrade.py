"""Real-ESRGAN degradations: kernel generators vs the float64 formulas (and those vs hand-worked
values and BasicSR's sinc formula), each transform's statistics, the pipeline's determinism."""
import math
import re

import numpy as np
import pytest
import scipy.special
import torch
import triton
import triton.language as tl
from torchvision import tv_tensors
from torchvision.transforms import v2

import imgfilters
from imgfilters import degrade
from imgfilters.kernels import degrade as kernels
from imgfilters.reference import degrade as ref

from helpers import count_launches, random_image, sample


# ---- the reference formulas ----------------------------------------------------------------

def test_reference_kernels_worked_by_hand():
    e = math.exp
    iso = ref.mixed_kernel("iso", 3, 1.0)
    assert iso[1, 1].item() == pytest.approx(1 / (1 + 4 * e(-0.5) + 4 * e(-1)), abs=1e-15)
    assert iso[0, 0].item() == pytest.approx(e(-1) / (1 + 4 * e(-0.5) + 4 * e(-1)), abs=1e-15)
    plateau = ref.mixed_kernel("plateau_iso", 3, 1.0, beta=1.0)  # 1 / (r^2 + 1): 1, 1/2, 1/3
    assert plateau[1, 1].item() == pytest.approx(3 / 13, abs=1e-15)
    assert plateau[0, 1].item() == pytest.approx(1.5 / 13, abs=1e-15)
    # generalized with beta 2 at sigma 1: exp(-r^4 / 2): 1, e^-1/2, e^-2
    gen = ref.mixed_kernel("generalized_iso", 3, 1.0, beta=2.0)
    assert gen[0, 0].item() == pytest.approx(e(-2) / (1 + 4 * e(-0.5) + 4 * e(-2)), abs=1e-15)
    # anisotropic: sigma_x along columns; a quarter turn swaps the axes
    a = ref.mixed_kernel("aniso", 5, 2.0, 0.5, 0.0)
    assert a[2, 4].item() > a[4, 2].item()
    torch.testing.assert_close(ref.mixed_kernel("aniso", 5, 2.0, 0.5, math.pi / 2), a.T, rtol=0, atol=1e-15)
    # sinc of cutoff pi, 3 x 3: centre pi^2 / (4 pi), edge pi J1(pi) / (2 pi), corner at r = sqrt 2
    j1_pi, j1_pi_r2 = 0.28461534317975273, -0.21523477399425595
    raw = torch.tensor([[j1_pi_r2 / (2 * math.sqrt(2)), j1_pi / 2, j1_pi_r2 / (2 * math.sqrt(2))],
                        [j1_pi / 2, math.pi / 4, j1_pi / 2],
                        [j1_pi_r2 / (2 * math.sqrt(2)), j1_pi / 2, j1_pi_r2 / (2 * math.sqrt(2))]], dtype=torch.float64)
    torch.testing.assert_close(ref.circular_lowpass_kernel(math.pi, 3), raw / raw.sum(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("k,cutoff", [(7, math.pi / 3), (13, 2.0), (21, math.pi)])
def test_reference_sinc_equals_basicsr_formula(k, cutoff):
    """BasicSR's circular_lowpass_kernel, written with scipy's J1 as BasicSR does."""
    c = (k - 1) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.fromfunction(lambda x, y: cutoff * scipy.special.j1(cutoff * np.sqrt((x - c) ** 2 + (y - c) ** 2))
                            / (2 * np.pi * np.sqrt((x - c) ** 2 + (y - c) ** 2)), [k, k])
    w[k // 2, k // 2] = cutoff ** 2 / (4 * np.pi)
    np.testing.assert_allclose(ref.circular_lowpass_kernel(cutoff, k).numpy(), w / w.sum(), rtol=0, atol=1e-14)


# ---- kernels made on the device vs the reference -------------------------------------------

def test_every_kind_matches_the_reference(gen, device):
    n = len(degrade.KERNEL_KINDS)  # (an even size too: given parameters may hold one; it spans k + 1 cells)
    params = dict(kind=torch.arange(n).repeat(3), size=torch.tensor([7, 12, 21] * n).reshape(n, 3).T.reshape(-1),
                  sigma_x=0.2 + 2.8 * torch.rand(3 * n, generator=gen),
                  sigma_y=0.2 + 2.8 * torch.rand(3 * n, generator=gen),
                  theta=(torch.rand(3 * n, generator=gen) - 0.5) * 2 * math.pi,
                  beta=0.5 + 3.5 * torch.rand(3 * n, generator=gen),
                  cutoff=0.6 + 2.5 * torch.rand(3 * n, generator=gen))
    iso = (params["kind"] % 2 == 0) & (params["kind"] < 6)
    params["sigma_y"] = torch.where(iso, params["sigma_x"], params["sigma_y"])
    params["theta"] = torch.where(iso, 0.0, params["theta"])
    params["beta"] = torch.where(params["kind"] < 2, 1.0, params["beta"])
    on_device = {key: t.to(device) for key, t in params.items()}
    k = degrade.make_kernels(on_device).cpu().double()
    assert (k - ref.kernels(params)).abs().max() <= 1e-6
    torch.testing.assert_close(k.sum((1, 2)), torch.ones(3 * n, dtype=torch.float64))
    cropped = degrade.make_kernels(on_device, size=15).cpu().double()  # the 21 x 21 ones cut to 15 x 15
    assert (cropped - ref.kernels(params, size=15)).abs().max() <= 1e-6


def test_sampled_kernels_match_the_reference_and_are_reproducible(device):
    g = torch.Generator(device).manual_seed(7)
    params = degrade.sample_kernel_params(48, generator=g)
    k = degrade.make_kernels(params)
    assert k.shape == (48, 21, 21) and k.device.type == torch.device(device).type
    assert (k.cpu().double() - ref.kernels(params)).abs().max() <= 1e-6
    again = degrade.random_kernels(48, generator=torch.Generator(device).manual_seed(7))
    assert torch.equal(again, k)
    assert degrade.random_kernels(0, device=device).shape == (0, 21, 21)


# Options other than the defaults, so that each is seen to reach the kernel: (sampler, its
# options, the reference's definition and uniforms per image, the options as it takes them,
# the kinds it makes)
SAMPLERS = {
    "mixed": (degrade.sample_kernel_params,
              dict(kernel_sizes=(3, 21, 9), kernel_prob=(1, 2, 3, 4, 5, 6), sinc_prob=0.3, sigma=(0.5, 2.0),
                   rotation=(-1.0, 2.0), betag=(0.3, 3.0), betap=(0.7, 1.8)),
              ref.kernel_params, 9, dict(kernel_prob=tuple(p / 21 for p in range(1, 7))), set(range(ref.SINC + 1))),
    "sinc": (degrade.sample_sinc_params, dict(prob=0.5, cutoff=(0.5, 2.5), kernel_sizes=(5, 11, 17)),
             ref.sinc_params, 3, {}, {ref.SINC, ref.PULSE}),
}


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_sampled_parameters_are_the_reference_of_the_same_uniforms(sampler, device):
    """The parameters sampled in float32 (the kernel) are the float64 definition's of the
    one ``torch.rand(rows, batch)`` they are drawn from."""
    sample, options, define, rows, reference_options, kinds = SAMPLERS[sampler]
    got = sample(256, generator=torch.Generator(device).manual_seed(3), **options)  # (every kind, on any device)
    u = torch.rand(rows, 256, generator=torch.Generator(device).manual_seed(3), device=device)
    want = define(u.cpu().double(), **{**options, **reference_options})
    assert set(want["kind"].tolist()) == kinds and set(want["size"].tolist()) == set(options["kernel_sizes"])
    for name in ("kind", "size"):
        assert got[name].dtype == torch.int64 and torch.equal(got[name].cpu(), want[name])
    for name in ref.PARAMS[2:]:
        assert got[name].dtype == torch.float32
        torch.testing.assert_close(got[name].cpu().double(), want[name], rtol=1e-6, atol=1e-6)


@triton.jit
def _bessel_j1_kernel(X, Y, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(Y + i, kernels.bessel_j1(tl.load(X + i)))


def test_bessel_j1_matches_scipy(device):
    """The sinc kernels' J1 (float64) over the arguments they take (cutoff * r up to
    pi * 10 sqrt 2) and beyond."""
    x = torch.linspace(0, 70, 4096, dtype=torch.float64, device=device)
    y = torch.empty_like(x)
    _bessel_j1_kernel[(1,)](x, y, N=4096)
    assert np.abs(y.cpu().numpy() - scipy.special.j1(x.cpu().numpy())).max() <= 2e-8


def test_values_a_kind_does_not_use_are_placeholders(device):
    # the isotropic kinds' sigma_y and theta, the Gaussians' beta, the sigmas and beta of
    # sinc, everything of the pulse but its size: the kernels ignore them, as the reference
    nan = float("nan")
    params = dict(kind=torch.tensor([0, 2, 4, 1, 6, 7]), size=torch.tensor([7, 9, 5, 7, 9, 3]),
                  sigma_x=torch.tensor([1.0, 1.5, 0.8, 1.2, nan, nan]),
                  sigma_y=torch.tensor([2.0, nan, 0.0, 0.6, nan, nan]),
                  theta=torch.tensor([0.5, nan, 1.0, 0.3, nan, nan]), beta=torch.tensor([2.0, 1.5, 0.7, nan, nan, nan]),
                  cutoff=torch.tensor([nan, nan, nan, nan, 1.2, nan]))
    k = degrade.make_kernels({n: t.to(device) for n, t in params.items()}).cpu().double()
    assert torch.isfinite(k).all() and (k - ref.kernels(params)).abs().max() <= 1e-6


GOOD = dict(kind=[0], size=[7], sigma_x=[1.0], sigma_y=[1.0], theta=[0.0], beta=[1.0], cutoff=[1.0])


@pytest.mark.parametrize("call,error,match", [
    (lambda: degrade.random_kernels(2, size=-3), ValueError, "size must be an integer from 1 to 63, got -3"),
    (lambda: degrade.random_kernels(2, size=21.0), TypeError, "size must be an integer, got float"),
    (lambda: degrade.random_kernels(2, size=True), TypeError, "size must be an integer, got bool"),
    (lambda: degrade.random_kernels(2, size=65), ValueError, "size must be an integer from 1 to 63"),  # filter2d's
    (lambda: degrade.random_kernels(-1), ValueError, "batch must be an integer >= 0, got -1"),
    (lambda: degrade.random_kernels(1.5), TypeError, "batch must be an integer, got float"),
    (lambda: degrade.sample_kernel_params(True), TypeError, "batch must be an integer, got bool"),
    (lambda: degrade.sample_sinc_params(-2), ValueError, "batch"),
    (lambda: degrade.random_kernels(2, kernel_sizes=(7.5,)), TypeError, "kernel_sizes must be a sequence of integers"),
    (lambda: degrade.random_kernels(2, kernel_sizes=("7",)), TypeError, "kernel_sizes must be a sequence of integers"),
    (lambda: degrade.sample_sinc_params(2, kernel_sizes=7), TypeError, "kernel_sizes must be a sequence of integers"),
    (lambda: degrade.random_kernels(2, sigma=(0.2, "3")), TypeError, "sigma must be a real number"),
    (lambda: degrade.random_kernels(2, kernel_prob="abcdef"), TypeError, "kernel_prob"),
    (lambda: degrade.make_kernels(GOOD, size=0), ValueError, "size must be an integer from 1 to 63"),
    (lambda: degrade.make_kernels(GOOD, size=7.0), TypeError, "size must be an integer"),
    (lambda: degrade.make_kernels([GOOD]), TypeError, "params must be a dict"),
    (lambda: degrade.make_kernels({n: v for n, v in GOOD.items() if n != "beta"}), ValueError, "params lacks beta"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [0, 1]}), ValueError,
     r"one length on one device: params\['size'\] has shape \(1,\) on cpu, params\['kind'\] \(2,\)"),
    (lambda: degrade.make_kernels({**GOOD, "kind": ["iso"]}), TypeError, r"params\['kind'\] must be a tensor"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [8]}), ValueError,
     r"params\['kind'\] must hold kind codes from 0 to 7 \(KERNEL_KINDS\), got 8"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [-1]}), ValueError, r"params\['kind'\]"),
    (lambda: degrade.make_kernels({**GOOD, "size": [7.5]}), ValueError, r"params\['size'\] must hold integers"),
    (lambda: degrade.make_kernels({**GOOD, "size": [0]}), ValueError, r"params\['size'\]"),
    (lambda: degrade.make_kernels({**GOOD, "sigma_x": [0.0]}), ValueError,  # (a NaN kernel)
     r"params\['sigma_x'\] must hold finite values of at least 1e-6 where the kind uses them, got 0 \(image 0\)"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [1], "sigma_y": [float("inf")]}), ValueError, "sigma_y"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [3], "theta": [float("nan")]}), ValueError, "theta"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [4], "beta": [-1.0]}), ValueError, "beta"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [6], "cutoff": [0.0]}), ValueError, "cutoff"),
    (lambda: degrade.make_kernels({**GOOD, "kind": [True]}), TypeError, r"params\['kind'\] must hold real numbers"),
])
def test_bad_kernel_arguments_raise_before_any_work(call, error, match):
    with count_launches() as launches, pytest.raises(error, match=match):
        call()
    assert not launches


def test_fractional_beta_keeps_the_centre_finite(device):
    """Q^beta at the centre (Q = 0) with beta < 1 is 0, not beta times log(0)."""
    params = dict(kind=torch.tensor([3, 5]), size=torch.tensor([21, 9]), sigma_x=torch.tensor([1.5, 0.4]),
                  sigma_y=torch.tensor([0.7, 2.0]), theta=torch.tensor([0.4, -1.0]), beta=torch.tensor([0.3, 0.6]),
                  cutoff=torch.tensor([1.0, 1.0]))
    k = degrade.make_kernels({n: t.to(device) for n, t in params.items()}).cpu().double()
    assert torch.isfinite(k).all() and (k - ref.kernels(params)).abs().max() <= 1e-6


def test_sampled_parameters_follow_real_esrgan_options():
    g = torch.Generator().manual_seed(0)
    n = 40000
    p = degrade.sample_kernel_params(n, generator=g)
    kind, size = p["kind"], p["size"]
    assert abs((kind == degrade.SINC).float().mean().item() - 0.1) < 0.01
    mixed = kind[kind != degrade.SINC]
    freq = torch.bincount(mixed, minlength=6).double() / mixed.numel()
    assert (freq - torch.tensor(degrade.KERNEL_PROB, dtype=torch.float64)).abs().max() < 0.01
    assert set(size.tolist()) == set(range(7, 22, 2))
    assert (torch.bincount(size)[7::2].double() / n - 1 / 8).abs().max() < 0.01
    assert p["sigma_x"].min() >= 0.2 and p["sigma_x"].max() <= 3.0
    iso = (kind == 0) | (kind == 2) | (kind == 4)
    assert torch.equal(p["sigma_y"][iso], p["sigma_x"][iso]) and (p["theta"][iso] == 0).all()
    aniso = (kind == 1) | (kind == 3) | (kind == 5)
    assert p["theta"][aniso].abs().max() <= math.pi and p["theta"][aniso].std() > 1.5
    bg = p["beta"][(kind == 2) | (kind == 3)]
    assert bg.min() >= 0.5 and bg.max() <= 4.0 and abs((bg < 1).float().mean().item() - 0.5) < 0.03
    bp = p["beta"][(kind == 4) | (kind == 5)]
    assert bp.min() >= 1.0 and bp.max() <= 2.0
    assert (p["beta"][kind < 2] == 1).all()
    cut = p["cutoff"][kind == degrade.SINC]
    small = size[kind == degrade.SINC] < 13
    assert cut[small].min() >= math.pi / 3 and cut[~small].min() >= math.pi / 5 and cut.max() <= math.pi
    assert cut[~small].min() < math.pi / 3  # the wider range is used
    s = degrade.sample_sinc_params(n, generator=g)
    assert abs((s["kind"] == degrade.SINC).float().mean().item() - 0.8) < 0.01


def test_pulse_kernels_are_the_identity(gen, device):
    x = random_image((3, 3, 12, 14), torch.float32, gen, device)
    params = degrade.sample_sinc_params(3, generator=torch.Generator(device).manual_seed(0), prob=0.0)
    assert torch.equal(imgfilters.filter2d(x, degrade.make_kernels(params)), x)


# ---- transforms ----------------------------------------------------------------------------

def test_random_kernel_blur_and_sinc_filter_draw_their_kernels_from_the_seed(gen, device):
    x = random_image((2, 3, 12, 16), torch.float32, gen, device)
    k = degrade.random_kernels(2, generator=torch.Generator(device).manual_seed(5))
    assert torch.equal(degrade.RandomKernelBlur(seed=5)(x), imgfilters.filter2d(x, k))
    s = degrade.make_kernels(degrade.sample_sinc_params(2, generator=torch.Generator(device).manual_seed(6)))
    assert torch.equal(degrade.SincFilter(seed=6)(x), imgfilters.filter2d(x, s))
    u8 = (x * 255).round().to(torch.uint8)
    assert degrade.RandomKernelBlur(seed=5)(u8).dtype == torch.uint8


@pytest.mark.parametrize("way,bounds", [(0, (1.0, 1.5)), (1, (0.15, 1.0)), (2, (1.0, 1.0))])
def test_random_resize_sizes(way, bounds, gen, device):
    x = random_image((2, 3, 40, 48), torch.float32, gen, device)
    prob = [0.0, 0.0, 0.0]
    prob[way] = 1.0
    t = degrade.RandomResize(prob, seed=1)
    for _ in range(3):
        y = t(x)
        h, w = y.shape[-2:]
        assert bounds[0] * 40 - 1 <= h <= bounds[1] * 40 and bounds[0] * 48 - 1 <= w <= bounds[1] * 48
    h, w = degrade.RandomResize(prob, (0.5, 2.0), size_base=(10, 12), seed=1)(x).shape[-2:]
    lo, hi = {0: (1.0, 2.0), 1: (0.5, 1.0), 2: (1.0, 1.0)}[way]
    assert int(10 * lo) <= h <= 10 * hi and int(12 * lo) <= w <= 12 * hi


def test_gaussian_noise_sigma_and_grey(device):
    x = torch.full((8, 3, 32, 32), 0.5, device=device)
    n = (degrade.RandomNoise(1.0, (10.0, 10.0), gray_prob=0.0, seed=2)(x) - x) * 255
    assert abs(n.std().item() - 10.0) < 0.3 and abs(n.mean().item()) < 0.2
    assert (n[:, 0] - n[:, 1]).abs().mean() > 5  # colour noise: channels differ
    g = degrade.RandomNoise(1.0, (4.0, 4.0), gray_prob=1.0, seed=2)(x) - x
    assert torch.equal(g[:, 0], g[:, 1]) and torch.equal(g[:, 1], g[:, 2])
    per_image = (degrade.RandomNoise(1.0, (1.0, 30.0), gray_prob=0.0, seed=3)(x) - x).std((1, 2, 3)) * 255
    assert per_image.min() >= 0.9 and per_image.max() <= 31 and per_image.std() > 2  # one sigma per image


def test_poisson_noise_variance(device):
    """Poisson noise of scale s on an image of 256 levels: variance s^2 x / 256 per pixel."""
    ramp = torch.arange(256, device=device, dtype=torch.float32) / 255
    x = (0.3 + 0.4 * ramp).repeat(16, 3, 64, 1)  # values 0.3 .. 0.7: clipping never acts
    x[:, :, 0, :] = torch.arange(256, device=device) / 255  # all 256 levels present: vals = 256
    t = degrade.RandomNoise(0.0, poisson_scale_range=(2.0, 2.0), gray_prob=0.0, seed=4)
    xr = (x * 255).round() / 255
    n = t(x) - x
    ratio = ((n - (xr - x)) ** 2)[:, :, 1:].mean() / (4 * xr[:, :, 1:] / 256).mean()
    assert abs(ratio.item() - 1) < 0.03


@pytest.mark.parametrize("codec", degrade.JPEG_CODECS)
def test_random_jpeg_compresses_and_decodes(codec, device):
    img = sample("astronaut")[:, 100:164, 200:280].float() / 255
    x = torch.stack([img, img.flip(-1)]).to(device)
    y = degrade.RandomJPEG((40, 40), codec=codec, seed=0)(x)
    assert y.shape == x.shape and y.dtype == torch.float32 and y.device == x.device
    assert ((y * 255).round() - y * 255).abs().max() < 1e-4  # decoded: 8-bit levels
    err = (y - x).abs()
    assert err.max() > 0.02 and err.mean() < 0.05  # changed, and still the picture
    if codec == "torchvision":  # JPEG's own round trip (libjpeg or nvjpeg)
        from torchvision.io import decode_jpeg, encode_jpeg
        again = decode_jpeg(encode_jpeg((x[0].cpu() * 255).round().to(torch.uint8), quality=40)).float() / 255
        assert (again - y[0].cpu()).abs().mean() < 0.01
    else:
        assert torch.equal(y, degrade.jpeg(x, 40))
    q90 = (degrade.RandomJPEG((90, 90), codec=codec, seed=0)(x) - x).abs().mean()
    assert q90 < err.mean()


def test_the_imgfilters_codec_agrees_with_libjpeg_within_a_level_or_two(device):
    # torchvision's codec on CPU tensors is libjpeg (on CUDA, nvjpeg: about 3 levels off
    # libjpeg on this photo, H200)
    img = sample("coffee")[:, :96, :128].float() / 255
    x = torch.stack([img, img.flip(-1)])
    quality = torch.tensor([35.0, 80.0])
    ours = degrade.jpeg(x.to(device), quality.to(device)).cpu()
    assert (ours - degrade.jpeg(x, quality, codec="torchvision")).abs().mean() * 255 < 1.5


def test_unseeded_transforms_follow_torch_manual_seed(gen, device):
    gt = random_image((2, 1, 16, 20), torch.float32, gen, device)
    t = degrade.RealESRGANDegradation(scale=2)
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        if device == "cuda":
            torch.cuda.manual_seed(3)
        runs.append(t(gt)[0])
    assert torch.equal(runs[0], runs[1])


def test_real_esrgan_pipeline_sizes_and_determinism(gen, device):
    gt = random_image((2, 1, 16, 20), torch.float32, gen, device)  # (grey: fewer planes for the interpreter)
    t = degrade.RealESRGANDegradation(scale=4, seed=11)
    lq, out_gt = t(gt)
    assert out_gt is gt and lq.shape == (2, 1, 4, 5) and lq.dtype == torch.float32
    assert torch.equal((lq * 255).round() / 255, lq) and lq.min() >= 0 and lq.max() <= 1
    assert torch.equal(degrade.RealESRGANDegradation(scale=4, seed=11)(gt)[0], lq)
    assert not torch.equal(t(gt)[0], lq)  # the same transform draws new parameters on the next call


def test_composes_with_v2_and_fuse(gen, device):
    x = random_image((2, 3, 12, 12), torch.uint8, gen, device)
    steps = lambda: [v2.ToDtype(torch.float32, scale=True), degrade.RandomKernelBlur(seed=3),
                     v2.Normalize([0.5] * 3, [0.25] * 3)]
    composed = v2.Compose(steps())(x)
    fused = imgfilters.fuse(steps())(x)
    assert (fused - composed).abs().max() <= 1e-6
    lq, gt = v2.Compose([v2.ToDtype(torch.float32, scale=True), degrade.RealESRGANDegradation(scale=2, seed=1)])(x[:1])
    assert lq.shape == (1, 3, 6, 6) and gt.dtype == torch.float32


@pytest.mark.parametrize("make,match", [
    (lambda: degrade.RandomKernelBlur(sigma=(3.0, 0.2)), "low <= high"),
    (lambda: degrade.RandomResize(resize_range=(0.2, 0.5)), "resize_range must hold 1"),
    (lambda: degrade.RandomResize(size_base=(0, 4)), "size_base"),
    (lambda: degrade.RandomKernelBlur(seed=2 ** 63), "seed must be an integer from"),
    (lambda: degrade.RandomKernelBlur(kernel_sizes=(7, 8)), "odd"),
    (lambda: degrade.RandomKernelBlur(kernel_prob=(1.0, 0.0)), "kernel_prob"),
    (lambda: degrade.RandomResize((0.5, 0.5)), "resize_prob"),
    (lambda: degrade.RandomResize(modes=("nearest",)), "modes"),
    (lambda: degrade.RandomNoise(sigma_range=(30, 1)), "low <= high"),
    (lambda: degrade.RandomNoise(gray_prob=1.5), "gray_prob"),
    (lambda: degrade.RandomJPEG((95, 30)), "low <= high"),
    (lambda: degrade.RandomJPEG((0, 50)), r"\[1, 100\]"),
    (lambda: degrade.RandomJPEG(codec="pil"), "codec"),
    (lambda: degrade.SincFilter(prob=-0.1), "prob"),
    (lambda: degrade.RealESRGANDegradation(scale=0), "scale"),
])
def test_bad_options_raise_when_made(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("seed", ["a", 1.5, True])
@pytest.mark.parametrize("make", [degrade.RandomNoise, degrade.RealESRGANDegradation])
def test_seeds_are_integers(make, seed):
    with pytest.raises(TypeError, match="seed must be an integer"):
        make(seed=seed)


def test_a_generator_as_seed_picks_one_from_its_state(gen, device):
    x = random_image((2, 3, 16, 16), torch.float32, gen, device)
    made = [degrade.RealESRGANDegradation(2, seed=torch.Generator().manual_seed(s)) for s in (3, 3, 4)]
    assert made[0].seed == made[1].seed != made[2].seed
    assert all(torch.equal(a, b) for a, b in zip(made[0](x), made[1](x)))
    caller = torch.Generator().manual_seed(3)
    first, second = degrade.RandomNoise(seed=caller), degrade.RandomNoise(seed=caller)
    assert first.seed == made[0].seed and second.seed != first.seed  # (each draw advances it)


def test_numpy_integers_are_seeds_and_scales(gen, device):
    x = random_image((1, 1, 8, 8), torch.float32, gen, device)
    assert torch.equal(degrade.RandomKernelBlur(seed=np.int64(5))(x), degrade.RandomKernelBlur(seed=5)(x))
    assert degrade.RealESRGANDegradation(np.int32(2), seed=np.uint8(1)).scale == 2
    with pytest.raises(TypeError, match="scale must be an integer, got float"):
        degrade.RealESRGANDegradation(2.0)


def test_images_smaller_than_the_scale_raise():
    with pytest.raises(ValueError, match="smaller than the scale"):
        degrade.RealESRGANDegradation(scale=4)(torch.rand(1, 3, 3, 8))


# Inputs a step cannot take are refused when the transform is called, naming what is wrong
# in the input as given, before any draw or launch (not later, with an intermediate's shape).
@pytest.mark.parametrize("make", [lambda: degrade.RealESRGANDegradation(scale=2, seed=0),
                                  lambda: degrade.RandomJPEG(seed=0)], ids=["RealESRGAN", "RandomJPEG"])
@pytest.mark.parametrize("shape", [(1, 4, 25, 25), (2, 25, 25)])
def test_jpeg_steps_refuse_other_channel_counts_at_the_call(make, shape):
    with count_launches() as launches, pytest.raises(
            ValueError, match=re.escape(f"img must have 1 or 3 channels, got {shape[-3]} (shape {shape})")):
        make()(torch.rand(shape))
    assert not launches


@pytest.mark.parametrize("make", [lambda: degrade.RealESRGANDegradation(scale=4, seed=4),
                                  lambda: degrade.RandomResize((0.0, 1.0, 0.0), seed=0)],
                         ids=["RealESRGAN", "RandomResize"])
def test_images_a_random_resize_would_empty_are_refused_at_the_call(make):
    # scaled by 0.15 (the lowest of resize_range), 6 rows would be none: some draws failed
    # in the middle of the pipeline
    t = make()
    with count_launches() as launches, pytest.raises(ValueError, match=r"img of 6 x 9 is too small.* 7 a side"):
        t(torch.rand(1, 1, 6, 9))
    assert not launches


def test_real_esrgan_takes_images_only():
    with pytest.raises(TypeError, match="takes one image batch, got Mask"):
        degrade.RealESRGANDegradation(scale=2)(tv_tensors.Mask(torch.ones(1, 8, 8)))


@pytest.mark.parametrize("codec", degrade.JPEG_CODECS)
@pytest.mark.parametrize("shape", [(3, 8, 8), (1, 4, 8, 8)])
def test_jpeg_refuses_what_it_cannot_code_naming_x(codec, shape):
    with pytest.raises(ValueError, match=re.escape(f"x must be a (B, C, H, W) batch with C = 1 or 3 (grey or RGB), "
                                                   f"got shape {shape}")):
        degrade.jpeg(torch.rand(shape), 50, codec=codec)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        degrade.jpeg(np.zeros((1, 3, 8, 8)), 50, codec=codec)


@pytest.mark.parametrize("call,error,match", [
    (lambda x: degrade.add_gaussian_noise(x[0], 5.0, False), ValueError, r"x must be a \(B, C, H, W\) batch"),
    (lambda x: degrade.add_gaussian_noise((x * 255).to(torch.uint8), 5.0, False), TypeError, "x must be a floating"),
    (lambda x: degrade.add_gaussian_noise(x, "5", False), TypeError, "sigma must be a real number"),
    (lambda x: degrade.add_gaussian_noise(x, torch.ones(3), False), ValueError, "sigma as a tensor"),
    (lambda x: degrade.add_poisson_noise(x, -1.0, False), ValueError, "scale must be >= 0"),
    (lambda x: degrade.add_poisson_noise(x, 1.0, torch.ones(2)), TypeError, "gray must be a bool"),
    (lambda x: degrade.add_poisson_noise(x, 1.0, torch.ones(3, dtype=torch.bool)), ValueError, "gray as a tensor"),
])
def test_noise_functions_check_their_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(torch.rand(2, 3, 4, 5))


def test_noise_functions_take_numbers_and_bools(device):
    x = torch.full((2, 3, 8, 8), 0.5, device=device)
    grey = degrade.add_gaussian_noise(x, 8.0, True, generator=torch.Generator(device).manual_seed(0))
    assert torch.equal(grey[:, 0], grey[:, 2]) and 0.01 < (grey - x).std() < 0.05
    sigma, gray = torch.tensor([8.0, 8.0], device=device), torch.tensor([True, True], device=device)
    same = degrade.add_gaussian_noise(x, sigma, gray, generator=torch.Generator(device).manual_seed(0))
    assert torch.equal(grey, same)
    assert torch.equal(degrade.add_poisson_noise(x, 0.0, False), x)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float16])
def test_other_dtypes_come_back_in_their_dtype(dtype, gen, device):
    x = random_image((1, 1, 8, 12), dtype, gen, device)
    lq, _ = degrade.RealESRGANDegradation(scale=2, seed=5)(x)
    assert lq.dtype == dtype and lq.shape == (1, 1, 4, 6)
    ref32, _ = degrade.RealESRGANDegradation(scale=2, seed=5)(_to_float(x))
    assert (_to_float(lq) - ref32).abs().max() <= 1 / 255 + 1e-3


def _to_float(x):
    return x.float() / 255 if x.dtype == torch.uint8 else x.float()
