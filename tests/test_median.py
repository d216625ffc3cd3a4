"""median_blur: the kernels vs the float64 reference, the reference vs OpenCV, scipy and kornia,
gradients, the per-path checks (transform, fusion, tiling, dask, CLI)."""
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.kernels import median as kernels
from imgfilters.kernels.core.borders import BORDERS
from imgfilters.reference import median as ref

from helpers import KERNEL_DTYPES, SAMPLES, assert_matches, gpu, random_image, sample

SCIPY_MODE = {"reflect": "mirror", "symmetric": "reflect", "replicate": "nearest", "constant": "constant"}


def reference(x, k, border="reflect", value=0.0):
    x4 = _image.as_planes(_image.to_unit(x.detach().cpu()))
    return ref.median_blur(x4, k, border, value).reshape(x.shape)


# ---- kernels vs reference ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("border", BORDERS)
def test_every_dtype_and_border(dtype, border, gen, device):
    x = random_image((2, 3, 9, 11), dtype, gen, device)
    k = 3 if border in ("reflect", "constant") else 5
    # 0.4 is no uint8 level (float keys), 0.2 = 51/255 is (the stored values as keys)
    for value in (0.4, 0.2) if border == "constant" else (0.0,):
        assert_matches(imgfilters.median_blur(x, k, border=border, border_value=value), reference(x, k, border, value))


@pytest.mark.parametrize("k", [1, 7, 15])
def test_sizes_up_to_15_and_windows_larger_than_the_image(k, gen, device):
    x = random_image((1, 2, 6, 9), torch.uint8, gen, device)
    assert_matches(imgfilters.median_blur(x, k, border="symmetric"), reference(x, k, "symmetric"))


def test_results_are_values_of_the_window_with_many_ties(gen, device):
    x = (random_image((2, 1, 10, 12), torch.float32, gen, device) * 3).round() / 3  # four levels
    assert torch.equal(imgfilters.median_blur(x, 5).cpu(), reference(x, 5).float())


@pytest.mark.parametrize("k,dtype,border,value,method", [
    (7, torch.uint8, "reflect", 0.0, "network"), (7, torch.float32, "constant", 0.3, "network"),
    (3, torch.uint8, "constant", 0.3, "radix"),
    (9, torch.uint8, "symmetric", 0.0, "radix"), (3, torch.uint8, "constant", 0.2, "columns"),
    (5, torch.float32, "replicate", 0.0, "columns"), (5, torch.uint16, "reflect", 0.0, "columns"),
    (9, torch.uint8, "constant", 0.2, "nibbles")])
def test_gpu_kernel_in_small_tiles(k, dtype, border, value, method, gen, device):
    """The GPU's kernels (the interpreter runs a per-plane one unless told): tiles that cut
    the plane; selection networks over the whole 7 x 7 window (stored integers, floats with
    a NaN) and over sorted columns shared by a lane's outputs (two a lane; a border level), the
    radix select on kept keys (float keys: 0.3 is no uint8 level) and on keys reloaded
    every round (k = 9: slow in the interpreter, one tile), and the nibbles of uint8 windows
    (two lanes of two rows: each program carries its columns and counts down its rows)."""
    x = random_image((1, 1, 4, 4) if method == "radix" and k == 9 else (1, 1, 5, 7), dtype, gen, device)
    if dtype == torch.float32:
        x[0, 0, 2, 3] = float("nan")
    y = torch.empty_like(x)
    tile = {"columns": dict(BW=2, S=2, SEG=2, num_warps=1),
            "nibbles": dict(BW=2, SEG=2, num_warps=1)}.get(method, dict(BH=4, BW=4, num_warps=1))
    kernels.launch(x, y, k, border=_image.check_border(border), border_value=value, tile=tile, method=method)
    torch.testing.assert_close(y.cpu().double(), _image.from_unit(reference(x, k, border, value), dtype).double(),
                               rtol=0, atol=0, equal_nan=True)


def test_nibbles_at_the_ends_of_the_range(gen, device):
    """uint8 values at both ends (the top coarse lane, thresholds 240, and the bottom one),
    many tied, and a window that reaches past the image's height: the nibbles' counts stay
    exact."""
    x = random_image((1, 1, 6, 8), torch.uint8, gen, device)
    x = torch.where(x < 128, x % 4, 252 + x % 4)
    y = torch.empty_like(x)
    kernels.launch(x, y, 7, border=_image.check_border("symmetric"), tile=dict(BW=4, SEG=4, num_warps=1),
                   method="nibbles")
    assert torch.equal(y.cpu(), _image.from_unit(reference(x, 7, "symmetric"), torch.uint8))


@pytest.mark.parametrize("tile", [None, dict(BH=4, BW=4, num_warps=1)])
def test_median_positions_for_the_gradient(tile, gen, device):
    """ARG mode stores the window position the reference's stable-sort rule picks, ties
    included (the interpreter's per-plane kernel, and the GPU's in small tiles)."""
    x = (random_image((1, 1, 4, 4), torch.float32, gen, device) * 3).round() / 3  # (one interpreted tile)
    pos = torch.empty(x.shape, dtype=torch.int32, device=device)
    kernels.launch(x, pos, 3, border=_image.check_border("replicate"), arg=True, tile=tile)
    assert torch.equal(pos.cpu().long(), ref.median_index(x.cpu().double(), 3, "replicate"))


def test_layouts_keep_their_format(gen, device):
    x = random_image((2, 3, 9, 10), torch.uint8, gen, device)
    cl = x.contiguous(memory_format=torch.channels_last)
    y = imgfilters.median_blur(cl, 3)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, imgfilters.median_blur(x, 3))
    view = random_image((2, 3, 12, 20), torch.float32, gen, device)[:, :, 1:10, ::2]  # strided
    assert_matches(imgfilters.median_blur(view, 3), reference(view, 3))
    plane = random_image((7, 9), torch.float32, gen, device)
    assert_matches(imgfilters.median_blur(plane, 3), reference(plane, 3))
    assert isinstance(imgfilters.median_blur(tv_tensors.Image(x), 3), tv_tensors.Image)


def test_float64_runs_the_reference(gen):
    x = torch.rand(2, 3, 10, 12, generator=gen, dtype=torch.float64)
    assert torch.equal(imgfilters.median_blur(x, 5, border="replicate"), ref.median_blur(x, 5, "replicate"))


@pytest.mark.parametrize("size,error", [(4, ValueError), (0, ValueError), (33, ValueError), (3.0, TypeError),
                                        (True, TypeError)])
def test_bad_sizes_raise_before_launch(size, error):
    with pytest.raises(error, match="kernel_size"):
        imgfilters.median_blur(torch.rand(1, 3, 8, 8), size)


# ---- the reference vs its peers ------------------------------------------------------------

def _photo():
    return sample("astronaut")[:, 100:160, 200:270]  # (3, 60, 70) uint8


@pytest.mark.parametrize("k", [3, 5, 7])
def test_reference_equals_opencv_median_blur(k, gen):
    # cv2.medianBlur replicates the edge pixel; uint8 any size, float32 sizes 3 and 5
    for x in (_photo(), random_image((3, 23, 31), torch.uint8, gen)):
        expected = cv2.medianBlur(x.permute(1, 2, 0).contiguous().numpy(), k)
        got = _image.from_unit(ref.median_blur(x.double() / 255, k, "replicate"), torch.uint8)
        assert np.array_equal(got.permute(1, 2, 0).numpy(), expected)
    if k <= 5:
        xf = torch.rand(17, 19, generator=gen, dtype=torch.float32)
        assert np.array_equal(ref.median_blur(xf.double(), k, "replicate").float().numpy(),
                              cv2.medianBlur(xf.numpy(), k))


@pytest.mark.parametrize("border", BORDERS)
def test_reference_equals_scipy_median_filter(border, gen):
    ndimage = pytest.importorskip("scipy.ndimage")
    for x in (_photo().double() / 255, torch.rand(2, 13, 17, generator=gen, dtype=torch.float64)):
        expected = ndimage.median_filter(x.numpy(), size=(1, 5, 5), mode=SCIPY_MODE[border], cval=0.3)
        np.testing.assert_array_equal(ref.median_blur(x, 5, border, 0.3).numpy(), expected)


@pytest.mark.parametrize("border", ["reflect", "replicate", "constant"])
def test_reference_equals_kornia_median_blur(border, gen):
    kornia = pytest.importorskip("kornia")
    for x in (_photo()[None].double() / 255, torch.rand(2, 2, 12, 15, generator=gen, dtype=torch.float64)):
        expected = kornia.filters.median_blur(x, (5, 5), border_type=border)  # its constant border is 0
        torch.testing.assert_close(ref.median_blur(x, 5, border, 0.0), expected, rtol=0, atol=0)


# ---- autograd ------------------------------------------------------------------------------

@pytest.mark.parametrize("border", BORDERS)
def test_reference_gradcheck(border, gen):
    x = torch.rand(2, 1, 5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: imgfilters.median_blur(a, 3, border=border, border_value=0.3), (x,))


@pytest.mark.parametrize("border,k", [("reflect", 3), ("constant", 5), ("replicate", 5)])
def test_kernel_backward_routes_to_the_median_pixel_as_the_reference(border, k, gen, device):
    # ties included: four levels, so most windows hold several equal values
    x = ((random_image((2, 2, 8, 9), torch.float32, gen, device) * 3).round() / 3).requires_grad_()
    y = imgfilters.median_blur(x, k, border=border, border_value=0.5)  # (no level: no tie with the border)
    g = torch.randn(y.shape, generator=gen).to(device)
    (gx,) = torch.autograd.grad(y, (x,), g)
    xd = x.detach().cpu().double().requires_grad_()
    (expected,) = torch.autograd.grad(ref.median_blur(xd, k, border, 0.5), (xd,), g.cpu().double())
    torch.testing.assert_close(gx.cpu().double(), expected, rtol=0, atol=1e-6)


# ---- the other paths -----------------------------------------------------------------------

def test_transform_with_a_range_of_sizes(gen, device):
    x = random_image((2, 3, 9, 11), torch.uint8, gen, device)
    assert torch.equal(T.MedianBlur(3, border="replicate")(x), imgfilters.median_blur(x, 3, border="replicate"))
    t = T.MedianBlur((3, 7))
    sizes = {t.make_params([x])["kernel_size"] for _ in range(40)}
    assert sizes == {3, 5, 7}
    pil = T.MedianBlur(3)(Image.open(SAMPLES / "camera.png").crop((0, 0, 12, 10)))
    assert pil.mode == "L" and pil.size == (12, 10)
    with pytest.raises(ValueError, match="kernel_size"):
        T.MedianBlur((5, 4))


def test_fused_prologue_and_epilogue_in_one_launch(gen, device):
    x = random_image((2, 3, 9, 11), torch.uint8, gen, device)
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, -0.1]),
             T.MedianBlur(3, border="constant", border_value=0.2), v2.Normalize([0.1], [2.0])]
    fused = imgfilters.fuse(steps)
    assert fused.launches(torch.uint8) == 1
    torch.testing.assert_close(fused(x), v2.Compose(steps)(x), rtol=0, atol=2e-6)


def test_tiled_and_dask_equal_untiled(gen):
    da = pytest.importorskip("dask.array")
    import imgfilters.dask as idask
    x = torch.rand(1, 2, 19, 23, generator=gen, dtype=torch.float64)
    expected = imgfilters.median_blur(x, 7, border="symmetric")
    tiles = imgfilters.tiled(imgfilters.median_blur, x, 7, border="symmetric", tile=5, progress=False)
    blocks = idask.median_blur(da.from_array(x.numpy(), chunks=(1, 2, 8, 8)), 7, border="symmetric")
    assert torch.equal(tiles, expected)
    assert np.array_equal(blocks.compute(scheduler="threads"), expected.numpy())


def test_cli_median_equals_the_function(tmp_path):
    arr = np.asarray(Image.open(SAMPLES / "coffee.png"))[:40, :50]
    Image.fromarray(arr).save(tmp_path / "in.png")
    # the float64 reference on the CPU (the engine's cold compile would cost 10 s here; its
    # results are test_cpu_median.py's)
    env = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, "IMGFILTERS_CPU_ENGINE": "0"}
    r = subprocess.run([sys.executable, "-m", "imgfilters", tmp_path / "in.png", tmp_path / "out.png", "--method",
                        "median", "--kernel-size", "5", "--print-params"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "kernel_size=5" in r.stdout
    got = np.asarray(Image.open(tmp_path / "out.png"))
    expected = _image.from_unit(ref.median_blur(torch.from_numpy(arr.copy()).permute(2, 0, 1).double() / 255, 5),
                                torch.uint8).permute(1, 2, 0).numpy()
    assert np.array_equal(got, expected)
    bad = subprocess.run([sys.executable, "-m", "imgfilters", tmp_path / "in.png", tmp_path / "o.png", "--method",
                          "median", "--kernel-size", "4"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "--kernel-size" in bad.stderr


# ---- GPU only ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k", [3, 5, 7, 9, 15])
def test_batch_matches_reference_on_gpu_autotuned(dtype, k, gen, monkeypatch):
    monkeypatch.setenv("IMGFILTERS_AUTOTUNE", "1")
    x = random_image((2, 3, 70, 150), dtype, gen, "cuda")
    assert_matches(imgfilters.median_blur(x, k, border="symmetric"), reference(x, k, "symmetric"))


@gpu
@pytest.mark.parametrize("tile", range(len(kernels.ALL_TILES)))
def test_every_tile(tile, gen):
    x = random_image((2, 3, 50, 133), torch.uint8, gen, "cuda")
    for k, border, method in ((3, 0, "radix"), (7, 3, "network"), (9, 1, "radix")):
        y = torch.empty_like(x)
        kernels.launch(x, y, k, border=border, tile=kernels.ALL_TILES[tile], method=method)
        assert_matches(y, reference(x, k, BORDERS[border]))


@gpu
@pytest.mark.parametrize("tile", range(len(kernels.COLUMN_TILES)))
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_every_column_tile(tile, dtype, gen):
    x = random_image((2, 3, 50, 133), dtype, gen, "cuda")
    for k, border in ((3, 0), (5, 3), (5, 2)):
        y = torch.empty_like(x)
        kernels.launch(x, y, k, border=border, tile=kernels.COLUMN_TILES[tile], method="columns")
        assert_matches(y, reference(x, k, BORDERS[border]))


@gpu
@pytest.mark.parametrize("tile", range(len(kernels.NIBBLE_TILES)))
def test_every_nibble_tile(tile, gen):
    x = random_image((2, 3, 150, 133), torch.uint8, gen, "cuda")
    ends = torch.where(x < 128, x % 8, 248 + x % 8)
    for k, border, value in ((7, 0, 0.0), (11, 3, 0.0), (15, 3, 0.2), (15, 1, 0.0), (9, 3, 1.0), (13, 2, 0.0)):
        for img in (x, ends):
            y = torch.empty_like(img)
            kernels.launch(img, y, k, border=border, border_value=value, tile=kernels.NIBBLE_TILES[tile],
                           method="nibbles")
            assert_matches(y, reference(img, k, BORDERS[border], value))


@gpu
def test_int64_offsets_past_2_31_elements(gen):
    x = torch.zeros(1, 1, 2 ** 16 + 8, 2 ** 15 + 8, dtype=torch.uint8, device="cuda")
    x[..., -20:, -20:] = random_image((20, 20), torch.uint8, gen, "cuda")
    y = imgfilters.median_blur(x, 5)
    assert_matches(y[..., -20:, -20:], reference(x[..., -24:, -24:], 5)[..., -20:, -20:])


@gpu
def test_4k_rgb_5x5_uint8_beats_cvcuda():
    import triton
    x = torch.randint(0, 256, (1, 3, 2160, 3840), dtype=torch.uint8, device="cuda")
    imgfilters.median_blur(x, 5)
    ms = triton.testing.do_bench(lambda: imgfilters.median_blur(x, 5), return_mode="median")
    assert ms < 0.93, ms  # CV-CUDA's 5x5 median on the H200 (issue 40)


@pytest.mark.parametrize("target, path", [("triton", "kernels/median/networks.py"),
                                          ("numba", "imgfilters/cpu/median_networks.py")])
def test_generated_networks_are_the_generators_output(target, path):
    """The selection networks are generated (and checked against ``sorted``) by
    ``scripts/median_networks.py``: the files must be exactly its output, not edited."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "scripts", "median_networks.py"), target],
                         capture_output=True, text=True, check=True).stdout
    with open(os.path.join(root, path)) as f:
        assert f.read() == out
