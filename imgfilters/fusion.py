"""``imgfilters.fuse``: run a torchvision pipeline with fewer passes over memory.

The pointwise steps next to an imgfilters filter become that filter's prologue (before
it, on every pixel it loads) and epilogue (after it, before the store), so the filter's
one launch does them too; runs of pointwise steps with no filter become one launch of the
generic elementwise kernel. Everything else runs as it is.

Pointwise steps it recognises, in unit scale (integers read as value / max):

- ``v2.ToDtype(float dtype, scale=True)``: nothing to compute, the output dtype changes;
  ``scale=False`` from an integer image multiplies by its max. ``ToDtype`` to the dtype
  the image already has is nothing at all (torchvision returns the image as it is): it
  costs no launch, and a pipeline that ends in it returns what the step before returned.
- ``v2.Normalize(mean, std)``: a per-channel affine step.

Conversions to integer dtypes (torchvision truncates ``x * 255.999`` where the kernels
round), ``ToDtype`` with a per-type dict, and anything else run as they are. Where the
unfused pipeline stores a filter's result in an integer dtype before later steps, the
fused epilogue rounds it the same way first, so the results agree up to float32
rounding (float16 and bfloat16 intermediates are not rounded to their precision).
A constant border's value is a pixel of the image the filter receives, so the kernels
insert it after the prologue, as the unfused pipeline pads the prologue's output
(``kernels/core/neighbourhood.py``). ``NonLocalMeans`` that estimates the noise (no
``sigma``) gets no prologue: the estimate reads the image as stored.

Each fused filter is one call of its op's implementation with a ``pointwise.Fusion``
(prologue, epilogue, dtypes), one launch: the transform says which op call it makes
(``_op_call``), and ``op.fused`` runs it (``ops/library.py``).
"""
import torch
from torchvision.transforms import v2

from imgfilters import _image, transforms as T
from imgfilters.ops import pointwise as pw

__all__ = ["fuse", "Fused"]

FILTERS = (T.GaussianBlur, T.BoxBlur, T.SeparableFilter, T.Filter2D, T.MedianBlur, T.Morphology, T.UnsharpMask,
           T.Bilateral, T.NonLocalMeans, T.Resize, T.Upsample)


def fuse(pipeline):
    """A callable giving ``pipeline``'s result with fewer passes over memory.

    Args:
        pipeline: a ``v2.Compose`` or a list of transforms (at least one, as ``v2.Compose``).

    The fused callable takes one image (a tensor, ``tv_tensors.Image`` or ``Video``) on
    the GPU, or on the CPU (the CPU engine, or the interpreted kernels under
    ``TRITON_INTERPRET=1``; a filter whose op is not on the CPU engine runs its steps one
    after the other there). Other inputs (PIL images, several inputs, tensors that require
    grad, float64 images) run the pipeline unfused. ``launches(dtype)`` counts the passes
    it makes for an input dtype.

    Example: on a uint8 batch, ``fuse([v2.ToDtype(torch.float32, scale=True),
    transforms.Bilateral(), v2.Normalize(mean, std)])`` is one kernel launch.
    """
    if isinstance(pipeline, v2.Compose):
        steps = list(pipeline.transforms)
    elif isinstance(pipeline, (list, tuple)):
        steps = list(pipeline)
    else:
        raise TypeError(f"pipeline must be a v2.Compose or a list of transforms, got {type(pipeline).__name__}")
    if not steps:  # (as v2.Compose, which the fused callable falls back to)
        raise ValueError("pipeline must hold at least one transform")
    for t in steps:
        if not callable(t):
            raise TypeError(f"pipeline holds {type(t).__name__}, which is not callable")
    return Fused(steps)


class _Filter:
    """One imgfilters filter with its ``pointwise.Fusion``: one launch (``Morphology``: its
    passes, the prologue in the first, the epilogue in the last)."""

    def __init__(self, transform, fusion, raw):
        """``raw``: the filter loads stored integers as they are (an integer stage input, no
        prologue)."""
        self.transform, self.fusion, self.out_dtype = transform, fusion, fusion.out_dtype
        self.launches = transform._launches(raw) if hasattr(transform, "_launches") else 1

    def __call__(self, x):
        op, args = self.transform._op_call(x, self.transform.make_params([x]))
        if op.can_fuse(x):
            return _image.wrap(x, op.fused(self.fusion, *args))
        # a CPU tensor of an op not on the CPU engine (the float64 reference): the steps
        # one after the other, with the parameters drawn for this call
        f = self.fusion
        if f.prologue or x.dtype != f.in_dtype:
            x = pw.pointwise(x, f.prologue, dtype=f.in_dtype)
        y = op(x, *args[1:])
        if f.epilogue or y.dtype != f.out_dtype:
            y = pw.pointwise(y, f.epilogue, dtype=f.out_dtype)
        return _image.wrap(x, y)


class _Pointwise:
    launches = 1

    def __init__(self, steps, dtype):
        self.steps, self.out_dtype = list(steps), dtype

    def __call__(self, x):
        return pw.pointwise(x, self.steps, dtype=self.out_dtype)


class _AsIs:
    launches = 1

    def __init__(self, transform, dtype):
        self.transform, self.out_dtype = transform, dtype

    def __call__(self, x):
        return self.transform(x)


class _Nothing:
    """The pipeline's last steps when they change nothing (``ToDtype`` to the image's own
    dtype, which torchvision returns as it is): no launch, the same tensor."""

    launches = 0

    def __init__(self, dtype):
        self.out_dtype = dtype

    def __call__(self, x):
        return x


class Fused:
    """The callable ``fuse`` returns; ``transforms`` is the original list."""

    def __init__(self, transforms):
        self.transforms = transforms
        self._stages = {}

    def __repr__(self):
        return f"Fused({self.transforms!r})"

    @torch.compiler.disable  # fusion passes Triton functions to the launch sites: eager only
    def __call__(self, *inputs):
        if len(inputs) != 1 or not self._fusable(inputs[0]):
            return v2.Compose(self.transforms)(*inputs)
        x, i = inputs[0], 0
        with torch.no_grad():
            while i < len(self.transforms):
                if not self._fusable(x):  # a step returned something else (crops, a PIL image...)
                    return v2.Compose(self.transforms[i:])(x)
                stage, i = self._stage(i, x.dtype)
                x = stage(x)
        return x

    def launches(self, dtype):
        """Passes over memory for an input of ``dtype``: one per stage that does something;
        a step run as it is counts one and is taken to keep the dtype."""
        i, count = 0, 0
        while i < len(self.transforms):
            stage, i = self._stage(i, dtype)
            dtype, count = stage.out_dtype, count + stage.launches
        return count

    @staticmethod
    def _fusable(x):
        return (isinstance(x, torch.Tensor) and not T.not_an_image(x) and x.dtype in _image.KERNEL_DTYPES
                and (_image.uses_kernels(x) or _image.uses_cpu_engine(x)) and not x.requires_grad)

    def _stage(self, i, dtype):
        """The stage that starts at transform ``i`` for an input of ``dtype``, and the index
        after it (cached: plans depend only on the position and the dtype)."""
        key = (i, dtype)
        if key not in self._stages:
            self._stages[key] = self._make_stage(i, dtype)
        return self._stages[key]

    def _make_stage(self, i, dtype):
        ts, n = self.transforms, len(self.transforms)
        steps, cur = [], dtype
        while i < n and (step := _pointwise_step(ts[i], cur)) is not None:
            steps += step[0]
            cur = step[1]
            i += 1
        if i < n and _is_filter(ts[i]) and not (steps and _estimates_noise(ts[i])):
            t, epilogue, out = ts[i], [], cur
            i += 1
            while i < n and (step := _pointwise_step(ts[i], out)) is not None:
                if out == cur and not cur.is_floating_point and step[1] != cur:
                    epilogue.append(pw.quantize(_image.MAX_VALUE[cur]))  # the store the pipeline made
                epilogue += step[0]
                out = step[1]
                i += 1
            return _Filter(t, pw.Fusion(tuple(steps), tuple(epilogue), cur, out),
                           not steps and not dtype.is_floating_point), i
        if steps or cur != dtype:
            return _Pointwise(steps, cur), i
        if i == n:
            return _Nothing(dtype), i
        return _AsIs(ts[i], dtype), i + 1


def _is_filter(t):
    return isinstance(t, FILTERS) and t._op_call is not None  # (JointBilateral is called on pairs)


def _estimates_noise(t):
    """NLM without ``sigma`` estimates it from the image as stored: it takes no prologue."""
    return isinstance(t, T.NonLocalMeans) and t.sigma is None


def _pointwise_step(t, dtype):
    """(steps, dtype after) for a transform that is pointwise in unit scale, or None."""
    if isinstance(t, v2.Normalize) and dtype.is_floating_point:
        return [pw.normalize(t.mean, t.std)], dtype
    if isinstance(t, v2.ToDtype):
        target = t.dtype  # a per-type dict depends on the input's type: run it as it is
        if target == dtype:  # torchvision returns the image as it is, whatever the dtype and scale
            return [], dtype
        if not isinstance(target, torch.dtype) or target not in _image.KERNEL_DTYPES or not target.is_floating_point:
            return None
        if t.scale or dtype.is_floating_point:
            return [], target
        return [pw.scale(_image.MAX_VALUE[dtype])], target
    return None
