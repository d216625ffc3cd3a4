"""imgfilters.dask: each family on dask arrays equals the in-memory call, on the threaded
scheduler and on a distributed cluster; zarr and BigTIFF round trips stream from disk to
disk. float64 images: the reference path, which every worker runs without a GPU."""
import pickle

import numpy as np
import pytest
import torch

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

import imgfilters  # noqa: E402
import imgfilters.dask as idask  # noqa: E402
from imgfilters.ops import pointwise as pw  # noqa: E402

from helpers import random_image  # noqa: E402

CALLS = [
    ("bilateral", (0.2,), {"radius": 3, "border": "constant", "border_value": 0.4}),
    ("gaussian_blur", ([9, 3],), {"border": "symmetric"}),
    ("box_blur", (3,), {"border": "replicate"}),
    ("separable_filter", ([0.2, 0.6, 0.2],), {}),
    ("unsharp_mask", (1.2,), {}),
    ("nl_means", (0.06,), {"sigma": 0.02, "patch_size": 3, "search_radius": 2}),
    ("pointwise", ([pw.gamma(0.5)],), {}),
    ("resize", ((9, 31),), {"interpolation": "bilinear"}),
    ("upsample", (2.3,), {"mode": "bicubic"}),
    ("imresize", (0.4,), {}),
    ("filter2d", ([[0.1, 0.5, -0.2], [0.3, 0.1, 0.2], [0.0, 0.4, -0.1]],), {"border": "constant"}),
    ("median_blur", (5,), {"border": "replicate"}),
    ("morphology", ("gradient", 5), {"shape": "ellipse"}),
]


@pytest.fixture(scope="module")
def client():
    """Two workers (threads of this process: worker processes would import torch for
    tens of seconds on CI); closed after the module."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


def _compare(name, x, chunks, args, params, **compute):
    expected = getattr(imgfilters, name)(x, *args, **params).numpy()
    got = getattr(idask, name)(da.from_array(x.numpy(), chunks=chunks), *args, **params)
    assert isinstance(got, da.Array) and got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got.compute(**compute), expected, rtol=0, atol=1e-12)
    return got


@pytest.mark.parametrize("name,args,params", CALLS, ids=[c[0] for c in CALLS])
def test_threaded_equals_in_memory(name, args, params, gen):
    # chunks of 2 rows: smaller than most halos (merged); one image per chunk along the batch;
    # resampling's output blocks take the input's chunk sizes: 6 rows keep them few
    x = random_image((2, 3, 17, 22), torch.float64, gen)
    rows = 6 if name in ("resize", "upsample", "imresize") else 2
    _compare(name, x, (1, 3, rows, 8), args, params, scheduler="threads")


def test_per_image_parameters_follow_batch_chunks(gen):
    """Per-image sigmas, amounts, kernels and rows of taps are cut to each block's images; a
    1-D tensor of taps as long as the batch is no per-image parameter."""
    x = random_image((2, 2, 1, 13, 14), torch.float64, gen)
    sigma = torch.tensor([0.05, 0.1, 0.2, 0.4], dtype=torch.float64)
    kernels = torch.rand(4, 3, 5, generator=gen, dtype=torch.float64)
    three = random_image((3, 1, 13, 14), torch.float64, gen)
    taps = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    rows = torch.rand(4, 5, generator=gen, dtype=torch.float64)
    for name, img, args in (("bilateral", x, (sigma,)), ("filter2d", x, (kernels,)),
                            ("separable_filter", three, (taps,)), ("separable_filter", x, (rows, taps)),
                            ("unsharp_mask", x, (sigma * 10, torch.tensor([0.5, 1.0, -0.5, 2.0])))):
        expected = getattr(imgfilters, name)(img, *args).numpy()
        chunks = (1,) * (img.ndim - 2) + (5, 14)
        got = getattr(idask, name)(da.from_array(img.numpy(), chunks=chunks), *args).compute(scheduler="threads")
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_nl_means_one_estimate(gen):
    x = (0.5 + 0.03 * torch.randn(1, 30, 31, generator=gen, dtype=torch.float64)).clamp(0, 1)
    _compare("nl_means", x, (1, 12, 12), (), {"search_radius": 2}, scheduler="threads")


def test_joint_bilateral_guide_chunks_follow_the_image(gen):
    x, guide = random_image((3, 16, 15), torch.float64, gen), random_image((1, 16, 15), torch.float64, gen)
    expected = imgfilters.joint_bilateral(x, guide, 0.2, radius=2).numpy()
    got = idask.joint_bilateral(da.from_array(x.numpy(), chunks=(3, 6, 6)), da.from_array(guide.numpy(), chunks=4),
                                0.2, radius=2)
    np.testing.assert_allclose(got.compute(scheduler="threads"), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("guide_shape", [(1, 2, 16, 15), (2, 16, 15), (16, 15), (4, 2, 16, 15)])
def test_joint_bilateral_guide_shared_or_reshaped(guide_shape, gen):
    """A guide shared by the batch (its leading dims one image) or with the batch's images
    under other leading dims, as the in-memory call takes them."""
    x, guide = random_image((2, 2, 3, 16, 15), torch.float64, gen), random_image(guide_shape, torch.float64, gen)
    expected = imgfilters.joint_bilateral(x, guide, 0.2, radius=2).numpy()
    got = idask.joint_bilateral(da.from_array(x.numpy(), chunks=(1, 2, 3, 8, 15)), da.from_array(guide.numpy()),
                                0.2, radius=2)
    np.testing.assert_allclose(got.compute(scheduler="threads"), expected, rtol=0, atol=1e-12)


def test_halo_larger_than_the_image(gen):
    """An axis shorter than the halo is one block, which needs no overlap."""
    x = random_image((1, 3, 4, 40), torch.float64, gen)
    for chunks in ((1, 3, 4, 40), (1, 3, 4, 10)):
        got = idask.bilateral(da.from_array(x.numpy(), chunks=chunks), 0.1, 3.0).compute(scheduler="threads")
        np.testing.assert_allclose(got, imgfilters.bilateral(x, 0.1, 3.0).numpy(), rtol=0, atol=1e-12)
    grey = x[0, 0]
    got = idask.gaussian_blur(da.from_array(grey.numpy(), chunks=(2, 9)), 9).compute(scheduler="threads")
    np.testing.assert_allclose(got, imgfilters.gaussian_blur(grey, 9).numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name,args,params,message", [
    ("bilateral", (-0.1,), {}, "sigma_color must be"),
    ("bilateral", (0.1,), {"window": "round"}, "window must be one of"),
    ("gaussian_blur", (5,), {"border": "wrap"}, "border must be one of"),
    ("nl_means", (-0.1,), {"sigma": 0.02}, "h must be"),
    ("pointwise", ([pw.normalize([0.5, 0.5], [0.2, 0.2])],), {}, "normalize has 2 values for 3"),
    ("bilateral", (torch.tensor([0.1, 0.2, 0.3]),), {}, r"one value per image \(2\)"),
    ("filter2d", (torch.ones(3, 3, 3),), {}, "one per image"),
    ("resize", ((0, 9),), {}, "output size"),
    ("bilateral", (0.1, 20.0), {}, "default radius of 40"),  # (values that the op reads:)
    ("bilateral", (torch.tensor([0.1, -0.2]),), {}, "sigma_color must be finite and > 0, got -0.2"),
    ("nl_means", (torch.tensor([0.1, -1.0]),), {"sigma": 0.02}, "h must be finite and > 0"),
], ids=["sigma", "window", "border", "h", "normalize", "per-image", "kernels", "size", "radius", "sigma-values",
        "h-values"])
def test_arguments_are_checked_when_the_graph_is_built(tmp_path, name, args, params, message, gen):
    """A bad argument fails when the graph is built, so ``to_zarr(..., overwrite=True)``
    never empties an existing result before failing."""
    zarr = pytest.importorskip("zarr")
    x = random_image((2, 3, 12, 14), torch.float64, gen).numpy()
    zarr.create_array(str(tmp_path / "result.zarr"), shape=x.shape, chunks=(1, 3, 6, 7), dtype=x.dtype)[:] = x
    with pytest.raises((TypeError, ValueError), match=message):
        getattr(idask, name)(da.from_array(x, chunks=(1, 3, 6, 7)), *args, **params).to_zarr(
            str(tmp_path / "result.zarr"), overwrite=True)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "result.zarr"), mode="r")[:], x)


@pytest.mark.parametrize("name", ["bilateral", "resize"])
def test_distributed_cluster(client, name, gen):
    args, params = next((a, p) for n, a, p in CALLS if n == name)
    x = random_image((2, 3, 21, 19), torch.float64, gen)
    got = _compare(name, x, (1, 3, 8, 8), args, params)  # the client is the default scheduler
    assert pickle.loads(pickle.dumps(got)).name == got.name  # the graph can travel to worker processes


def test_zarr_round_trip(tmp_path, gen):
    zarr = pytest.importorskip("zarr")
    x = random_image((1, 1200, 1700), torch.float64, gen).numpy()  # 2 megapixels
    zarr.create_array(str(tmp_path / "in.zarr"), shape=x.shape, chunks=(1, 512, 512), dtype=x.dtype)[:] = x
    src = da.from_zarr(str(tmp_path / "in.zarr"))
    idask.gaussian_blur(src, 5).to_zarr(str(tmp_path / "out.zarr"))
    got = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")[:]
    np.testing.assert_allclose(got, imgfilters.gaussian_blur(torch.from_numpy(x), 5).numpy(), rtol=0, atol=1e-12)


def test_bigtiff_round_trip(tmp_path, gen):
    """A tiled RGB BigTIFF (channels last, as TIFF stores them) read through tifffile's
    zarr view, filtered (in float64, the reference path), and written into a
    memory-mapped BigTIFF, block by block."""
    tifffile = pytest.importorskip("tifffile")
    zarr = pytest.importorskip("zarr")
    x = random_image((1100, 1500, 3), torch.uint8, gen).numpy()
    tifffile.imwrite(tmp_path / "in.tif", x, bigtiff=True, tile=(256, 256))
    store = tifffile.imread(tmp_path / "in.tif", aszarr=True)
    src = da.from_zarr(zarr.open_array(store, mode="r")).transpose(2, 0, 1) / 255.0
    result = (idask.box_blur(src, 5) * 255).round().astype(np.uint8).transpose(1, 2, 0)
    out = tifffile.memmap(tmp_path / "out.tif", shape=result.shape, dtype=result.dtype, bigtiff=True)
    da.store(result, out, scheduler="threads")
    out.flush()
    store.close()
    expected = imgfilters.box_blur(torch.from_numpy(x).permute(2, 0, 1).double() / 255, 5).permute(1, 2, 0) * 255
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "out.tif"), expected.round().to(torch.uint8).numpy())


def test_bad_input(gen):
    x = random_image((3, 12, 12), torch.float64, gen).numpy()
    with pytest.raises(TypeError, match=r"img must be a dask.array.Array, got ndarray \(imgfilters.bilateral takes"):
        idask.bilateral(x)
    with pytest.raises(TypeError, match=r"guide must be a dask.array.Array, got ndarray \(imgfilters.joint_bilateral"):
        idask.joint_bilateral(da.from_array(x), x)
    unknown = da.from_array(x)[da.from_array(x)[:, 0, 0] > -1]  # (rows chosen by values: unknown chunk sizes)
    with pytest.raises(ValueError, match=r"unknown chunk sizes .*compute_chunk_sizes\(\)"):
        idask.bilateral(unknown)
    with pytest.raises(ValueError, match="img has 5 channels; nl_means supports 1 to 4"):
        idask.nl_means(da.from_array(np.zeros((5, 40, 40))), 0.1, sigma=0.02)
    with pytest.raises(AttributeError, match="no joint_bilateral_upsample: its output lies on the guide's grid"):
        idask.joint_bilateral_upsample(da.from_array(x[:, ::2, ::2]), da.from_array(x))
    with pytest.raises(ValueError, match="channel axis"):
        idask.bilateral(da.from_array(x, chunks=(1, 12, 12)))
    with pytest.raises(TypeError, match="dtype"):
        idask.bilateral(da.from_array(x.astype(np.int32)))
    with pytest.raises(ValueError, match="guide"):
        idask.joint_bilateral(da.from_array(x), da.from_array(x[:, :6]))
    assert set(idask.__all__) <= set(imgfilters.__all__)
    assert dask.is_dask_collection(idask.resize(da.from_array(x), 5))
