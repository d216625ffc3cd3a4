"""imgfilters: Triton GPU kernels for image filtering on PyTorch tensors.

``import imgfilters`` loads nothing but this file: each public name is imported from its
module on first use (PEP 562 ``__getattr__``), so the package, and the command line's
``--help``, cost no torch, Triton or torchvision import. The custom ops
(``torch.ops.imgfilters.*``) exist once ``imgfilters.ops`` is imported, which the first
use of any function does; ``import imgfilters.ops`` registers them all up front.
"""
import importlib

__version__ = "0.1.0"

# public name -> the module that defines it (a new public function is added here)
_EXPORTS = {
    "filter2d": "imgfilters.ops.filter2d", "median_blur": "imgfilters.ops.median",
    "erode": "imgfilters.ops.morphology", "dilate": "imgfilters.ops.morphology",
    "morphology": "imgfilters.ops.morphology", "structuring_element": "imgfilters.ops.morphology",
    "separable_filter": "imgfilters.ops.separable", "gaussian_blur": "imgfilters.ops.separable",
    "box_blur": "imgfilters.ops.separable", "unsharp_mask": "imgfilters.ops.separable",
    "bilateral": "imgfilters.ops.bilateral", "joint_bilateral": "imgfilters.ops.bilateral",
    "joint_bilateral_upsample": "imgfilters.ops.bilateral",
    "nl_means": "imgfilters.ops.nlm", "estimate_noise": "imgfilters.ops.noise",
    "resize": "imgfilters.ops.resample", "upsample": "imgfilters.ops.resample", "imresize": "imgfilters.ops.resample",
    "sobel": "imgfilters.ops.derivatives", "scharr": "imgfilters.ops.derivatives",
    "laplacian": "imgfilters.ops.derivatives", "gradient_magnitude": "imgfilters.ops.derivatives",
    "guided_filter": "imgfilters.ops.guided",
    "pointwise": "imgfilters.ops.pointwise",
    "fuse": "imgfilters.fusion", "tiled": "imgfilters.tiling",
    "transforms": "imgfilters.transforms",  # a module: imgfilters.transforms.Bilateral() etc.
    "degrade": "imgfilters.degrade",  # a module: imgfilters.degrade.RealESRGANDegradation() etc.
}
# subpackages and modules reachable as attributes without an import of their own
_SUBMODULES = ("ops", "reference", "kernels", "transforms", "fusion", "tiling", "dask", "io", "cli")

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        module = importlib.import_module(_EXPORTS[name])
        value = module if module.__name__ == f"{__name__}.{name}" else getattr(module, name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
