"""imgfilters.tiled: tiled equals untiled for every family, border, tile size and array
kind; bad input is refused before anything is written."""
import numpy as np
import pytest
import torch

import imgfilters
from imgfilters.ops import noise
from imgfilters.ops import pointwise as pw

from helpers import TOLERANCE, gpu, random_image

# (filter, args, params): one call per family and the borders and shapes of its halo
CALLS = [
    (imgfilters.bilateral, (0.2, 1.5), {}),
    (imgfilters.bilateral, (0.3,), {"radius": 2, "window": "disk", "border": "constant", "border_value": 0.7}),
    (imgfilters.gaussian_blur, ([7, 3],), {"border": "symmetric"}),
    (imgfilters.box_blur, (5,), {"border": "replicate"}),
    (imgfilters.separable_filter, ([0.1, 0.5, 0.2], [0.3, -0.2, 0.5, 0.1, 0.3]), {"border": "constant"}),
    (imgfilters.separable_filter, (torch.linspace(-0.2, 0.9, 10, dtype=torch.float64).reshape(2, 5),),
     {"border": "symmetric"}),  # a row of taps per image
    (imgfilters.unsharp_mask, (0.8, 1.5), {}),
    (imgfilters.unsharp_mask, (torch.tensor([0.4, 1.1], dtype=torch.float64), torch.tensor([1.5, -0.5])), {}),
    (imgfilters.filter2d, ([[0.1, 0.5, -0.2], [0.3, 0.1, 0.2], [0.0, 0.4, -0.1], [0.2, 0.2, 0.1], [0.1, 0.0, 0.3]],),
     {"border": "symmetric"}),
    (imgfilters.filter2d, (torch.linspace(-0.5, 1.0, 30, dtype=torch.float64).reshape(2, 3, 5),), {}),  # per image
    (imgfilters.median_blur, (5,), {"border": "symmetric"}),
    (imgfilters.morphology, ("tophat", 3), {"shape": "ellipse", "iterations": 2, "border": "symmetric"}),
    (imgfilters.erode, ([[1, 0, 1], [0, 1, 1]],), {}),
    (imgfilters.nl_means, (0.08,), {"sigma": 0.02, "patch_size": 3, "search_radius": 2}),
    (imgfilters.pointwise, ([pw.gamma(2.2), pw.scale(0.5)],), {}),
    (imgfilters.resize, ((11, 30),), {"interpolation": "bicubic"}),  # down along H (antialiased), up along W
    (imgfilters.resize, ((6, 9),), {"interpolation": "lanczos"}),
    (imgfilters.resize, ((17, 13),), {"interpolation": "area"}),
    (imgfilters.upsample, (1.7,), {"mode": "bicubic", "align_corners": True}),
    (imgfilters.upsample, ((0.6, 2.0),), {"mode": "nearest"}),
    (imgfilters.imresize, (0.45,), {}),
]
IDS = [f"{fn.__name__}-{k}" for k, (fn, _, _) in enumerate(CALLS)]


@pytest.mark.parametrize("fn,args,params", CALLS, ids=IDS)
@pytest.mark.parametrize("tile", [2, 3, 8, 64])  # below, at and above the halos (1 to 3); larger than the image
def test_tiled_equals_untiled_reference(fn, args, params, tile, gen):
    if fn is imgfilters.nl_means and tile < 8:
        pytest.skip("the NLM reference costs ~0.1 s a call: small tiles are the other families' tests")
    x = random_image((2, 3, 17, 23), torch.float64, gen)  # float64: the reference path
    expected = fn(x, *args, **params)
    got = imgfilters.tiled(fn, x, *args, tile=tile, progress=False, **params)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fn,args,params,dtype", [
    (imgfilters.gaussian_blur, (5,), {"border": "constant"}, torch.uint8),
    (imgfilters.resize, ((7, 19),), {"interpolation": "bicubic"}, torch.uint8),
    (imgfilters.resize, ((7, 19),), {"interpolation": "bicubic"}, torch.float32)], ids=["gaussian", "resize", "resize"])
def test_tiled_kernels_match_untiled(fn, args, params, dtype, gen, device):
    """The kernels (the interpreter without a GPU) on tiles against the untiled call."""
    x = random_image((1, 1, 13, 11), dtype, gen)
    expected = fn(x.to(device), *args, **params).cpu()
    got = imgfilters.tiled(fn, x, *args, tile=(7, 11), device=device, progress=False, **params)
    assert (got.double() - expected.double()).abs().max() <= TOLERANCE[dtype]


def test_nl_means_estimates_once(gen):
    """Automatic parameters: one noise estimate for the image, the same as the untiled
    call's on an image this small, whatever the tiles."""
    x = (0.5 + 0.02 * torch.randn(1, 31, 33, generator=gen, dtype=torch.float64)).clamp(0, 1)
    expected = imgfilters.nl_means(x, search_radius=2)
    got = imgfilters.tiled(imgfilters.nl_means, x, search_radius=2, tile=(16, 33), progress=False)
    torch.testing.assert_close(got, expected,
                               rtol=0, atol=1e-12)


def test_sample_windows_cover_large_images():
    assert noise.sample_windows(300, 500) == [(0, 300, 0, 500)]
    windows = noise.sample_windows(5000, 3000)
    assert len(windows) == 9 and all(r1 <= 5000 and c1 <= 3000 for _, r1, _, c1 in windows)
    assert (0, 1024, 0, 1024) in windows and (3976, 5000, 1976, 3000) in windows


def test_numpy_channels_last_and_out(tmp_path, gen):
    """numpy and memmap arrays are (H, W, C) (or (H, W)); the result lands in ``out``."""
    x = random_image((3, 19, 14), torch.float64, gen)
    expected = imgfilters.bilateral(x, 0.2).permute(1, 2, 0).numpy()
    arr = x.permute(1, 2, 0).contiguous().numpy()
    got = imgfilters.tiled(imgfilters.bilateral, arr, 0.2, tile=5, progress=False)
    assert isinstance(got, np.ndarray) and got.shape == arr.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    src = np.memmap(tmp_path / "in.raw", dtype=np.float64, mode="w+", shape=arr.shape)
    src[:] = arr
    out = np.memmap(tmp_path / "out.raw", dtype=np.float64, mode="w+", shape=arr.shape)
    assert imgfilters.tiled(imgfilters.bilateral, src, 0.2, tile=6, out=out, progress=False) is out
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    grey = arr[..., 0]
    np.testing.assert_allclose(imgfilters.tiled(imgfilters.gaussian_blur, grey, 3, tile=4, progress=False),
                               imgfilters.gaussian_blur(torch.from_numpy(grey), 3).numpy(), rtol=0, atol=1e-12)


def test_zarr_in_and_out(gen, monkeypatch):
    """zarr arrays in and out; full-width bands decode each chunk row once (the halos of
    consecutive bands share theirs)."""
    zarr = pytest.importorskip("zarr")
    x = random_image((21, 18, 2), torch.float64, gen).numpy()
    z = zarr.create_array(store={}, shape=x.shape, chunks=(4, 8, 2), dtype=x.dtype)
    z[:] = x
    got = imgfilters.tiled(imgfilters.resize, z, (10, 25), tile=8, progress=False)
    assert type(got).__module__.startswith("zarr")
    expected = imgfilters.resize(torch.from_numpy(x).permute(2, 0, 1), (10, 25)).permute(1, 2, 0).numpy()
    np.testing.assert_allclose(got[:], expected, rtol=0, atol=1e-12)
    decoded = []
    get = type(z).get_basic_selection
    monkeypatch.setattr(type(z), "get_basic_selection", lambda a, index, **k: decoded.append(index[-3]) or get(
        a, index, **k))
    got = imgfilters.tiled(imgfilters.box_blur, z, 5, tile=(4, 18), progress=False)
    expected = imgfilters.box_blur(torch.from_numpy(x).permute(2, 0, 1), 5).permute(1, 2, 0).numpy()
    np.testing.assert_allclose(got[:], expected, rtol=0, atol=1e-12)
    assert decoded == [slice(r, min(r + 4, 21)) for r in range(0, 21, 4)]


def test_joint_bilateral_tiles_the_guide(gen):
    x, guide = random_image((2, 3, 15, 16), torch.float64, gen), random_image((2, 1, 15, 16), torch.float64, gen)
    expected = imgfilters.joint_bilateral(x, guide, 0.2, radius=3)
    got = imgfilters.tiled(imgfilters.joint_bilateral, x, guide, 0.2, radius=3, tile=4, progress=False)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_bad_input_writes_nothing(gen):
    x = random_image((3, 10, 12), torch.float64, gen)
    with pytest.raises(TypeError, match="numpy slicing"):
        imgfilters.tiled(imgfilters.bilateral, x.tolist())
    for fn in (lambda t: t, None, "bilateral", imgfilters.fuse):
        with pytest.raises(TypeError, match="fn must be a public imgfilters filter"):
            imgfilters.tiled(fn, x)
    with pytest.raises(TypeError, match="estimate_noise cannot be tiled"):
        imgfilters.tiled(imgfilters.estimate_noise, x)
    with pytest.raises(TypeError, match="joint_bilateral_upsample cannot be tiled: its output lies on the guide"):
        imgfilters.tiled(imgfilters.joint_bilateral_upsample, x[..., ::2, ::2], x)
    with pytest.raises(ValueError, match="tile"):
        imgfilters.tiled(imgfilters.bilateral, x, tile=0)
    for tile in (True, 2.5, (4, True), (4, 4, 4), "8"):
        with pytest.raises(TypeError, match="tile must be a positive integer"):
            imgfilters.tiled(imgfilters.bilateral, x, tile=tile)
    for device in ["cuda:99", "gpu", "mps", 3.5] + ([] if torch.cuda.is_available() else ["cuda"]):
        with pytest.raises(ValueError, match="device"):
            imgfilters.tiled(imgfilters.bilateral, x, device=device)
    for out in (torch.zeros(3, 10, 11, dtype=torch.float64), torch.zeros(3, 10, 12, dtype=torch.float32)):
        with pytest.raises(ValueError, match="out must have shape"):
            imgfilters.tiled(imgfilters.bilateral, x, out=out)
        assert not out.any()
    with pytest.raises(TypeError, match="out must be of img's kind"):
        imgfilters.tiled(imgfilters.bilateral, x, out=np.zeros((10, 12, 3)))
    with pytest.raises(TypeError, match="dtype"):
        imgfilters.tiled(imgfilters.bilateral, np.zeros((10, 12, 3), dtype=np.int32))
    out = torch.zeros_like(x)
    with pytest.raises(ValueError, match="radius"):
        imgfilters.tiled(imgfilters.bilateral, x, radius=99, out=out, tile=4)
    assert not out.any()
    arr = x.permute(1, 2, 0).numpy()
    read_only = np.zeros_like(arr)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        imgfilters.tiled(imgfilters.bilateral, arr, out=read_only, tile=4)


class CountedReads:
    """A numpy-like array that counts the crops read from it."""

    def __init__(self, arr):
        self.arr, self.shape, self.dtype, self.reads = arr, arr.shape, arr.dtype, 0

    def __getitem__(self, index):
        self.reads += 1
        return self.arr[index]


@pytest.mark.parametrize("fn,args,params,channels,message", [
    (imgfilters.bilateral, (-0.1,), {}, 3, "sigma_color must be"),
    (imgfilters.bilateral, (0.1,), {"window": "round"}, 3, "window must be one of"),
    (imgfilters.gaussian_blur, (5,), {"border": "wrap"}, 3, "border must be one of"),
    (imgfilters.nl_means, (-0.1,), {"sigma": 0.02}, 3, "h must be"),
    (imgfilters.nl_means, (0.1,), {"sigma": 0.02, "patch_size": 4}, 3, "patch_size must be an odd"),
    (imgfilters.nl_means, (0.1,), {"sigma": 0.02}, 5, "img has 5 channels; nl_means supports 1 to 4"),
    (imgfilters.pointwise, ([pw.normalize([0.5, 0.5], [0.2, 0.2])],), {}, 3, "normalize has 2 values for 3"),
    (imgfilters.bilateral, (torch.tensor([0.1, 0.2, 0.3]),), {}, 3, r"one value per image \(2\)"),
    (imgfilters.filter2d, (torch.ones(3, 3, 3),), {}, 3, "one per image"),
    (imgfilters.resize, ((0, 9),), {}, 3, "output size"),
    (imgfilters.bilateral, (), {"sigma": 0.1}, 3, "unexpected keyword"),
    (imgfilters.bilateral, (0.1, 20.0), {}, 3, "default radius of 40"),  # (values that the op reads:)
    (imgfilters.bilateral, (torch.tensor([0.1, -0.2]),), {}, 3, "sigma_color must be finite and > 0, got -0.2"),
    (imgfilters.nl_means, (torch.tensor([0.1, -1.0]),), {"sigma": 0.02}, 3, "h must be finite and > 0"),
], ids=["sigma", "window", "border", "h", "patch", "channels", "normalize", "per-image", "kernels", "size",
        "keyword", "radius", "sigma-values", "h-values"])
def test_arguments_are_checked_before_anything_is_read(fn, args, params, channels, message, gen):
    """Every argument is checked on the whole image's shape before a crop is read, the
    noise estimated or a tile written (``tiling.Call``'s call on meta tensors; the values
    of per-image tensors by the families' halo hooks)."""
    x = CountedReads(random_image((2, 12, 14, channels), torch.uint8, gen).numpy())
    out = np.zeros(x.shape, np.uint8)
    with pytest.raises((TypeError, ValueError), match=message):
        imgfilters.tiled(fn, x, *args, tile=4, out=out, progress=False, **params)
    assert x.reads == 0 and not out.any()


def test_out_sharing_memory_with_an_input_is_refused(tmp_path, gen):
    """An out that shares memory with img or the guide would be written while later tiles
    still read it: refused before anything is written, whatever the kind of array."""
    x = random_image((3, 16, 18), torch.float64, gen)
    arr = x.permute(1, 2, 0).contiguous().numpy()
    big = random_image((3, 16, 19), torch.float64, gen)
    cases = [(arr, arr), (arr[1:], arr[:-1]), (big[..., 1:], big[..., :-1]), (x, x[:, :, :])]
    src = np.memmap(tmp_path / "img.raw", dtype=np.uint8, mode="w+", shape=(16, 18, 3))
    src[:] = (arr * 255).astype(np.uint8)
    cases.append((src, np.memmap(tmp_path / "img.raw", dtype=np.uint8, mode="r+", shape=(16, 18, 3))))
    zarr = pytest.importorskip("zarr")
    z = zarr.create_array(str(tmp_path / "img.zarr"), shape=arr.shape, chunks=(8, 8, 3), dtype=arr.dtype)
    z[:] = arr
    cases.append((z, zarr.open_array(str(tmp_path / "." / "img.zarr"), mode="r+")))
    for img, out in cases:
        kept = img.clone() if isinstance(img, torch.Tensor) else np.array(img[:])
        with pytest.raises(ValueError, match="out shares memory with img"):
            imgfilters.tiled(imgfilters.box_blur, img, 3, tile=4, out=out, progress=False)
        assert torch.equal(img, kept) if isinstance(img, torch.Tensor) else np.array_equal(img[:], kept)
    guide = random_image((3, 16, 18), torch.float64, gen)
    with pytest.raises(ValueError, match="out shares memory with guide"):
        imgfilters.tiled(imgfilters.joint_bilateral, x, guide, 0.1, tile=4, out=guide, progress=False)
    with pytest.raises(ValueError, match="out shares memory with img"):
        imgfilters.tiled(imgfilters.joint_bilateral, x, x, 0.1, tile=4, out=x, progress=False)
    left, right = arr[:, :9], arr[:, 9:]  # (one array's halves share no byte)
    expected = imgfilters.box_blur(torch.from_numpy(left).permute(2, 0, 1), 3).permute(1, 2, 0).numpy()
    imgfilters.tiled(imgfilters.box_blur, left, 3, tile=4, out=right, progress=False)
    np.testing.assert_allclose(right, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fn,args,shape,dtype,tile", [
    (imgfilters.imresize, (2.5,), (3, 26, 34), torch.uint8, 3),
    (imgfilters.resize, ((6, 8), "area"), (3, 9, 20), torch.uint16, 1)], ids=["imresize", "area"])
def test_integer_resampling_equals_untiled_bit_for_bit(fn, args, shape, dtype, tile, gen, monkeypatch):
    """On the float64 path a tile computes each output with the untiled call's own
    arithmetic, so exact .5 ties of integer outputs round the same way."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # uint8 on the CPU: the float64 reference,
    monkeypatch.setenv("IMGFILTERS_CPU_ENGINE", "0")  # not the CPU engine
    x = random_image((2, *shape), dtype, gen)
    params = {"antialias": False} if fn is imgfilters.imresize else {}
    expected = fn(x, *args, **params)
    assert torch.equal(imgfilters.tiled(fn, x, *args, tile=tile, device="cpu", progress=False, **params), expected)


def test_integer_tiles_layouts_and_default_bands(gen):
    """Integer types as tile sizes; a channels-last tensor keeps its layout; the default
    tiles are full-width bands aligned with a zarr output's chunk rows."""
    from imgfilters import tiling
    x = random_image((2, 3, 11, 13), torch.float64, gen)
    expected = imgfilters.box_blur(x, 3)
    for tile in (np.int64(4), torch.tensor(4), (np.int32(3), torch.tensor(5))):
        torch.testing.assert_close(imgfilters.tiled(imgfilters.box_blur, x, 3, tile=tile, progress=False), expected,
                                   rtol=0, atol=0)
    cl = x.contiguous(memory_format=torch.channels_last)
    got = imgfilters.tiled(imgfilters.box_blur, cl, 3, tile=4, progress=False)
    assert got.is_contiguous(memory_format=torch.channels_last) and not got.is_contiguous()
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    cpu = torch.device("cpu")
    assert tiling._tile_size(None, (100, 10 ** 5), (100, 10 ** 5), None, cpu) == (tiling.MIN_BAND_ROWS, 10 ** 5)
    assert tiling._tile_size(None, (9000, 1000), (9000, 1000), 300, cpu) == (4200, 1000)  # 4194 rows, whole chunks
    assert tiling._tile_size(None, (2000, 2000), (4000, 4000), None, cpu) == (524, 2000)  # 2 source rows a row


@gpu
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_gpu_pipeline(dtype, gen):
    """The streamed path: many tiles, tensors and channels-last arrays, against the
    untiled call on the GPU; device memory stays at a few tiles."""
    x = random_image((1, 3, 1000, 1300), dtype, gen)
    for fn, args in ((imgfilters.bilateral, (0.1, 2.0)), (imgfilters.resize, ((700, 1900),))):
        expected = fn(x.cuda(), *args).cpu()
        got = imgfilters.tiled(fn, x, *args, tile=256, progress=False)
        assert (got.double() - expected.double()).abs().max() <= TOLERANCE[dtype]
        arr = x[0].permute(1, 2, 0).contiguous().numpy()
        for tile in ((200, 300), (96, expected.shape[-1])):  # square tiles; full-width bands, one block each
            got = imgfilters.tiled(fn, arr, *args, tile=tile, progress=False)
            assert np.abs(got.astype(np.float64) - expected[0].permute(1, 2, 0).double().numpy()).max() \
                <= TOLERANCE[dtype]
    big = random_image((1, 3, 3000, 3000), dtype, gen)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()  # what earlier tests of this process keep (caches)
    torch.cuda.reset_peak_memory_stats()
    imgfilters.tiled(imgfilters.gaussian_blur, big, 9, tile=512, progress=False)
    assert torch.cuda.max_memory_allocated() - base < 40 * 3 * 600 * 600 * big.element_size()


@gpu
def test_pinned_tensors_go_straight_to_the_gpu(gen):
    """A pinned tensor: full-width bands by default, copied with no staging, into a pinned
    output; square tiles of it go through the staging buffers. Both equal the untiled
    call."""
    x = random_image((2, 3, 300, 410), torch.uint8, gen).pin_memory()
    expected = imgfilters.bilateral(x.cuda(), 0.1, radius=3).cpu()
    got = imgfilters.tiled(imgfilters.bilateral, x, 0.1, radius=3, progress=False)
    assert got.is_pinned() and (got.int() - expected.int()).abs().max() <= TOLERANCE[torch.uint8]
    out = torch.empty_like(x).pin_memory()
    imgfilters.tiled(imgfilters.bilateral, x, 0.1, radius=3, tile=(50, 410), out=out, progress=False)
    assert (out.int() - expected.int()).abs().max() <= TOLERANCE[torch.uint8]
    got = imgfilters.tiled(imgfilters.bilateral, x, 0.1, radius=3, tile=64, progress=False)
    assert (got.int() - expected.int()).abs().max() <= TOLERANCE[torch.uint8]


@gpu
def test_gpu_bands_of_memmaps_zarr_and_channels_last(tmp_path, gen):
    """Full-width bands of channels-last sources, each a block in the pinned buffer and a
    channels-last tensor on the GPU: memmaps and zarr arrays into arrays of their kind, a
    pinned channels-last tensor straight into a pinned channels-last output."""
    zarr = pytest.importorskip("zarr")
    x = random_image((1, 3, 700, 900), torch.uint8, gen)
    expected = imgfilters.bilateral(x.cuda(), 0.1, radius=2).cpu()
    want = expected[0].permute(1, 2, 0).numpy()
    arr = x[0].permute(1, 2, 0).contiguous().numpy()
    src = np.memmap(tmp_path / "in.raw", dtype=np.uint8, mode="w+", shape=arr.shape)
    src[:] = arr
    out = np.memmap(tmp_path / "out.raw", dtype=np.uint8, mode="w+", shape=arr.shape)
    imgfilters.tiled(imgfilters.bilateral, src, 0.1, radius=2, tile=(96, 900), out=out, progress=False)
    assert np.abs(out.astype(int) - want).max() <= TOLERANCE[torch.uint8]
    z = zarr.create_array(str(tmp_path / "in.zarr"), shape=arr.shape, chunks=(128, 128, 3), dtype="uint8")
    z[:] = arr
    zout = zarr.create_array(str(tmp_path / "out.zarr"), shape=arr.shape, chunks=(128, 128, 3), dtype="uint8")
    imgfilters.tiled(imgfilters.bilateral, z, 0.1, radius=2, tile=(100, 900), out=zout, progress=False)
    assert np.abs(zout[:].astype(int) - want).max() <= TOLERANCE[torch.uint8]
    pinned = x.contiguous(memory_format=torch.channels_last).pin_memory()
    got = imgfilters.tiled(imgfilters.bilateral, pinned, 0.1, radius=2, progress=False)
    assert got.is_pinned() and got.is_contiguous(memory_format=torch.channels_last)
    assert (got.int() - expected.int()).abs().max() <= TOLERANCE[torch.uint8]
