"""Typed pixel access: every supported dtype to float32 in unit scale, and back.

Integer images are read as value / max (255 for uint8, 65535 for uint16) and written by
scaling, rounding half to even and saturating, so integer results match
``torch.round(...).clamp(...)`` on the float result (torchvision's convention). Floating
images are read and written as they are; float16/bfloat16 round to nearest even.
"""
import triton
import triton.language as tl

# Adding and subtracting 1.5 * 2**23 rounds a float32 in [0, 2**22) to the nearest integer,
# ties to even, in two exact additions: cheaper than libdevice rint and identical on the
# GPU and in the interpreter (Triton does not reassociate float arithmetic).
_ROUNDER: tl.constexpr = tl.constexpr(12582912.0)


@triton.jit
def unit_scale(dtype: tl.constexpr):
    """The factor from stored value to unit scale (1 / max for integers, 1 for floats)."""
    if dtype == tl.uint8:
        return 1.0 / 255.0
    elif dtype == tl.uint16:
        return 1.0 / 65535.0
    else:
        return 1.0


@triton.jit
def to_float_raw(v):
    """Loaded values -> float32 of the stored value (integers not yet scaled).

    Integers go through the exponent trick: the bits 0x4B000000 | u are the float
    2**23 + u, so one OR and one subtraction convert exactly. I2F, the conversion
    instruction, runs at an eighth of the FMA rate and dominated the uint8 filter loop.
    """
    if v.dtype == tl.uint8 or v.dtype == tl.uint16:
        bits = v.to(tl.uint32) | 0x4B000000
        return bits.to(tl.float32, bitcast=True) - 8388608.0
    else:
        return v.to(tl.float32)


@triton.jit
def to_float(v):
    """Loaded values of any supported dtype -> float32 in unit scale."""
    if v.dtype == tl.uint8 or v.dtype == tl.uint16:
        return to_float_raw(v) * unit_scale(v.dtype)
    else:
        return v.to(tl.float32)


@triton.jit
def round_even(y):
    """float32 ``y`` (|y| < 2^22) rounded half to even, as ``torch.round``."""
    return (y + _ROUNDER) - _ROUNDER


@triton.jit
def from_float(y, dtype: tl.constexpr):
    """float32 in unit scale -> ``dtype``: integers are rounded half to even and saturated."""
    if dtype == tl.uint8:
        y = tl.minimum(tl.maximum(y * 255.0, 0.0), 255.0)
        return round_even(y).to(tl.uint8)
    elif dtype == tl.uint16:
        y = tl.minimum(tl.maximum(y * 65535.0, 0.0), 65535.0)
        return round_even(y).to(tl.uint16)
    else:
        return y.to(dtype)


@triton.jit
def load_raw(ptrs, mask=None):
    """Load pixels as float32 of the stored value: a linear filter scales its result (or
    its taps) by ``unit_scale`` once instead of scaling every loaded pixel."""
    return to_float_raw(tl.load(ptrs, mask=mask))


@triton.jit
def load(ptrs, mask=None):
    """Load pixels of any supported dtype as float32 in unit scale (masked-off lanes are
    undefined: callers never use them)."""
    return to_float(tl.load(ptrs, mask=mask))


@triton.jit
def store(ptrs, y, mask=None):
    """Store float32 unit-scale values into a tensor of any supported dtype."""
    tl.store(ptrs, from_float(y, ptrs.dtype.element_ty), mask=mask)


@triton.jit
def store_streaming(ptrs, y, mask=None):
    """``store``, marked as data that nothing reads soon (``.cs``: evicted from the L2 first)."""
    tl.store(ptrs, from_float(y, ptrs.dtype.element_ty), mask=mask, cache_modifier=".cs")
