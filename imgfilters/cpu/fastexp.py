"""``exp2`` of float32 exponents <= 0 as plain arithmetic that vectorises inside the
engine's row loops (a call of libm's ``expf`` does not: LLVM keeps each one a scalar
call), for the weights of the bilateral filters and non-local means.

2^t = 2^n * 2^f with n = round(t) and f = t - n in [-0.5, 0.5]: 2^f is a degree-5
polynomial fitted to the relative error (at most 2.4e-7 over the interval, evaluated in
float32; a weight's relative error reaches a normalised weighted mean scaled by the spread
of its values), 2^n the float whose exponent field is n + 127, n taken from the bits of
t + 1.5 * 2^23 (the rounding, with no conversion). Exponents below FLOOR = -64 count as
FLOOR: such a weight is below 2^-64 of the largest of its window, which the filters keep
at 2^0 or more, far below what a float32 sum of them resolves (and a weight that much
smaller would soon make a subnormal float of a product, whose arithmetic costs a hundred
cycles). NaN stays NaN (no comparison turns it into a number), so a non-finite pixel
still makes NaN of the sums that read it; -inf gives 2^FLOOR.
"""
import numpy as np

from imgfilters.cpu import core
from imgfilters.cpu.core import f32

# 2^f ~ C0 + C1 f + ... + C5 f^5 on [-0.5, 0.5]
C0, C1, C2, C3, C4, C5 = (1.0000000716557893, 0.693146967029978, 0.2402211971669405, 0.05550713325397266,
                          0.009675541765939656, 0.001327645676445365)
LOG2E = 1.4426950408889634
FLOOR = -64.0
ROUND = 1.5 * 2 ** 23  # x + ROUND - ROUND rounds |x| < 2^22 to an integer (no reassociation: FASTMATH)


@core.intrinsic
def _float32_from_bits(typingctx, bits):
    """The float32 whose bits are the int32 ``bits`` (an LLVM bitcast: no memory)."""
    from llvmlite import ir
    from numba import types
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@core.intrinsic
def wide_vectors(typingctx):
    """Mark the calling function for the widest vectors the CPU has (LLVM's
    ``prefer-vector-width``): with AVX-512, LLVM's default for Intel CPUs stops at 256 bits
    (for the clock speed that 512-bit instructions cost on the earliest of them), while
    the filters' loops, arithmetic on rows in L1, run 1.4 times faster on 512 (Sapphire
    Rapids). Where there is no AVX-512 the attribute changes nothing. llvmlite accepts
    only the attributes it knows, so this one goes into its set as LLVM spells it."""
    from numba import types

    def codegen(context, builder, signature, args):
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()
    return types.none(), codegen


@core.intrinsic
def not_inlined(typingctx):
    """Keep the calling function out of its callers (LLVM's ``noinline``): a helper that
    runs once a row, such as one that loads a row through the prologue's steps, is then
    compiled once and not again into each caller, which costs compile time and gains no
    speed."""
    from numba import types

    def codegen(context, builder, signature, args):
        builder.function.attributes.add("noinline")
        return context.get_dummy_value()
    return types.none(), codegen


@core.intrinsic
def _bits_of_float32(typingctx, value):
    """The int32 whose bits are the float32 ``value``'s (an LLVM bitcast: no memory)."""
    from llvmlite import ir
    from numba import types
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@core.jit
def exp2_neg(t):
    """2^t for float32 t <= 0 (or NaN), within 2.4e-7 relative; 2^FLOOR below FLOOR."""
    tc = f32(FLOOR) if t < f32(FLOOR) else t  # (one max; NaN stays NaN)
    m = tc + f32(ROUND)  # round(tc) in the low bits of m's mantissa
    n = m - f32(ROUND)
    u = tc - n
    p = f32(C5) * u + f32(C4)
    p = p * u + f32(C3)
    p = p * u + f32(C2)
    p = p * u + f32(C1)
    p = p * u + f32(C0)
    # m's low 9 bits are n's (two's complement): shifted to the exponent field, plus the bias
    return p * _float32_from_bits(np.int32((_bits_of_float32(m) << np.int32(23)) + np.int32(127 << 23)))
