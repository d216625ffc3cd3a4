"""Filters as matrix products on the tensor cores, with IEEE non-finite semantics.

A linear filter over a tile can run as a product of the tile with a weight matrix that is
zero wherever an output does not read an input (a band for a convolution, the taps of
each output for resampling). The product multiplies every input by every output's
weight, and 0 * NaN is NaN: one NaN would spread over the whole tile. So the product
takes the finite values only, and the non-finite ones are counted per output by how
IEEE arithmetic would combine them (``non_finite_hits``) and put back afterwards
(``mark_non_finite``): a NaN gives NaN, an inf times a positive or negative weight an
inf, opposite infs NaN, and a weight of 0 reads nothing.
"""
import triton
import triton.language as tl


@triton.jit
def has_non_finite(x):
    """True when the tile ``x`` holds a NaN or an inf (its sum of ``x * 0`` is then NaN)."""
    return tl.sum(x * 0.0) != 0.0


@triton.jit
def finite_part(x):
    """``x`` with its NaN and inf set to 0."""
    return tl.where(x * 0.0 == 0.0, x, 0.0)


@triton.jit
def non_finite_hits(w, data, nan_hits, up_hits, down_hits, WEIGHTS_FIRST: tl.constexpr):
    """Add to the per-output counts the non-finite values of ``data`` that the product
    ``w @ data`` (``WEIGHTS_FIRST``) or ``data @ w`` weighs with a nonzero weight: NaNs
    (``nan_hits``), infs pushed up and down (``up_hits``, ``down_hits``). One code per
    value, 1 for NaN, 2**8 for inf and 2**16 for -inf, goes through two products, with
    the positive and with the negative weights; a product's sums stay below 2**24 and
    each count below 2**8 (at most 255 inputs), so both decode exactly."""
    code = tl.where(data != data, 1.0, tl.where(data * 0.0 != 0.0, tl.where(data > 0.0, 256.0, 65536.0), 0.0))
    above, below = (w > 0.0).to(tl.float32), (w < 0.0).to(tl.float32)
    if WEIGHTS_FIRST:
        by_above = tl.dot(above, code, input_precision="tf32")
        by_below = tl.dot(below, code, input_precision="tf32")
    else:
        by_above = tl.dot(code, above, input_precision="tf32")
        by_below = tl.dot(code, below, input_precision="tf32")
    nan_a, inf_a, minus_a = _decode(by_above)
    nan_b, inf_b, minus_b = _decode(by_below)
    return nan_hits + nan_a + nan_b, up_hits + inf_a + minus_b, down_hits + minus_a + inf_b


@triton.jit
def _decode(sums):
    """(NaN, inf, -inf) counts of ``non_finite_hits``'s coded sums."""
    minus = tl.floor(sums * (1.0 / 65536.0))
    rest = sums - minus * 65536.0
    inf = tl.floor(rest * (1.0 / 256.0))
    return rest - inf * 256.0, inf, minus


@triton.jit
def mark_non_finite(acc, nan_hits, up_hits, down_hits):
    """``acc``, a product of the finite values, plus the counted non-finite ones: added
    as infs and NaNs, so that IEEE addition combines them with what ``acc`` already
    holds (an earlier product's -inf and this one's inf make NaN)."""
    acc += tl.where(up_hits > 0.0, float("inf"), 0.0)
    acc += tl.where(down_hits > 0.0, -float("inf"), 0.0)
    return acc + tl.where(nan_hits > 0.0, float("nan"), 0.0)


@triton.jit
def weighted_product(w, data, acc, WEIGHTS_FIRST: tl.constexpr, PRECISION: tl.constexpr):
    """``acc`` plus ``w @ data`` (``WEIGHTS_FIRST``) or ``data @ w`` in float32 accuracy
    (``PRECISION`` "tf32x3" on the GPU), where a non-finite value of ``data`` reaches only
    the outputs that weigh it (counted by two more products, only in tiles that hold one)."""
    clean = finite_part(data)
    if has_non_finite(data):
        hits = tl.zeros(acc.shape, dtype=tl.float32)
        nan_hits, up_hits, down_hits = non_finite_hits(w, data, hits, hits, hits, WEIGHTS_FIRST)
        acc = mark_non_finite(acc, nan_hits, up_hits, down_hits)
    if WEIGHTS_FIRST:
        return tl.dot(w, clean, acc, input_precision=PRECISION)
    else:
        return tl.dot(clean, w, acc, input_precision=PRECISION)
