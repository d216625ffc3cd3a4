"""The guided filter: the float64 definition (``reference/guided.py``) against kornia's
``guided_blur`` and an independent NumPy implementation (window views, He et al.'s
formulas solved per pixel), its gradients; the function (the library's launches on the
kernels and the CPU engine) against the definition, the transform, tiles and Dask."""
import numpy as np
import pytest
import torch

import imgfilters
from imgfilters import _image, transforms as T
from imgfilters.reference import guided as ref
from imgfilters.reference.borders import border_indices

from helpers import KERNEL_DTYPES, assert_matches, random_image, sample


def numpy_guided(p, guide, r, eps, border):
    """He et al.'s guided filter of one image ``p`` (C, H, W) by ``guide`` (G, H, W), G 1
    or 3, NumPy float64: box means over window views of the padded images, a G x G solve
    per pixel by ``numpy.linalg.solve``."""
    C, H, W = p.shape
    G = guide.shape[0]
    rows = border_indices(H, r, r, border).numpy()
    cols = border_indices(W, r, r, border).numpy()

    def mean(x):  # (..., H, W) -> box means
        xp = x[..., np.clip(rows, 0, None), :][..., np.clip(cols, 0, None)]
        if border == "constant":
            xp = xp * ((rows >= 0)[:, None] & (cols >= 0)[None, :])
        return np.lib.stride_tricks.sliding_window_view(xp, (2 * r + 1, 2 * r + 1), axis=(-2, -1)).mean((-2, -1))

    mi, mp = mean(guide), mean(p)
    cov = mean(guide[:, None] * p[None]) - mi[:, None] * mp[None]  # (G, C, H, W)
    sigma = mean(guide[:, None] * guide[None]) - mi[:, None] * mi[None]  # (G, G, H, W)
    a = np.empty((G, C, H, W))
    for i in range(H):
        for j in range(W):
            a[:, :, i, j] = np.linalg.solve(sigma[:, :, i, j] + eps * np.eye(G), cov[:, :, i, j])
    b = mp - (a * mi[:, None]).sum(0)
    return (mean(a) * guide[:, None]).sum(0) + mean(b)


@pytest.mark.parametrize("border", ["reflect", "symmetric", "replicate", "constant"])
@pytest.mark.parametrize("channels", [1, 3])
def test_definition_equals_numpy(channels, border, gen):
    photo = sample("coffee")[:, 60:90, 100:136].double() / 255
    x = torch.cat([photo[None], torch.rand(1, 3, 30, 36, generator=gen, dtype=torch.float64)])
    guide = x[:, :channels].flip(-1)
    got = ref.guided_filter(x, guide, 3, torch.tensor([1e-2, 1e-3]), border=border)
    for i, eps in enumerate((1e-2, 1e-3)):
        expected = numpy_guided(x[i].numpy(), guide[i].numpy(), 3, eps, border)
        # (variances as E[x^2] - E[x]^2 and eps 1e-3: the solve scales their rounding by 1e3 and more)
        np.testing.assert_allclose(got[i].numpy(), expected, rtol=0, atol=1e-8)


@pytest.mark.parametrize("border", ["reflect", "replicate", "constant"])
@pytest.mark.parametrize("r, s", [(2, 1), (4, 1), (4, 2), (8, 4), (6, 3)])
@pytest.mark.parametrize("guide", ["grey", "colour", "self"])
def test_definition_equals_kornia(guide, r, s, border, gen):
    kornia = pytest.importorskip("kornia")
    x = torch.rand(2, 3, 27, 34, generator=gen, dtype=torch.float64)
    g = {"grey": x[:, 1:2].sqrt(), "colour": torch.rand(2, 3, 27, 34, generator=gen, dtype=torch.float64),
         "self": x}[guide]
    eps = torch.tensor([1e-2, 3e-3], dtype=torch.float64)
    expected = kornia.filters.guided_blur(g, x, 2 * r + 1, eps, border_type=border, subsample=s)
    torch.testing.assert_close(ref.guided_filter(x, g, r, eps, s, border), expected, rtol=0, atol=1e-12)


def test_definition_gradients(gen):
    x = torch.rand(1, 2, 9, 11, generator=gen, dtype=torch.float64, requires_grad=True)
    grey = torch.rand(1, 1, 9, 11, generator=gen, dtype=torch.float64, requires_grad=True)
    colour = torch.rand(1, 3, 9, 11, generator=gen, dtype=torch.float64, requires_grad=True)
    eps = torch.tensor([0.05], dtype=torch.float64, requires_grad=True)
    for g in (grey, colour):
        assert torch.autograd.gradcheck(lambda a, b, e: ref.guided_filter(a, b, 2, e, border="symmetric"),
                                        (x, g, eps))
    assert torch.autograd.gradcheck(lambda a, b, e: ref.guided_filter(a, b, 2, e, 2), (x, colour, eps))


def small_tiles(monkeypatch):
    """The sliding kernels in the GPU's plan (``sliding.programs``' other branch) with a
    tile of 16 lanes and 3 rows: several blocks of lanes and segments of rows an image."""
    from imgfilters.kernels import sliding
    monkeypatch.setattr(sliding, "interpreted", lambda x: False)
    monkeypatch.setattr(sliding, "tile", lambda radius, lanes: (16, 3, 1))


@pytest.mark.parametrize("radius, lanes, planned", [(8, 2, (128, 64, 2)), (1, 2, (128, 64, 2)), (8, 1, (128, 64, 4)),
                                                    (16, 2, (128, 64, 2)), (17, 2, (256, 64, 4)),
                                                    (63, 2, (512, 64, 8)), (63, 1, (512, 64, 16))])
def test_sliding_plans_cover_the_image(radius, lanes, planned, monkeypatch):
    """The GPU's tiles (``sliding.tile``, a plain function of the radius and the lanes a
    thread), asked for 4K without a GPU: at most a quarter of a block is halo, and the
    programs' blocks of outputs and segments of rows cover the image."""
    from imgfilters.kernels import sliding
    block, seg, warps = sliding.tile(radius, lanes)
    assert (block, seg, warps) == planned and 2 * radius <= block // 4 and block == 32 * warps * lanes
    monkeypatch.setattr(sliding, "interpreted", lambda x: False)
    H, W = 2160, 3840
    tile, n = sliding.programs(torch.empty(2, 3, 0, 0, device="meta"), radius, W, H, lanes)
    assert tile == planned and n == 2 * -(-W // (block - 2 * radius)) * -(-H // seg)
    assert n * (block - 2 * radius) * seg >= 2 * H * W


# ---- the function: the library's launches (kernels, CPU engine) against the definition ------

def definition(img, guide, radius, eps, subsample=1, border="reflect"):
    x = _image.to_unit(_image.as_planes(img.cpu()))
    g = x if guide is None else _image.to_unit(_image.as_planes(guide.cpu()))
    eps = torch.as_tensor(eps, dtype=torch.float64)
    return ref.guided_filter(x, g, radius, eps, subsample, border).reshape(img.shape)


def test_kernels_grey_and_colour_guides(gen, device):
    # (the interpreter runs each box launch over the stacked channels for seconds: one small case each)
    x = random_image((2, 3, 9, 13), torch.float32, gen, device)
    grey = random_image((1, 1, 9, 13), torch.uint8, gen, device)
    assert_matches(imgfilters.guided_filter(x, grey, 2, 0.01), definition(x, grey, 2, 0.01), torch.float32)
    eps = torch.tensor([0.02, 0.005], device=device)
    assert_matches(imgfilters.guided_filter(x, None, 2, eps, subsample=2, border="constant"),
                   definition(x, None, 2, eps.cpu(), 2, "constant"))


@pytest.mark.parametrize("guide_channels", [1, 3])
def test_the_models_and_output_are_one_launch_each(guide_channels, gen, device):
    """The models from ``kernels/guided.py``, then their box means applied to the guide in
    one launch; uint8 in and out, channels-last, a guide shared by the batch."""
    from helpers import count_launches
    x = random_image((2, 3, 6, 9), torch.uint8, gen, device).contiguous(memory_format=torch.channels_last)
    g = random_image((1, guide_channels, 6, 9), torch.float32, gen, device)
    with count_launches() as launches:
        y = imgfilters.guided_filter(x, g, 1, 0.02)
    assert launches["models_kernel"] == launches["box_kernel"] == 1 and sum(launches.values()) == 2, launches
    assert y.dtype == torch.uint8 and y.is_contiguous(memory_format=torch.channels_last)
    assert_matches(y, definition(x, g, 1, 0.02))


@pytest.mark.parametrize("guide_channels, border", [(3, "reflect"), (1, "constant")])
def test_bands_of_rows_keep_the_models_small(guide_channels, border, gen, device, monkeypatch):
    """Without gradients the models and their means are made band by band of rows (G + 1
    bands: 4 for a colour guide), each band's models reaching ``radius`` rows past it;
    the result is the definition's, band edges included."""
    from helpers import count_launches
    from imgfilters.ops import guided
    monkeypatch.setattr(guided, "MIN_BAND_ROWS", 3)
    x = random_image((1, 3, 13, 9), torch.float32, gen, device)
    g = random_image((1, guide_channels, 13, 9), torch.uint8, gen, device)
    with count_launches() as launches:
        y = imgfilters.guided_filter(x, g, 2, 0.01, border=border)
    bands = guide_channels + 1
    assert launches["models_kernel"] == launches["box_kernel"] == bands == sum(launches.values()) / 2, launches
    assert_matches(y, definition(x, g, 2, 0.01, 1, border))


@pytest.mark.parametrize("border", ["reflect", "replicate", "constant"])
def test_sliding_box_means_equal_box_blur(border, gen, device, monkeypatch):
    """``kernels.sliding.box``'s means against ``box_blur``: in the GPU's tiles made small
    (several blocks of lanes and segments of rows an image, a radius past the image's
    size), a band of rows, and NaN and inf reaching only the windows that hold them."""
    from imgfilters.kernels import sliding
    from imgfilters.ops import separable
    small_tiles(monkeypatch)
    for (H, W, r, rows) in ((9, 30, 2, (1, 8)), (3, 4, 4, (0, 3))):
        m = torch.rand(2, 2, H, W, generator=gen).to(device)
        m[1, 1, H // 2, W // 3] = float("nan")
        m[0, 1, H - 1, W - 2] = float("inf")
        want = separable.box_blur(m.cpu(), 2 * r + 1, border=border, border_value=0.0)
        got = sliding.box(m, r, border, rows).cpu()
        expected = want[:, :, rows[0]:rows[1]]
        assert torch.equal(got.isnan(), expected.isnan()) and torch.equal(got.isinf(), expected.isinf())
        finite = expected.isfinite()
        torch.testing.assert_close(got[finite], expected[finite], rtol=0, atol=2e-6)


@pytest.mark.parametrize("border", ["reflect", "symmetric", "replicate", "constant"])
def test_sliding_box_adjoint_is_the_box_blurs_gradient(border, gen, device, monkeypatch):
    """The box means' adjoint (the sliding box over zeros, its margins folded back) against
    autograd through the float64 ``box_blur``, in small tiles, a radius past the image's
    size included."""
    from imgfilters.ops import guided, separable
    small_tiles(monkeypatch)
    for (H, W, r) in ((9, 30, 2), (3, 4, 4)):
        grad = torch.rand(1, 2, H, W, generator=gen)
        x = torch.zeros(1, 2, H, W, dtype=torch.float64, requires_grad=True)
        y = separable.box_blur(x, 2 * r + 1, border=border, border_value=0.0)
        expected, = torch.autograd.grad(y, x, grad.double())
        got = guided._box_adjoint(grad.to(device), r, border).cpu()
        torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-6)


@pytest.mark.parametrize("guide_channels, border", [(3, "symmetric"), (1, "constant")])
def test_models_slide_in_the_gpus_tiles(guide_channels, border, gen, device, monkeypatch):
    """The models' sliding window sums in the GPU's tiles made small (several blocks of
    lanes and segments of rows an image), a NaN in the image: the filter equals the
    definition, and the NaN reaches the outputs within twice the radius of it only."""
    small_tiles(monkeypatch)
    x = random_image((1, 3, 12, 31), torch.float32, gen, device)
    x[0, 1, 5, 17] = float("nan")
    g = random_image((1, guide_channels, 12, 31), torch.float32, gen, device)
    y = imgfilters.guided_filter(x, g, 2, 0.01, border=border).cpu()
    expected = definition(x, g, 2, 0.01, 1, border)
    assert torch.equal(y.isnan(), expected.isnan()) and 0 < int(y.isnan().sum()) < y.numel() // 3
    finite = expected.isfinite()
    torch.testing.assert_close(y[finite].double(), expected[finite], rtol=0, atol=1e-5)


@pytest.mark.parametrize("guide_channels, subsample, border", [(3, 2, "reflect"), (1, 1, "constant"),
                                                               (3, 1, "symmetric")])
def test_kernel_gradients_to_image_guide_and_eps(guide_channels, subsample, border, gen, device):
    """The backward kernels (the output's gradient, the models' recomputed window sums,
    the terms' products) against autograd through the float64 definition: a colour guide
    per image with per-image eps, with the fast filter's upsampling and without; a grey
    guide shared by the batch with a number eps and the constant border."""
    from helpers import count_launches
    x = torch.rand(2, 3, 8, 9, generator=gen).to(device).requires_grad_()
    g = torch.rand(2 if guide_channels == 3 else 1, guide_channels, 8, 9, generator=gen).to(device).requires_grad_()
    eps = torch.tensor([0.02, 0.05], device=device, requires_grad=True) if guide_channels == 3 else 0.03
    w = torch.rand(2, 3, 8, 9, generator=gen)
    inputs = (x, g, eps) if torch.is_tensor(eps) else (x, g)
    with count_launches() as launches:
        got = torch.autograd.grad((imgfilters.guided_filter(x, g, 2, eps, subsample=subsample, border=border)
                                   * w.to(device)).sum(), inputs)
    # forward: the fast filter's models, box means and output; else models and output.
    # Backward: the output's gradient (the fast filter's from its upsampled means, else from
    # the box means summed again), the models' and the terms' launches, two box adjoints
    # (the interior, and four margins but at the constant border)
    assert launches["models_kernel"] == 2 and launches["terms_vjp_kernel"] == 1, launches
    adjoints = 2 * (1 if border == "constant" else 5)
    assert launches["box_kernel"] == 3 - subsample + adjoints, launches
    assert launches["apply_kernel"] == (2 if subsample > 1 else 0), launches
    inputs64 = [t.detach().cpu().double().requires_grad_() for t in inputs]
    e64 = inputs64[2] if torch.is_tensor(eps) else torch.tensor(eps, dtype=torch.float64)
    y64 = ref.guided_filter(inputs64[0], inputs64[1].expand(2, -1, -1, -1), 2, e64, subsample, border)
    expected = torch.autograd.grad((y64 * w.double()).sum(), inputs64)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.cpu().double(), b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
def test_engine_every_dtype_guide_and_layout(dtype, cpu_engine, gen):
    x = random_image((2, 3, 19, 23), dtype, gen).to(memory_format=torch.channels_last)
    colour = random_image((2, 3, 19, 23), torch.float32, gen)
    for guide, subsample, border in ((None, 1, "reflect"), (x[:, :1], 1, "symmetric"), (colour, 3, "replicate")):
        y = imgfilters.guided_filter(x, guide, 3, 0.01, subsample=subsample, border=border)
        assert y.dtype == dtype and y.is_contiguous(memory_format=torch.channels_last)
        assert_matches(y, definition(x, guide, 3, 0.01, subsample, border))


def test_float64_is_the_definition(gen):
    x = torch.rand(1, 3, 11, 12, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(imgfilters.guided_filter(x, None, 2, 0.1), definition(x, None, 2, 0.1), rtol=0,
                               atol=0)


def test_gradients_to_image_guide_and_eps(cpu_engine, gen):
    x = torch.rand(2, 3, 10, 12, generator=gen, requires_grad=True)
    g = torch.rand(2, 3, 10, 12, generator=gen, requires_grad=True)
    eps = torch.tensor([0.02, 0.05], requires_grad=True)
    w = torch.rand(2, 3, 10, 12, generator=gen)
    got = torch.autograd.grad((imgfilters.guided_filter(x, g, 2, eps, subsample=2) * w).sum(), (x, g, eps))
    x64, g64, e64 = (t.detach().double().requires_grad_() for t in (x, g, eps))
    expected = torch.autograd.grad((ref.guided_filter(x64, g64, 2, e64, 2) * w.double()).sum(), (x64, g64, e64))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.double(), b, rtol=1e-3, atol=1e-4)


def test_transform_tiles_and_dask(cpu_engine, gen):
    x = random_image((2, 3, 30, 34), torch.uint8, gen)
    torch.manual_seed(3)
    y = T.GuidedFilter(3, (0.01, 0.05), per_sample=True)(x)
    torch.manual_seed(3)
    eps = torch.empty(2, dtype=torch.float64).uniform_(0.01, 0.05)
    assert torch.equal(y, imgfilters.guided_filter(x, None, 3, eps))
    whole = imgfilters.guided_filter(x, x[:1, 1:2], 3, 0.02)
    assert torch.equal(imgfilters.tiled(imgfilters.guided_filter, x, x[:1, 1:2], 3, 0.02, tile=(12, 16),
                                        device="cpu"), whole)
    with pytest.raises(ValueError, match="subsample > 1 cannot be tiled"):
        imgfilters.tiled(imgfilters.guided_filter, x, subsample=2)
    da = pytest.importorskip("dask.array")
    import imgfilters.dask as idask
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    d = idask.guided_filter(da.from_array(x.numpy(), chunks=(1, 3, 15, 17)), None, 3, eps).compute()
    np.testing.assert_array_equal(d, imgfilters.guided_filter(x.to(dev), None, 3, eps).cpu().numpy())


@pytest.mark.parametrize("call, message", [
    (lambda x: imgfilters.guided_filter(x, radius=0), "radius must be an integer in"),
    (lambda x: imgfilters.guided_filter(x, eps=0.0), "eps must be > 0"),
    (lambda x: imgfilters.guided_filter(x, eps=torch.tensor([0.1, 0.2, 0.3])), "eps must be a number or a float"),
    (lambda x: imgfilters.guided_filter(x, subsample=0), "subsample must be an integer in"),
    (lambda x: imgfilters.guided_filter(x, torch.zeros(1, 2, 4, 4)), "guide must be"),
    (lambda x: imgfilters.guided_filter(x, torch.zeros(1, 1, 4, 5)), "guide must be"),
    (lambda x: imgfilters.guided_filter(x[:, :2]), "needs 1 or 3 channels"),
    (lambda x: imgfilters.guided_filter(x, border="wrap"), "border"),
    (lambda x: T.GuidedFilter(eps=(0.2, 0.1)), "eps must be a number or a"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call(torch.zeros(1, 3, 4, 4))
