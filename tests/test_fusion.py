"""imgfilters.fuse: the fused pipeline equals the unfused one, in fewer launches."""
import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2

import imgfilters
from imgfilters import fusion, transforms as T
from imgfilters.kernels import bilateral as bilateral_kernels
from imgfilters.ops import bilateral, library, pointwise as pw

from helpers import FUSED, count_launches, gpu, random_image

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def assert_same(fused, unfused, rtol=FUSED[torch.float32]):
    assert fused.dtype == unfused.dtype and fused.shape == unfused.shape
    assert type(fused) is type(unfused)
    a, b = fused.double(), unfused.double()
    assert ((a - b).abs() / b.abs().clamp(min=1)).max() <= rtol


@pytest.mark.parametrize("steps,launches", [
    ([v2.ToDtype(torch.float32, scale=True), T.Bilateral(0.1, radius=2), v2.Normalize(MEAN, STD)], 1),
    ([T.Bilateral(0.1, radius=2), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)], 1),
    ([v2.ToDtype(torch.float32, scale=False), v2.Normalize(MEAN, STD), T.GaussianBlur(5, 1.2)], 1),
    ([v2.ToDtype(torch.float32, scale=False), v2.Normalize(MEAN, STD), T.GaussianBlur(45, 8.0)], 1),  # products
    ([v2.ToDtype(torch.float32, scale=True), T.UnsharpMask(1.0, 0.8), v2.Normalize(MEAN, STD)], 1),
    ([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)], 1),
    ([T.BoxBlur(3), v2.ToDtype(torch.float16, scale=True), T.BoxBlur(5), v2.Normalize(MEAN, STD)], 2),
    ([v2.ToDtype(torch.float32, scale=True), v2.RandomHorizontalFlip(p=1.0), v2.Normalize(MEAN, STD),
      T.BoxBlur(3)], 3),
    ([v2.ToDtype(torch.float32, scale=True), T.NonLocalMeans(search_radius=1), v2.Normalize(MEAN, STD)], 1),
    ([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD), T.NonLocalMeans(search_radius=1)], 2),
    ([v2.ToDtype(torch.float32, scale=True), T.NonLocalMeans(0.1, sigma=0.02, patch_size=3, search_radius=1)], 1),
    # h from sigma's row of the table: nothing is estimated, so the prologue fuses
    ([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD), T.NonLocalMeans(sigma=0.2, patch_size=3,
                                                                                      search_radius=1)], 1),
    ([T.BoxBlur(3), v2.ToDtype(torch.float32, scale=True), v2.ToDtype(torch.uint8, scale=True)], 2),  # as it is
    # resampling clamps the row pass of integer images only: here the image it gets is float
    ([v2.ToDtype(torch.float32, scale=True), T.Resize((29, 37), "bicubic"), v2.Normalize(MEAN, STD)], 1),
    ([T.Resize((11, 13), "bicubic"), v2.ToDtype(torch.float32, scale=True)], 1),  # and here uint8
    ([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD), T.Upsample(2, mode="bilinear")], 1),
])
def test_fused_equals_unfused_in_fewer_launches(steps, launches, gen, device):
    x = random_image((2, 3, 19, 23), torch.uint8, gen, device)
    fused = imgfilters.fuse(v2.Compose(steps))
    assert fused.launches(torch.uint8) == launches
    rtol = FUSED[torch.float16 if any(isinstance(s, v2.ToDtype) and s.dtype == torch.float16 for s in steps)
                 else torch.float32]
    assert_same(fused(x), v2.Compose(steps)(x), rtol)


def test_tv_tensors_and_unfusable_inputs_stay_correct(gen, device):
    steps = [v2.ToDtype(torch.float32, scale=True), T.Bilateral(0.1, radius=1), v2.Normalize(MEAN, STD)]
    fused, plain = imgfilters.fuse(steps), v2.Compose(steps)
    img = tv_tensors.Image(random_image((3, 12, 14), torch.uint8, gen, device))
    assert_same(fused(img), plain(img))
    mask = tv_tensors.Mask(torch.ones(12, 14, dtype=torch.uint8))
    out, m = fused(img, mask)  # several inputs: run as the pipeline
    assert m is mask and torch.equal(out, plain(img))
    f = random_image((3, 12, 14), torch.float32, gen, device).requires_grad_()
    assert fused(f).requires_grad  # gradients: unfused, so autograd sees every step


@pytest.mark.filterwarnings("ignore:scale was set to True")  # torchvision, on the "others" entry
def test_steps_that_change_the_input_type_and_dict_dtypes_stay_correct(gen, device):
    x = random_image((3, 16, 18), torch.uint8, gen, device)
    crops = imgfilters.fuse([T.GaussianBlur(3, 1.0), v2.FiveCrop(8), v2.ToDtype(torch.float32, scale=True)])(x)
    expected = v2.Compose([T.GaussianBlur(3, 1.0), v2.FiveCrop(8), v2.ToDtype(torch.float32, scale=True)])(x)
    assert len(crops) == 5 and all(torch.equal(a, b) for a, b in zip(crops, expected))
    by_type = [v2.ToDtype({tv_tensors.Image: torch.float32, "others": None}, scale=True), T.BoxBlur(3)]
    fused = imgfilters.fuse(by_type)
    assert torch.equal(fused(x), v2.Compose(by_type)(x))  # a plain tensor is "others": stays uint8


# one of each fused filter (fusion.FILTERS), cheap in the interpreter
EACH_FILTER = [T.GaussianBlur(5, 1.2), T.BoxBlur(3), T.SeparableFilter([1.0, 2.0, 1.0], [0.25, 0.5, 0.25]),
               T.Filter2D([[0.0, 0.2, 0.0], [0.2, 0.3, 0.1], [0.0, 0.2, 0.0]]), T.MedianBlur(3),
               T.Morphology("dilate", 3, shape="cross"),
               T.UnsharpMask(1.0, 0.8),
               T.Bilateral(0.3, radius=1), T.NonLocalMeans(0.3, sigma=0.05, patch_size=3, search_radius=1),
               T.Resize((9, 11), "bicubic"), T.Upsample(2, mode="bilinear")]


@pytest.mark.parametrize("filt", EACH_FILTER, ids=lambda t: type(t).__name__)
def test_each_fused_filter_is_one_launch_with_its_prologue_and_epilogue(filt, gen, device):
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD), filt, v2.Normalize([0.5] * 3, [2.0] * 3)]
    x = random_image((2, 3, 12, 14), torch.uint8, gen, device)
    fused = imgfilters.fuse(steps)
    assert fused.launches(torch.uint8) == 1
    with count_launches() as launches:
        y = fused(x)
    assert sum(launches.values()) == 1, launches  # the prologue and epilogue went into the filter's launch
    assert_same(y, v2.Compose(steps)(x))  # ...and were applied there


@pytest.mark.parametrize("filt", [
    T.Bilateral(0.5, radius=1, border="constant", border_value=0.2),
    T.NonLocalMeans(0.3, sigma=0.05, patch_size=3, search_radius=1, border="constant", border_value=0.2),
    T.BoxBlur(5, border="constant", border_value=0.2),
    T.UnsharpMask(1.0, 0.8, border="constant", border_value=-0.3),
    T.SeparableFilter([0.1] * 5 + [0.5] + [0.1] * 5, [0.5, 0.5, 0.0], border="constant", border_value=0.2),
    T.Filter2D(torch.full((5, 3), 1 / 15), border="constant", border_value=0.2),
    T.MedianBlur(3, border="constant", border_value=0.2),
    T.Morphology("erode", 3, border="constant", border_value=0.2),
], ids=lambda t: type(t).__name__)
def test_constant_borders_are_a_value_of_the_normalised_image(filt, gen, device):
    # the unfused pipeline pads the normalised image with border_value: the fused filter
    # inserts it after the prologue, in its one launch
    steps = [v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD), filt]
    x = random_image((2, 3, 13, 15), torch.uint8, gen, device)
    fused = imgfilters.fuse(steps)
    assert fused.launches(torch.uint8) == 1
    with count_launches() as launches:
        y = fused(x)
    assert sum(launches.values()) == 1, launches
    assert_same(y, v2.Compose(steps)(x))


def test_fusion_is_an_argument_of_the_fusable_ops_only(gen, device):
    x = random_image((1, 3, 8, 9), torch.uint8, gen, device)
    for t in EACH_FILTER:
        op, args = t._op_call(x, t.make_params([x]))
        assert callable(op.fused), type(t).__name__
    for name in ("gaussian_blur", "box_blur", "separable_filter", "filter2d", "median_blur", "morphology",
                 "unsharp_mask", "bilateral", "nl_means", "resample"):  # (the op's schema cannot carry it)
        assert "fusion" not in str(getattr(torch.ops.imgfilters, name).default._schema)
    # joint bilateral upsampling is not fusable: no fused call, no prologue or epilogue in its kernel
    assert not hasattr(bilateral._upsample_op, "fused") and not hasattr(bilateral._joint_op, "fused")
    assert not {"PRO", "EPI"} & set(bilateral_kernels.upsample_kernel.arg_names)
    assert not fusion._is_filter(T.JointBilateral())  # (called on pairs)
    assert not hasattr(library, "FUSION") and not hasattr(pw, "fused")  # no context to set
    # a Fusion runs the kernels: the float64 reference takes none
    op, args = EACH_FILTER[0]._op_call(x.double(), EACH_FILTER[0].make_params([x]))
    with pytest.raises(ValueError, match="fused call runs the kernels"):
        op.fused(pw.Fusion((), (), torch.float64, torch.float64), *args)


FLIP = v2.RandomHorizontalFlip(p=1.0)


@pytest.mark.parametrize("steps,dtype,launches", [
    ([v2.ToDtype(torch.float32)], torch.float32, 0),
    ([v2.ToDtype(torch.uint8, scale=True)], torch.uint8, 0),
    ([v2.ToDtype(torch.float32), FLIP], torch.float32, 1),  # at the start
    ([FLIP, v2.ToDtype(torch.float32), FLIP], torch.float32, 2),  # in the middle
    # at the end
    ([v2.ToDtype(torch.float32, scale=True), FLIP, v2.ToDtype(torch.float32, scale=True)], torch.uint8, 2),
    ([v2.ToDtype(torch.float32, scale=True), v2.ToDtype(torch.float32, scale=True)], torch.uint8, 1),
    ([v2.ToDtype(torch.uint8), T.BoxBlur(3), v2.ToDtype(torch.uint8)], torch.uint8, 1),  # around a filter
])
def test_a_todtype_that_changes_nothing_costs_nothing(steps, dtype, launches, gen, device):
    # torchvision returns the image itself: the fused pipeline neither launches nor copies for it
    x = random_image((2, 3, 6, 7), dtype, gen, device)
    fused = imgfilters.fuse(steps)
    assert fused.launches(dtype) == launches
    with count_launches() as kernels:
        y = fused(x)
    assert sum(kernels.values()) == launches - steps.count(FLIP)  # (the flips run as they are: torch's)
    expected = v2.Compose(steps)(x)
    assert y.dtype == expected.dtype and torch.equal(y, expected)
    assert (y is x) == (expected is x)


def test_bad_pipelines_raise():
    with pytest.raises(TypeError, match="pipeline"):
        imgfilters.fuse(T.BoxBlur(3))
    with pytest.raises(ValueError, match="pipeline must hold at least one transform"):
        imgfilters.fuse([])  # (v2.Compose, which runs unfusable inputs, refuses it too)
    with pytest.raises(TypeError, match="not callable"):
        imgfilters.fuse([T.BoxBlur(3), 3])


def test_a_compiled_function_runs_the_fused_pipeline_eagerly(gen, device):
    x = random_image((2, 3, 12, 16), torch.uint8, gen, device)
    fused = imgfilters.fuse([v2.ToDtype(torch.float32, scale=True), T.Bilateral(0.1, radius=1),
                             v2.Normalize(MEAN, STD)])
    compiled = torch.compile(lambda x: fused(x) * 2, backend="aot_eager")
    y = compiled(x)
    assert y.dtype == torch.float32 and torch.equal(y, fused(x) * 2)


@gpu
def test_one_kernel_launch_on_the_gpu(gen):
    x = random_image((2, 3, 256, 320), torch.uint8, gen, "cuda")
    fused = imgfilters.fuse([v2.ToDtype(torch.float32, scale=True), T.Bilateral(0.1, radius=2),
                             v2.Normalize(MEAN, STD)])
    fused(x)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fused(x)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "Memcpy" not in e.name and "Memset" not in e.name]
    assert len(kernels) == 1, [e.name for e in kernels]


@gpu
def test_a_captured_cuda_graph_replays_after_the_constant_cache_moves_on(gen):
    x = random_image((2, 3, 64, 80), torch.uint8, gen, "cuda")
    fused = imgfilters.fuse([v2.ToDtype(torch.float32, scale=True), T.Bilateral(0.1, radius=2),
                             v2.Normalize(MEAN, STD)])
    expected = fused(x)  # compiles, and puts the coefficients and mean/std in the cache
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = fused(x)
    for s in torch.linspace(0.01, 0.5, 300).tolist():  # more new values than the cache holds
        imgfilters.bilateral(x, s, radius=1)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, expected)
