"""GPU benchmark of imgfilters against its peers (the README's Performance tables).

    python scripts/benchmark.py [family ...] [--markdown] [--plot out.png]
    python scripts/benchmark.py cpu [--help]     # the CPU engine against OpenCV (benchmark_cpu.py)

Times every case with ``triton.testing.do_bench`` (median, ms) after a warm-up that also
runs the autotuner, and prints one row per case: op, shape, dtype, ms, the same call
replayed from a CUDA graph (no Python or launch overhead: the kernel's own time), GB/s
(the fewest bytes the op must move: input read once, output written once), % of the
measured device-to-device copy bandwidth, extra GPU memory beyond the output, the tile the
autotuner chose, and the speed-up over each installed peer (torchvision, torch, kornia;
OpenCV's CPU non-local means, timed once).

A case is ``(op, input, fn, peers)``; backward cases add ``{"graph": False}``: autograd's
backward cannot be captured in a CUDA graph, and a failed capture leaves the CUDA RNG
unusable for every case after it. ``{"warmup": n}`` runs n more calls before timing (a
random pipeline meets new sizes, and so new tunings, for its first calls);
``{"peer_memory": True}`` prints each peer's extra memory beside ours.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import triton
from PIL import Image

import imgfilters
import imgfilters.ops.nlm
import imgfilters.reference.separable

FAMILIES = {}


def family(name):
    def register(fn):
        FAMILIES[name] = fn
        return fn
    return register


def optional(module):
    try:
        return __import__(module)
    except Exception:
        return None


def nhwc(cvcuda, x, out_hw=None):
    """CV-CUDA's (src, dst) NHWC tensors for a (B, C, H, W) batch ``x`` (dst of ``out_hw``,
    default x's size)."""
    hwc = x.permute(0, 2, 3, 1).contiguous()
    out = hwc if out_hw is None else hwc.new_empty(hwc.shape[0], *out_hw, hwc.shape[3])
    return cvcuda.as_tensor(hwc, "NHWC"), cvcuda.as_tensor(torch.empty_like(out), "NHWC")


def image(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(shape, generator=g, device="cuda")
    return (x * 255).round().to(dtype) if dtype == torch.uint8 else x.to(dtype)


@family("separable")
def separable_cases():
    import torchvision.transforms.v2.functional as tvf
    kornia = optional("kornia")
    cases = []
    k4, hd16 = (1, 3, 2160, 3840), (16, 3, 1080, 1920)
    cvcuda = optional("cvcuda")
    for shape, dtype, k, sigma in [(k4, torch.float32, 15, 3.0), (k4, torch.uint8, 15, 3.0),
                                   (k4, torch.float32, 5, 1.0), (k4, torch.uint8, 5, 1.0),
                                   (hd16, torch.float32, 15, 3.0), (k4, torch.float32, 31, 6.0),
                                   (k4, torch.float32, 63, 12.0)]:
        x = image(shape, dtype)
        peers = {"torchvision": lambda x=x, k=k, s=sigma: tvf.gaussian_blur(x, [k, k], [s, s])}
        if dtype != torch.uint8:
            taps = imgfilters.reference.separable.gaussian_taps(k, sigma).to("cuda", dtype)
            wx = taps.view(1, 1, 1, k).expand(shape[1], 1, 1, k)
            wy = taps.view(1, 1, k, 1).expand(shape[1], 1, k, 1)
            def two_conv(x=x, wx=wx, wy=wy, k=k):
                p = torch.nn.functional.pad(x, (k // 2,) * 4, mode="reflect")
                p = torch.nn.functional.conv2d(p, wy, groups=x.shape[1])
                return torch.nn.functional.conv2d(p, wx, groups=x.shape[1])
            peers["torch conv2d x2"] = two_conv
            if kornia is not None:
                peers["kornia"] = lambda x=x, k=k, s=sigma: kornia.filters.gaussian_blur2d(
                    x, (k, k), (s, s), border_type="reflect")
        if cvcuda is not None and shape == k4 and k <= 15:  # (issue 42: 5x5 at least 1.5x CV-CUDA)
            src, dst = nhwc(cvcuda, x)
            peers["CV-CUDA"] = lambda src=src, dst=dst, k=k, s=sigma: cvcuda.gaussian_into(
                dst, src, (k, k), (s, s), border=cvcuda.Border.REFLECT101)
        cases.append((f"gaussian_blur {k}x{k}", x, lambda x=x, k=k, s=sigma: imgfilters.gaussian_blur(x, k, s), peers))
    x = image(k4, torch.float32)
    cases.append(("box_blur 9x9", x, lambda x=x: imgfilters.box_blur(x, 9),
                  {"kornia": lambda x=x: kornia.filters.box_blur(x, (9, 9), border_type="reflect")} if kornia else {}))
    cases.append(("unsharp_mask s=1.5", x, lambda x=x: imgfilters.unsharp_mask(x, 1.5, 1.0), {}))
    # GaussianBlur(per_sample=True): a sigma per image drawn from (0.1, 3), the batch in one
    # launch, against the same transform drawing one sigma for the batch (the issue names no
    # kernel size: 5, 9 and 19, which holds 3 sigma of the largest). Each call draws anew on
    # the host: no graph.
    from imgfilters import transforms as T
    batch = image((64, 3, 256, 256), torch.float32)
    for k in (5, 9, 19):
        per_sample = T.GaussianBlur(k, (0.1, 3.0), per_sample=True, seed=0)
        shared = T.GaussianBlur(k, (0.1, 3.0), seed=0)
        cases.append((f"GaussianBlur {k}x{k} per_sample", batch, lambda t=per_sample: t(batch),
                      {"one sigma": lambda t=shared: t(batch)}, {"graph": False}))
    xg = x.clone().requires_grad_()
    y = imgfilters.gaussian_blur(xg, 15, 3.0)
    g = torch.rand_like(y)
    cases.append(("gaussian_blur 15x15 backward", x,
                  lambda: torch.autograd.grad(y, xg, g, retain_graph=True), {}, {"graph": False}))
    cases.append(("gaussian_blur 15x15 forward + backward", x,  # (issue 42's row)
                  lambda: torch.autograd.grad(imgfilters.gaussian_blur(xg, 15, 3.0), xg, g), {}, {"graph": False}))
    return cases


@family("derivatives")
def derivative_cases():
    """Issue 41's rows: Sobel 3x3 dx=1 on 4K RGB uint8 (a float32 result) and float32; the
    gradient magnitude 3x3 on float32."""
    kornia = optional("kornia")
    cases = []
    for dtype in (torch.uint8, torch.float32):
        x = image((1, 3, 2160, 3840), dtype)
        w = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]], device="cuda").expand(3, 1, 3, 3)
        peers = {"torch conv2d": lambda x=x, w=w: torch.nn.functional.conv2d(
            torch.nn.functional.pad(x.float(), (1, 1, 1, 1), mode="reflect"), w, groups=3)}
        if kornia is not None and dtype == torch.float32:
            peers["kornia spatial_gradient"] = lambda x=x: kornia.filters.spatial_gradient(x, normalized=False)
        cases.append((f"sobel 3x3 dx=1 {str(dtype).split('.')[-1]}", x, lambda x=x: imgfilters.sobel(x, 1, 0), peers))
    x = image((1, 3, 2160, 3840), torch.float32)
    cases.append(("laplacian 3x3 float32", x, lambda x=x: imgfilters.laplacian(x, 3), {}))
    peers = {"torch (two sobel, hypot)": lambda x=x: torch.hypot(imgfilters.sobel(x, 1, 0), imgfilters.sobel(x, 0, 1))}
    if kornia is not None:
        peers["kornia sobel"] = lambda x=x: kornia.filters.sobel(x, normalized=False, eps=0.0)
    cases.append(("gradient_magnitude 3x3 float32", x, lambda x=x: imgfilters.gradient_magnitude(x), peers))
    cases.append(("gradient_magnitude + direction 3x3 float32", x,
                  lambda x=x: imgfilters.gradient_magnitude(x, direction=True), {}))
    return cases


@family("guided")
def guided_cases():
    """Issue 41's guided-filter rows on 4K RGB float32 (1x3x2160x3840), radius 8, eps 1e-2:
    a grey guide, a colour guide, the colour guide with subsample 4, and the colour guide's
    forward + backward to the image and the guide; next to kornia's ``guided_blur`` (its
    extra memory too: the issue bounds ours at a tenth of it) and He et al.'s filter written
    with torch box means (``avg_pool2d`` of the reflect-padded products, the colour guide's
    3 x 3 systems by ``torch.linalg.solve``)."""
    kornia = optional("kornia")
    F = torch.nn.functional
    r, eps = 8, 1e-2

    def torch_guided(x, g):
        def box(t):
            return F.avg_pool2d(F.pad(t, (r,) * 4, mode="reflect"), 2 * r + 1, stride=1)

        def cross(u, v, mean_u, mean_v):  # the box covariances of u's and v's channels, (B, I, J, H, W)
            uv = box((u[:, :, None] * v[:, None]).flatten(1, 2)).unflatten(1, (u.shape[1], v.shape[1]))
            return uv - mean_u[:, :, None] * mean_v[:, None]
        mean_g, mean_x = box(g), box(x)
        G, C = g.shape[1], x.shape[1]
        cov, sigma = cross(g, x, mean_g, mean_x), cross(g, g, mean_g, mean_g)
        sigma = sigma + eps * torch.eye(G, device=x.device)[None, :, :, None, None]
        a = torch.linalg.solve(sigma.permute(0, 3, 4, 1, 2), cov.permute(0, 3, 4, 1, 2)).permute(0, 3, 4, 1, 2)
        b = mean_x - (a * mean_g[:, :, None]).sum(1)
        return (box(a.flatten(1, 2)).unflatten(1, (G, C)) * g[:, :, None]).sum(1) + box(b)

    x = image((1, 3, 2160, 3840), torch.float32)
    grey, colour = image((1, 1, 2160, 3840), torch.float32, 1), image((1, 3, 2160, 3840), torch.float32, 2)
    cases = []
    for name, g, s in [("grey guide", grey, 1), ("colour guide", colour, 1), ("colour guide s=4", colour, 4)]:
        peers = {}
        if kornia is not None:
            peers["kornia"] = lambda g=g, s=s: kornia.filters.guided_blur(g, x, 2 * r + 1, eps, subsample=s)
        if s == 1:
            peers["torch box means"] = lambda g=g: torch_guided(x, g)
        cases.append((f"guided_filter r8 {name}", x, lambda g=g, s=s: imgfilters.guided_filter(
            x, g, r, eps, subsample=s), peers, {"peer_memory": True}))
    xg, gg = x.clone().requires_grad_(), colour.clone().requires_grad_()
    dy = torch.rand_like(x)
    peers = {}
    if kornia is not None:
        peers["kornia"] = lambda: torch.autograd.grad(kornia.filters.guided_blur(gg, xg, 2 * r + 1, eps), (xg, gg), dy)
    cases.append(("guided_filter r8 colour forward+backward", x,
                  lambda: torch.autograd.grad(imgfilters.guided_filter(xg, gg, r, eps), (xg, gg), dy), peers,
                  {"graph": False}))
    return cases


@family("bilateral")
def bilateral_cases():
    kornia, cvcuda = optional("kornia"), optional("cvcuda")
    k4, hd16 = (1, 3, 2160, 3840), (16, 3, 1080, 1920)
    cases = []
    # the disk windows with the l1 distance are cv2.bilateralFilter's and CV-CUDA's filter;
    # the square 15x15 l1 beside them (issue 42: the disk, fewer taps, at most its time)
    for shape, dtype, radius, window, dist in [
            (k4, torch.float32, 2, "square", "l2"), (k4, torch.float32, 4, "square", "l2"),
            (k4, torch.uint8, 7, "square", "l2"), (hd16, torch.float32, 4, "square", "l2"),
            (k4, torch.float32, 4, "disk", "l1"), (k4, torch.uint8, 4, "disk", "l1"),
            (k4, torch.float32, 7, "disk", "l1"), (k4, torch.uint8, 7, "disk", "l1"),
            (k4, torch.float32, 7, "square", "l1"), (k4, torch.uint8, 7, "square", "l1")]:
        x = image(shape, dtype)
        peers = {}
        if cvcuda is not None and window == "disk":  # (OpenCV's d = 2r + 1; sigma_color in the stored units)
            src, dst = nhwc(cvcuda, x)
            levels = 255.0 if dtype == torch.uint8 else 1.0
            peers["CV-CUDA"] = lambda src=src, dst=dst, d=2 * radius + 1, c=0.1 * levels: cvcuda.bilateral_filter_into(
                dst, src, d, c, 1.5, border=cvcuda.Border.REFLECT101)
        if kornia is not None and dtype != torch.uint8 and window == "square" and shape == k4 and radius <= 2:
            k = 2 * radius + 1
            peers["kornia"] = lambda x=x, k=k: kornia.filters.bilateral_blur(x, k, 0.1, (1.5, 1.5))
        op = f"bilateral {2 * radius + 1}x{2 * radius + 1} {window} {dist}"
        cases.append((op, x, lambda x=x, r=radius, w=window, d=dist: imgfilters.bilateral(
            x, 0.1, 1.5, radius=r, window=w, color_distance=d), peers))
    x, guide3 = image(k4, torch.float32), image(k4, torch.float32, seed=1)
    cases.append(("joint_bilateral 9x9, 3-channel guide", x,
                  lambda: imgfilters.joint_bilateral(x, guide3, 0.1, 1.5, radius=4), {}))
    x = image(k4, torch.float32).requires_grad_()
    y = imgfilters.bilateral(x, 0.1, 1.5, radius=4)
    g = torch.rand_like(y)
    cases.append(("bilateral 9x9 backward", x.detach(), lambda: torch.autograd.grad(y, x, g, retain_graph=True), {},
                  {"graph": False}))
    low = image((1, 1, 540, 960), torch.float32)
    guide = image(k4, torch.uint8)
    cases.append(("joint_bilateral_upsample 4x, 5x5", guide,
                  lambda: imgfilters.joint_bilateral_upsample(low, guide, 0.1, 1.0, radius=2), {}))
    low3, guide3 = image((1, 3, 540, 960), torch.float32), image(k4, torch.float32, seed=1)  # (issue 42's row)
    cases.append(("joint_bilateral_upsample 4x, 5x5, RGB float32 image and guide", guide3,
                  lambda: imgfilters.joint_bilateral_upsample(low3, guide3, 0.1, 1.0, radius=2), {}))
    return cases


@family("nlm")
def nlm_cases():
    cv2 = optional("cv2")
    k4, hd = (1, 3, 2160, 3840), (1, 1, 1080, 1920)
    cases = []
    for shape, dtype, patch, radius in [(k4, torch.float32, 7, 10), (k4, torch.uint8, 7, 10),
                                        (hd, torch.float32, 7, 10), (k4, torch.float32, 5, 17)]:
        x = image(shape, dtype)
        peers = {}
        if cv2 is not None and dtype == torch.uint8 and shape[1] == 3:
            hwc = x[0].permute(1, 2, 0).contiguous().cpu().numpy()
            peers["OpenCV CPU"] = lambda hwc=hwc, p=patch, r=radius: cv2.fastNlMeansDenoisingColored(
                hwc, None, 10, 10, p, 2 * r + 1)
        op = f"nl_means P{patch} {2 * radius + 1}x{2 * radius + 1}"
        cases.append((op, x, lambda x=x, p=patch, r=radius: imgfilters.nl_means(
            x, 0.04, sigma=0.04, patch_size=p, search_radius=r), peers))
    # automatic parameters on a photo with sigma 25 noise, next to the explicit call with the
    # patch and window they choose (it waits for sigma: no graph replay); the estimate alone
    # on the uint8 photo and on the same photo in float32 (issue 42's row)
    x = noisy_photo(k4, 25 / 255)
    sigma = float(imgfilters.estimate_noise(x))
    patch, radius, h = imgfilters.ops.nlm.parameters(sigma, 3)
    explicit = {f"explicit P{patch} R{radius}": lambda: imgfilters.nl_means(
        x, h, sigma=sigma, patch_size=patch, search_radius=radius)}
    cases.append(("nl_means automatic, sigma 25", x, lambda: imgfilters.nl_means(x), explicit, {"graph": False}))
    cases.append(("estimate_noise, sigma 25", x, lambda: imgfilters.estimate_noise(x), {}))
    xf = x.float() / 255
    cases.append(("estimate_noise, sigma 25, float32", xf, lambda: imgfilters.estimate_noise(xf), {}))
    return cases


def noisy_photo(shape, sigma, name="coffee"):
    """A sample photo resized to ``shape``'s (H, W), with Gaussian noise, as uint8."""
    path = Path(__file__).resolve().parent.parent / "samples" / f"{name}.png"
    clean = torch.from_numpy(np.asarray(Image.open(path)).copy()).permute(2, 0, 1).float().cuda() / 255
    clean = torch.nn.functional.interpolate(clean[None], size=shape[-2:], mode="bilinear")
    g = torch.Generator(device="cuda").manual_seed(0)
    noisy = clean + sigma * torch.randn(clean.shape, generator=g, device="cuda")
    return (noisy.clamp(0, 1) * 255).round().to(torch.uint8)


@family("resample")
def resample_cases():
    """The rows of issue 15, each next to F.interpolate and torchvision where they do the same."""
    import torch.nn.functional as F
    import torchvision.transforms.v2.functional as tvf
    bicubic, bilinear = tvf.InterpolationMode.BICUBIC, tvf.InterpolationMode.BILINEAR
    hd, k4, hd16 = (1, 3, 1080, 1920), (1, 3, 2160, 3840), (16, 3, 1080, 1920)
    cases = []
    for shape, dtype in [(hd, torch.float32), (hd, torch.uint8), (hd16, torch.float32)]:
        x = image(shape, dtype)
        peers = {"torchvision": lambda x=x: tvf.resize(x, [2160, 3840], bicubic, antialias=False)}
        if dtype != torch.uint8:
            peers["F.interpolate"] = lambda x=x: F.interpolate(x, scale_factor=2, mode="bicubic")
        cases.append(("upsample 2x bicubic", x, lambda x=x: imgfilters.upsample(x, 2.0, mode="bicubic"), peers))
    cvcuda = optional("cvcuda")
    for dtype in (torch.float32, torch.uint8):  # (issue 42: uint8 at least 1.2x CV-CUDA)
        x = image(hd, dtype)
        peers = {"torchvision": lambda x=x: tvf.resize(x, [2160, 3840], bilinear, antialias=False)}
        if dtype != torch.uint8:
            peers["F.interpolate"] = lambda x=x: F.interpolate(x, scale_factor=2, mode="bilinear")
        if cvcuda is not None:
            src, dst = nhwc(cvcuda, x, (2160, 3840))
            peers["CV-CUDA"] = lambda src=src, dst=dst: cvcuda.resize_into(dst, src, cvcuda.Interp.LINEAR)
        cases.append(("upsample 2x bilinear", x, lambda x=x: imgfilters.upsample(x, 2.0, mode="bilinear"), peers))
    x = image(hd, torch.float32)
    cases.append(("resize 2x lanczos", x, lambda x=x: imgfilters.resize(x, (2160, 3840), "lanczos"), {}))
    cases.append(("resize 1080p -> 1440x2560 bicubic", x,
                  lambda x=x: imgfilters.resize(x, (1440, 2560), "bicubic", antialias=False),
                  {"F.interpolate": lambda x=x: F.interpolate(x, size=(1440, 2560), mode="bicubic"),
                   "torchvision": lambda x=x: tvf.resize(x, [1440, 2560], bicubic, antialias=False)}))
    xg = x.clone().requires_grad_()
    g = torch.rand(1, 3, 2160, 3840, device="cuda")
    xt = x.clone().requires_grad_()
    cases.append(("upsample 2x bicubic forward + backward", x,
                  lambda: torch.autograd.grad(imgfilters.upsample(xg, 2.0, mode="bicubic"), xg, g),
                  {"F.interpolate": lambda: torch.autograd.grad(F.interpolate(xt, scale_factor=2, mode="bicubic"),
                                                                xt, g)}, {"graph": False}))
    x = image(k4, torch.float32)
    cases.append(("resize 4K -> 1080p bicubic antialias", x,
                  lambda x=x: imgfilters.resize(x, (1080, 1920), "bicubic", antialias=True),
                  {"F.interpolate": lambda x=x: F.interpolate(x, size=(1080, 1920), mode="bicubic", antialias=True),
                   "torchvision bilinear": lambda x=x: tvf.resize(x, [1080, 1920], antialias=True)}))
    cases.append(("imresize 4K x1/4", x, lambda x=x: imgfilters.imresize(x, 0.25), {}))
    x = image(k4, torch.uint8)
    cases.append(("resize 4K -> 224x224 bilinear antialias", x,
                  lambda x=x: imgfilters.resize(x, (224, 224), "bilinear", antialias=True),
                  {"torchvision": lambda x=x: tvf.resize(x, [224, 224], bilinear, antialias=True)}))
    return cases


@family("fusion")
def fusion_cases():
    """The issue's pipeline on a 4K uint8 batch: ToDtype -> Bilateral -> Normalize, fused into
    one launch, against the same steps run one after another, and kornia's chain."""
    from torchvision.transforms import v2

    from imgfilters import transforms as T
    kornia = optional("kornia")
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    steps = [v2.ToDtype(torch.float32, scale=True), T.Bilateral(0.1, radius=2), v2.Normalize(mean, std)]
    unfused, fused = v2.Compose(steps), imgfilters.fuse(steps)
    x = image((4, 3, 2160, 3840), torch.uint8)
    peers = {"unfused": lambda: unfused(x)}
    if kornia is not None:
        m = torch.tensor(mean, device="cuda")
        s = torch.tensor(std, device="cuda")
        peers["kornia"] = lambda: kornia.enhance.normalize(kornia.filters.bilateral_blur(
            x.float() / 255, (5, 5), 0.1, (1.5, 1.5), border_type="reflect", color_distance_type="l2"), m, s)
    return [("fused ToDtype+Bilateral 5x5+Normalize", x, lambda: fused(x), peers)]


@family("filter2d")
def filter2d_cases():
    """Issue 19: per-image 2-D kernels on super-resolution training batches, next to
    BasicSR's way (reflect-pad, one grouped F.conv2d over B*C planes; cuDNN, TF32 as torch's
    default allows)."""
    import torch.nn.functional as F

    def grouped_conv2d(x, k):
        b, c, h, w = x.shape
        r = k.shape[-1] // 2
        p = F.pad(x, (r, r, r, r), mode="reflect").reshape(1, b * c, h + 2 * r, w + 2 * r)
        return F.conv2d(p, k.repeat_interleave(c, 0)[:, None], groups=b * c).reshape(b, c, h, w)

    sr, k4 = (32, 3, 256, 256), (1, 3, 2160, 3840)
    cases = []
    for shape, ksize, dtype in [(sr, 21, torch.float32), (sr, 5, torch.float32), (sr, 31, torch.float32),
                                (sr, 21, torch.uint8), (k4, 21, torch.float32)]:
        x = image(shape, dtype)
        k = torch.rand(shape[0], ksize, ksize, device="cuda")
        k /= k.sum((1, 2), keepdim=True)
        peers = {} if dtype == torch.uint8 else {"grouped conv2d": lambda x=x, k=k: grouped_conv2d(x, k)}
        cases.append((f"filter2d {ksize}x{ksize} per image", x, lambda x=x, k=k: imgfilters.filter2d(x, k), peers))
    x = image(sr, torch.float32)
    xg, kg = x.clone().requires_grad_(), (torch.rand(32, 21, 21, device="cuda") / 441).requires_grad_()
    xt, kt = x.clone().requires_grad_(), kg.detach().clone().requires_grad_()
    g = torch.rand_like(x)
    cases.append(("filter2d 21x21 forward + backward (image, kernel)", x,
                  lambda: torch.autograd.grad(imgfilters.filter2d(xg, kg), (xg, kg), g),
                  {"grouped conv2d": lambda: torch.autograd.grad(grouped_conv2d(xt, kt), (xt, kt), g)},
                  {"graph": False}))
    return cases



@family("median")
def median_cases():
    """Issue 40: the median on 4K RGB (1x3x2160x3840), next to CV-CUDA (``cvcuda.median_blur``
    on the NHWC image, when installed; the issue's bound is its 0.93 ms for 5 x 5 uint8) and
    kornia (float32 only: its median_blur takes floats)."""
    kornia, cvcuda = optional("kornia"), optional("cvcuda")
    k4 = (1, 3, 2160, 3840)
    cases = []
    for ksize, dtype in [(5, torch.uint8), (3, torch.uint8), (7, torch.uint8), (15, torch.uint8),
                         (5, torch.float32)]:
        x = image(k4, dtype)
        peers = {}
        if cvcuda is not None and ksize <= 7:
            src, dst = nhwc(cvcuda, x)
            peers["CV-CUDA"] = lambda src=src, dst=dst, k=ksize: cvcuda.median_blur_into(dst, src, (k, k))
        if kornia is not None and dtype == torch.float32:
            peers["kornia"] = lambda x=x, k=ksize: kornia.filters.median_blur(x, (k, k))
        cases.append((f"median_blur {ksize}x{ksize}", x, lambda x=x, k=ksize: imgfilters.median_blur(x, k), peers))
    return cases

@family("morphology")
def morphology_cases():
    """Issue 40's morphology rows on 4K RGB (1x3x2160x3840): dilate 3x3 and 15x15 rectangles
    and a 15x15 ellipse on uint8, opening 5x5 on float32, and erode and closing 5x5 on
    uint8; next to CV-CUDA (``cvcuda.morphology_into`` on the NHWC image, rectangles only,
    when installed; opening and closing with their workspace) and kornia (float32 only:
    its morphology takes floats)."""
    kornia, cvcuda = optional("kornia"), optional("cvcuda")
    k4 = (1, 3, 2160, 3840)
    cases = []
    for op, ksize, shape, dtype in [("dilate", 3, "rect", torch.uint8), ("dilate", 15, "rect", torch.uint8),
                                    ("dilate", 15, "ellipse", torch.uint8), ("opening", 5, "rect", torch.float32),
                                    ("erode", 5, "rect", torch.uint8), ("closing", 5, "rect", torch.uint8)]:
        x = image(k4, dtype)
        peers = {}
        if cvcuda is not None and shape == "rect":
            src, dst = nhwc(cvcuda, x)
            work = nhwc(cvcuda, x)[1] if op in ("opening", "closing") else None
            kind = {"dilate": "DILATE", "erode": "ERODE", "opening": "OPEN", "closing": "CLOSE"}[op]
            peers["CV-CUDA"] = lambda src=src, dst=dst, work=work, k=ksize, kind=kind: cvcuda.morphology_into(
                dst, src, getattr(cvcuda.MorphologyType, kind), (k, k), (-1, -1), workspace=work,
                border=cvcuda.Border.REPLICATE)
        if kornia is not None and dtype == torch.float32:
            mask = imgfilters.structuring_element(shape, ksize).to("cuda", torch.float32)
            fn = {"dilate": kornia.morphology.dilation, "erode": kornia.morphology.erosion,
                  "opening": kornia.morphology.opening, "closing": kornia.morphology.closing}[op]
            peers["kornia"] = lambda x=x, fn=fn, mask=mask: fn(x, mask)
        cases.append((f"{op} {ksize}x{ksize} {shape} {str(dtype).split('.')[-1]}", x,
                      lambda x=x, op=op, k=ksize, shape=shape: imgfilters.morphology(x, op, k, shape=shape), peers))
    return cases


# ---- Real-ESRGAN's degradations the BasicSR way (torch ops), the peer of the "degrade" rows ----

_JPEG_Y = [[16, 11, 10, 16, 24, 40, 51, 61], [12, 12, 14, 19, 26, 58, 60, 55], [14, 13, 16, 24, 40, 57, 69, 56],
           [14, 17, 22, 29, 51, 87, 80, 62], [18, 22, 37, 56, 68, 109, 103, 77], [24, 35, 55, 64, 81, 104, 113, 92],
           [49, 64, 78, 87, 103, 121, 120, 101], [72, 92, 95, 98, 112, 100, 103, 99]]
_JPEG_C = [[17, 18, 24, 47, 99, 99, 99, 99], [18, 21, 26, 66, 99, 99, 99, 99], [24, 26, 56, 99, 99, 99, 99, 99],
           [47, 66, 99, 99, 99, 99, 99, 99]] + [[99] * 8] * 4


def diff_jpeg(x, quality):
    """BasicSR's DiffJPEG (``basicsr/utils/diffjpeg.py``) in its steps: YCbCr, 4:2:0 chroma,
    8x8 DCT, quantisation by the standard tables scaled by each image's quality, its
    differentiable rounding, and back. x: (B, 3, H, W) in [0, 1], H and W multiples of 16."""
    import math
    b, _, h, w = x.shape
    dev = x.device
    q = quality.view(b, 1, 1, 1, 1, 1)  # per image, over (B, C, blocks_h, blocks_w, 8, 8)
    factor = torch.where(q < 50, 5000.0 / q, 200.0 - 2 * q) / 100.0
    m = torch.tensor([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]], device=dev)
    ycc = torch.einsum("ij,bjhw->bihw", m, x * 255) + torch.tensor([0.0, 128.0, 128.0], device=dev).view(1, 3, 1, 1)
    planes = [ycc[:, :1], torch.nn.functional.avg_pool2d(ycc[:, 1:], 2)]
    k = torch.arange(8, device=dev, dtype=torch.float32)
    cos = torch.cos((2 * k[:, None] + 1) * k[None, :] * math.pi / 16)  # (x, u)
    alpha = torch.ones(8, device=dev)
    alpha[0] = 1 / math.sqrt(2)
    scale = torch.outer(alpha, alpha) * 0.25
    out = []
    for plane, table in zip(planes, (_JPEG_Y, _JPEG_C)):
        t = torch.tensor(table, device=dev, dtype=torch.float32)
        n, c, hh, ww = plane.shape
        blocks = (plane - 128).reshape(n, c, hh // 8, 8, ww // 8, 8).permute(0, 1, 2, 4, 3, 5)
        d = torch.einsum("...xy,xu,yv->...uv", blocks, cos, cos) * scale
        d = d / (t * factor)
        r = torch.round(d)
        d = (r + (d - r) ** 3) * (t * factor)  # BasicSR's diff_round, then dequantise
        blocks = torch.einsum("...uv,xu,yv->...xy", d * scale, cos, cos) + 128
        out.append(blocks.permute(0, 1, 2, 4, 3, 5).reshape(n, c, hh, ww))
    cbcr = out[1].repeat_interleave(2, -2).repeat_interleave(2, -1)
    ycc = torch.cat([out[0], cbcr], 1) - torch.tensor([0.0, 128.0, 128.0], device=dev).view(1, 3, 1, 1)
    inv = torch.tensor([[1.0, 0.0, 1.402], [1.0, -0.344136, -0.714136], [1.0, 1.772, 0.0]], device=dev)
    return (torch.einsum("ij,bjhw->bihw", inv, ycc) / 255).clamp(0, 1)


def basicsr_degradation(gt, k1, k2, sinc, rng, with_jpeg=True):
    """Real-ESRGAN's ``feed_data`` with torch ops as BasicSR runs it: grouped F.conv2d blurs,
    F.interpolate, its noise functions (torch.unique per image for Poisson), DiffJPEG (the
    input padded to a multiple of 16, as BasicSR's DiffJPEG pads; not ``with_jpeg``: the
    same steps without it, issue 42's comparison). The kernels come made (BasicSR makes
    them in the data loader's workers, with numpy): not timed here."""
    import math
    import torch.nn.functional as F

    def filter2d(x, k):
        b, c, h, w = x.shape
        r = k.shape[-1] // 2
        p = F.pad(x, (r, r, r, r), mode="reflect").reshape(1, b * c, h + 2 * r, w + 2 * r)
        return F.conv2d(p, k.repeat_interleave(c, 0)[:, None], groups=b * c).reshape(b, c, h, w)

    def u(lo=0.0, hi=1.0):
        return lo + (hi - lo) * torch.rand((), generator=rng).item()

    def pick(options, weights=None):
        w = torch.ones(len(options)) if weights is None else torch.tensor(weights, dtype=torch.float)
        return options[int(torch.multinomial(w, 1, generator=rng))]

    def noise(x, sigma_range, scale_range):
        b = x.shape[0]
        gray = (torch.rand(b, device=x.device) < 0.4).float().view(b, 1, 1, 1)
        if u() < 0.5:
            lo, hi = sigma_range
            sigma = (torch.rand(b, device=x.device) * (hi - lo) + lo).view(b, 1, 1, 1)
            n_gray = torch.randn(*x.shape[2:], device=x.device) * sigma / 255.0
            n = torch.randn_like(x) * sigma / 255.0
            n = n * (1 - gray) + n_gray * gray
        else:
            scale = torch.rand(b, device=x.device) * (scale_range[1] - scale_range[0]) + scale_range[0]
            g = (0.299 * x[:, :1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:])
            n = []
            for img in (g, x):
                img = torch.clamp((img * 255.0).round(), 0, 255) / 255.0
                vals = [2 ** math.ceil(math.log2(len(torch.unique(img[i])))) for i in range(b)]
                vals = img.new_tensor(vals).view(b, 1, 1, 1)
                n.append(torch.poisson(img * vals) / vals - img)
            n = (n[1] * (1 - gray) + n[0].expand_as(x) * gray) * scale.view(b, 1, 1, 1)
        return torch.clamp(x + n, 0, 1)

    def jpeg(x):
        if not with_jpeg:
            return x
        q = torch.rand(x.shape[0], device=x.device) * 65 + 30
        h, w = x.shape[-2:]
        p = F.pad(x.clamp(0, 1), (0, -w % 16, 0, -h % 16))
        return diff_jpeg(p, q)[..., :h, :w]

    ori_h, ori_w = gt.shape[-2:]
    out = filter2d(gt, k1)
    way = pick(["up", "down", "keep"], [0.2, 0.7, 0.1])
    scale = u(1, 1.5) if way == "up" else u(0.15, 1) if way == "down" else 1
    out = F.interpolate(out, scale_factor=scale, mode=pick(["area", "bilinear", "bicubic"]))
    out = jpeg(noise(out, (1, 30), (0.05, 3)))
    if u() < 0.8:
        out = filter2d(out, k2)
    way = pick(["up", "down", "keep"], [0.3, 0.4, 0.3])
    scale = u(1, 1.2) if way == "up" else u(0.3, 1) if way == "down" else 1
    out = F.interpolate(out, size=(int(ori_h / 4 * scale), int(ori_w / 4 * scale)),
                        mode=pick(["area", "bilinear", "bicubic"]))
    out = noise(out, (1, 25), (0.05, 2.5))
    final = lambda y: filter2d(F.interpolate(y, size=(ori_h // 4, ori_w // 4),
                                             mode=pick(["area", "bilinear", "bicubic"])), sinc)
    out = jpeg(final(out)) if u() < 0.5 else final(jpeg(out))
    return torch.clamp((out * 255.0).round(), 0, 255) / 255.0


@family("degrade")
def degrade_cases():
    """Issue 19: Real-ESRGAN's degradation of a 32 x 3 x 256 x 256 batch of patches,
    against the same steps written with torch ops (BasicSR's way), and two of its steps."""
    from imgfilters import degrade
    gt = image((32, 3, 256, 256), torch.float32)
    g = torch.Generator(device="cuda").manual_seed(0)
    k1, k2 = degrade.random_kernels(32, generator=g), degrade.random_kernels(32, generator=g, sigma=(0.2, 1.5))
    sinc = degrade.make_kernels(degrade.sample_sinc_params(32, generator=g))
    pipeline = degrade.RealESRGANDegradation(scale=4, seed=0)
    rng = torch.Generator().manual_seed(0)
    real_codec = degrade.RealESRGANDegradation(scale=4, jpeg_codec="torchvision", seed=0)
    basicsr = {"BasicSR torch ops": lambda: basicsr_degradation(gt, k1, k2, sinc, rng),
               "BasicSR torch ops without JPEG": lambda: basicsr_degradation(gt, k1, k2, sinc, rng, False)}
    cases = [("RealESRGANDegradation(scale=4)", gt, lambda: pipeline(gt)[0], basicsr,
              {"graph": False, "warmup": 200}),
             ("RealESRGANDegradation(scale=4, jpeg_codec='torchvision')", gt, lambda: real_codec(gt)[0], basicsr,
              {"graph": False, "warmup": 50})]
    q = torch.full((32,), 50.0, device="cuda")
    cases.append(("jpeg quality 50", gt, lambda: degrade.jpeg(gt, q),
                  {"BasicSR DiffJPEG": lambda: diff_jpeg(gt, q),
                   "torchvision nvjpeg": lambda: degrade.jpeg(gt, q, codec="torchvision")}))
    scale, gray = torch.full((32,), 1.0, device="cuda"), torch.zeros(32, dtype=torch.bool, device="cuda")
    cases.append(("poisson noise", gt, lambda: degrade.add_poisson_noise(gt, scale, gray), {}, {"graph": False}))
    cases.append(("random_kernels 32 x 21 x 21", gt, lambda: degrade.random_kernels(32, generator=g), {}))
    return cases


def tuned_tile(family_name):
    """The tile the family's tuning chose last (NLM: its one tile), for the notes (None
    when untuned)."""
    from imgfilters.kernels import bilateral, filter2d, median, nlm, separable
    from imgfilters.kernels.core.launch import tile_config
    if family_name == "nlm":
        cfg = tile_config(**nlm.TILE)
    else:
        tuning = {"separable": separable.scratch_tuning, "bilateral": bilateral.forward_tuning,
                  "filter2d": filter2d.tuning, "median": median.tuning}.get(family_name)
        cfg = getattr(tuning, "last", None)
    if cfg is None:
        return None
    k = cfg.kwargs
    if "SEG" in k:  # strip kernels: rows a segment x columns a strip
        return f"{k['SEG']}x{k['T'] * k['S']}/S{k['S']}/{cfg.num_warps}w"
    return f"{k.get('BH', k.get('TH', k.get('K')))}x{k.get('BW', k.get('TW', k.get('LANES')))}/{cfg.num_warps}w"


def peer_ms(name, fn):
    """A peer's time: do_bench's median on the GPU; for a CPU peer (seconds a call), one
    timed call after a warm-up."""
    fn()
    if "CPU" not in name:
        return triton.testing.do_bench(fn, return_mode="median")
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def copy_bandwidth():
    """Device-to-device copy of 1 GiB: bytes read + written per second."""
    a = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    ms = triton.testing.do_bench(lambda: b.copy_(a), return_mode="median")
    return 2 * a.numel() * 4 / ms / 1e6


def extra_memory(fn, out_bytes):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    r = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del r
    return max(0, peak - out_bytes)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["cpu"]:  # the CPU engine against OpenCV: scripts/benchmark_cpu.py
        import benchmark_cpu
        return benchmark_cpu.main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("families", nargs="*", help=f"families to run (default all: {', '.join(FAMILIES)})")
    ap.add_argument("--markdown", action="store_true", help="print a README table")
    ap.add_argument("--plot", metavar="PNG", help="save a bar chart of the times")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmark.py needs a CUDA GPU (timings on the CPU interpreter mean nothing)")
    names = args.families or list(FAMILIES)
    for n in names:
        if n not in FAMILIES:
            ap.error(f"unknown family {n!r}; known: {', '.join(FAMILIES)}")
    bw = copy_bandwidth()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"copy bandwidth {bw:.0f} GB/s")
    rows = []
    cases = [(n, case) for n in names for case in FAMILIES[n]()]  # inputs drawn before any capture
    for n, (op, x, fn, peers, *opts) in cases:
        result = fn()  # compile + autotune
        for _ in range((opts[0] if opts else {}).get("warmup", 0)):  # random pipelines: every variant
            fn()
        ms = triton.testing.do_bench(fn, return_mode="median")
        tile = tuned_tile(n)
        graph_ms = float("nan")
        if (opts[0] if opts else {}).get("graph", True):
            try:
                graph_ms = triton.testing.do_bench_cudagraph(fn, return_mode="median")
            except Exception as e:  # an op that cannot be captured: report, go on
                print(f"  (graph capture failed on {op}: {type(e).__name__}: {e})")
        in_bytes = x.numel() * x.element_size()
        outputs = result if isinstance(result, tuple) else (result,)
        out_bytes = sum(t.numel() * t.element_size() if isinstance(t, torch.Tensor) else in_bytes for t in outputs)
        del result
        gbs = (in_bytes + out_bytes) / ms / 1e6
        extra = extra_memory(fn, out_bytes) / 2 ** 20
        ups = {}
        for peer, pfn in peers.items():
            try:
                ups[peer] = (peer_ms(peer, pfn),)
                if (opts[0] if opts else {}).get("peer_memory"):
                    print(f"  ({peer}: extra {extra_memory(pfn, out_bytes) / 2 ** 20:.1f} MiB, ours {extra:.1f})")
            except Exception as e:  # a peer that cannot run this case is reported, not fatal
                ups[peer] = (float("nan"),)
                print(f"  ({peer} failed on {op}: {type(e).__name__})")
        rows.append((op, "x".join(map(str, x.shape)), str(x.dtype).replace("torch.", ""), ms, gbs,
                     100 * gbs / bw, extra, {p: t[0] for p, t in ups.items()}, graph_ms, tile))
        r = rows[-1]
        peer_txt = "  ".join(f"{p} {t:.3f} ms ({t / ms:.1f}x)" for p, t in r[7].items())
        print(f"{r[0]:30s} {r[1]:>14s} {r[2]:>8s} {r[3]:8.4f} ms (graph {r[8]:.4f}) {r[4]:7.0f} GB/s "
              f"{r[5]:5.1f}% extra {r[6]:6.1f} MiB  [{r[9]}]  {peer_txt}", flush=True)
    if args.markdown:
        print("\n| op | shape | dtype | ms | graph ms | GB/s | % copy bw | extra MiB | peers (ms, our speed-up) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            peer_txt = "; ".join(f"{p} {t:.3f} ({t / r[3]:.1f}x)" for p, t in r[7].items()) or "-"
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.4f} | {r[8]:.4f} | {r[4]:.0f} | {r[5]:.0f}% | {r[6]:.1f} "
                  f"| {peer_txt} |")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        labels = [f"{r[0]}\n{r[2]} {r[1]}" for r in rows]
        fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1))
        ax.barh(labels, [r[3] for r in rows], label="imgfilters")
        ax.set_xlabel("ms (median, do_bench)")
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(args.plot)


if __name__ == "__main__":
    main()
