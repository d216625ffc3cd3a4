"""imgfilters: Triton GPU kernels for image filtering on PyTorch tensors."""
from imgfilters.ops.bilateral import bilateral, joint_bilateral, joint_bilateral_upsample
from imgfilters.ops.filter2d import filter2d
from imgfilters.ops.nlm import nl_means
from imgfilters.ops.noise import estimate_noise
from imgfilters.ops.pointwise import pointwise
from imgfilters.ops.resample import imresize, resize, upsample
from imgfilters.ops.separable import box_blur, gaussian_blur, separable_filter, unsharp_mask
from imgfilters import transforms  # noqa: E402  (imgfilters.transforms.Bilateral() etc.)
from imgfilters.fusion import fuse  # noqa: E402

__all__ = ["filter2d", "separable_filter", "gaussian_blur", "box_blur", "unsharp_mask", "bilateral", "joint_bilateral",
           "joint_bilateral_upsample", "nl_means", "estimate_noise", "resize", "upsample", "imresize",
           "pointwise", "transforms", "fuse"]
__version__ = "0.1.0"
