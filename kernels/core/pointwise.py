"""The elementwise / fusion core.

A pointwise *step* is a ``@triton.jit`` function ``step(x, channel, *args) -> x`` on float32
unit-scale values; ``channel`` is the channel index of the tile (for per-channel steps such
as Normalize). A *chain* is a tuple of steps passed as one ``tl.constexpr`` together with a
tuple holding each step's argument tuple; every filter kernel applies one chain as its
prologue (after loading, in ``neighbourhood.load``) and one as its epilogue (before
storing), so pointwise work around a filter costs no extra pass over memory.
``elementwise_kernel`` applies a chain on its own.

Epilogue steps also receive the input pixel at the output position (``x_in``) and the
index of the image in the batch (``image``) as extra first arguments, so that a step such
as unsharp masking can combine the filtered and the original value, with an amount of
each image's own (``UnsharpMask(per_sample=True)``); the compiler drops that load and
that index when no step uses them.
"""
import triton
import triton.language as tl

from . import pixels
from .launch import launch, tile_config
from .tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin


@triton.jit
def apply_chain(x, channel, STEPS: tl.constexpr, args):
    """Apply prologue steps in order: ``x = step(x, channel, *step_args)``."""
    for i in tl.static_range(len(STEPS)):
        x = STEPS[i](x, channel, *args[i])
    return x


@triton.jit
def apply_epilogue(y, x_in, image, channel, STEPS: tl.constexpr, args):
    """Apply epilogue steps in order: ``y = step(y, x_in, image, channel, *step_args)``."""
    for i in tl.static_range(len(STEPS)):
        y = STEPS[i](y, x_in, image, channel, *args[i])
    return y


@triton.jit
def as_epilogue(y, x_in, image, channel, STEP: tl.constexpr, step_args):
    """A plain step in an epilogue chain (which passes ``x_in`` and ``image`` too):
    ``STEP(y, channel, *step_args)``."""
    return STEP(y, channel, *step_args)


# ---- prologue / plain steps: step(x, channel, *args) ------------------------------------

@triton.jit
def scale(x, channel, factor):
    """x * factor (e.g. ToDtype without value scaling: unit scale -> 0..255)."""
    return x * factor


@triton.jit
def channel_affine(x, channel, SCALE, SHIFT):
    """x * SCALE[channel] + SHIFT[channel]; Normalize is scale 1/std, shift -mean/std."""
    return x * tl.load(SCALE + channel) + tl.load(SHIFT + channel)


@triton.jit
def clamp(x, channel, lo, hi):
    """min(max(x, lo), hi)."""
    return tl.minimum(tl.maximum(x, lo), hi)


@triton.jit
def quantize(x, channel, levels):
    """round(clamp(x, 0, 1) * levels) / levels, half to even: what storing into an integer
    image and reading it back does (fusion keeps a skipped integer store exact)."""
    y = tl.minimum(tl.maximum(x * levels, 0.0), levels)
    return pixels.round_even(y) / levels


@triton.jit
def gamma(x, channel, g):
    """max(x, 0) ** g, as exp2(g * log2(x)); 0 stays 0 (log2 never sees 0)."""
    positive = x > 0.0
    return tl.where(positive, tl.exp2(g * tl.log2(tl.where(positive, x, 1.0))), 0.0)


@triton.jit
def srgb_to_linear(x, channel):
    """IEC 61966-2-1 sRGB decoding (inputs clamped at 0)."""
    x = tl.maximum(x, 0.0)
    return tl.where(x <= 0.04045, x / 12.92, tl.exp2(2.4 * tl.log2((x + 0.055) / 1.055)))


@triton.jit
def linear_to_srgb(x, channel):
    """IEC 61966-2-1 sRGB encoding (inputs clamped at 0)."""
    x = tl.maximum(x, 0.0)
    power = 1.055 * tl.exp2(tl.log2(tl.maximum(x, 0.0031308)) / 2.4) - 0.055
    return tl.where(x <= 0.0031308, x * 12.92, power)


# ---- the generic elementwise kernel -------------------------------------------------------

@triton.jit
def elementwise_kernel(X, Y, C, H, W, x_strides, y_strides,
                       STEPS: tl.constexpr, args, OFF64: tl.constexpr,
                       BH: tl.constexpr, BW: tl.constexpr):
    """Y = chain(X) over (B, C, H, W) tensors of any strides and supported dtypes."""
    sxb, sxc, sxh, sxw = x_strides
    syb, syc, syh, syw = y_strides
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    rows = h0 + tl.arange(0, BH)
    cols = w0 + tl.arange(0, BW)
    mask = (rows < H)[:, None] & (cols < W)[None, :]
    x_ptrs = X + b * sxb + c * sxc + (offset(rows, sxh, OFF64)[:, None] + offset(cols, sxw, OFF64)[None, :])
    y_ptrs = Y + b * syb + c * syc + (offset(rows, syh, OFF64)[:, None] + offset(cols, syw, OFF64)[None, :])
    x = pixels.load(x_ptrs, mask)
    pixels.store(y_ptrs, apply_chain(x, c, STEPS, args), mask)


def launch_elementwise(x, y, steps, args):
    """``y = chain(x)`` for 4-D (B, C, H, W) tensors, in one launch. Memory-bound: 16 x 128
    tiles of 4 warps keep 16-byte accesses on contiguous rows (one tile per plane in the
    interpreter)."""
    B, C, H, W = x.shape
    bh, bw = (pow2_at_least(H, 1, 256), pow2_at_least(W, 16, 256)) if interpreting() else (16, 128)
    launch(elementwise_kernel, lambda m: (programs(B * C, H, W, bh, bw),),
           (x, y, C, H, W, x.stride(), y.stride(), steps, args), dict(OFF64=needs_int64(x, y)), x,
           tile_config(BH=bh, BW=bw))
