"""Morphology: ``erode``, ``dilate``, ``morphology`` (opening, closing, gradient, tophat,
blackhat) and ``structuring_element``.

Inputs are ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16, float16,
bfloat16 or float32 (float64 runs the float64 reference); the output keeps the dtype and
memory format. The structuring element is a size (a ``k x k`` or ``kh x kw``
rectangle, cross or ellipse: OpenCV's ``getStructuringElement``) or a boolean mask up to
63 x 63, anchored at its centre. CUDA tensors run the Triton kernels
(``kernels/morphology/``: a direct pass for masks of up to 25 positions, separable van
Herk passes for larger rectangles, row runs for the other masks); other CPU tensors run
the CPU engine (``imgfilters/cpu/morphology.py``), or the kernels in Triton's
interpreter under ``TRITON_INTERPRET=1``. The definition and its peers:
``reference/morphology.py``.

Gradients (floating-point inputs): each output's gradient goes to the window positions
that hold its value, split evenly among ties (``torch.amin``/``amax``); on the kernel path
the backward recomputes each pass's input with the kernels and routes the gradient with
torch operations (one per mask position), through the border as the forward read it.
"""
import math
import numbers
import operator

import torch
from torch import Tensor
from typing import List, Optional

from imgfilters import _image
from imgfilters.kernels import morphology as kernels
from imgfilters.kernels.core.borders import border_code
from imgfilters.ops import library, pointwise
from imgfilters.reference import morphology as reference
from imgfilters.reference.borders import fold, pad

__all__ = ["erode", "dilate", "morphology", "structuring_element"]

SHAPES = reference.SHAPES
OPS = reference.OPS
MAX_SIDE = kernels.MAX_SIDE
MAX_RECT = kernels.MAX_RECT
MAX_ITERATIONS = 100


def structuring_element(shape, kernel_size):
    """OpenCV's ``getStructuringElement``: a ``(kh, kw)`` bool tensor of ``shape``
    ("rect", "cross" or "ellipse") for ``kernel_size`` ``k`` or ``(kh, kw)`` (sides 1 to
    63; OpenCV's order is ``(width, height)``, this one ``(height, width)`` as a tensor's)."""
    return reference.structuring_element(_check_shape(shape), _check_size(kernel_size))


def erode(img, kernel=3, *, shape="rect", iterations=1, border=None, border_value=0.0):
    """The minimum over each pixel's structuring element.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        kernel: the structuring element: a size ``k`` or ``(kh, kw)`` (sides 1 to 63) of
            the ``shape``, or a 2-D boolean mask up to 63 x 63 (a tensor, array or nested
            list of bools or 0/1; ``shape`` then stays "rect"), anchored at
            ``(kh // 2, kw // 2)``.
        shape: "rect" (default), "cross" or "ellipse": OpenCV's shapes.
        iterations: passes, 1 to 100 (an all-True mask makes one pass of a larger
            rectangle instead, as OpenCV: ``reference/morphology.py``).
        border: None (default, OpenCV's: the border never wins a min or max),
            ``"reflect"`` (reflect-101), ``"symmetric"``, ``"replicate"`` or ``"constant"``
            (``border_value``, unit scale).

    Returns:
        A tensor of ``img``'s shape, dtype and memory format; exactly ``cv2.erode``'s on
        integer images. An output whose window holds a NaN is NaN.
    """
    return _image.wrap(img, _morph_op(img, *_arguments(img, "erode", kernel, shape, iterations, border, border_value)))


def dilate(img, kernel=3, *, shape="rect", iterations=1, border=None, border_value=0.0):
    """The maximum over each pixel's structuring element (``erode``'s arguments; the mask
    is read as it is, as ``cv2.dilate`` does, not reflected)."""
    return _image.wrap(img, _morph_op(img, *_arguments(img, "dilate", kernel, shape, iterations, border,
                                                       border_value)))


def morphology(img, op, kernel=3, *, shape="rect", iterations=1, border=None, border_value=0.0):
    """``cv2.morphologyEx``: ``op`` is "opening" (dilate of erode), "closing" (erode of
    dilate), "gradient" (dilate - erode), "tophat" (img - opening), "blackhat" (closing -
    img), or "erode" / "dilate"; each erosion and dilation makes ``iterations`` passes.
    Integer images store differences saturated (a negative tophat of a uint8 image is 0).
    The other arguments are ``erode``'s."""
    return _image.wrap(img, _morph_op(img, *_arguments(img, op, kernel, shape, iterations, border, border_value)))


# ---- arguments ------------------------------------------------------------------------------

def _arguments(img, op, kernel, shape, iterations, border, border_value):
    """The op's arguments after the image, checked in order: (op, mask rows as bit sets,
    mask width, iterations, border, border_value)."""
    _image.check_image(img)
    op = check_op(op)
    rows, kw = check_kernel(kernel, shape)
    n = check_iterations(iterations, rows, kw)
    if border is not None:
        _image.check_border(border, border_value)
    border_value = _image.check_number(border_value, "border_value")
    return op, list(rows), kw, n, border, border_value


def check_op(op):
    if not isinstance(op, str) or op not in OPS:
        raise ValueError(f"op must be one of {', '.join(map(repr, OPS))}, got {op!r}")
    return op


def _check_shape(shape):
    if not isinstance(shape, str) or shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(map(repr, SHAPES))}, got {shape!r}")
    return shape


def _check_size(size):
    """``k`` or ``(kh, kw)`` -> (kh, kw), sides 1 to MAX_SIDE."""
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise ValueError(f"kernel as a size must be k or (kh, kw), got {size!r}")
        return tuple(_image.check_integer(s, "kernel", 1, MAX_SIDE) for s in size)
    k = _image.check_integer(size, "kernel", 1, MAX_SIDE)
    return k, k


def _is_size(kernel):
    if isinstance(kernel, numbers.Number):  # (a float: refused by the size check, which names it)
        return True
    if isinstance(kernel, (tuple, list)):
        return len(kernel) == 2 and all(not isinstance(s, (tuple, list, torch.Tensor)) and not hasattr(s, "shape")
                                        for s in kernel)
    try:
        operator.index(kernel)
    except TypeError:
        return isinstance(kernel, bool)  # (refused by the size check, which names it)
    return not (isinstance(kernel, torch.Tensor) and kernel.ndim > 0)


def check_kernel(kernel, shape="rect"):
    """The structuring element -> (rows, kw): each mask row as a bit set (bit v: column v)."""
    _check_shape(shape)
    if _is_size(kernel):
        kh, kw = _check_size(kernel)
        return tuple(sum(1 << v for v in range(j1, j2)) for j1, j2 in reference.element_spans(shape, (kh, kw))), kw
    if shape != "rect":
        raise ValueError(f"shape {shape!r} applies to a kernel size; kernel is a mask")
    # the mask as nested Python lists, checked in plain Python (``torch.compile`` traces a
    # list as constants; a tensor's values are read on the host)
    m = kernel.detach().cpu().tolist() if isinstance(kernel, torch.Tensor) else kernel
    m = m.tolist() if hasattr(m, "tolist") and not isinstance(m, (list, tuple)) else m
    if (not isinstance(m, (list, tuple)) or not 1 <= len(m) <= MAX_SIDE
            or not all(isinstance(r, (list, tuple)) and len(r) == len(m[0]) for r in m)
            or not 1 <= len(m[0]) <= MAX_SIDE or any(isinstance(v, (list, tuple)) for r in m for v in r)):
        raise ValueError(f"kernel as a mask must be 2-D (a tensor, array or nested list) with sides 1 to {MAX_SIDE}")
    if not all(v in (0, 1) and not isinstance(v, complex) for r in m for v in r):
        raise ValueError("kernel as a mask must hold booleans, or only 0 and 1")
    rows = tuple(sum(1 << v for v, on in enumerate(r) if on) for r in m)
    if not any(rows):
        raise ValueError("kernel as a mask must hold at least one True")
    return rows, len(m[0])


def check_iterations(iterations, rows, kw):
    n = _image.check_integer(iterations, "iterations", 1, MAX_ITERATIONS)
    kh = len(rows)
    if n > 1 and _all_true(rows, kw) and max(kh, kw) + (n - 1) * (max(kh, kw) - 1) > MAX_RECT:
        raise ValueError(f"iterations={n} makes a rectangle wider than {MAX_RECT} (OpenCV's rule: one pass of "
                         f"kernel size + (iterations - 1) * (kernel size - 1)); use fewer iterations")
    return n


def _all_true(rows, kw):
    return all(r == (1 << kw) - 1 for r in rows)


def mask_of(rows, kw):
    """The bool mask of bit-set ``rows``."""
    return torch.tensor([[bool(r >> v & 1) for v in range(kw)] for r in rows], dtype=torch.bool).reshape(len(rows),
                                                                                                          kw)


def _passes(rows, kw, n):
    """(rows, kw, anchor) of each pass of one erosion or dilation (``reference.passes``'s
    rule: an all-True mask makes one pass of a larger rectangle, anchored at n times the
    anchor)."""
    rows = tuple(rows)
    kh = len(rows)
    if n > 1 and _all_true(rows, kw):
        kh2, kw2 = kh + (n - 1) * (kh - 1), kw + (n - 1) * (kw - 1)
        return [(((1 << kw2) - 1,) * kh2, kw2, (kh // 2 * n, kw // 2 * n))]
    return [(rows, kw, (kh // 2, kw // 2))] * n


def _chains(op):
    """The erosion/dilation chains of ``op`` and how it finishes: (first, second, sub,
    z): first and second are "erode"/"dilate"/None; sub 1 (result - z) or 2 (z - result),
    z "input" or "first" (the first chain's result)."""
    return {"erode": ("erode", None, 0, None), "dilate": ("dilate", None, 0, None),
            "opening": ("erode", "dilate", 0, None), "closing": ("dilate", "erode", 0, None),
            "gradient": ("erode", "dilate", 1, "first"), "tophat": ("erode", "dilate", 2, "input"),
            "blackhat": ("dilate", "erode", 1, "input")}[op]


def _paired(second, z, border, plan, raw):
    """Whether an operation of two chains runs as one ``kernels.pair`` launch: the second
    chain on the first's result (not the gradient's two chains on the image), the default
    border, one pass of a small enough rectangle, float pixels (``raw``: an integer image
    without a prologue)."""
    return (second is not None and z != "first" and border is None and len(plan) == 1
            and _all_true(plan[0][0], plan[0][1]) and kernels.pairs(len(plan[0][0]), plan[0][1], raw))


def launches(op, rows, kw, n, border=None, raw=False):
    """The kernel launches of one call on the kernel path (``raw``: an integer image
    without a prologue)."""
    _, second, _, z = _chains(op)
    plan = _passes(rows, kw, n)
    if _paired(second, z, border, plan, raw):
        return 1
    per_pass = 0
    for r, w, anchor in plan:
        how = kernels.plan(r, w, *anchor)
        if how[0] == "rect":
            per_pass += 1 if kernels.one_march(len(r), w) else 2
        else:
            per_pass += 1 if how[0] == "direct" else kernels.row_launches(how[1]) + 1
    return per_pass * (1 if op in ("erode", "dilate") else 2)


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` that one output tile needs (``imgfilters.tiling``):
    the reach of the structuring element times the passes."""
    op = name if name != "morphology" else check_op(a["op"])
    rows, kw = check_kernel(a["kernel"], a["shape"])
    n = check_iterations(a["iterations"], rows, kw)
    ry, rx = _reach_of(rows, kw)
    passes = n * (1 if op in ("erode", "dilate", "gradient") else 2)
    return ry * passes, rx * passes


def _reach_of(rows, kw):
    kh = len(rows)
    return max(kh // 2, kh - 1 - kh // 2), max(kw // 2, kw - 1 - kw // 2)


# ---- the kernel path ------------------------------------------------------------------------

def _border_value(border, border_value, dilate):
    """The constant the kernels pad with: the border never wins when ``border`` is None."""
    if border is None:
        return -math.inf if dilate else math.inf
    return border_value


def _chain(x4, out, is_input, dilate, plan, border, border_value, pro, buffer_dtype, epi=((), ()), sub=0, z=None,
           z_input=False):
    """The passes of one erosion (dilation) of ``x4`` into ``out`` (None: a new buffer),
    the last with the epilogue and ``sub``."""
    levels = int(_image.MAX_VALUE.get(buffer_dtype, 0))  # (an integer operation: results as stored)
    code = border_code("constant" if border is None else border)
    value = _border_value(border, border_value, dilate)
    for k, (rows, kw, anchor) in enumerate(plan):
        last = k == len(plan) - 1
        dst = out if last and out is not None else torch.empty(x4.shape, dtype=buffer_dtype, device=x4.device)
        kernels.launch(x4, dst, rows, kw, dilate, code, value, pro, epi if last else ((), ()), inp=is_input,
                       z=z if last else None, sub=sub if last else 0, z_input=z_input, buffer_dtype=buffer_dtype,
                       anchor=anchor, levels=levels)
        x4, is_input = dst, False
    return x4


def _run(img, op, rows, kw, n, border, border_value, fusion=None):
    x4 = _image.as_planes(img)
    pro, epi, dtype = pointwise.fused_chains(fusion, x4.shape[1], img.device, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    y4 = _image.as_planes(y)
    buffer_dtype = img.dtype if len(pro[0]) == 0 else torch.float32
    plan = _passes(rows, kw, n)
    first, second, sub, z = _chains(op)
    common = (plan, border, border_value, pro, buffer_dtype)
    if _paired(second, z, border, plan, not img.dtype.is_floating_point and len(pro[0]) == 0):
        # one launch, the first pass's image never stored
        (prows, pkw, anchor), = plan
        kernels.pair(x4, y4, x4 if z else y4, len(prows), pkw, anchor, first == "dilate", pro, epi, sub,
                     z == "input")
    elif second is None:
        _chain(x4, y4, True, first == "dilate", *common, epi=epi)
    elif z == "first":  # gradient: dilate(x) - erode(x)
        e = _chain(x4, None, True, first == "dilate", *common)
        _chain(x4, y4, True, second == "dilate", *common, epi=epi, sub=sub, z=e)
    else:
        t = _chain(x4, None, True, first == "dilate", *common)
        _chain(t, y4, False, second == "dilate", *common, epi=epi, sub=sub, z=x4 if z else None,
               z_input=z == "input")
    return y


def _pass_backward(x, y, g, rows, kw, anchor, dilate, border, border_value):
    """d x of one pass ``y = min over the mask of x~`` (float32 planes): each output's
    gradient split evenly among the positions holding its value, folded through the
    border (a constant border's positions read no pixel)."""
    kh = len(rows)
    H, W = x.shape[-2:]
    ay, ax = anchor
    mode = "constant" if border is None else border
    xp = pad(x, ay, kh - 1 - ay, ax, kw - 1 - ax, mode, _border_value(border, border_value, dilate))
    taps = [(u, v) for u in range(kh) for v in range(kw) if rows[u] >> v & 1]
    count = torch.zeros_like(y)
    for u, v in taps:
        count += xp[..., u:u + H, v:v + W] == y
    share = torch.where(count > 0, g / count.clamp(min=1), 0.0)
    gp = torch.zeros_like(xp)
    for u, v in taps:
        gp[..., u:u + H, v:v + W] += torch.where(xp[..., u:u + H, v:v + W] == y, share, 0.0)
    return fold(gp, H, W, ay, ax, mode)


def _chain_backward(x4, g, dilate, plan, border, border_value):
    """d x4 of one erosion (dilation) chain: its passes recomputed (float32 buffers), the
    gradient routed back through each."""
    inputs = []
    code = border_code("constant" if border is None else border)
    value = _border_value(border, border_value, dilate)
    for rows, kw, anchor in plan:
        inputs.append(x4)
        y = torch.empty(x4.shape, dtype=torch.float32, device=x4.device)
        kernels.launch(x4, y, rows, kw, dilate, code, value, buffer_dtype=torch.float32, anchor=anchor)
        x4 = y
    outputs = inputs[1:] + [x4]
    for (rows, kw, anchor), x, y in reversed(list(zip(plan, inputs, outputs))):
        g = _pass_backward(x.float(), y, g, rows, kw, anchor, dilate, border, border_value)
    return g


def _backward(grad, img, op, rows, kw, n, border, border_value):
    x4 = _image.as_planes(img).float()
    g = _image.as_planes(grad).float()
    plan = _passes(rows, kw, n)
    first, second, sub, z = _chains(op)
    args = (plan, border, border_value)
    if second is None:
        d = _chain_backward(x4, g, first == "dilate", *args)
    elif z == "first":  # gradient
        d = _chain_backward(x4, g, True, *args) - _chain_backward(x4, g, False, *args)
    else:
        t = _chain(x4, None, True, first == "dilate", plan, border, border_value, ((), ()), torch.float32)
        gt = _chain_backward(t, -g if sub == 2 else g, second == "dilate", *args)
        d = _chain_backward(x4, gt, first == "dilate", *args)
        if sub:
            d = d + (g if sub == 2 else -g)
    return d.reshape(img.shape)


@library.op("morphology", library.same_as_input, grads=("img",), backward=_backward, cpu_engine=True)
def _morph_op(img: Tensor, op: str, rows: List[int], width: int, iterations: int, border: Optional[str],
              border_value: float, *, fusion=None) -> Tensor:
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import morphology as engine
        return engine.morphology(img, op, rows, width, iterations, border, border_value, fusion)
    if not _image.uses_kernels(img):
        levels = _image.MAX_VALUE.get(img.dtype)
        y = reference.morphology(_image.to_unit(_image.as_planes(img)), op, mask_of(rows, width), iterations,
                                 border, border_value, levels)
        return _image.in_layout(img, _image.from_unit(y.reshape(img.shape), img.dtype))
    return _run(img, op, tuple(rows), width, iterations, border, border_value, fusion)
