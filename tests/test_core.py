"""The kernel core on its own: borders, typed load/store, pointwise chains."""
import json
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import imgfilters
from imgfilters import _image
from imgfilters.kernels.core import borders, neighbourhood
from imgfilters.ops import pointwise as pw
from imgfilters.reference.borders import border_indices, fold, pad

from helpers import KERNEL_DTYPES, assert_matches, random_image

NUMPY_MODE = {"reflect": "reflect", "symmetric": "symmetric", "replicate": "edge", "constant": "constant"}


@triton.jit
def _remap_kernel(I, O, n, count, BORDER: tl.constexpr, NEAR: tl.constexpr, BLOCK: tl.constexpr):
    k = tl.arange(0, BLOCK)
    i = tl.load(I + k, mask=k < count)
    if NEAR:
        j = borders.remap_near(i, n, BORDER)
    else:
        j = borders.remap(i, n, BORDER)
    tl.store(O + k, j, mask=k < count)


@pytest.mark.parametrize("border", borders.BORDERS)
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_border_indices_match_numpy_pad(border, n):
    # pads up to 5x the axis: the reflection must repeat exactly as numpy's does
    before, after = 5 * n + 2, 4 * n + 3
    a = np.arange(n) + 10
    kw = {"constant_values": -1} if border == "constant" else {}
    expected = np.pad(a, (before, after), mode=NUMPY_MODE[border], **kw)
    idx = border_indices(n, before, after, border).numpy()
    got = np.where(idx >= 0, a[np.clip(idx, 0, None)], -1)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("border", borders.BORDERS)
@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("near", [False, True])
def test_kernel_remap_matches_reference(border, n, near, device):
    # remap folds any distance; remap_near is exact within one image size (-n < i < 2n - 1)
    i = torch.arange(-6 * n - 3, 7 * n + 4, dtype=torch.int32, device=device)
    out = torch.empty_like(i)
    _remap_kernel[(1,)](i, out, n, i.numel(), BORDER=borders.border_code(border), NEAR=near,
                        BLOCK=triton.next_power_of_2(i.numel()))
    ref = border_indices(n, 6 * n + 3, 6 * n + 4, border)
    # constant: the kernel clamps (the caller substitutes the value); elsewhere identical
    exact = ref >= 0
    if near:
        exact &= (i.cpu() > -n) & (i.cpu() < 2 * n - 1)
    assert exact.sum() >= n
    assert torch.equal(out.cpu().long()[exact], ref[exact])
    assert ((out >= 0) & (out < n)).all()  # never an out-of-bounds index, exact or not


@pytest.mark.parametrize("border", borders.BORDERS)
def test_fold_is_the_adjoint_of_pad(border, gen):
    # <pad x, z> = <x, fold z>: pads wider than the image included (the constant border
    # with value 0 is the linear part of constant padding)
    x = torch.rand(2, 5, 4, generator=gen, dtype=torch.float64)
    z = torch.rand(2, 5 + 9, 4 + 13, generator=gen, dtype=torch.float64)
    lhs = (pad(x, 4, 5, 6, 7, border, 0.0) * z).sum()
    rhs = (x * fold(z, 5, 4, 4, 6, border)).sum()
    assert torch.allclose(lhs, rhs)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_load_store_round_trip_is_exact(dtype, gen, device):
    x = random_image((2, 3, 9, 33), dtype, gen, device)
    x_before = x.clone()
    y = imgfilters.pointwise(x, [])
    assert torch.equal(y.cpu(), x_before.cpu())
    assert torch.equal(x, x_before)


@pytest.mark.parametrize("src", KERNEL_DTYPES)
@pytest.mark.parametrize("dst", KERNEL_DTYPES)
def test_dtype_conversion_scales_rounds_and_saturates(src, dst, gen, device):
    x = random_image((1, 2, 5, 17), src, gen, device)
    steps = [pw.scale(1.7)]  # pushes values out of range: integer outputs must saturate
    y = imgfilters.pointwise(x, steps, dtype=dst)
    assert_matches(y, pw.reference_chain(steps, _image.to_unit(x.cpu())), dst)


def test_integer_store_rounds_half_to_even(device):
    # 0.5 / 255 ... exact ties after scaling: 0.5, 1.5, 2.5 levels
    levels = torch.tensor([0.5, 1.5, 2.5, 3.5, 254.5, 255.5, -0.5, 300.0], dtype=torch.float32)
    y = imgfilters.pointwise((levels / 255).reshape(1, 1, 1, -1).to(device), [], dtype=torch.uint8)
    assert y.flatten().tolist() == [0, 2, 2, 4, 254, 255, 0, 255]


@triton.jit
def _neighbourhood_kernel(X, O, n, border_value, PRO: tl.constexpr, pro_args, SCALE: tl.constexpr,
                          BORDER: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK) - 3  # three pixels beyond each edge
    v = neighbourhood.load(X + borders.remap(i, n, BORDER), borders.inside(i, n), border_value, 0, PRO, pro_args,
                           SCALE, BORDER)
    tl.store(O + tl.arange(0, BLOCK), v)


@pytest.mark.parametrize("scale", ["unit", "linear", "biased"])
@pytest.mark.parametrize("border", ["constant", "replicate"])
def test_neighbourhood_order_remap_load_prologue_border_value(scale, border, device):
    # the constant border's value is a pixel of the image after the prologue: not doubled here
    x = torch.tensor([0, 51, 102, 204, 255], dtype=torch.uint8, device=device)
    out = torch.empty(16, dtype=torch.float32, device=device)
    code, mode = borders.border_code(border), getattr(neighbourhood, scale.upper())
    chain = pw.kernel_chain([pw.scale(2.0)] if scale != "biased" else [], 1, device)
    _neighbourhood_kernel[(1,)](x, out, 5, 0.25, *chain, SCALE=mode, BORDER=code, BLOCK=16)
    stored = x.cpu().double()
    if scale == "biased":
        inner = stored + 2 ** 23
    else:
        inner = 2 * stored / 255
    idx = border_indices(5, 3, 8, border)
    expected = torch.where(idx >= 0, inner[idx.clamp(min=0)], torch.tensor(0.25, dtype=torch.float64))
    assert torch.allclose(out.cpu().double(), expected, rtol=1e-6)


CHAINS = {
    "normalize": [pw.normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])],
    "clamp+gamma": [pw.scale(1.3), pw.clamp(0.1, 0.9), pw.gamma(2.2)],
    "srgb round trip": [pw.srgb_to_linear(), pw.linear_to_srgb()],
    "srgb decode": [pw.srgb_to_linear()],
}


@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_chain_matches_plain_torch(chain, dtype, gen, device):
    x = random_image((2, 3, 11, 20), dtype, gen, device)
    y = imgfilters.pointwise(x, CHAINS[chain], dtype=torch.float32)
    assert_matches(y, pw.reference_chain(CHAINS[chain], _image.to_unit(x.cpu())), torch.float32)


def test_step_references_match_torchvision(gen):
    from torchvision.transforms.v2 import functional as F
    x = torch.rand(2, 3, 6, 7, generator=gen, dtype=torch.float64)
    mean, std = [0.2, 0.5, 0.7], [0.3, 0.1, 0.9]
    assert torch.allclose(pw.normalize(mean, std).reference(x), F.normalize(x, mean, std))
    assert torch.allclose(pw.gamma(0.7).reference(x), F.adjust_gamma(x, 0.7))
    assert torch.allclose(pw.srgb_to_linear().reference(pw.linear_to_srgb().reference(x)), x)


def test_chain_on_channels_last_and_views(gen, device):
    x = random_image((2, 3, 12, 40), torch.uint8, gen, device).to(memory_format=torch.channels_last)
    steps = CHAINS["normalize"]
    y = imgfilters.pointwise(x, steps, dtype=torch.float32)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert_matches(y, pw.reference_chain(steps, _image.to_unit(x.cpu())), torch.float32)
    view = x[:, :, 2:9, 5:31]
    assert_matches(imgfilters.pointwise(view, steps, dtype=torch.float32),
                   pw.reference_chain(steps, _image.to_unit(view.cpu())), torch.float32)


def test_views_whose_leading_dims_cannot_merge(gen, device):
    x = random_image((3, 2, 2, 5, 7), torch.uint8, gen, device).transpose(0, 1)
    assert torch.equal(imgfilters.pointwise(x, []).cpu(), x.cpu())


def test_large_strides_use_64_bit_offsets(device):
    # a 2x4 view whose column stride puts its last pixels 2.25 * 2**30 elements in:
    # int32 offsets would overflow there
    s = 3 * 2 ** 28
    buf = torch.zeros(3 * s + 2, dtype=torch.uint8, device=device)
    view = buf.as_strided((1, 1, 2, 4), (0, 0, 1, s))
    view_vals = torch.tensor([[10, 20, 30, 40], [50, 60, 70, 80]], dtype=torch.uint8, device=device)
    for i in range(2):
        for j in range(4):
            buf[i + j * s] = view_vals[i, j]
    assert torch.equal(imgfilters.pointwise(view, [pw.scale(2.0)])[0, 0].cpu(), 2 * view_vals.cpu())


@pytest.mark.parametrize("bad", [[pw.normalize([0.1, 0.2, 0.3], [1, 1, 1])]])
def test_reference_path_raises_like_the_kernels(bad, monkeypatch):
    x = torch.rand(2, 4, 4)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="channels"):
        imgfilters.pointwise(x, bad)


def test_pointwise_rejects_bad_arguments(device):
    x = torch.rand(3, 4, 4, device=device)
    with pytest.raises(TypeError, match="steps"):
        imgfilters.pointwise(x, [lambda v: v])
    with pytest.raises(ValueError, match="channels"):
        imgfilters.pointwise(x[:2], [pw.normalize([0.1, 0.2, 0.3], [1, 1, 1])])
    with pytest.raises(ValueError, match="std"):
        pw.normalize([0.1], [0.0])
    with pytest.raises(ValueError, match="lo <= hi"):
        pw.clamp(1.0, 0.0)
    with pytest.raises(TypeError, match="dtype"):
        imgfilters.pointwise(x, [], dtype=torch.int32)
    with pytest.raises(TypeError, match="mean"):
        pw.normalize(None, [1.0])


def test_hwc_strided_images_keep_their_layout(gen, device):
    # (C, H, W) with HWC strides, as pil_to_tensor and v2.ToImage give: channels-last planes
    x = random_image((9, 11, 3), torch.uint8, gen, device).permute(2, 0, 1)
    for y in (imgfilters.gaussian_blur(x, 3, 1.0), imgfilters.resize(x, [5, 6]), imgfilters.bilateral(x, 0.1)):
        assert y.permute(1, 2, 0).is_contiguous()


# ---- the launcher (kernels/core/launch.py) ---------------------------------------------------

def test_launch_keys_separate_what_triton_specialises_on():
    from imgfilters.kernels.core import launch
    x = torch.zeros(64)
    key = lambda *args: launch._launch_key(_remap_kernel, args, dict(BLOCK=16), None, 0)
    assert key(x, 7, 1.5) == key(torch.zeros(64), 7, 2.5)  # new data and float values: same kernel
    assert key(x, 7, 1.5) != key(x[1:], 7, 1.5)  # a misaligned pointer
    assert key(x, 7, 1.5) != key(x.int(), 7, 1.5)  # a dtype
    assert key(x, 16, 1.5) != key(x, 17, 1.5) != key(x, 1, 1.5)  # integers exactly
    assert key(x, (x, 2), 1.5) != key(x, (x[1:], 2), 1.5)  # inside tuples (chains' arguments)
    assert key(x, (x, 2), 1.5) == key(torch.ones(64), (torch.ones(64), 2), 0.5)
    assert key(x, (64, 1), 1.5) != key(x, (64, 2), 1.5) != key(x, (16, 2), 1.5)  # strides: exactly
    assert key(x, (), 1.5) == key(x, (), 2.5) != key(x, (1,), 1.5)
    with pytest.raises(TypeError):  # unhashable: the launch goes without the cache
        hash(key(x, [1], 1.5))


def test_new_sizes_that_triton_specialises_alike_take_its_kernel(monkeypatch):
    """A launch with a new key whose integers Triton would specialise as before (new sizes
    and strides: not 1, as divisible by 16, int32) runs the kernel compiled for the first,
    without Triton's binder; an integer that becomes 1 or divisible by 16, an int64, a
    dtype, a misaligned tensor or another tile go through Triton (a compile of their own)."""
    from imgfilters.kernels.core import launch
    compiles, runs = [], []

    class Compiled:
        def __getitem__(self, grid):
            return lambda *args: runs.append(args)

    class Kernel:  # (what ``launch`` uses of a JITFunction)
        fn, arg_names = "kernel", ["X", "n", "strides", "BLOCK"]

        def __getitem__(self, grid):
            return lambda *args, **options: compiles.append(args) or Compiled()

    monkeypatch.setattr(launch, "interpreted", lambda x: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: -1)
    monkeypatch.setattr(launch, "_launches", {})
    monkeypatch.setattr(launch, "_alike", {})
    kernel, tile, x = Kernel(), launch.tile_config(BLOCK=16), torch.zeros(64)

    def compiled_after(t, n, strides, config=tile):
        launch.launch(kernel, (1,), (t, n, strides), {}, t, config)
        return len(compiles)

    assert compiled_after(x, 100, (64, 1)) == 1
    assert [compiled_after(x, n, s) for n, s in [(100, (64, 1)), (37, (48, 1)), (2 ** 20 + 3, (4096, 1))]] == [1, 1, 1]
    assert compiled_after(torch.zeros(64), 101, (32, 1)) == 1  # new data too
    assert compiled_after(x, 96, (64, 1)) == 2  # divisible by 16
    assert compiled_after(x, 1, (64, 1)) == 3  # 1, a constant to Triton
    assert compiled_after(x, 100, (64, 2)) == 4  # a column stride no longer 1
    assert compiled_after(x, 2 ** 31 + 3, (64, 1)) == 5  # int64
    assert compiled_after(x.int(), 100, (64, 1)) == 6
    assert compiled_after(x[1:], 100, (64, 1)) == 7  # misaligned
    assert compiled_after(x, 100, (64, 1), launch.tile_config(BLOCK=32)) == 8
    assert compiled_after(x, 100, (64, 1)) == 8 and compiled_after(x, 2 ** 31 + 5, (64, 1)) == 8
    # (14 launches, 8 compiles; the rest ran with their own arguments and the tile's constexpr)
    assert len(runs) == 6 and runs[2] == (x, 2 ** 20 + 3, (4096, 1), 16)


def test_tuned_tiles_are_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    """A tile chosen by timing is written to the machine's tuning file; a new process (a
    new ``Tuning``) takes it without timing, whatever its own timings would say, until the
    kernel's source, its key, the candidates or the file change."""
    from imgfilters.kernels.core import launch
    monkeypatch.setenv("IMGFILTERS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H200 (test)")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    tiles = [launch.tile_config(BH=8), launch.tile_config(BH=16, num_warps=8), launch.tile_config(BH=32)]
    times, timed = {8: 3.0, 16: 1.0, 32: 2.0}, []

    def do_bench(fn, warmup, rep):
        bh = fn()
        timed.append(bh)
        return times[bh]
    monkeypatch.setattr(triton.testing, "do_bench", do_bench)

    class Kernel:  # what Tuning reads of a JITFunction; a launch returns its tile's BH
        arg_names, fn, cache_key = ["X", "N"], _remap_kernel.fn, "source-1"

        def __getitem__(self, grid):
            return lambda *args, **options: options["BH"]
    kernel, x = Kernel(), torch.zeros(4)

    def tile(n, candidates=tiles):
        return launch.Tuning(lambda meta: candidates, key=["N"]).tile(kernel, (1,), (x, n), {}, 0)
    assert tile(7) is tiles[1] and timed == [8, 16, 32]
    path = launch.tuning_file(0)
    assert path.startswith(str(tmp_path)) and os.path.basename(path) == \
        f"NVIDIA-H200-test-sm90-triton-{triton.__version__}.json"
    times.update({16: 9.0})  # a new process would now pick another tile: it takes the file's
    timed.clear()
    assert tile(7) is tiles[1] and timed == []
    assert tile(8) is tiles[2] and timed == [8, 16, 32]  # another key value: timed
    timed.clear()
    kernel.cache_key = "source-2"  # the kernel's code changed: timed again
    assert tile(7) is tiles[2] and timed == [8, 16, 32]
    timed.clear()
    assert tile(7, [tiles[0], launch.tile_config(BH=32, num_warps=2)]) is not None and timed == [8, 32]
    timed.clear()
    with open(path, "w") as f:
        f.write("{half a file")  # unreadable: tuned again, and the file made whole
    assert tile(7) is tiles[2] and timed == [8, 16, 32]
    with open(path) as f:
        assert len(json.load(f)) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cached_launches_follow_alignment_and_shape_changes(gen):
    x = random_image((1, 3, 67, 131), torch.float32, gen, "cuda")
    flat = torch.empty(x.numel() + 1, device="cuda")
    for shift in (0, 1, 0, 1):  # aligned, misaligned, and back: each a separate compiled launch
        xs = flat[shift:shift + x.numel()].view_as(x).copy_(x)
        for fn in (lambda t: imgfilters.gaussian_blur(t, 5, 1.0), lambda t: imgfilters.bilateral(t, 0.1, radius=2),
                   lambda t: imgfilters.upsample(t, scale_factor=2, mode="bicubic")):
            assert torch.equal(fn(xs), fn(x.clone()))
    for w in (131, 130, 128):
        y = imgfilters.gaussian_blur(x[..., :w], 5, 1.0)
        assert torch.equal(y, imgfilters.gaussian_blur(x[..., :w].contiguous(), 5, 1.0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cached_launches_equal_launches_compiled_anew(gen):
    """A repeated call launches the kernel its first call compiled (the launcher's cache):
    over batch sizes, crops, layouts, misaligned views, dtypes and options, each result
    equals the same call with the cache emptied, so that no key lets one view's compiled
    kernel serve another's."""
    from imgfilters.kernels.core import launch
    x = random_image((4, 3, 67, 131), torch.float32, gen, "cuda")
    flat = torch.empty(x.numel() + 1, device="cuda")
    views = [x, x[:1], x[:2], x[..., 1:], x[..., :130], x.contiguous(memory_format=torch.channels_last),
             flat[1:].view_as(x).copy_(x), torch.nn.Parameter(x.clone(), requires_grad=False)]

    def backward(t):
        t = t.detach().requires_grad_()
        y = imgfilters.upsample(t, scale_factor=2, mode="bicubic")
        return torch.autograd.grad(y, t, torch.ones_like(y))[0]

    u8 = lambda t: (t * 255).round().to(torch.uint8)  # noqa: E731
    calls = [lambda t: imgfilters.bilateral(t, 0.1, radius=2), lambda t: imgfilters.bilateral(t, 0.2, radius=2),
             lambda t: imgfilters.bilateral(t, 0.1, radius=4, border="constant", border_value=0.5),
             lambda t: imgfilters.bilateral(u8(t), 0.1, radius=7),  # EXPANDED distances
             lambda t: imgfilters.bilateral(u8(t), 0.01, radius=7),  # sigma past EXPANDED's bound: direct
             lambda t: imgfilters.joint_bilateral(t, t[:, :1], 0.1, radius=2),
             lambda t: imgfilters.upsample(t, scale_factor=2, mode="bicubic"),
             lambda t: imgfilters.upsample(u8(t), scale_factor=2, mode="bilinear"), backward]
    for call in calls:
        for v in views + views:  # the second round launches from the cache
            got = call(v)
            launch._launches.clear()
            assert torch.equal(got, call(v))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_threads_tuning_at_once_on_every_gpu(gen, monkeypatch):
    """Triton's own autotuner crashed when two threads tuned at once; tuning is per device."""
    import threading
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    devices = [f"cuda:{i}" for i in range(min(2, torch.cuda.device_count()))]
    x = {d: random_image((1, 3, 96, 160), torch.float32, gen, "cpu").to(d) for d in devices}
    errors, results = [], {}

    def work(name, device):
        try:
            for i in range(30):
                s = 0.05 + 0.01 * i
                results[name, i] = (imgfilters.bilateral(x[device], s, radius=3).cpu(),
                                    imgfilters.gaussian_blur(x[device], 7, 1.0 + s).cpu())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=((d, k), d)) for d in devices for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 60 * len(devices)
    for (_, i), pair in results.items():  # every thread, every device: the same results (tiles may differ)
        for got, want in zip(pair, results[(devices[0], 0), i]):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def _warm_calls(x, u8):
    """The library's ops on a GPU batch, as a data loader or a training step calls them."""
    from imgfilters import degrade
    pipeline = degrade.RealESRGANDegradation(scale=4, seed=0)
    xg, dy = x.clone().requires_grad_(), torch.rand_like(x)
    return {
        "gaussian_blur forward + backward": lambda: torch.autograd.grad(
            imgfilters.gaussian_blur(xg, 15, 3.0), xg, dy),
        "bilateral forward + backward": lambda: torch.autograd.grad(
            imgfilters.bilateral(xg, 0.1, 1.5, radius=2), xg, dy),
        "bilateral": lambda: imgfilters.bilateral(x, 0.1, 1.5, radius=2),
        "bilateral disk uint8": lambda: imgfilters.bilateral(u8, 0.1, 1.5, radius=7, window="disk",
                                                             color_distance="l1"),
        "joint_bilateral_upsample": lambda: imgfilters.joint_bilateral_upsample(x[..., ::4, ::4], x, 0.1, 1.0),
        "nl_means": lambda: imgfilters.nl_means(x, 0.1, sigma=0.02, patch_size=3, search_radius=3),
        "gaussian_blur uint8": lambda: imgfilters.gaussian_blur(u8, 5, 1.0),
        "box_blur": lambda: imgfilters.box_blur(x, 9),
        "unsharp_mask": lambda: imgfilters.unsharp_mask(x, 1.5, 1.0),
        "sobel uint8": lambda: imgfilters.sobel(u8, 1, 0),
        "laplacian": lambda: imgfilters.laplacian(x, 3),
        "gradient_magnitude": lambda: imgfilters.gradient_magnitude(x),
        "median_blur": lambda: imgfilters.median_blur(u8, 5),
        "dilate": lambda: imgfilters.dilate(u8, 5),
        "upsample bilinear uint8": lambda: imgfilters.upsample(u8, 2.0, mode="bilinear"),
        "resize antialias": lambda: imgfilters.resize(x, (24, 20), antialias=True),
        "guided_filter": lambda: imgfilters.guided_filter(x, radius=4),
        "guided_filter subsample": lambda: imgfilters.guided_filter(x, x, radius=4, subsample=2),
        "RealESRGANDegradation": lambda: pipeline(x),
        "add_gaussian_noise, numbers": lambda: degrade.add_gaussian_noise(x, 5.0, False),
        "filter2d, a kernel on the host": lambda: imgfilters.filter2d(x, torch.full((3, 5), 1 / 15)),
        "jpeg, qualities on the host": lambda: degrade.jpeg(x, torch.tensor([50.0, 70.0])),
    }


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_warm_calls_never_make_the_host_wait_for_the_gpu(gen):
    """After its first call an op only enqueues work: a synchronising step (a copy from
    pageable memory, a value read back) would leave the GPU idle through every call's host
    time, and a small image's call would take the host's time plus the GPU's."""
    x = random_image((2, 3, 64, 72), torch.float32, gen, "cuda")
    u8 = random_image((2, 3, 64, 72), torch.uint8, gen, "cuda")
    waits = []
    for name, call in _warm_calls(x, u8).items():
        call()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            call()
        except RuntimeError as e:
            waits.append(f"{name}: {str(e).splitlines()[0]}")
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert not waits, waits


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cached_values_reach_another_stream_after_their_asynchronous_copy():
    """``_image.on`` copies new values asynchronously on the current stream; a use on
    another stream before that copy is done must wait for it."""
    from imgfilters import _image
    values = tuple(float(v) for v in torch.rand(5, dtype=torch.float64).tolist())
    torch.cuda._sleep(50_000_000)  # the copy queued behind some 20 ms of work
    _image.on(values, "cuda")
    other = torch.cuda.Stream()
    with torch.cuda.stream(other):
        read = _image.on(values, "cuda") * 1
    torch.cuda.synchronize()
    assert torch.equal(read.cpu(), torch.tensor(values, dtype=torch.float32))
    assert torch.equal(_image.on(values, "cuda").cpu(), torch.tensor(values, dtype=torch.float32))
