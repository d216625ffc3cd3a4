"""Border index remapping, shared by every filter kernel.

A filter reads pixels outside the image; these functions map such an index back into
``[0, n)``. The modes and their peers:

=============  ==========================  ==================  ===================
mode           pattern for ``abcd``        numpy.pad mode      OpenCV
=============  ==========================  ==================  ===================
``reflect``    ``dcb|abcd|cba``            ``reflect``         BORDER_REFLECT_101
``symmetric``  ``cba|abcd|dcb``            ``symmetric``       BORDER_REFLECT
``replicate``  ``aaa|abcd|ddd``            ``edge``            BORDER_REPLICATE
``constant``   ``vvv|abcd|vvv``            ``constant``        BORDER_CONSTANT
=============  ==========================  ==================  ===================

When the filter reaches further than the image is wide, the reflection repeats (the
index is folded with the mode's period) as in OpenCV and ``numpy.pad``, so no index is
ever out of bounds whatever the radius.
"""
import triton
import triton.language as tl

BORDERS = ("reflect", "symmetric", "replicate", "constant")
REFLECT: tl.constexpr = tl.constexpr(0)
SYMMETRIC: tl.constexpr = tl.constexpr(1)
REPLICATE: tl.constexpr = tl.constexpr(2)
CONSTANT: tl.constexpr = tl.constexpr(3)


def border_code(name: str) -> int:
    """The constexpr code of a border mode name (validated by the caller)."""
    return BORDERS.index(name)


@triton.jit
def remap(i, n, BORDER: tl.constexpr):
    """Map integer indices ``i`` (any sign, any distance) into ``[0, n)``.

    For ``constant`` the index is clamped so that the load stays in bounds; the caller
    replaces those pixels with the border value (see ``inside``).
    """
    if BORDER == REFLECT:
        # reflect-101 has period 2n - 2 and is even about 0; n == 1 gives period 1 -> 0.
        period = tl.maximum(2 * n - 2, 1)
        j = tl.abs(i) % period
        j = tl.where(j >= n, period - j, j)
    elif BORDER == SYMMETRIC:
        # symmetric is even about -0.5: fold negatives with -1 - i, then period 2n.
        j = tl.where(i < 0, -1 - i, i) % (2 * n)
        j = tl.where(j >= n, 2 * n - 1 - j, j)
    else:  # REPLICATE, and CONSTANT's in-bounds index
        j = tl.minimum(tl.maximum(i, 0), n - 1)
    return j


@triton.jit
def remap_near(i, n, BORDER: tl.constexpr):
    """``remap`` by a single fold, without the integer modulo (about 20 instructions per
    element) that ``remap`` needs for indices any distance away: exact for indices within
    one image size, ``-n < i < 2n - 1``, which is where a filter narrower than the image
    reads. Indices beyond that give some in-range index (never an out-of-bounds load):
    callers use them only for positions whose results they discard, such as the columns
    of a tile that extends past the image."""
    if BORDER == REFLECT:
        j = tl.abs(i)
        j = tl.where(j >= n, tl.maximum(2 * n - 2 - j, 0), j)
    elif BORDER == SYMMETRIC:
        j = tl.where(i < 0, -1 - i, i)
        j = tl.where(j >= n, tl.maximum(2 * n - 1 - j, 0), j)
    else:
        j = tl.minimum(tl.maximum(i, 0), n - 1)
    return j


@triton.jit
def remap_within(i, n, BORDER: tl.constexpr, NEAR: tl.constexpr):
    """``remap``, or its single fold (``remap_near``: no integer modulo, a third of the
    instructions) where the caller knows its window reaches less than the image's size
    (``NEAR``)."""
    if NEAR:
        return remap_near(i, n, BORDER)
    else:
        return remap(i, n, BORDER)


@triton.jit
def inside(i, n):
    """True where an index lies in the image (used by the constant border)."""
    return (i >= 0) & (i < n)


@triton.jit
def fold_add(ptr, value, ok, inside, band, BORDER: tl.constexpr):
    """Add ``value``, the gradient at a position of the border-extended grid, into the
    pixel ``ptr`` that BORDER reads that position from (the adjoint of the extension,
    into a zeroed output). Pixels in ``band``, near an edge, receive several positions,
    from other programs too: relaxed atomic adds (the default acq_rel adds a fence to
    each); every other pixel receives exactly this one: a plain store. A constant border
    reads no pixel for positions outside the image (not ``inside``): they are dropped."""
    if BORDER == CONSTANT:
        tl.store(ptr, value, ok & inside)
    else:
        tl.store(ptr, value, ok & ~band)
        tl.atomic_add(ptr, value, ok & band, sem="relaxed")
