"""General 2-D correlation with one kernel for the batch or one kernel per image.

Inputs are ``(..., C, H, W)`` or ``(H, W)`` tensors of dtype uint8, uint16, float16,
bfloat16 or float32 (float64 runs the float64 reference); the output keeps the dtype and
memory format. CUDA tensors run one Triton launch; other CPU tensors run the CPU engine
(``imgfilters/cpu``), or the Triton kernel in Triton's interpreter under
``TRITON_INTERPRET=1``.

Gradients flow to the image and to the kernel (floating-point inputs). The image's is the
flipped kernel over the zero-extended output gradient (one launch of the same kernel),
folded back through the border; the kernel's is the correlation of the border-extended
image with the output gradient, one grouped ``F.conv2d`` (TF32 off).
"""
import torch
from torch import Tensor
import torch.nn.functional as F

from imgfilters import _image
from imgfilters.kernels import filter2d as kernels
from imgfilters.ops import library, pointwise
from imgfilters.reference import filter2d as reference
from imgfilters.reference.borders import fold, pad

__all__ = ["filter2d"]

MAX_SIZE = 2 * kernels.MAX_RADIUS + 1


def filter2d(img, kernel, *, border="reflect", border_value=0.0):
    """Correlate ``img`` with a 2-D kernel: ``y[b, c, i, j] = sum_{u,v} k[u, v] *
    img~[b, c, i + u - kh//2, j + v - kw//2]``, ``img~`` extended by the border.

    Args:
        img: ``(..., C, H, W)`` or ``(H, W)`` tensor.
        kernel: ``(kh, kw)`` (one kernel for every image) or ``(B, kh, kw)`` (image b of
            the batch, the leading dims of ``img`` flattened, filtered by ``kernel[b]``);
            odd sizes up to 63, a tensor or nested sequence of real numbers. Taps are not
            flipped (a correlation, as ``cv2.filter2D`` and ``F.conv2d``); they need not
            sum to 1 nor be separable. A tensor that requires grad gets its gradient.
        border: ``"reflect"`` (default, reflect-101), ``"symmetric"``, ``"replicate"``
            or ``"constant"`` (``border_value``, unit scale).

    Returns:
        A tensor of ``img``'s shape, dtype and memory format; integer results round half
        to even and saturate.
    """
    return _image.wrap(img, _filter2d_op(img, *_filter2d_args(img, kernel, border, border_value)))


def _filter2d_args(img, kernel, border, border_value):
    """The op's arguments after the image, checked in order."""
    _image.check_image(img)
    _image.check_border(border, border_value)
    return check_kernel(kernel, _image._planes(img.shape)[0], img.device), border, float(border_value)


def check_kernel(kernel, batch, device):
    """``kernel`` as a floating-point tensor on ``device`` of shape ``(kh, kw)`` or
    ``(batch, kh, kw)``, odd sizes up to ``MAX_SIZE``; a clear error otherwise. The move
    is differentiable: a kernel that requires grad keeps its graph."""
    if isinstance(kernel, torch.Tensor):
        k = kernel
    else:
        try:
            k = torch.as_tensor(kernel, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"kernel must be a tensor or nested sequence of numbers, got {type(kernel).__name__}") \
                from None
    if k.is_complex() or k.dtype == torch.bool:
        raise TypeError(f"kernel must hold real numbers, got dtype {k.dtype}")
    if k.ndim not in (2, 3):
        raise ValueError(f"kernel must have shape (kh, kw) or (B, kh, kw), got {tuple(k.shape)}")
    kh, kw = k.shape[-2:]
    if kh % 2 == 0 or kw % 2 == 0 or kh > MAX_SIZE or kw > MAX_SIZE:
        raise ValueError(f"kernel sizes must be odd and at most {MAX_SIZE}, got {kh} x {kw}")
    if k.ndim == 3 and k.shape[0] != batch:
        raise ValueError(f"a batch of kernels needs one per image: img holds {batch} images, "
                         f"kernel has {k.shape[0]}")
    if not k.is_floating_point():
        k = k.to(torch.float32)
    return _image.sent(k, device, k.dtype)  # (a kernel given anew each call: no wait for the GPU)


def halo(name, a, channels):
    """The input margin ``(rows, cols)`` that one output tile of ``filter2d`` needs
    (``imgfilters.tiling``): half the kernel along each axis; ``a`` holds the call's
    arguments by name."""
    kh, kw = torch.as_tensor(a["kernel"]).shape[-2:]
    return kh // 2, kw // 2


def _kernel_planes(kernel):
    """The kernels as the launch takes them: float32, (B or 1, kh, kw), contiguous."""
    k = kernel.detach().to(torch.float32)
    return (k if k.ndim == 3 else k[None]).contiguous()


def _run(img, kernel, border, border_value, fusion=None):
    """One launch (with ``fusion``'s prologue and epilogue, a ``pointwise.Fusion``)."""
    x4 = _image.as_planes(img)
    pro, epi, dtype = pointwise.fused_chains(fusion, x4.shape[1], img.device, img.dtype)
    y = _image.new_image(img, dtype=dtype)
    kernels.launch(x4, _image.as_planes(y), _kernel_planes(kernel), border=_image.check_border(border),
                   border_value=border_value, pro=pro, epi=epi)
    return y


def image_gradient(grad, kernel, border, shape):
    """d img of ``filter2d`` for the output gradient ``grad`` on the kernel path: the
    flipped kernel over the zero-extended gradient, on the extended grid, folded back onto
    the pixels the border read from."""
    g4 = _image.as_planes(grad).float()
    B, C, H, W = g4.shape
    k = _kernel_planes(kernel)
    ry, rx = k.shape[-2] // 2, k.shape[-1] // 2
    z = torch.empty(B, C, H + 2 * ry, W + 2 * rx, dtype=torch.float32, device=grad.device)
    kernels.launch(g4, z, k.flip(-1, -2).contiguous(), oy=-ry, ox=-rx, border=_image.check_border("constant"))
    return fold(z, H, W, ry, rx, border).reshape(shape)


def _backward(grad, img, kernel, border, border_value):
    """(d img, d kernel) for the output gradient ``grad`` on the kernel path."""
    d_img = image_gradient(grad, kernel, border, img.shape)
    g4 = _image.as_planes(grad).float()
    B, C, H, W = g4.shape
    kh, kw = kernel.shape[-2:]
    ry, rx = kh // 2, kw // 2
    # d kernel[b, u, v] = sum_{c,i,j} grad[b, c, i, j] * img~[b, c, i + u, j + v]
    xp = pad(_image.to_unit(_image.as_planes(img), torch.float32, copy=False), ry, ry, rx, rx, border, border_value)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        d_k = F.conv2d(xp.reshape(1, B * C, H + 2 * ry, W + 2 * rx), g4.reshape(B * C, 1, H, W), groups=B * C)
    d_k = d_k.reshape(B, C, kh, kw).sum(1)
    return d_img, (d_k if kernel.ndim == 3 else d_k.sum(0))


@library.op("filter2d", library.same_as_input, grads=("img", "kernel"), backward=_backward, cpu_engine=True)
def _filter2d_op(img: Tensor, kernel: Tensor, border: str, border_value: float, *, fusion=None) -> Tensor:
    if _image.uses_cpu_engine(img):
        from imgfilters.cpu import filter2d as engine
        return engine.filter2d(img, kernel, _image.check_border(border), border_value, fusion)
    if not _image.uses_kernels(img):
        x = _image.to_unit(_image.as_planes(img))
        y = reference.filter2d(x, kernel, border, border_value).reshape(img.shape)
        return _image.in_layout(img, _image.from_unit(y, img.dtype))
    return _run(img, kernel, border, border_value, fusion)
