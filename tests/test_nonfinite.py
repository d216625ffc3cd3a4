"""NaN and inf inputs stay local: on every path (the kernels, the CPU engine, the float64
reference) a non-finite pixel reaches only the outputs that read it (README, "Non-finite
values")."""
import pytest
import torch

import imgfilters
from imgfilters import _image
from imgfilters.reference import resample as ref

NAN, INF = float("nan"), float("inf")
# (plane, row, column, value): a NaN, and an inf next to a -inf (between them IEEE makes NaN)
BAD = [(0, 5, 6, NAN), (1, 10, 3, INF), (1, 10, 4, -INF), (2, 2, 12, INF)]

FILTERS = {
    "separable_filter": lambda x: imgfilters.separable_filter(x, [1.0, -2.0, 0.5], [0.25, 0.5, 0.25]),
    "gaussian_blur": lambda x: imgfilters.gaussian_blur(x, 5, 1.0),
    "gaussian_blur, banded products": lambda x: imgfilters.gaussian_blur(x, 45, 6.0),
    "box_blur": lambda x: imgfilters.box_blur(x, 3, border="constant"),
    "unsharp_mask": lambda x: imgfilters.unsharp_mask(x, 1.0, 0.5),
    "bilateral": lambda x: imgfilters.bilateral(x, 0.2, 1.0, radius=2),
    "joint_bilateral": lambda x: imgfilters.joint_bilateral(x, x.flip(-1), 0.2, 1.0, radius=1),
    "joint_bilateral_upsample": lambda x: imgfilters.joint_bilateral_upsample(x[..., ::2, ::2], x, 0.2, 1.0,
                                                                              radius=1),
    "nl_means": lambda x: imgfilters.nl_means(x, 0.2, sigma=0.02, patch_size=3, search_radius=2),
    "sobel": lambda x: imgfilters.sobel(x, 1, 1, ksize=5),
    "laplacian": lambda x: imgfilters.laplacian(x, 3),
    "gradient_magnitude": lambda x: imgfilters.gradient_magnitude(x, 3),
    "guided_filter": lambda x: imgfilters.guided_filter(x, None, 2, 0.01),
    "morphology": lambda x: imgfilters.morphology(x, "gradient", 3, shape="cross"),
    "pointwise": lambda x: imgfilters.pointwise(x, [imgfilters.ops.pointwise.normalize([0.5] * 3, [0.2] * 3)]),
    "resize": lambda x: imgfilters.resize(x, (23, 11), "bicubic"),
    "upsample": lambda x: imgfilters.upsample(x, 2),
    "imresize": lambda x: imgfilters.imresize(x, 0.75),
}


# The filters whose windows hold zero taps (the derivatives'): IEEE makes 0 * NaN NaN, so
# their reach is the whole window, (rows, cols), not only the taps that weigh a pixel; and
# morphology's, whose outputs change with a pixel's value only where it is the min or max
# (its cross lies in the 3 x 3 window).
WINDOWS = {"sobel": (5, 5), "laplacian": (3, 3), "gradient_magnitude": (3, 3), "morphology": (3, 3)}


def _with(x, value=None):
    """``x`` with the BAD pixels set to their values (or to ``value``)."""
    x = x.clone()
    for p, r, c, v in BAD:
        x[0, p, r, c] = v if value is None else value
    return x


# The interpreter takes 2-3 s per call of the filter kernels on any image; there only the
# resampling kernels, the banded products (under a second) and non-local means are checked,
# the rest on the GPU.
INTERPRETER_CHECKED = ("pointwise", "resize", "upsample", "imresize", "nl_means", "gaussian_blur, banded products",
                       "gradient_magnitude", "morphology")


@pytest.mark.parametrize("path", ["reference", "kernels", "cpu engine"])
@pytest.mark.parametrize("name", FILTERS)
def test_non_finite_stays_where_it_is_read(name, path, device, gen, monkeypatch):
    if path == "kernels" and device == "cpu" and name not in INTERPRETER_CHECKED:
        pytest.skip("checked on the GPU (slow in the interpreter)")
    if path == "cpu engine":
        pytest.importorskip("numba")
        device = "cpu"
        monkeypatch.setattr(_image, "_ENGINE", [True])
    if name == "nl_means" and device == "cpu":
        # the GPU's strips of 8 rows, whose box sums span two blocks of patch rows (the
        # interpreter's own one-row strips never do)
        from imgfilters.kernels import nlm
        monkeypatch.setattr(nlm, "interpreting", lambda: False)
    fn = FILTERS[name]
    x = torch.rand(1, 3, 16, 16, generator=gen, dtype=torch.float64)
    # the outputs that read a BAD pixel: those that change with its value (float64 path)
    clean = fn(_with(x, 0.3))
    reach = (clean - fn(_with(x, 0.7))).abs() > 1e-12
    if name in WINDOWS:
        (kh, kw), marked = WINDOWS[name], _with(torch.zeros_like(x), 1.0)
        reach = torch.nn.functional.max_pool2d(marked, (kh, kw), 1, (kh // 2, kw // 2)) > 0
    img = _with(x) if path == "reference" else _with(x).float().to(device)
    y = fn(img).cpu().double()
    bad = ~y.isfinite()
    assert bad.any() or name == "unsharp_mask"  # (a NaN blur fails the threshold: the pixel is kept)
    assert not (bad & ~reach).any(), f"{int((bad & ~reach).sum())} non-finite outputs out of reach"
    assert torch.allclose(y[~reach], clean[~reach], atol=1e-5, rtol=0)


RESAMPLING = [("bilinear", (23, 11), True), ("bicubic", (16, 16), False), ("lanczos", (9, 30), True),
              ("area", (8, 5), False), ("nearest", (31, 7), False), ("matlab", (12, 20), True)]


@pytest.mark.parametrize("mode, size, aa", RESAMPLING)
def test_resampling_non_finite_exactly_as_the_reference(mode, size, aa, device, gen):
    """Kernels and reference agree on which outputs are NaN, inf and -inf: those that give
    a non-finite pixel a nonzero weight, combined as IEEE arithmetic does (bicubic at the
    same size and MATLAB's outermost taps have weights of 0: those read nothing)."""
    _resampling_exactly_as_the_reference(mode, size, aa, device, gen)


@pytest.mark.parametrize("mode, size, aa", RESAMPLING + [("bicubic", (32, 48), False), ("lanczos", (48, 32), True),
                                                          ("nearest", (64, 32), False)])
def test_cpu_engine_resampling_non_finite_exactly_as_the_reference(mode, size, aa, gen, monkeypatch):
    """The same on the CPU engine, with its constant-phase W pass (integer upscales)."""
    pytest.importorskip("numba")
    monkeypatch.setattr(_image, "_ENGINE", [True])
    _resampling_exactly_as_the_reference(mode, size, aa, "cpu", gen)


def _resampling_exactly_as_the_reference(mode, size, aa, device, gen):
    if mode == "matlab":
        fn = lambda img: imgfilters.imresize(img, size=size)  # noqa: E731
    else:
        fn = lambda img: imgfilters.resize(img, size, mode, antialias=aa)  # noqa: E731
    x = _with(torch.rand(1, 3, 16, 16, generator=gen, dtype=torch.float64))
    expected = fn(x)  # the float64 reference
    taps = [ref.weights(n, m, mode, antialias=aa) != 0 for n, m in zip(x.shape[-2:], size)]
    near = torch.zeros(3, *size, dtype=torch.bool)  # the outputs whose taps read a BAD pixel
    for p, r, c, _ in BAD:
        near[p] |= taps[0][:, r][:, None] & taps[1][:, c][None, :]
    assert expected[0][near].isnan().any() and expected[0][~near].isfinite().all()
    y = fn(x.float().to(device)).cpu().double()
    for test in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(test(y), test(expected)), test.__name__
    finite = expected.isfinite()
    assert torch.allclose(y[finite], expected[finite], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name,args,params", [("resize", ((8, 10),), {}), ("upsample", (2.0,), {"mode": "bilinear"}),
                                              ("imresize", (0.75,), {}), ("resize", ((23, 11), "lanczos"), {})],
                         ids=["resize", "upsample", "imresize", "lanczos"])
def test_tiled_and_dask_resampling_keep_non_finite_local(name, args, params, device, gen):
    """Tiles and dask blocks read only the taps of nonzero weight, as the untiled call: the
    same NaN, inf and -inf, and the same finite values (bit for bit on the float64 path)."""
    da = pytest.importorskip("dask.array")
    import imgfilters.dask as idask
    fn = getattr(imgfilters, name)
    x = _with(torch.rand(1, 3, 16, 20, generator=gen, dtype=torch.float64))
    expected = fn(x, *args, **params)
    assert expected.isnan().any() and expected.isfinite().sum() > expected.numel() // 2
    tiles = imgfilters.tiled(fn, x, *args, tile=3, progress=False, **params)
    blocks = torch.from_numpy(getattr(idask, name)(da.from_array(x.numpy(), chunks=(1, 3, 8, 8)), *args,
                                                    **params).compute(scheduler="threads"))
    for got in (tiles, blocks):
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    on_device = imgfilters.tiled(fn, x.float(), *args, tile=5, device=device, progress=False, **params).double()
    for test in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(test(on_device), test(expected)), test.__name__


@pytest.mark.parametrize("path", ["reference", "kernels", "cpu engine"])
@pytest.mark.parametrize("border", ["reflect", "constant"])
def test_median_nan_windows_give_nan_and_infinities_are_ordered_values(path, border, device, gen, monkeypatch):
    """``median_blur``: an output is NaN exactly where its window holds a NaN; an inf is
    a value like any other (below or above every finite one), so the other outputs are
    their windows' exact medians, infinities among them (the float64 reference's, on
    every path)."""
    from imgfilters.reference import median as median_ref
    if path == "cpu engine":
        pytest.importorskip("numba")
        device = "cpu"
        monkeypatch.setattr(_image, "_ENGINE", [True])
    x = _with(torch.rand(1, 3, 16, 16, generator=gen, dtype=torch.float64))
    x[0, 1, 9:12, 2:5] = INF  # a window of infinities: an inf median
    expected = median_ref.median_blur(x, 3, border, 0.5)
    holds_nan = median_ref.windows(x.isnan().double(), 3, border).amax(-1) > 0
    assert torch.equal(expected.isnan(), holds_nan) and expected.isposinf().any()
    img = x if path == "reference" else x.float().to(device)
    y = imgfilters.median_blur(img, 3, border=border, border_value=0.5).cpu().double()
    torch.testing.assert_close(y, expected, rtol=0, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("path", ["reference", "kernels", "cpu engine"])
@pytest.mark.parametrize("kernel,shape,border", [(3, "rect", None), (11, "rect", "reflect"),
                                                (7, "ellipse", "constant")])
def test_morphology_nan_windows_give_nan_and_infinities_are_ordered_values(path, kernel, shape, border, device, gen,
                                                                           monkeypatch):
    """``erode``/``dilate``: an output is NaN exactly where its window (the structuring
    element's positions) holds a NaN, whichever pass (direct, van Herk scans, row runs)
    computes it; infinities are values like any other (the float64 reference's, on every
    path)."""
    from imgfilters.ops.morphology import check_kernel, mask_of
    from imgfilters.reference import morphology as morph_ref
    if path == "cpu engine":
        pytest.importorskip("numba")
        device = "cpu"
        monkeypatch.setattr(_image, "_ENGINE", [True])
    x = _with(torch.rand(1, 3, 16, 16, generator=gen, dtype=torch.float64))
    mask = mask_of(*check_kernel(kernel, shape))
    holds_nan = morph_ref.dilate(x.isnan().double(), mask, 1, border, 0.0) > 0
    img = x if path == "reference" else x.float().to(device)
    for fn, ref_fn in ((imgfilters.erode, morph_ref.erode), (imgfilters.dilate, morph_ref.dilate)):
        expected = ref_fn(torch.where(x.isnan(), 0.5, x), mask, 1, border, 0.5)
        expected = torch.where(holds_nan, float("nan"), expected)
        assert expected.isinf().any()
        y = fn(img, kernel, shape=shape, border=border, border_value=0.5).cpu().double()
        torch.testing.assert_close(y, expected, rtol=0, atol=1e-7, equal_nan=True)
