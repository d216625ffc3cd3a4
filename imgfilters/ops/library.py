"""The public ops as PyTorch custom ops (``torch.ops.imgfilters.<name>``): the one place
for their registration, their autograd and the direct call that fusion makes.

``torch.compile`` traces the public functions, whose argument checks look only at
shapes, dtypes and Python values (and raise before anything runs), and keeps each op as
one opaque node with a fake implementation for shape inference. Everything that reads
tensor values (per-image parameters, taps, automatic radii and noise levels) and the
choice between the kernels and the float64 reference happens inside the op, where it
cannot break the graph. Per-image parameters travel as Python floats for a number and as
float64 tensors otherwise (``_image.per_image``; the custom op's path makes a number a 0-d
tensor, ``as_tensors``; None means automatic, as for ``nl_means``'s ``h`` and ``sigma``).

In plain eager calls (no compile, mode or functorch transform, no tensor subclass), the
public functions call the implementation directly, through a plain ``autograd.Function``
with the same backward when a gradient is recorded: the dispatcher's path through a
custom op costs tens of microseconds of host time a call, and its autograd about 150 us a
forward and as much a backward (H200 host), more than a small image's kernel.

``imgfilters.fuse`` hands a filter its prologue and epilogue as a ``pointwise.Fusion``,
which no op schema can carry: an implementation that takes a keyword-only ``fusion``
registers without it, and ``op.fused(fusion, *args)`` calls it directly (eagerly, without
gradients, on the kernels or the CPU engine: ``op.can_fuse(img)``). The other ops have no
``fused``: they are not fusable.
"""
import functools
import inspect
from typing import Optional, Tuple

import torch
from torch.overrides import has_torch_function

from imgfilters import _image

__all__ = ["op", "same_as_input"]


def same_as_input(img, *args):
    """The fake implementation of filters whose output is shaped and typed as ``img``."""
    return _image.new_image(img)


def op(name, fake, *, grads=(), backward=None, linear=False, cpu_engine=False):
    """Register the decorated implementation as ``torch.ops.imgfilters.<name>`` and return
    the callable that the public functions call with positional arguments.

    Args:
        name: the op's name in the ``imgfilters`` namespace.
        fake: ``fake(*args)`` -> an empty output of the op's shape, dtype and layout,
            allocated as the implementation allocates it (``_image.new_image``).
        grads: names of the tensor arguments that receive gradients; empty for ops without
            a gradient (NLM, the noise estimate, pointwise chains), whose outputs never
            require grad.
        backward: ``backward(grad, *args)`` -> those gradients on the kernel path (a tensor,
            or a tuple in the order of ``grads``; None for an argument passed as a number).
            It becomes the op ``<name>_backward`` (the incoming gradient, then every
            argument of the forward), so that compiled graphs call it as one opaque node
            too. On the reference path (decided by the first argument, the image, as in
            the forward) the backward differentiates the float64 torch definition instead.
        linear: the op is linear (or affine) in its image, the first argument, so its
            backward needs only the image's shape, dtype and device: autograd then keeps a
            one-element stand-in, not the image, until the backward pass.
        cpu_engine: the implementation runs CPU tensors on the CPU engine
            (``imgfilters.cpu``) when ``_image.uses_cpu_engine`` says so, fused prologue
            and epilogue included; without it a CPU tensor takes the float64 reference
            and a fused pipeline runs this op unfused (``fusable``).

    The implementation may take a keyword-only ``fusion=None`` last (a ``pointwise.Fusion``
    for its launch): the op is then registered without it, and the returned callable's
    ``fused(fusion, *args)`` runs the implementation with it.
    """
    def register(impl):
        signature = inspect.signature(impl)
        fusable = "fusion" in signature.parameters
        registered = impl
        if fusable:  # the op's schema: the implementation's parameters without ``fusion``
            signature = signature.replace(parameters=[p for p in signature.parameters.values() if p.name != "fusion"])

            def registered(*args):
                return impl(*args)
            registered.__signature__ = signature
        custom = torch.library.custom_op(f"imgfilters::{name}", registered, mutates_args=())
        custom.register_fake(fake)
        eager = _register_autograd(custom, impl, signature, name, grads, backward, linear) if grads else None
        overload = getattr(torch.ops.imgfilters, name).default
        numbers = _tensor_slots(signature)

        def call(*args):
            recording = _plain_eager(args)
            if not grads:
                with torch.no_grad():
                    return overload(*as_tensors(args, numbers)) if recording is None else impl(*args)
            if recording is None:
                return overload(*as_tensors(args, numbers))
            return eager.apply(*args) if recording and torch.is_grad_enabled() else impl(*args)

        if fusable:
            def can_fuse(img):
                """Whether ``img`` runs a path that takes a prologue and an epilogue: the
                kernels, or the CPU engine where the op has it."""
                return _image.uses_kernels(img) or (cpu_engine and _image.uses_cpu_engine(img))

            def fused(fusion, *args):
                """The implementation with ``fusion``'s prologue and epilogue in its launch
                (``imgfilters.fuse``): eager, no gradient, the kernels or the CPU engine."""
                if not can_fuse(args[0]):
                    raise ValueError(f"{name}: a fused call runs the kernels or the CPU engine, not the float64 "
                                     f"reference")
                return impl(*args, fusion=fusion)
            call.fused, call.can_fuse = fused, can_fuse
        return call
    return register


def direct(args):
    """Whether a public function may run launches of its own between the ops (a plain
    eager call, ``_plain_eager``, that records no gradient): otherwise it calls only ops,
    which traces and autograd see."""
    recording = _plain_eager(args)
    return recording is not None and not (recording and torch.is_grad_enabled())


def _tensor_slots(signature):
    """The positions of the parameters that the op's schema types as tensors."""
    tensor = (torch.Tensor, Optional[torch.Tensor])
    return frozenset(i for i, p in enumerate(signature.parameters.values()) if p.annotation in tensor)


def as_tensors(args, slots):
    """``args`` as the custom op takes them: a number at a tensor parameter (a per-image
    parameter, ``_image.per_image``) as a 0-d float64 tensor."""
    return tuple(torch.scalar_tensor(a, dtype=torch.float64) if i in slots and isinstance(a, float) else a
                 for i, a in enumerate(args))


def _plain_eager(args):
    """None unless nothing needs to see the op as an op, so that the public functions may
    call its implementation directly (with its autograd as a plain ``autograd.Function``):
    eager mode, plain tensors with their own memory, no torch-function mode or jit trace
    active. Otherwise whether a tensor argument requires grad. The dispatcher's path
    through a custom op costs tens of microseconds a call (its autograd about 150 us a
    forward and as much a backward on the H200's host), more than the kernel of a small
    image.

    What takes the op: ``torch.compile`` and jit traces (a trace records ops, not Triton
    launches), tensor subclasses (FakeTensor included), meta tensors (their outputs come
    from the op's fake implementation), and functorch's transforms (``vmap``,
    ``torch.func.grad``), whose wrapped tensors look plain from Python but have no memory
    of their own (``data_ptr`` raises: the one public sign of them). A dispatch mode over
    plain tensors (``FlopCounterMode``; torch has no public query of one) sees the torch
    operations the implementation runs, not the op."""
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if has_torch_function(tensors):  # a torch-function mode, or a subclass that overrides it
        return None
    recording = False
    for a in tensors:
        if type(a) is not torch.Tensor or a.is_meta:
            return None
        try:
            a.data_ptr()
        except RuntimeError:  # a functorch transform's wrapper
            return None
        recording = recording or a.requires_grad
    return recording


def _register_autograd(custom, impl, signature, name, grads, backward, linear):
    params = list(signature.parameters)
    numbers = _tensor_slots(signature)
    slots = [params.index(g) for g in grads]

    def backward_impl(grad, *args):
        if _image.uses_kernels(args[0]):
            out = backward(grad, *args)
        else:
            out = _reference_vjp(impl, grad, args, slots)
        out = (out,) if isinstance(out, torch.Tensor) else out
        # as the fake allocates them: each gradient in its input's dtype and layout (None
        # for a number: eager calls pass per-image parameters as they came)
        out = tuple(None if g is None else _image.in_layout(args[i], g if g.dtype == args[i].dtype else
                                                             g.to(args[i].dtype))
                    for i, g in zip(slots, out))
        return out[0] if len(out) == 1 else out

    def backward_fake(grad, *args):
        out = tuple(_image.new_image(args[i]) for i in slots)
        return out[0] if len(out) == 1 else out

    # its schema, inferred as the forward's: the incoming gradient, then the forward's
    # arguments; a gradient for each of ``grads``
    backward_impl.__signature__ = signature.replace(
        parameters=[inspect.Parameter("grad_out", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor),
                    *signature.parameters.values()],
        return_annotation=torch.Tensor if len(slots) == 1 else Tuple[(torch.Tensor,) * len(slots)])
    backward_op = torch.library.custom_op(f"imgfilters::{name}_backward", backward_impl, mutates_args=())
    backward_op.register_fake(backward_fake)
    overload = getattr(torch.ops.imgfilters, f"{name}_backward").default

    def setup_context(ctx, inputs, output, stand_in=_traced_stand_in):
        """All of the forward's arguments, kept for the backward op; for a linear op a
        stand-in for the image (its values do not matter: a zero-stride view of one element)."""
        if linear:
            inputs = (stand_in(inputs[0]), *inputs[1:])
        ctx.tensors = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)]
        ctx.save_for_backward(*[inputs[i] for i in ctx.tensors])
        ctx.others = list(inputs)
        for i in ctx.tensors:
            ctx.others[i] = None

    def backward_formula(ctx, grad):
        args = list(ctx.others)
        for i, t in zip(ctx.tensors, ctx.saved_tensors):
            args[i] = t
        if _plain_eager((grad, *args)) is None:
            out = overload(grad, *as_tensors(args, numbers))
        else:
            out = backward_impl(grad, *args)
        out = (out,) if isinstance(out, torch.Tensor) else out
        result = [None] * len(args)
        for i, g in zip(slots, out):
            if ctx.needs_input_grad[i]:
                result[i] = g
        return tuple(result)

    custom.register_autograd(backward_formula, setup_context=setup_context)

    class Eager(torch.autograd.Function):
        """The same autograd for plain eager calls, without the dispatcher."""

        @staticmethod
        def forward(ctx, *args):
            out = impl(*args)
            setup_context(ctx, args, out, stand_in=_eager_stand_in)
            return out

        @staticmethod
        def backward(ctx, grad):
            return backward_formula(ctx, grad)

    return Eager


def _traced_stand_in(img):
    """A linear op's image for its backward in traced calls."""
    return img.new_empty(()).expand(img.shape)


def _eager_stand_in(img):
    return _stand_in(img.shape, img.dtype, img.device)


@functools.lru_cache(maxsize=64)
def _stand_in(shape, dtype, device):
    """A linear op's image for its backward in eager calls, shared between calls of one
    shape (a new view costs microseconds of host time); traced calls make their own."""
    return torch.empty((), dtype=dtype, device=device).expand(shape)


def _reference_vjp(impl, grad, args, slots):
    """Gradients of ``impl`` on its reference path (plain differentiable torch code): its
    vector-Jacobian product with ``grad``, through ``torch.func`` because autograd's own
    dispatch is off inside an op's implementation. Integer inputs get zeros (unused),
    numbers None."""
    floats = [i for i in slots if isinstance(args[i], torch.Tensor) and args[i].is_floating_point()]

    def forward(*inputs):
        full = list(args)
        for i, t in zip(floats, inputs):
            full[i] = t
        return impl(*full)

    with _image.differentiating():
        _, vjp = torch.func.vjp(forward, *(args[i] for i in floats))
        found = dict(zip(floats, vjp(grad)))
    return tuple(found[i] if i in found else torch.zeros_like(args[i]) if isinstance(args[i], torch.Tensor) else None
                 for i in slots)
