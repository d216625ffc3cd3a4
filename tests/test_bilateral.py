"""Bilateral family: the float64 reference against its peers (kornia, OpenCV)."""
import cv2
import numpy as np
import pytest
import torch

from imgfilters.reference import bilateral as ref

from helpers import SAMPLE_NAMES, sample


def unit(t):
    return t.to(torch.float64)[None] / 255


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_reference_equals_kornia_bilateral_blur(name):
    kornia = pytest.importorskip("kornia")
    x = unit(sample(name))[..., :64, :80]
    for radius, sc, ss in [(2, 0.1, 1.5), (4, 0.05, 3.0)]:
        ours = ref.bilateral(x, x, sc, ss, radius, "square", "l1", "reflect")
        k = 2 * radius + 1
        theirs = kornia.filters.bilateral_blur(x, (k, k), sc, (ss, ss), "reflect", "l1")
        assert (ours - theirs).abs().max() <= 1e-5


def test_reference_equals_kornia_joint_bilateral_blur_l2(gen):
    kornia = pytest.importorskip("kornia")
    x = torch.rand(2, 3, 30, 41, generator=gen, dtype=torch.float64)
    guide = torch.rand(2, 1, 30, 41, generator=gen, dtype=torch.float64)
    ours = ref.bilateral(x, guide, 0.2, 2.0, 3, "square", "l2", "reflect")
    theirs = kornia.filters.joint_bilateral_blur(x, guide, (7, 7), 0.2, (2.0, 2.0), "reflect", "l2")
    assert (ours - theirs).abs().max() <= 1e-5


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_reference_disk_l1_equals_opencv_on_uint8(name):
    img = sample(name)
    hwc = img.permute(1, 2, 0).numpy().copy()
    for d, sigma_color_cv, sigma_space in [(5, 25.0, 2.0), (9, 40.0, 3.0)]:
        cv = cv2.bilateralFilter(hwc, d, sigma_color_cv, sigma_space, borderType=cv2.BORDER_REFLECT_101)
        ours = ref.bilateral(unit(img), unit(img), sigma_color_cv / 255, sigma_space, d // 2, "disk", "l1")
        ours = (ours[0] * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
        assert np.abs(ours.astype(int) - cv.reshape(ours.shape).astype(int)).max() <= 1


def test_reference_per_image_sigmas_equal_separate_calls(gen):
    x = torch.rand(3, 2, 17, 19, generator=gen, dtype=torch.float64)
    sc = torch.tensor([0.05, 0.1, 0.3], dtype=torch.float64)
    ss = torch.tensor([1.0, 2.0, 0.7], dtype=torch.float64)
    both = ref.bilateral(x, x, sc, ss, 3)
    for b in range(3):
        one = ref.bilateral(x[b:b + 1], x[b:b + 1], float(sc[b]), float(ss[b]), 3)
        assert torch.allclose(both[b:b + 1], one)


def test_reference_gradcheck_image_and_guide(gen):
    x = torch.rand(1, 2, 6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.rand(1, 1, 6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ref.bilateral(a, b, 0.3, 1.5, 2, "disk", "l2", "symmetric"), (x, g))
