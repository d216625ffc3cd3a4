"""Device helpers the separable kernels share: the epilogue's store of an output tile
(``_store_tile``), the horizontal taps' sum (``_tap_sum``), image ``b``'s row of per-image
taps (``image_taps``), and the ``unsharp`` epilogues."""
import triton
import triton.language as tl

from ..core import borders, neighbourhood, pixels, pointwise
from ..core.tiling import offset


@triton.jit
def _store_tile(x_base, y_base, out_rows, out_cols, y, H, W, HO, WO, OY, OX, sxh, syh, b, c, PRO: tl.constexpr,
                pro_args, EPI: tl.constexpr, epi_args, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                OFF64: tl.constexpr):
    """Store the 2-D tile ``y`` of outputs (``out_rows``, ``out_cols``) through the epilogue,
    whose ``x_in`` is the prologue of the input pixel at (row + OY, column + OX)."""
    if len(EPI) > 0:
        xr = borders.remap(out_rows + OY, H, BORDER)
        xc = borders.remap(out_cols + OX, W, BORDER)
        x_in = neighbourhood.load(x_base + (offset(xr, sxh, OFF64)[:, None] + offset(xc, SXW, OFF64)[None, :]), None,
                                  0.0, c, PRO, pro_args, neighbourhood.UNIT, BORDER)
        y = pointwise.apply_epilogue(y, x_in, b, c, EPI, epi_args)
    mask = (out_rows < HO)[:, None] & (out_cols < WO)[None, :]
    pixels.store(y_base + (offset(out_rows, syh, OFF64)[:, None] + offset(out_cols, SYW, OFF64)[None, :]), y, mask)


@triton.jit
def _tap_sum(TX, RX: tl.constexpr):
    """Sum of the horizontal taps: the horizontal pass of a constant row."""
    s = 0.0
    for v in range(2 * RX + 1):
        s += tl.load(TX + v)
    return s


@triton.jit
def image_taps(T, b, R: tl.constexpr, PER_IMAGE: tl.constexpr):
    """The 2*R + 1 taps of image ``b``: row b of a (B, 2*R + 1) table under PER_IMAGE
    (``GaussianBlur(per_sample=True)``: one launch for a batch of sigmas), else ``T``."""
    if PER_IMAGE:
        return T + b * (2 * R + 1)
    else:
        return T


@triton.jit
def unsharp(y, x_in, image, channel, amount, threshold):
    """Epilogue of unsharp masking: y is the blur, x_in the pixel."""
    detail = x_in - y
    return tl.where(tl.abs(detail) >= threshold, x_in + amount * detail, x_in)


@triton.jit
def unsharp_per_image(y, x_in, image, channel, AMOUNT, threshold):
    """``unsharp`` with an amount per image: ``AMOUNT`` a float32 vector of B values."""
    return unsharp(y, x_in, image, channel, tl.load(AMOUNT + image), threshold)

