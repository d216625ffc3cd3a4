"""torch.compile and autograd through the custom ops (torch.ops.imgfilters): graphs with no
break, compiled results and gradients equal to eager ones, opcheck on every op."""
import pytest
import torch

import imgfilters
from imgfilters.ops import pointwise as pw
from imgfilters.reference import bilateral as bilateral_reference

from helpers import GRADIENT, gpu, random_image

OPS = torch.ops.imgfilters
STEPS = [pw.normalize([0.4, 0.5, 0.6], [0.2, 0.25, 0.3]), pw.clamp(-1.0, 1.0)]

# name -> (function of (img, guide, low), indices of the inputs it differentiates)
CALLS = {
    "separable_filter": (lambda x, g, low: imgfilters.separable_filter(x, [0.25, 0.5, 0.25],
                                                                       torch.tensor([0.1, 0.3, 0.6])), [0]),
    "separable_filter_per_image": (lambda x, g, low: imgfilters.separable_filter(
        x, torch.tensor([[0.25, 0.5, 0.25], [0.1, 0.3, 0.6]]), [0.2, 0.6, 0.2], border="symmetric"), [0]),
    "gaussian_blur": (lambda x, g, low: imgfilters.gaussian_blur(x, [3, 5], [0.8, 1.2]), [0]),
    "box_blur": (lambda x, g, low: imgfilters.box_blur(x, 3, border="constant", border_value=0.5), [0]),
    "unsharp_mask": (lambda x, g, low: imgfilters.unsharp_mask(x, 0.6, 1.5, 0.02), [0]),
    "unsharp_mask_per_image": (lambda x, g, low: imgfilters.unsharp_mask(x, torch.tensor([0.4, 0.7]),
                                                                         torch.tensor([1.5, -0.5])), [0]),
    "median_blur": (lambda x, g, low: imgfilters.median_blur(x, 3, border="constant", border_value=0.5), [0]),
    # (a mask of lists: torch.compile traces it as constants)
    "morphology": (lambda x, g, low: imgfilters.morphology(x, "gradient", [[1, 0, 1], [0, 1, 0]]), [0]),
    "bilateral": (lambda x, g, low: imgfilters.bilateral(x, 0.2, 0.4), [0]),  # (radius ceil(2 * 0.4) = 1)
    "bilateral_per_image": (lambda x, g, low: imgfilters.bilateral(x, torch.tensor([0.1, 0.3]), 1.0, radius=1,
                                                                   window="disk", color_distance="l1"), [0]),
    "joint_bilateral": (lambda x, g, low: imgfilters.joint_bilateral(x, g, 0.2, 1.0, radius=1), [0, 1]),
    "joint_bilateral_upsample": (lambda x, g, low: imgfilters.joint_bilateral_upsample(low, x, 0.2, 1.0, radius=1),
                                 [0, 2]),
    "nl_means": (lambda x, g, low: imgfilters.nl_means(x, torch.tensor([0.1, 0.2]), sigma=0.02, patch_size=3,
                                                       search_radius=1), []),
    "resize": (lambda x, g, low: imgfilters.resize(x, [7, 9], antialias=True), [0]),
    "upsample": (lambda x, g, low: imgfilters.upsample(x, 1.5, mode="bicubic"), [0]),
    "imresize": (lambda x, g, low: imgfilters.imresize(x, 0.5), [0]),
    "pointwise": (lambda x, g, low: imgfilters.pointwise(x, STEPS, dtype=torch.float32), []),
    "sobel": (lambda x, g, low: imgfilters.sobel(x, 1, 1, border="replicate"), [0]),
    "laplacian": (lambda x, g, low: imgfilters.laplacian(x, 3, scale=0.5), [0]),
    "gradient_magnitude": (lambda x, g, low: imgfilters.gradient_magnitude(x, 3, border="constant"), [0]),
    "guided_filter": (lambda x, g, low: imgfilters.guided_filter(x, g, 1, 0.05), [0, 1]),
}
DIFFERENTIABLE = [name for name, (_, grads) in CALLS.items() if grads]


# The filters whose programs march down the rows (the interpreter's cost grows with them)
# get fewer rows: 6 for the separable ones, whose radius-2 window still meets neither border
# from the middle rows; 4 for the bilaterals (all of radius 1) and 3 low-resolution ones for
# the upsampling, their windows still smaller than the image (their NEAR branch). The
# resamplers keep 12, whose sizes choose their paths.
ROWS = dict.fromkeys(["separable_filter", "separable_filter_per_image", "gaussian_blur", "box_blur", "unsharp_mask",
                      "unsharp_mask_per_image", "joint_bilateral_upsample", "sobel", "laplacian", "gradient_magnitude",
                      "guided_filter"], 6)
ROWS.update(dict.fromkeys(["bilateral", "bilateral_per_image", "joint_bilateral"], 4))


def inputs(gen, dtype=torch.float32, device="cpu", rows=12):
    """A batch of 2 tiny images, a shared one-channel guide and a half-size image."""
    return (random_image((2, 3, rows, 16), dtype, gen, device), random_image((1, 1, rows, 16), dtype, gen, device),
            random_image((2, 3, rows // 2, 8), dtype, gen, device))


@pytest.mark.parametrize("name", CALLS)
def test_compiles_without_graph_breaks_and_matches_eager(name, gen, device):
    fn = CALLS[name][0]
    args = inputs(gen, torch.uint8 if name == "pointwise" else torch.float32, device, ROWS.get(name, 12))
    compiled = torch.compile(fn, fullgraph=True, backend="eager")
    assert torch.equal(compiled(*args), fn(*args))


def test_automatic_parameters_and_noise_estimates_compile(gen, device):
    x = random_image((2, 3, 20, 20), torch.float32, gen, device)
    fn = lambda x: (imgfilters.nl_means(x, search_radius=1), imgfilters.estimate_noise(x))  # noqa: E731
    (y, sigma), (y_ref, sigma_ref) = torch.compile(fn, fullgraph=True, backend="eager")(x), fn(x)
    assert torch.equal(y, y_ref) and torch.equal(sigma, sigma_ref) and sigma.shape == (2,)


def test_layout_dtype_and_changing_python_numbers(gen, device):
    # (one image of 6 rows, shrunk to 4 by 2 / 3 as 12 to 8 were: the bilateral's cost grows
    # with the images and the rows)
    x = random_image((1, 3, 6, 16), torch.uint8, gen, device).to(memory_format=torch.channels_last)
    fn = lambda x, s: imgfilters.resize(imgfilters.bilateral(x, s, radius=1), 4)  # noqa: E731
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    for s in (0.1, 0.2):  # a second value of a float argument makes it symbolic: still no break
        y = compiled(x, s)
        assert torch.equal(y, fn(x, s)) and y.dtype == torch.uint8
        assert y.is_contiguous(memory_format=torch.channels_last)


# Ops whose backward kernel accumulates with atomics (their order varies from run to run).
# (their backward adds terms with atomics: the upsampling's low-resolution samples, the guided
# filter's box adjoint at the image's borders)
ATOMIC_BACKWARD = {"joint_bilateral_upsample", "guided_filter"}


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_compiled_gradients_equal_eager(name, gen, device):
    fn, wrt = CALLS[name]
    base, results = inputs(gen, device=device, rows=ROWS.get(name, 12)), []
    for compiled in (False, True):
        args = [a.clone().requires_grad_(i in wrt) for i, a in enumerate(base)]
        y = (torch.compile(fn, fullgraph=True, backend="aot_eager") if compiled else fn)(*args)
        g = torch.linspace(-1, 1, y.numel(), device=device).reshape(y.shape)
        results.append((y, torch.autograd.grad(y, [args[i] for i in wrt], g)))
    (y, grads), (y_c, grads_c) = results
    assert torch.equal(y, y_c)
    for a, b in zip(grads, grads_c):
        # (atomics add in no fixed order on a GPU: float32 sums of many terms, each rounded,
        # relative to the largest gradient as GRADIENT says)
        atol = GRADIENT * a.abs().max().item() if name in ATOMIC_BACKWARD and a.is_cuda else 1e-7
        torch.testing.assert_close(a, b, rtol=1e-6, atol=atol)


def test_compiled_gradient_of_the_float64_reference(gen):
    # float64 runs the reference inside the op; its backward is the reference's own derivative
    x = torch.rand(1, 2, 7, 9, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.rand(1, 1, 7, 9, generator=gen, dtype=torch.float64, requires_grad=True)
    fn = lambda x, g: imgfilters.joint_bilateral(x, g, 0.3, 1.0, radius=1, window="disk")  # noqa: E731
    out = torch.compile(fn, fullgraph=True, backend="aot_eager")(x, g)
    grads = torch.autograd.grad(out.square().sum(), [x, g])
    expected = bilateral_reference.bilateral(x, g, 0.3, 1.0, 1, "disk")
    torch.testing.assert_close(out, expected)
    for a, b in zip(grads, torch.autograd.grad(expected.square().sum(), [x, g])):
        torch.testing.assert_close(a, b)


def test_values_are_checked_inside_the_compiled_graph(gen, device):
    x = random_image((2, 3, 12, 16), torch.float32, gen, device)
    compiled = torch.compile(lambda x, s: imgfilters.bilateral(x, s, radius=1), fullgraph=True, backend="eager")
    with pytest.raises(ValueError, match="sigma_color"):
        compiled(x, torch.tensor([0.1, -0.1]))
    taps = torch.tensor([0.2, float("nan"), 0.2])
    with pytest.raises(ValueError, match="kernel_x"):
        torch.compile(lambda x: imgfilters.separable_filter(x, taps), fullgraph=True, backend="eager")(x)


def test_ops_without_gradient_return_no_graph(gen, device):
    x = random_image((1, 3, 20, 20), torch.float32, gen, device).requires_grad_()
    assert not imgfilters.nl_means(x, 0.1, sigma=0.02, patch_size=3, search_radius=1).requires_grad
    assert not imgfilters.estimate_noise(x).requires_grad
    assert not imgfilters.pointwise(x, STEPS).requires_grad


def _opcheck_cases(gen, device="cpu"):
    """Every op with small arguments on ``device`` (where the kernels run: opcheck's schema
    check cannot look inside the reference path's torch.func backward): forward inputs
    require grad (opcheck then checks the autograd registration too); backward ops take
    (grad_out, *the forward's arguments)."""
    def img(*shape, grad=True, layout=torch.contiguous_format):
        return torch.rand(*shape, generator=gen).to(device, memory_format=layout).requires_grad_(grad)

    def plain(*shape, layout=torch.contiguous_format):
        return img(*shape, grad=False, layout=layout)

    taps = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)
    bil = (torch.tensor(0.2, dtype=torch.float64), torch.tensor([0.8, 1.2]), 1, "disk", "l1", "reflect", 0.0)
    resample = ([5, 13], "bicubic", True, False, [1.6, 10 / 13])
    cl = torch.channels_last
    u8 = torch.randint(0, 256, (1, 3, 8, 10), generator=gen, dtype=torch.uint8).to(device)
    return {
        "separable_filter": (img(2, 3, 5, 10, layout=cl), taps, taps, "reflect", 0.0),
        "filter2d": (img(2, 3, 8, 10, layout=cl), img(2, 3, 5), "reflect", 0.0),
        "gaussian_blur": (img(3, 5, 10), [3, 5], [1.0, 1.5], "symmetric", 0.0),
        "box_blur": (img(5, 10), [3, 3], "constant", 0.5),
        "median_blur": (img(2, 3, 5, 10, layout=cl), 3, "symmetric", 0.0),
        "morphology": (img(2, 3, 5, 10, layout=cl), "erode", [2, 7, 2], 3, 1, "symmetric", 0.0),
        "unsharp_mask": (img(2, 2, 5, 10), torch.tensor([0.6, 1.2], dtype=torch.float64), torch.tensor(1.5,
                         dtype=torch.float64), 0.01, "replicate", 0.0),
        # (the filters whose programs march down the rows get few: the separable ones 5, where
        # a radius-2 window of the middle row meets neither border, the bilaterals 3, where
        # a radius-1 window is still smaller than the image, their NEAR branch, as at 8)
        "bilateral": (img(2, 3, 3, 10), *bil),
        "joint_bilateral": (img(2, 3, 3, 10), img(1, 1, 3, 10), *bil),
        "joint_bilateral_upsample": (img(2, 2, 2, 5, layout=cl), img(1, 1, 4, 10), *bil),
        "nl_means": (plain(1, 3, 8, 10), torch.tensor(0.1, dtype=torch.float64), torch.tensor([0.02]), 3, 1, "reflect",
                     0.0),
        "estimate_noise": (plain(2, 1, 30, 30),),
        # (the guided ops: a grey guide and two channels, whose 6 window terms the interpreter
        # sums in a fraction of the colour guide's time; opcheck runs each op dozens of times)
        "guided_models": (img(2, 2, 4, 6, layout=cl), img(1, 1, 4, 6).expand(2, 1, 4, 6),
                          torch.tensor([0.01, 0.1], device=device, requires_grad=True), 1, "symmetric"),
        "guided_apply": (img(2, 4, 2, 3), img(1, 1, 4, 6).expand(2, 1, 4, 6), plain(2, 2, 4, 6, layout=cl)),
        "guided_output": (img(2, 4, 4, 6), img(1, 1, 4, 6).expand(2, 1, 4, 6), plain(2, 2, 4, 6, layout=cl), 1,
                          "symmetric"),
        "guided_box": (img(2, 4, 2, 3), 1, "constant"),
        "jpeg": (plain(2, 3, 8, 10, layout=cl), torch.tensor([50.0, 70.0], device=device)),
        "resample": (img(1, 3, 8, 10, layout=cl), *resample),
        "pointwise": (u8, [pw.STEP_NAMES.index("scale"), pw.STEP_NAMES.index("normalize")], [2.0],
                      [torch.tensor([0.5]), torch.tensor([0.1, 0.2, 0.3])], torch.float32),
        "derivative": (img(2, 3, 5, 10, layout=cl), 1, 1, 3, 2.0, "reflect", 0.0, torch.float32),
        "laplacian": (img(1, 3, 5, 10), 3, 1.0, "symmetric", 0.0, torch.float32),
        "separable_filter_backward": (plain(1, 2, 5, 10), plain(1, 2, 5, 10, layout=cl), taps, taps, "reflect", 0.0),
        "derivative_backward": (plain(2, 3, 5, 10), plain(2, 3, 5, 10, layout=cl), 0, 1, -1, 1.0, "constant", 0.2,
                                torch.float32),
        "laplacian_backward": (plain(1, 3, 5, 10), plain(1, 3, 5, 10), 1, 1.0, "replicate", 0.0, torch.float32),
        "gradient_magnitude": (img(2, 3, 5, 10, layout=cl), 3, 1.0, "reflect", 0.0, torch.float32, True),
        "gradient_magnitude_backward": (plain(1, 3, 5, 10), plain(1, 3, 5, 10, layout=cl), -1, 2.0, "constant", 0.2,
                                        torch.float32, False),
        "filter2d_backward": (plain(2, 3, 8, 10), plain(2, 3, 8, 10, layout=cl), plain(3, 3), "symmetric", 0.2),
        "gaussian_blur_backward": (plain(3, 5, 10), plain(3, 5, 10), [3, 5], [1.0, 1.5], "symmetric", 0.0),
        "box_blur_backward": (plain(5, 10), plain(5, 10), [3, 5], "constant", 0.5),
        "guided_models_backward": (plain(2, 4, 4, 6), plain(2, 2, 4, 6, layout=cl),
                                   plain(1, 1, 4, 6).expand(2, 1, 4, 6), torch.tensor([0.01, 0.1], device=device), 1,
                                   "symmetric"),
        "guided_apply_backward": (plain(2, 2, 4, 6), plain(2, 4, 2, 3), plain(1, 1, 4, 6).expand(2, 1, 4, 6),
                                  plain(2, 2, 4, 6, layout=cl)),
        "guided_output_backward": (plain(2, 2, 4, 6, layout=cl), plain(2, 4, 4, 6),
                                   plain(1, 1, 4, 6).expand(2, 1, 4, 6), plain(2, 2, 4, 6, layout=cl), 1, "symmetric"),
        "guided_box_backward": (plain(2, 4, 2, 3), plain(2, 4, 2, 3), 1, "constant"),
        "median_blur_backward": (plain(2, 3, 5, 10), plain(2, 3, 5, 10, layout=cl), 5, "constant", 0.3),
        "morphology_backward": (plain(2, 3, 5, 10), plain(2, 3, 5, 10, layout=cl), "dilate", [2, 7, 2], 3, 1, None,
                                0.0),
        "unsharp_mask_backward": (plain(2, 2, 5, 10), plain(2, 2, 5, 10), torch.tensor(0.6, dtype=torch.float64),
                                  torch.tensor([1.5, -0.5], dtype=torch.float64), 0.01, "reflect", 0.0),
        "bilateral_backward": (plain(2, 3, 3, 10), plain(2, 3, 3, 10), *bil),
        "joint_bilateral_backward": (plain(2, 3, 3, 10), plain(2, 3, 3, 10), plain(1, 1, 3, 10), *bil),
        "joint_bilateral_upsample_backward": (plain(2, 2, 4, 10), plain(2, 2, 2, 5), plain(1, 1, 4, 10), *bil),
        "resample_backward": (plain(1, 3, 5, 13), plain(1, 3, 8, 10), *resample),
    }


OPCHECKED = list(_opcheck_cases(torch.Generator()))


@pytest.mark.parametrize("name", OPCHECKED)
def test_opcheck(name, gen, device):
    torch.library.opcheck(getattr(OPS, name), _opcheck_cases(gen, device)[name])


def test_every_op_is_opchecked():
    assert {name for name in dir(OPS) if hasattr(getattr(OPS, name), "default")} == set(OPCHECKED)


# ---- GPU only ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("name", ["gaussian_blur", "bilateral_per_image", "joint_bilateral", "resize"])
def test_inductor_on_gpu(name, gen):
    fn, wrt = CALLS[name]
    args = [a.requires_grad_(i in wrt) for i, a in enumerate(inputs(gen, device="cuda"))]
    post = lambda *a: (fn(*a) * 2).sin()  # noqa: E731  (inductor fuses around the opaque op)
    y = torch.compile(post, fullgraph=True)(*args)
    y_ref = post(*args)
    torch.testing.assert_close(y, y_ref)
    grads = torch.autograd.grad(y.sum(), [args[i] for i in wrt])
    for a, b in zip(grads, torch.autograd.grad(y_ref.sum(), [args[i] for i in wrt])):
        torch.testing.assert_close(a, b)


def test_linear_ops_keep_no_copy_of_the_image_for_backward(gen, device):
    x = random_image((1, 3, 16, 20), torch.float32, gen, device).requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = imgfilters.gaussian_blur(x, 5, 1.0).sum() + imgfilters.resize(x, [8, 10]).sum()
    assert saved and all(t.untyped_storage().nbytes() <= 8 for t in saved)
    y.backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("name", ["gaussian_blur", "bilateral", "resize"])
def test_meta_tensors_get_the_ops_fake_output(name):
    # plain eager calls skip the dispatcher (ops/library.py); meta tensors must not
    x = torch.empty(2, 3, 8, 10, device="meta")
    y = CALLS[name][0](x, x[:, :1], x)
    assert y.is_meta and y.shape == CALLS[name][0](torch.rand(2, 3, 8, 10), None, None).shape


def test_jit_trace_records_the_op(gen, device):
    # the tracer sees ops, not Triton launches: traced calls must go through the op
    x = random_image((1, 3, 9, 11), torch.float32, gen, device)
    fn = lambda v: imgfilters.gaussian_blur(v, 3, 1.0)  # noqa: E731
    traced = torch.jit.trace(fn, x)
    other = random_image((1, 3, 9, 11), torch.float32, gen, device)
    assert torch.equal(traced(other), fn(other))
