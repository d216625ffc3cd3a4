"""torchvision.transforms.v2 transforms for imgfilters' filters.

Each class is a ``v2.Transform``: it works inside ``v2.Compose``, ``v2.RandomApply`` and
``v2.RandomChoice``, filters ``tv_tensors.Image``, ``tv_tensors.Video``, plain tensors
and PIL images (a PIL image comes back as a PIL image of the same mode), and passes
bounding boxes, masks and other tv_tensors through unchanged.

``GaussianBlur`` and ``Resize`` take exactly the arguments of ``v2.GaussianBlur`` and
``v2.Resize`` (they are ones, with imgfilters' kernels), so swapping the import is
enough; ``Resize`` and ``Upsample`` hand boxes and masks to torchvision, so they move
with the image. The other transforms take the
arguments of their functional op; a float parameter may also be a ``(low, high)`` range,
sampled uniformly on every call, from torch's global RNG or, with ``seed=`` (an integer
or a ``torch.Generator``), reproducibly from the transform's own; with ``per_sample=True``
``GaussianBlur``, ``UnsharpMask`` and the bilateral, guided-filter and non-local-means
transforms draw one value per image of a batch and filter the batch in one launch.

The transforms that ``imgfilters.fuse`` fuses (``fusion.FILTERS``) also say which op call
their ``transform`` makes for an image tensor (``_op_call``), so that a fused pipeline
calls that op's implementation with its prologue and epilogue (``op.fused``).
"""
import math
import numbers

import numpy as np
import PIL.Image
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from imgfilters._image import check_border as _image_check_border
from imgfilters._image import check_integer as _image_check_integer
from imgfilters._image import sent as _image_sent
from imgfilters._image import wrap as _image_wrap
from imgfilters.ops import bilateral as _bilateral
from imgfilters.ops import derivatives as _derivatives
from imgfilters.ops import filter2d as _filter2d
from imgfilters.ops import guided as _guided
from imgfilters.ops import median as _median
from imgfilters.ops import morphology as _morphology
from imgfilters.ops import nlm as _nlm
from imgfilters.ops import resample as _resample
from imgfilters.ops import separable as _separable
from imgfilters.reference import separable as _reference_separable

__all__ = ["GaussianBlur", "BoxBlur", "SeparableFilter", "Filter2D", "MedianBlur", "Morphology", "UnsharpMask",
           "Bilateral", "JointBilateral", "NonLocalMeans", "Resize", "Upsample", "Sobel", "Scharr", "Laplacian",
           "GradientMagnitude", "GuidedFilter"]

# PIL modes the filters take (a superset of what torchvision's functional filters take):
# 8 bits per channel, then the modes that travel as another one (``_filter_pil``)
_PIL_BYTE_MODES = ("L", "LA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "HSV", "LAB")
_PIL_MODES = _PIL_BYTE_MODES + ("I;16", "I;16L", "I;16B", "I", "F", "1", "P")


def not_an_image(inpt):
    """Boxes, masks, keypoints and any other tv_tensor that is not an Image or a Video."""
    return isinstance(inpt, tv_tensors.TVTensor) and not isinstance(inpt, (tv_tensors.Image, tv_tensors.Video))


def _filter_images(inpt, fn):
    """Apply ``fn`` to image-like inputs (tensors, Image, Video, PIL); pass others (boxes,
    masks, keypoints, any other tv_tensor) through."""
    if not_an_image(inpt):
        return inpt
    if isinstance(inpt, PIL.Image.Image):
        return _filter_pil(inpt, fn)
    if isinstance(inpt, torch.Tensor):
        return fn(inpt)
    return inpt


def _filter_pil(img, fn):
    """``fn`` applied to a PIL image through a tensor, returned in the image's mode: 8-bit
    channels as uint8 and 16-bit grey (``I;16``, ``I;16L``, ``I;16B``) as uint16, both read
    and written by the kernels directly; 32-bit integers (``I``) and floats (``F``) as
    float32 values as they are (``I`` rounded and saturated back); bilevel (``1``) as grey,
    thresholded back at half; palette (``P``) as RGB, mapped back to the nearest colours
    of its own palette."""
    mode = img.mode
    if mode not in _PIL_MODES:
        raise TypeError(f"PIL images of mode {mode!r} are not supported; use one of {', '.join(_PIL_MODES)}")
    if mode == "1":
        return _filter_pil(img.convert("L"), fn).convert("1", dither=PIL.Image.Dither.NONE)
    if mode == "P":
        out = _filter_pil(img.convert("RGB"), fn).quantize(palette=img, dither=PIL.Image.Dither.NONE)
        out.info.update(img.info)  # (a transparent palette index stays transparent)
        return out
    arr = np.asarray(img)
    arr = arr.astype(np.uint16 if mode.startswith("I;16") else np.float32 if mode == "I" else arr.dtype)
    t = torch.from_numpy(arr.copy())
    y = fn(t[None] if t.ndim == 2 else t.permute(2, 0, 1)).cpu()
    out = y.permute(1, 2, 0).numpy()
    out = out[..., 0] if out.shape[-1] == 1 else out
    if mode == "I":
        out = np.clip(np.round(out.astype(np.float64)), -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    elif mode.startswith("I;16"):
        out = out.astype(">u2" if mode == "I;16B" else "<u2")
    return PIL.Image.frombytes(mode, (out.shape[1], out.shape[0]), np.ascontiguousarray(out).tobytes())


def _range(value, name, low=None):
    """A number, or a (low, high) range to sample from, validated."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2 or not all(isinstance(v, numbers.Real) for v in value) or value[0] > value[1]:
            raise ValueError(f"{name} must be a number or a (low, high) range, got {value!r}")
        lo, hi = float(value[0]), float(value[1])
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        lo = hi = float(value)
    else:
        raise TypeError(f"{name} must be a number or a (low, high) range, got {type(value).__name__}")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and lo <= low:
        raise ValueError(f"{name} must be > {low}, got {value!r}")
    return (lo, hi)


def _generator(seed):
    """Where a transform's ``seed`` says to draw from: None (torch's global CPU generator,
    which ``torch.manual_seed`` and DataLoader workers seed), an integer (the transform's
    own CPU generator, seeded with it: the same draws in every run, and in every copy of
    the transform, a DataLoader worker's included), or a ``torch.Generator`` (the caller's)."""
    if seed is None or isinstance(seed, torch.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be None, an integer or a torch.Generator, got {type(seed).__name__}")
    if not -2 ** 63 <= int(seed) < 2 ** 64:
        raise ValueError(f"seed must be an integer from -2**63 to 2**64 - 1, got {seed}")
    return torch.Generator().manual_seed(int(seed))


def _sample(bounds, count=None, generator=None):
    """A float from the range, or ``count`` of them as a CPU tensor, from ``generator``
    (None: torch's global one)."""
    lo, hi = bounds
    device = "cpu" if generator is None else generator.device
    if count is None:
        return lo if lo == hi else torch.empty(1, device=device).uniform_(lo, hi, generator=generator).item()
    return torch.empty(count, dtype=torch.float64, device=device).uniform_(lo, hi, generator=generator).cpu()


def _sample_int(n, generator=None):
    """An integer from 0 to n - 1, from ``generator`` (None: torch's global one)."""
    device = "cpu" if generator is None else generator.device
    return int(torch.randint(n, (), generator=generator, device=device).item())


def _images_in(t):
    """Images in tensor ``t`` of 3 or more dims: the product of its leading dims (no tensor
    op: this runs on every per-sample call)."""
    return math.prod(t.shape[:-3])


def _check_batch(inpt, values):
    """A per-sample call's draws (``values``, a tensor of one per image) fit ``inpt``."""
    if isinstance(inpt, torch.Tensor) and inpt.ndim >= 3 and _images_in(inpt) != values.numel():
        raise ValueError("per_sample=True needs every image input of a call to have the same batch size")


def _batch_size(flat_inputs):
    """Images in the first image-like input: the product of its leading dims."""
    for inpt in flat_inputs:
        if isinstance(inpt, torch.Tensor) and not not_an_image(inpt) and inpt.ndim >= 3:
            return _images_in(inpt)
    return 1


def _sample_step(bounds, step, count, generator):
    """One of ``low``, ``low + step``, ... ``high``, uniformly: an int, or with ``count`` a
    CPU int64 tensor of them."""
    lo, hi = bounds
    if count is None:
        return lo if lo == hi else lo + step * _sample_int((hi - lo) // step + 1, generator)
    device = "cpu" if generator is None else generator.device
    return lo + step * torch.randint((hi - lo) // step + 1, (count,), generator=generator, device=device).cpu()


def _by_draw(t, draws, fn):
    """``fn(images, *values)`` over the images of ``t`` grouped by their rows of ``draws``
    (a (B, k) CPU tensor: per-sample values that set the kernel itself, a window's size or
    a count of passes), reassembled in order: one launch per distinct draw, not per image."""
    _check_batch(t, draws[:, 0])
    distinct = torch.unique(draws, dim=0)
    if len(distinct) == 1 or t.ndim < 3:
        return fn(t, *distinct[0].tolist())
    images = t.reshape(-1, *t.shape[-3:])
    out = torch.empty_like(images)
    for values in distinct:
        at = _image_sent((draws == values).all(1).nonzero().flatten(), t.device, torch.int64)
        out.index_copy_(0, at, fn(images.index_select(0, at), *values.tolist()))
    return _image_wrap(t, out.reshape(t.shape))


class GaussianBlur(v2.GaussianBlur):
    """``v2.GaussianBlur`` computed by ``imgfilters.gaussian_blur``: the same arguments,
    sigma sampling, repr and results (float32 within 1e-5, uint8 within 1); ``seed``
    draws sigma from a generator of its own (an integer) or the caller's. With
    ``per_sample=True`` each image of a batch draws its own sigma, and the batch is
    blurred in one launch (``separable_filter`` with a row of taps per image)."""

    def __init__(self, kernel_size, sigma=(0.1, 2.0), *, per_sample=False, seed=None):
        super().__init__(kernel_size, sigma)
        if per_sample:  # (at most 127 taps, now: the rows it makes skip separable_filter's checks)
            _separable._kernel_sizes(self.kernel_size)
        self.generator = _generator(seed)
        self._per_sample = per_sample  # (private: the repr stays torchvision's unless it is on)

    def extra_repr(self):
        return super().extra_repr() + (", per_sample=True" if self._per_sample else "")

    def make_params(self, flat_inputs):
        if self._per_sample:  # a CPU float64 tensor of one sigma per image
            return dict(sigma=_sample(tuple(self.sigma), _batch_size(flat_inputs), self.generator))
        if self.generator is None:  # (torchvision's draw, as v2.GaussianBlur)
            return super().make_params(flat_inputs)
        sigma = _sample(tuple(self.sigma), generator=self.generator)
        return dict(sigma=[sigma, sigma])

    def _per_image_args(self, img, sigma):
        """``separable_filter``'s op arguments for the per-image ``sigma``s: (B, K) rows of
        taps along x and y (the same tensor for a square kernel), made here and so given to
        the op without the public function's copy and checks of the caller's taps."""
        _check_batch(img, sigma)
        _separable._check(img, "reflect", 0.0)
        kx, ky = self.kernel_size
        tx = _reference_separable.gaussian_taps(kx, sigma)
        return img, tx, tx if ky == kx else _reference_separable.gaussian_taps(ky, sigma), "reflect", 0.0

    def transform(self, inpt, params):
        sigma = params["sigma"]
        if isinstance(sigma, torch.Tensor):
            return _filter_images(inpt, lambda t: _image_wrap(t, _separable._separable_op(
                *self._per_image_args(t, sigma))))
        return _filter_images(inpt, lambda t: _separable.gaussian_blur(t, self.kernel_size, sigma))

    def _op_call(self, img, params):
        """(op, its arguments): the call ``transform`` makes for the image tensor ``img``."""
        sigma = params["sigma"]
        if isinstance(sigma, torch.Tensor):
            return _separable._separable_op, self._per_image_args(img, sigma)
        return _separable._gaussian_op, (img, *_separable._gaussian_args(img, self.kernel_size, sigma,
                                                                          "reflect", 0.0))


class BoxBlur(v2.Transform):
    """``imgfilters.box_blur`` as a transform. With ``max_size`` the box is a square whose
    side is drawn on every call from the odd sizes ``kernel_size`` to ``max_size``
    (``seed`` as ``GaussianBlur``); with ``per_sample=True`` too each image of a batch
    draws its own, and the batch is blurred in one launch (``separable_filter`` with a row
    of taps per image: each box centred in a row as wide as the widest drawn)."""

    def __init__(self, kernel_size, *, max_size=None, border="reflect", border_value=0.0, per_sample=False,
                 seed=None):
        super().__init__()
        if max_size is None:
            if per_sample:
                raise ValueError("per_sample=True needs max_size: a box of one size draws nothing")
            self.kernel_size, self.sizes = list(_separable._kernel_sizes(kernel_size)), None
        else:
            low, high = (_separable._kernel_sizes(k)[0] for k in (kernel_size, max_size))
            if isinstance(kernel_size, (tuple, list)) or low > high:
                raise ValueError(f"with max_size the box is square: kernel_size must be an odd integer <= max_size, "
                                 f"got {kernel_size!r} and {max_size!r}")
            self.kernel_size, self.sizes = [low, low], (low, high)
        _image_check_border(border, border_value)
        self.border, self.border_value = border, border_value
        self.per_sample, self.generator = per_sample, _generator(seed)

    def make_params(self, flat_inputs):
        if self.sizes is None:
            return dict(kernel_size=self.kernel_size)
        size = _sample_step(self.sizes, 2, _batch_size(flat_inputs) if self.per_sample else None, self.generator)
        return dict(kernel_size=size if self.per_sample else [size, size])

    @staticmethod
    def _rows(sizes):
        """(B, K) float64 rows of taps: row b a box of ``sizes[b]`` taps of 1 / size, centred,
        zero beyond; K the largest size."""
        x = torch.arange(int(sizes.max()), dtype=torch.float64) - int(sizes.max()) // 2
        k = sizes.to(torch.float64)[:, None]
        return torch.where(x.abs() <= k // 2, 1.0 / k, 0.0)

    def _op_call(self, img, params):
        size = params["kernel_size"]
        if isinstance(size, torch.Tensor):
            _check_batch(img, size)
            _separable._check(img, self.border, self.border_value)
            rows = self._rows(size)
            return _separable._separable_op, (img, rows, rows, self.border, self.border_value)
        return _separable._box_op, (img, *_separable._box_args(img, size, self.border, self.border_value))

    def transform(self, inpt, params):
        def blur(t):
            op, args = self._op_call(t, params)
            return _image_wrap(t, op(*args))
        return _filter_images(inpt, blur)


class SeparableFilter(v2.Transform):
    """``imgfilters.separable_filter`` as a transform (fixed taps)."""

    def __init__(self, kernel_x, kernel_y=None, *, border="reflect", border_value=0.0):
        super().__init__()
        self.kernel_x = _separable._check_taps(kernel_x, "kernel_x").tolist()
        self.kernel_y = None if kernel_y is None else _separable._check_taps(kernel_y, "kernel_y").tolist()
        self.border, self.border_value = border, border_value

    def transform(self, inpt, params):
        return _filter_images(inpt, lambda t: _separable.separable_filter(
            t, self.kernel_x, self.kernel_y, border=self.border, border_value=self.border_value))

    def _op_call(self, img, params):
        return _separable._separable_op, (img, *_separable._separable_args(img, self.kernel_x, self.kernel_y,
                                                                            self.border, self.border_value))


class Filter2D(v2.Transform):
    """``imgfilters.filter2d`` as a transform with a fixed ``(kh, kw)`` kernel (a copy is
    kept; per-image kernels: ``imgfilters.degrade.RandomKernelBlur``)."""

    def __init__(self, kernel, *, border="reflect", border_value=0.0):
        super().__init__()
        k = _filter2d.check_kernel(kernel, 1, "cpu")
        if k.ndim != 2:
            raise ValueError(f"Filter2D takes one (kh, kw) kernel, got shape {tuple(k.shape)}")
        self.kernel = k.detach().to(torch.float64, copy=True)
        self.border, self.border_value = border, border_value

    def transform(self, inpt, params):
        return _filter_images(inpt, lambda t: _filter2d.filter2d(
            t, self.kernel, border=self.border, border_value=self.border_value))

    def _op_call(self, img, params):
        return _filter2d._filter2d_op, (img, *_filter2d._filter2d_args(img, self.kernel, self.border,
                                                                        self.border_value))


class MedianBlur(v2.Transform):
    """``imgfilters.median_blur`` as a transform. ``kernel_size`` may be a ``(low, high)``
    range of odd sizes: one of the odd sizes from low to high, drawn uniformly on every
    call (``seed`` as ``GaussianBlur``); with ``per_sample=True`` each image of a batch
    draws its own, and the batch runs one launch per distinct size drawn (the size is the
    kernel's own: at most ``(high - low) / 2 + 1`` launches, not one per image)."""

    def __init__(self, kernel_size, *, border="reflect", border_value=0.0, per_sample=False, seed=None):
        super().__init__()
        self.generator = _generator(seed)
        if isinstance(kernel_size, (tuple, list)):
            if len(kernel_size) != 2:
                raise ValueError(f"kernel_size must be an odd integer or a (low, high) range, got {kernel_size!r}")
            lo, hi = (_median.check_size(k) for k in kernel_size)
            if lo > hi:
                raise ValueError(f"kernel_size range must have low <= high, got {kernel_size!r}")
            self.kernel_size = (lo, hi)
        else:
            k = _median.check_size(kernel_size)
            self.kernel_size = (k, k)
        _image_check_border(border, border_value)
        self.border, self.border_value, self.per_sample = border, border_value, per_sample
        if per_sample:  # (a batch of sizes is several launches: a fused pipeline runs it as it is)
            self._op_call = None

    def make_params(self, flat_inputs):
        count = _batch_size(flat_inputs) if self.per_sample else None
        return dict(kernel_size=_sample_step(self.kernel_size, 2, count, self.generator))

    def _median(self, t, size):
        return _median.median_blur(t, size, border=self.border, border_value=self.border_value)

    def transform(self, inpt, params):
        size = params["kernel_size"]
        if isinstance(size, torch.Tensor):
            return _filter_images(inpt, lambda t: _by_draw(t, size[:, None], self._median))
        return _filter_images(inpt, lambda t: self._median(t, size))

    def _op_call(self, img, params):
        return _median._median_op, (img, *_median._median_args(img, params["kernel_size"], self.border,
                                                                self.border_value))


class Morphology(v2.Transform):
    """``imgfilters.morphology`` as a transform: ``op`` ("erode", "dilate", "opening",
    "closing", "gradient", "tophat", "blackhat") by a ``kernel_size`` square of ``shape``
    ("rect", "cross", "ellipse"), or by a boolean ``mask`` (then no ``kernel_size`` or
    ``shape``). ``kernel_size`` may be a ``(low, high)`` range of odd sizes and
    ``iterations`` a ``(low, high)`` range of counts, drawn uniformly on every call
    (``seed`` as ``GaussianBlur``); with ``per_sample=True`` each image of a batch draws its
    own, and the batch runs one call per distinct draw (size and count set the kernel and
    its passes: at most as many calls as the ranges hold pairs, not one per image)."""

    def __init__(self, op, kernel_size=3, *, shape="rect", mask=None, iterations=1, border=None, border_value=0.0,
                 per_sample=False, seed=None):
        super().__init__()
        self.generator = _generator(seed)
        self.op = _morphology.check_op(op)
        if mask is not None:
            if kernel_size != 3 or shape != "rect":
                raise ValueError("Morphology takes a mask or a kernel_size and shape, not both")
            self.mask = _morphology.check_kernel(mask)
            self.kernel_size, self.shape = None, shape
        else:
            self.mask = None
            self.shape = shape
            self.kernel_size = self._range(kernel_size, "kernel_size", lambda k: _image_check_integer(
                k, "kernel_size", 1, _morphology.MAX_SIDE), odd=True)
            _morphology.check_kernel(self.kernel_size[0], shape)
        self.iterations = self._range(iterations, "iterations", lambda n: _image_check_integer(
            n, "iterations", 1, _morphology.MAX_ITERATIONS))
        if self.mask is not None:
            _morphology.check_iterations(self.iterations[1], *self.mask)
        else:
            _morphology.check_iterations(self.iterations[1], *_morphology.check_kernel(self.kernel_size[1], shape))
        if border is not None:
            _image_check_border(border, border_value)
        self.border, self.border_value, self.per_sample = border, border_value, per_sample
        if per_sample:  # (a batch of draws is several calls: a fused pipeline runs it as it is)
            self._op_call = None

    @staticmethod
    def _range(value, name, check, odd=False):
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise ValueError(f"{name} must be an integer or a (low, high) range, got {value!r}")
            lo, hi = (check(v) for v in value)
            if lo > hi:
                raise ValueError(f"{name} range must have low <= high, got {value!r}")
            if odd and (lo % 2 == 0 or hi % 2 == 0):
                raise ValueError(f"{name} range must hold odd sizes, got {value!r}")
            return lo, hi
        v = check(value)
        return v, v

    def make_params(self, flat_inputs):
        count = _batch_size(flat_inputs) if self.per_sample else None
        params = {}
        if self.kernel_size is not None:
            params["kernel_size"] = _sample_step(self.kernel_size, 2, count, self.generator)
        params["iterations"] = _sample_step(self.iterations, 1, count, self.generator)
        return params

    def _kernel(self, size):
        return _morphology.mask_of(*self.mask) if self.mask is not None else size

    def _morphology(self, t, size, iterations):
        return _morphology.morphology(t, self.op, self._kernel(size), shape=self.shape, iterations=iterations,
                                      border=self.border, border_value=self.border_value)

    def transform(self, inpt, params):
        size, iterations = params.get("kernel_size", 0), params["iterations"]
        if isinstance(iterations, torch.Tensor):
            sizes = size if isinstance(size, torch.Tensor) else torch.zeros_like(iterations)  # (a mask: no size)
            draws = torch.stack([sizes, iterations], 1)
            return _filter_images(inpt, lambda t: _by_draw(t, draws, self._morphology))
        return _filter_images(inpt, lambda t: self._morphology(t, size, iterations))

    def _op_call(self, img, params):
        kernel = self._kernel(params.get("kernel_size"))
        return _morphology._morph_op, (img, *_morphology._arguments(img, self.op, kernel, self.shape,
                                                                    params["iterations"], self.border,
                                                                    self.border_value))

    def _launches(self, raw):
        """Kernel launches of one call (``imgfilters.fuse`` counts them), at the smallest
        parameters of a range (``raw``: an integer image without a prologue)."""
        if self.mask is not None:
            rows, kw = self.mask
        else:
            rows, kw = _morphology.check_kernel(self.kernel_size[0], self.shape)
        return _morphology.launches(self.op, rows, kw, self.iterations[0], self.border, raw)


class _Derivative(v2.Transform):
    """A derivative filter as a transform: tensors, Images and Videos in, signed results out
    (float32 for integer images unless ``dtype`` says otherwise: ``ops/derivatives.py``).
    PIL images are refused: their modes cannot hold a signed result."""

    def __init__(self, fn, check, **params):
        super().__init__()
        check(torch.empty(1, 1, 1, 1), **params)  # (checked now, not at the first image)
        self._fn, self.params = fn, params

    def transform(self, inpt, params):
        if isinstance(inpt, PIL.Image.Image):
            raise TypeError(f"{type(self).__name__} takes tensors, not PIL images (a PIL mode cannot hold a signed "
                            f"derivative): convert with v2.PILToTensor() first")
        return _filter_images(inpt, lambda t: self._fn(t, **self.params))


class Sobel(_Derivative):
    """``imgfilters.sobel`` as a transform."""

    def __init__(self, dx=1, dy=0, ksize=3, *, scale=1.0, border="reflect", border_value=0.0, dtype=None):
        super().__init__(_derivatives.sobel, _derivatives.sobel_args, dx=dx, dy=dy, ksize=ksize, scale=scale,
                         border=border, border_value=border_value, dtype=dtype)


class Scharr(_Derivative):
    """``imgfilters.scharr`` as a transform."""

    def __init__(self, dx=1, dy=0, *, scale=1.0, border="reflect", border_value=0.0, dtype=None):
        super().__init__(_derivatives.scharr, _derivatives.scharr_args, dx=dx, dy=dy, scale=scale, border=border,
                         border_value=border_value, dtype=dtype)


class Laplacian(_Derivative):
    """``imgfilters.laplacian`` as a transform."""

    def __init__(self, ksize=1, *, scale=1.0, border="reflect", border_value=0.0, dtype=None):
        super().__init__(_derivatives.laplacian, _derivatives.laplacian_args, ksize=ksize, scale=scale, border=border,
                         border_value=border_value, dtype=dtype)


class GradientMagnitude(_Derivative):
    """``imgfilters.gradient_magnitude`` as a transform (the magnitude; no direction)."""

    def __init__(self, ksize=3, *, operator="sobel", scale=1.0, border="reflect", border_value=0.0, dtype=None):
        super().__init__(_derivatives.gradient_magnitude, _derivatives.gradient_args, ksize=ksize, operator=operator,
                         scale=scale, border=border, border_value=border_value, dtype=dtype)


class UnsharpMask(v2.Transform):
    """``imgfilters.unsharp_mask`` as a transform; ``sigma`` and ``amount`` may be
    ``(low, high)`` ranges (``seed`` as ``GaussianBlur``); with ``per_sample=True`` each
    image of a batch draws its own, and the batch is sharpened in one launch."""

    def __init__(self, sigma=1.0, amount=1.0, threshold=0.0, *, border="reflect", border_value=0.0,
                 per_sample=False, seed=None):
        super().__init__()
        self.generator = _generator(seed)
        self.sigma = _range(sigma, "sigma", low=0.0)
        self.amount = _range(amount, "amount")
        self.threshold, self.border, self.border_value = threshold, border, border_value
        self.per_sample = per_sample
        if per_sample:  # (the widest blur the draws can ask for, refused now rather than mid-epoch)
            _separable._unsharp_reach(self.sigma[1])

    def make_params(self, flat_inputs):
        count = _batch_size(flat_inputs) if self.per_sample else None
        return dict(sigma=_sample(self.sigma, count, self.generator),
                    amount=_sample(self.amount, count, self.generator))

    def transform(self, inpt, params):
        if self.per_sample:
            _check_batch(inpt, params["sigma"])
        return _filter_images(inpt, lambda t: _separable.unsharp_mask(
            t, params["sigma"], params["amount"], self.threshold, border=self.border, border_value=self.border_value))

    def _op_call(self, img, params):
        return _separable._unsharp_op, (img, *_separable._unsharp_args(
            img, params["sigma"], params["amount"], self.threshold, self.border, self.border_value))


class Bilateral(v2.Transform):
    """``imgfilters.bilateral`` as a transform. ``sigma_color`` and ``sigma_space`` may be
    ``(low, high)`` ranges; with ``per_sample=True`` each image of a batch gets its own
    draw (one launch: the op takes per-image sigmas); ``seed`` as ``GaussianBlur``."""

    def __init__(self, sigma_color=0.1, sigma_space=1.5, *, radius=None, window="square", color_distance="l2",
                 border="reflect", border_value=0.0, per_sample=False, seed=None):
        super().__init__()
        self.generator = _generator(seed)
        self.sigma_color = _range(sigma_color, "sigma_color", low=0.0)
        self.sigma_space = _range(sigma_space, "sigma_space", low=0.0)
        _bilateral.check_options(radius, window, color_distance, border, border_value)  # now, not at the first call
        self.radius, self.window, self.color_distance = radius, window, color_distance
        self.border, self.border_value, self.per_sample = border, border_value, per_sample

    def make_params(self, flat_inputs):
        count = _batch_size(flat_inputs) if self.per_sample else None
        return dict(sigma_color=_sample(self.sigma_color, count, self.generator),
                    sigma_space=_sample(self.sigma_space, count, self.generator))

    def transform(self, inpt, params):
        if self.per_sample:
            _check_batch(inpt, params["sigma_color"])
        return _filter_images(inpt, lambda t: _bilateral.bilateral(
            t, params["sigma_color"], params["sigma_space"], radius=self.radius, window=self.window,
            color_distance=self.color_distance, border=self.border, border_value=self.border_value))

    def _op_call(self, img, params):
        return _bilateral._bilateral_op, (img, *_bilateral._arguments(
            img, None, params["sigma_color"], params["sigma_space"], self.radius, self.window, self.color_distance,
            self.border, self.border_value, joint=False))


class JointBilateral(Bilateral):
    """``imgfilters.joint_bilateral`` as a transform, called on a pair: ``t(img, guide,
    *rest)`` returns ``(filtered img, guide, *rest)``, so a sample ``(img, guide, ...)``
    flows through ``v2.Compose``, ``RandomApply`` and ``RandomChoice``. The guide (a
    tensor, Image or PIL image) passes through unchanged. Arguments as ``Bilateral``."""

    _op_call = None  # called on a pair, with its guide: not fused

    def forward(self, *inputs):
        if len(inputs) < 2:
            raise ValueError("JointBilateral is called as t(img, guide, *rest): it needs the guide")
        img, guide, *rest = inputs
        params = self.make_params([img])
        if self.per_sample:
            _check_batch(img, params["sigma_color"])
        g = F.pil_to_tensor(guide) if isinstance(guide, PIL.Image.Image) else guide
        out = _filter_images(img, lambda t: _bilateral.joint_bilateral(
            t, g.as_subclass(torch.Tensor).to(t.device), params["sigma_color"], params["sigma_space"],
            radius=self.radius, window=self.window, color_distance=self.color_distance, border=self.border,
            border_value=self.border_value))
        return (out, guide, *rest)


class GuidedFilter(v2.Transform):
    """``imgfilters.guided_filter`` as a transform, the image guiding itself (1 or 3
    channels). ``eps`` may be a ``(low, high)`` range; with ``per_sample=True`` each image of
    a batch gets its own draw (the function takes one eps per image); ``seed`` as
    ``GaussianBlur``."""

    def __init__(self, radius=4, eps=1e-2, *, subsample=1, border="reflect", per_sample=False, seed=None):
        super().__init__()
        self.generator = _generator(seed)
        self.eps = _range(eps, "eps", low=0.0)
        _guided.check_options(radius, subsample, border)  # now, not at the first image
        self.radius, self.subsample, self.border, self.per_sample = radius, subsample, border, per_sample

    def make_params(self, flat_inputs):
        return dict(eps=_sample(self.eps, _batch_size(flat_inputs) if self.per_sample else None, self.generator))

    def transform(self, inpt, params):
        return _filter_images(inpt, lambda t: _guided.guided_filter(t, None, self.radius, params["eps"],
                                                                    subsample=self.subsample, border=self.border))


class NonLocalMeans(v2.Transform):
    """``imgfilters.nl_means`` as a transform. ``h`` and ``sigma`` are ``None`` (automatic:
    sigma estimated per image, h from IPOL's table), numbers, or ``(low, high)`` ranges;
    with ``per_sample=True`` each image of a batch gets its own draw, in one launch;
    ``seed`` as ``GaussianBlur``."""

    def __init__(self, h=None, *, sigma=None, patch_size=None, search_radius=None, border="reflect",
                 border_value=0.0, per_sample=False, seed=None):
        super().__init__()
        self.generator = _generator(seed)
        self.h = None if h is None else _range(h, "h", low=0.0)
        self.sigma = None if sigma is None else _range(sigma, "sigma")
        if self.sigma is not None and self.sigma[0] < 0:
            raise ValueError(f"sigma must be >= 0, got {sigma!r}")
        self.patch_size, self.search_radius = patch_size, search_radius
        self.border, self.border_value, self.per_sample = border, border_value, per_sample

    def make_params(self, flat_inputs):
        count = _batch_size(flat_inputs) if self.per_sample else None
        draw = lambda bounds: None if bounds is None else _sample(bounds, count, self.generator)
        return dict(h=draw(self.h), sigma=draw(self.sigma))

    def transform(self, inpt, params):
        return _filter_images(inpt, lambda t: _nlm.nl_means(
            t, params["h"], sigma=params["sigma"], patch_size=self.patch_size, search_radius=self.search_radius,
            border=self.border, border_value=self.border_value))

    def _op_call(self, img, params):
        return _nlm._nlm_op, (img, *_nlm._nlm_args(img, params["h"], params["sigma"], self.patch_size,
                                                   self.search_radius, self.border, self.border_value))


class Resize(v2.Resize):
    """``v2.Resize`` with images resized by ``imgfilters.resize``: the same arguments and
    output sizes, float32 within 1e-5 and uint8 within 1 of torchvision. Bounding boxes,
    masks and other tv_tensors go through torchvision's own resize."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.size is not None and any(s < 1 for s in self.size):  # torchvision lets 0 wait for the first call
            raise ValueError(f"size must be positive, got {self.size}")

    def transform(self, inpt, params):
        if not_an_image(inpt) or (isinstance(inpt, PIL.Image.Image) and inpt.mode not in _PIL_MODES):
            # boxes, masks and PIL modes the filters do not take: torchvision's resize, given the enum
            # (torchvision before 0.27 does not take a mode's name)
            return self._call_kernel(F.resize, inpt, self.size, interpolation=_resample.as_enum(self.interpolation),
                                     max_size=self.max_size, antialias=self.antialias)
        return _filter_images(inpt, lambda t: _resample.resize(t, self.size, self.interpolation, self.max_size,
                                                               self.antialias))

    def _op_call(self, img, params):
        return _resample._resample_op, (img, *_resample._resize_plan(img, self.size, self.interpolation,
                                                                      self.max_size, self.antialias))


class Upsample(v2.Transform):
    """``imgfilters.upsample`` as a transform (``F.interpolate``'s arguments). Bounding
    boxes and masks are resized by torchvision to the images' new size."""

    def __init__(self, scale_factor=None, size=None, mode="bicubic", align_corners=False):
        super().__init__()
        if (scale_factor is None) == (size is None):
            raise ValueError("give exactly one of scale_factor and size")
        self.scale_factor, self.size, self.mode, self.align_corners = scale_factor, size, mode, align_corners

    def make_params(self, flat_inputs):
        from torchvision.transforms.v2._utils import query_size
        h, w = query_size(flat_inputs)
        if self.size is not None:
            out = _resample._pair_of(self.size, "size", int)
        else:
            fy, fx = _resample._pair_of(self.scale_factor, "scale_factor", float)
            out = (int(h * fy), int(w * fx))
        return dict(size=list(out))

    def transform(self, inpt, params):
        if not_an_image(inpt):
            return F.resize(inpt, params["size"])
        return _filter_images(inpt, lambda t: _resample.upsample(t, self.scale_factor, self.size, self.mode,
                                                                 self.align_corners))

    def _op_call(self, img, params):
        return _resample._resample_op, (img, *_resample._upsample_plan(img, self.scale_factor, self.size, self.mode,
                                                                        self.align_corners))
