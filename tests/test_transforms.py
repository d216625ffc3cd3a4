"""torchvision v2 transforms: module == functional, pipelines, input types, randomness."""
import numpy as np
import PIL.Image
import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2

import imgfilters
from imgfilters import _image, transforms as T

from helpers import gpu, random_image, sample


def test_gaussian_blur_is_torchvisions_with_our_kernel(gen, device):
    x = random_image((2, 3, 20, 24), torch.float32, gen, device)
    ours, theirs = T.GaussianBlur(7, sigma=(0.5, 2.0)), v2.GaussianBlur(7, sigma=(0.5, 2.0))
    torch.manual_seed(3)
    a = ours(x)
    torch.manual_seed(3)
    b = theirs(x)
    assert (a - b).abs().max() <= 1e-5
    assert repr(ours) == repr(theirs)
    with pytest.raises(ValueError):
        T.GaussianBlur(4)


@pytest.mark.parametrize("transform,functional", [
    (T.BoxBlur(5), lambda x: imgfilters.box_blur(x, 5)),
    (T.MedianBlur(3, border="replicate"), lambda x: imgfilters.median_blur(x, 3, border="replicate")),
    (T.Morphology("opening", 3, shape="cross"), lambda x: imgfilters.morphology(x, "opening", 3, shape="cross")),
    (T.SeparableFilter([1, 2, 1], [1, 0, -1]), lambda x: imgfilters.separable_filter(x, [1, 2, 1], [1, 0, -1])),
    (T.UnsharpMask(1.2, 0.7), lambda x: imgfilters.unsharp_mask(x, 1.2, 0.7)),
    (T.Bilateral(0.2, 1.0, window="disk"), lambda x: imgfilters.bilateral(x, 0.2, 1.0, window="disk")),
    (T.NonLocalMeans(0.1, sigma=0.02, patch_size=3, search_radius=2),
     lambda x: imgfilters.nl_means(x, 0.1, sigma=0.02, patch_size=3, search_radius=2)),
])
def test_module_equals_functional(transform, functional, gen, device):
    x = random_image((2, 3, 17, 19), torch.uint8, gen, device)
    assert torch.equal(transform(x), functional(x))


def test_inside_compose_random_apply_and_choice(gen, device):
    x = random_image((3, 16, 16), torch.uint8, gen, device)
    pipe = v2.Compose([v2.RandomApply([T.BoxBlur(3)], p=1.0),
                       v2.RandomChoice([T.Bilateral(0.1), T.UnsharpMask()]),
                       v2.ToDtype(torch.float32, scale=True)])
    y = pipe(x)
    assert y.shape == x.shape and y.dtype == torch.float32


def test_pil_images_come_back_as_pil_of_the_same_mode():
    img = PIL.Image.fromarray(sample("astronaut")[:, :40, :52].permute(1, 2, 0).numpy()).convert("RGBA")
    out = T.Bilateral(0.1, 1.0)(img)
    assert isinstance(out, PIL.Image.Image) and out.mode == "RGBA" and out.size == img.size
    grey = PIL.Image.fromarray(sample("camera")[0, :40, :52].numpy())
    assert T.BoxBlur(3)(grey).mode == "L"


def test_boxes_and_masks_pass_through(gen, device):
    img = tv_tensors.Image(random_image((3, 12, 14), torch.uint8, gen, device))
    boxes = tv_tensors.BoundingBoxes([[1, 2, 5, 6]], format="XYXY", canvas_size=(12, 14))
    mask = tv_tensors.Mask(torch.ones(12, 14, dtype=torch.uint8))
    out_img, out_boxes, out_mask = T.UnsharpMask(1.0, 2.0)(img, boxes, mask)
    assert isinstance(out_img, tv_tensors.Image) and not torch.equal(out_img, img)
    assert out_boxes is boxes and out_mask is mask


def test_keypoints_pass_through_filters(gen, device):
    img = tv_tensors.Image(random_image((3, 12, 14), torch.uint8, gen, device))
    points = tv_tensors.KeyPoints([[2, 3], [5, 7]], canvas_size=(12, 14))
    for t in (T.GaussianBlur(3, 1.0), T.BoxBlur(3), T.NonLocalMeans(0.1, sigma=0.01, patch_size=3, search_radius=1)):
        _, out = t(img, points)
        assert out is points


def test_video_is_filtered_frame_by_frame(gen, device):
    video = tv_tensors.Video(random_image((4, 3, 10, 11), torch.uint8, gen, device))
    out = T.BoxBlur(3)(video)
    assert isinstance(out, tv_tensors.Video)
    assert torch.equal(out[2], imgfilters.box_blur(video[2].as_subclass(torch.Tensor), 3))


def test_ranges_are_sampled_and_per_sample_draws_one_value_per_image(gen, device):
    x = random_image((4, 3, 12, 12), torch.float32, gen, device)
    t = T.Bilateral(sigma_color=(0.05, 0.5), sigma_space=(0.5, 2.0), radius=2, per_sample=True)
    torch.manual_seed(0)
    params = t.make_params([x])
    assert params["sigma_color"].shape == (4,) and len(set(params["sigma_color"].tolist())) == 4
    assert ((params["sigma_color"] >= 0.05) & (params["sigma_color"] <= 0.5)).all()
    torch.manual_seed(0)
    y = t(x)
    expected = torch.cat([imgfilters.bilateral(x[i:i + 1], float(params["sigma_color"][i]),
                                               float(params["sigma_space"][i]), radius=2) for i in range(4)])
    assert (y - expected).abs().max() <= 1e-5


def test_gaussian_blur_per_sample_draws_a_sigma_per_image_in_one_launch(gen, device):
    from helpers import count_launches
    x = random_image((2, 2, 3, 9, 12), torch.float32, gen, device)
    t = T.GaussianBlur((5, 3), (0.1, 3.0), per_sample=True, seed=5)
    sigma = T.GaussianBlur((5, 3), (0.1, 3.0), per_sample=True, seed=5).make_params([x])["sigma"]
    assert sigma.shape == (4,) and len(set(sigma.tolist())) == 4 and ((sigma >= 0.1) & (sigma <= 3.0)).all()
    with count_launches() as launches:
        y = t(x)
    assert sum(launches.values()) == 1, launches
    flat = x.reshape(4, 3, 9, 12)
    expected = torch.cat([imgfilters.gaussian_blur(flat[i:i + 1], (5, 3), float(sigma[i])) for i in range(4)])
    assert torch.equal(y, expected.reshape(x.shape))
    fused = imgfilters.fuse([T.GaussianBlur((5, 3), (0.1, 3.0), per_sample=True, seed=5), T.BoxBlur(3)])
    assert torch.equal(fused(x), imgfilters.box_blur(y, 3))
    with pytest.raises(ValueError, match="same batch size"):
        t.transform(x[:1], dict(sigma=sigma))


@gpu
@pytest.mark.parametrize("transform", [
    T.GaussianBlur(9, (0.1, 3.0), per_sample=True, seed=0), T.GaussianBlur(9, (0.1, 3.0), seed=0),
    T.UnsharpMask((0.3, 1.2), (0.5, 1.5), per_sample=True, seed=0), T.BoxBlur(3, max_size=7, per_sample=True, seed=0),
    T.Bilateral((0.05, 0.5), (0.5, 2.0), radius=2, per_sample=True, seed=0),
    T.MedianBlur((3, 5), per_sample=True, seed=0)], ids=repr)
def test_fresh_draws_reach_the_gpu_without_the_host_waiting_for_it(transform, gen):
    """A call that draws new parameters copies them to the GPU asynchronously: a copy
    from pageable memory would wait for the GPU's queue to drain, on every call."""
    x = random_image((4, 3, 32, 32), torch.float32, gen, "cuda")
    transform(x)  # compile
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            transform(x)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_sent_copies_a_host_tensor_as_float32(gen, device):
    host = torch.rand(3, 5, dtype=torch.float64, generator=gen)
    out = _image.sent(host, torch.device(device))
    assert out.device.type == device and out.dtype == torch.float32 and torch.equal(out.cpu(), host.float())


def test_unsharp_mask_per_sample_draws_a_sigma_and_amount_per_image_in_one_launch(gen, device):
    from helpers import count_launches
    x = random_image((3, 1, 8, 10), torch.uint8, gen, device)

    def make():
        return T.UnsharpMask((0.3, 1.2), (-0.5, 1.5), 0.01, border="symmetric", per_sample=True, seed=3)
    params = make().make_params([x])
    sigma, amount = params["sigma"], params["amount"]
    assert sigma.shape == amount.shape == (3,) and len(set(sigma.tolist())) == 3
    assert ((sigma >= 0.3) & (sigma <= 1.2)).all() and ((amount >= -0.5) & (amount <= 1.5)).all()
    with count_launches() as launches:
        y = make()(x)
    assert sum(launches.values()) == 1, launches
    expected = torch.cat([imgfilters.unsharp_mask(x[i:i + 1], float(sigma[i]), float(amount[i]), 0.01,
                                                  border="symmetric") for i in range(3)])
    assert torch.equal(y, expected)
    assert torch.equal(imgfilters.fuse([make(), T.BoxBlur(3)])(x), imgfilters.box_blur(y, 3))
    with pytest.raises(ValueError, match="same batch size"):
        make().transform(x[:1], params)
    with pytest.raises(ValueError, match="sigma"):
        T.UnsharpMask((1.0, 30.0), per_sample=True)  # a radius of 90 would be drawn some day


def test_box_blur_draws_a_size_and_per_sample_one_per_image_in_one_launch(gen, device):
    from helpers import count_launches
    x = random_image((4, 1, 6, 9), torch.float32, gen, device)
    size = T.BoxBlur(3, max_size=7, seed=1).make_params([x])["kernel_size"]
    assert size[0] == size[1] and size[0] in (3, 5, 7)
    assert torch.equal(T.BoxBlur(3, max_size=7, seed=1)(x), imgfilters.box_blur(x, size))
    sizes = T.BoxBlur(3, max_size=7, per_sample=True, seed=2).make_params([x])["kernel_size"]
    assert sizes.shape == (4,) and len(set(sizes.tolist())) > 1 and set(sizes.tolist()) <= {3, 5, 7}
    with count_launches() as launches:
        y = T.BoxBlur(3, max_size=7, border="constant", border_value=0.5, per_sample=True, seed=2)(x)
    assert sum(launches.values()) == 1, launches
    expected = torch.cat([imgfilters.box_blur(x[i:i + 1], int(sizes[i]), border="constant", border_value=0.5)
                          for i in range(4)])
    assert (y - expected).abs().max() <= 1e-6  # (the zero taps beside a narrower box: another order of sums)
    fused = imgfilters.fuse([T.BoxBlur(3, max_size=7, per_sample=True, seed=2), T.BoxBlur(3)])
    assert torch.equal(fused(x), imgfilters.box_blur(T.BoxBlur(3, max_size=7, per_sample=True, seed=2)(x), 3))
    with pytest.raises(ValueError, match="max_size"):
        T.BoxBlur(3, per_sample=True)
    with pytest.raises(ValueError, match="square"):
        T.BoxBlur((3, 5), max_size=7)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_median_and_morphology_per_sample_run_one_call_per_distinct_draw(dtype, gen, device):
    from helpers import count_launches
    # (small: the interpreter pays per call, and each image is checked by a call of its own)
    x = random_image((2, 2, 1, 6, 7), dtype, gen, device).contiguous()
    flat = x.reshape(4, 1, 6, 7)
    median = T.MedianBlur((3, 5), border="replicate", per_sample=True, seed=4)
    sizes = T.MedianBlur((3, 5), border="replicate", per_sample=True, seed=4).make_params([x])["kernel_size"]
    assert sizes.shape == (4,) and set(sizes.tolist()) == {3, 5}
    with count_launches() as launches:
        y = median(x)
    assert sum(launches.values()) == 2, launches  # (one a size)
    expected = torch.cat([imgfilters.median_blur(flat[i:i + 1], int(sizes[i]), border="replicate") for i in range(4)])
    assert torch.equal(y, expected.reshape(x.shape))

    def morph(seed):
        return T.Morphology("gradient", (3, 5), shape="ellipse", iterations=(1, 2), per_sample=True, seed=seed)
    params = morph(6).make_params([x])
    assert params["kernel_size"].shape == params["iterations"].shape == (4,)
    expected = torch.cat([imgfilters.morphology(flat[i:i + 1], "gradient", int(params["kernel_size"][i]),
                                                shape="ellipse", iterations=int(params["iterations"][i]))
                          for i in range(4)])
    assert torch.equal(morph(6)(x), expected.reshape(x.shape))
    masked = T.Morphology("erode", mask=torch.eye(3, dtype=torch.bool), iterations=(1, 3), per_sample=True, seed=7)
    counts = T.Morphology("erode", mask=torch.eye(3, dtype=torch.bool), iterations=(1, 3), per_sample=True,
                          seed=7).make_params([x])["iterations"]
    expected = torch.cat([imgfilters.morphology(flat[i:i + 1], "erode", torch.eye(3, dtype=torch.bool),
                                                iterations=int(counts[i])) for i in range(4)])
    assert torch.equal(masked(x), expected.reshape(x.shape))
    # a fused pipeline runs them as they are, each image its own draw
    fused = imgfilters.fuse([T.MedianBlur((3, 5), border="replicate", per_sample=True, seed=4), T.BoxBlur(3)])
    assert torch.equal(fused(x), imgfilters.box_blur(y, 3))
    with pytest.raises(ValueError, match="same batch size"):
        median.transform(x[:1], dict(kernel_size=sizes))


SEEDED = [  # (a transform with random parameters, made with a seed)
    lambda seed: T.GaussianBlur(5, (0.1, 2.0), seed=seed),
    lambda seed: T.GaussianBlur(5, (0.1, 2.0), per_sample=True, seed=seed),
    lambda seed: T.UnsharpMask((0.5, 2.0), (0.5, 1.5), seed=seed),
    lambda seed: T.UnsharpMask((0.5, 2.0), (0.5, 1.5), per_sample=True, seed=seed),
    lambda seed: T.BoxBlur(3, max_size=9, seed=seed),
    lambda seed: T.BoxBlur(3, max_size=9, per_sample=True, seed=seed),
    lambda seed: T.MedianBlur((3, 7), seed=seed),
    lambda seed: T.MedianBlur((3, 7), per_sample=True, seed=seed),
    lambda seed: T.Morphology("dilate", (3, 7), iterations=(1, 3), seed=seed),
    lambda seed: T.Morphology("dilate", (3, 7), iterations=(1, 3), per_sample=True, seed=seed),
    lambda seed: T.Bilateral((0.05, 0.5), (0.5, 2.0), radius=2, per_sample=True, seed=seed),
    lambda seed: T.GuidedFilter(2, (1e-3, 1e-1), per_sample=True, seed=seed),
    lambda seed: T.NonLocalMeans((0.05, 0.3), sigma=(0.0, 0.05), patch_size=3, search_radius=1, per_sample=True,
                                 seed=seed),
]


def _draws(t, x, n=4):
    """``n`` successive draws of ``t``'s parameters, as lists."""
    return [{k: v.tolist() if isinstance(v, torch.Tensor) else v for k, v in t.make_params([x]).items()}
            for _ in range(n)]


@pytest.mark.parametrize("make", range(len(SEEDED)))
def test_a_seed_makes_the_draws_reproducible(make, gen, device):
    # an integer: the transform's own generator, whatever torch's global one does (copies
    # included); a torch.Generator: the caller's, advanced by the draws
    make = SEEDED[make]
    x = random_image((3, 1, 10, 11), torch.float32, gen, device)
    torch.manual_seed(1)
    first = _draws(make(7), x)
    torch.manual_seed(2)
    again, other = _draws(make(7), x), _draws(make(8), x)
    assert first == again and first != other
    assert len({str(d) for d in first}) > 1  # (successive calls draw anew)
    caller = torch.Generator().manual_seed(7)
    from_caller = make(caller)
    assert _draws(from_caller, x) == first and _draws(from_caller, x) == _draws(make(7), x, 8)[4:]
    seeded = make(11)
    torch.manual_seed(0)
    expected = make(11)(x)
    torch.manual_seed(5)
    assert torch.equal(seeded(x), expected)


def test_seed_must_be_an_integer_or_a_generator():
    for bad, error in (("a", TypeError), (1.5, TypeError), (True, TypeError), (2 ** 64, ValueError),
                       (-2 ** 63 - 1, ValueError)):
        for make in SEEDED:
            with pytest.raises(error, match="seed"):
                make(bad)
    assert T.MedianBlur(3, seed=np.int64(4)).generator.initial_seed() == 4


def test_non_local_means_per_sample_and_automatic(gen, device):
    x = random_image((3, 1, 14, 15), torch.float32, gen, device)
    t = T.NonLocalMeans(h=(0.05, 0.3), sigma=(0.0, 0.05), patch_size=3, search_radius=2, per_sample=True)
    torch.manual_seed(1)
    params = t.make_params([x])
    torch.manual_seed(1)
    y = t(x)
    for i in range(3):
        one = imgfilters.nl_means(x[i], float(params["h"][i]), sigma=float(params["sigma"][i]), patch_size=3,
                                  search_radius=2)
        assert (y[i] - one).abs().max() <= 1e-6
    auto = T.NonLocalMeans(search_radius=1)
    assert auto.make_params([x]) == dict(h=None, sigma=None)
    big = random_image((2, 1, 32, 32), torch.float32, gen, device)  # enough patches to estimate the noise
    assert torch.equal(auto(big), imgfilters.nl_means(big, search_radius=1))


def test_joint_bilateral_filters_the_image_with_the_guide(gen, device):
    # 7 rows: a radius-2 window from the middle row meets neither border (the interpreter's
    # cost grows with the rows)
    img = tv_tensors.Image(random_image((2, 3, 7, 17), torch.uint8, gen, device))
    guide = random_image((2, 1, 7, 17), torch.float32, gen, device)
    t = T.JointBilateral(0.1, 1.5, radius=2)
    out, g = t(img, guide)
    assert g is guide and isinstance(out, tv_tensors.Image)
    assert torch.equal(out.as_subclass(torch.Tensor), imgfilters.joint_bilateral(img.as_subclass(torch.Tensor),
                                                                                 guide, 0.1, 1.5, radius=2))
    mask = tv_tensors.Mask(torch.zeros(7, 17, dtype=torch.uint8))
    pipe = v2.Compose([v2.RandomApply([t], p=1.0), T.BoxBlur(3)])
    out2, g2, m2 = pipe(img, guide, mask)
    assert torch.equal(out2.as_subclass(torch.Tensor), imgfilters.box_blur(out.as_subclass(torch.Tensor), 3))
    assert m2 is mask
    pil = PIL.Image.fromarray(sample("coffee")[:, :7, :16].permute(1, 2, 0).numpy())
    grey = pil.convert("L")
    out3, _ = t(pil, grey)
    assert isinstance(out3, PIL.Image.Image) and out3.mode == "RGB"
    with pytest.raises(ValueError, match="guide"):
        t(img)


def test_resize_is_torchvisions_for_images_boxes_and_masks(gen, device):
    img = tv_tensors.Image(random_image((3, 20, 30), torch.uint8, gen, device))
    boxes = tv_tensors.BoundingBoxes([[1, 2, 15, 16]], format="XYXY", canvas_size=(20, 30))
    mask = tv_tensors.Mask(random_image((20, 30), torch.uint8, gen, device))
    for args in ((13,), ((25, 11), "bicubic"), (10, v2.InterpolationMode.NEAREST, 14)):
        ours, theirs = T.Resize(*args), v2.Resize(*args)
        theirs_repr = repr(theirs).replace("torchvision.transforms.v2.", "")
        assert repr(ours).replace("imgfilters.transforms.", "") == theirs_repr
        a = ours(img, boxes, mask)
        # torchvision's CPU uint8 path (given the enum: torchvision before 0.27 takes no name)
        enum_args = [v2.InterpolationMode(a) if isinstance(a, str) else a for a in args]
        b = v2.Resize(*enum_args)(tv_tensors.Image(img.cpu()), boxes, tv_tensors.Mask(mask.cpu()))
        assert isinstance(a[0], tv_tensors.Image) and a[0].shape == b[0].shape
        assert (a[0].cpu().int() - b[0].int()).abs().max() <= 1
        assert torch.equal(a[1], b[1]) and torch.equal(a[2].cpu(), b[2])
    pil = PIL.Image.fromarray(sample("coffee")[:, :30, :45].permute(1, 2, 0).numpy())
    out = T.Resize((40, 60))(pil)
    assert isinstance(out, PIL.Image.Image) and out.size == (60, 40) and out.mode == "RGB"
    deep = PIL.Image.fromarray(sample("camera")[0].numpy().astype("uint16") * 257)  # I;16: torchvision's path
    assert T.Resize((40, 60))(deep).size == v2.Resize((40, 60))(deep).size


def test_upsample_resizes_images_and_moves_boxes(gen, device):
    img = tv_tensors.Image(random_image((3, 10, 12), torch.float32, gen, device))
    boxes = tv_tensors.BoundingBoxes([[1, 2, 5, 6]], format="XYXY", canvas_size=(10, 12))
    out, out_boxes = T.Upsample(scale_factor=2.0, mode="bilinear")(img, boxes)
    assert torch.equal(out.as_subclass(torch.Tensor),
                       imgfilters.upsample(img.as_subclass(torch.Tensor), 2.0, mode="bilinear"))
    assert out_boxes.canvas_size == (20, 24) and out_boxes.tolist() == [[2, 4, 10, 12]]
    with pytest.raises(ValueError, match="exactly one"):
        T.Upsample()


def test_repr_and_bad_arguments():
    assert "sigma_color=(0.05, 0.2)" in repr(T.Bilateral(sigma_color=(0.05, 0.2)))
    with pytest.raises(ValueError, match="sigma"):
        T.UnsharpMask(sigma=(2.0, 1.0))
    with pytest.raises(ValueError, match="sigma_color"):
        T.Bilateral(sigma_color=0.0)
    with pytest.raises(TypeError, match="sigma_space"):
        T.Bilateral(sigma_space="1")
    with pytest.raises(ValueError, match="kernel_size"):
        T.BoxBlur(4)
    with pytest.raises(ValueError, match="h"):
        T.NonLocalMeans(h=-0.1)
    with pytest.raises(ValueError, match="sigma"):
        T.NonLocalMeans(sigma=(-0.1, 0.1))
    # checked when the transform is made, not at its first call
    with pytest.raises(ValueError, match="sigma_color"):
        T.Bilateral(sigma_color=(0.1, float("nan")))
    with pytest.raises(ValueError, match="window"):
        T.Bilateral(window="foo")
    with pytest.raises(ValueError, match="radius"):
        T.JointBilateral(radius=1000)
    with pytest.raises(ValueError, match="border"):
        T.Bilateral(border="wrap")
    with pytest.raises(ValueError, match="size"):
        T.Resize(0)
    with pytest.raises(ValueError, match="size"):
        T.Resize((4, -1))


# PIL modes v2.GaussianBlur takes, and those it does not that the CLI reads (and the rest)
TORCHVISION_MODES = ("L", "LA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "HSV", "I", "F")


def test_pil_modes_at_least_those_of_torchvision(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # (the mode plumbing, on the fast float64 path)
    rgb = PIL.Image.fromarray(sample("coffee")[:, :12, :14].permute(1, 2, 0).numpy())
    ours, theirs = T.GaussianBlur(5, 1.2), v2.GaussianBlur(5, 1.2)
    for mode in TORCHVISION_MODES:
        img = rgb.convert(mode)
        a, b = ours(img), theirs(img)
        assert a.mode == mode and a.size == img.size, mode
        assert np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max() <= (1e-4 if mode == "F" else 1), mode
    deep = sample("camera")[0, :12, :14].numpy().astype(np.uint16) * 257
    expected = imgfilters.gaussian_blur(torch.from_numpy(deep.copy()), 5, 1.2).numpy()
    for mode in ("I;16", "I;16B"):
        img = PIL.Image.frombytes(mode, (14, 12), deep.astype(">u2" if mode == "I;16B" else "<u2").tobytes())
        out = ours(img)
        assert out.mode == mode and np.array_equal(np.asarray(out).astype(np.uint16), expected), mode
    palette = rgb.quantize(16)
    out = ours(palette)
    assert out.mode == "P" and out.getpalette() == palette.getpalette()
    assert np.array_equal(np.asarray(out), np.asarray(ours(palette.convert("RGB")).quantize(
        palette=palette, dither=PIL.Image.Dither.NONE)))
    bilevel = rgb.convert("1")
    out = ours(bilevel)
    assert out.mode == "1" and np.array_equal(np.asarray(out), np.asarray(ours(bilevel.convert("L"))) >= 128)
    with pytest.raises(TypeError, match="mode 'PA'"):
        ours(palette.convert("PA"))
