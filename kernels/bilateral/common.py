"""Device helpers shared by the bilateral family's kernels: typed row and block loads,
the distances and the exponent of a tap's weight, int64 strides."""
import triton
import triton.language as tl

from ..core import borders, neighbourhood
from ..core.tiling import offset, tile_origin

LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)


@triton.jit
def _vectors(base, ch, n_ch, sc, rows, row_ok, cols, H, W, sh, sw, border_value,
             BORDER: tl.constexpr, OFF64: tl.constexpr):
    """The (CP, BH, BW) block base[ch, rows, remap(cols)] in unit scale, with the constant
    border's value outside the image; ``rows`` are already remapped, ``row_ok`` says which
    of them lay inside."""
    c_idx = borders.remap(cols, W, BORDER)
    offs = (offset(ch, sc, OFF64)[:, None, None] + offset(rows, sh, OFF64)[None, :, None]
            + offset(c_idx, sw, OFF64)[None, None, :])
    valid = (ch < n_ch)[:, None, None]
    inside = (row_ok[:, None] & borders.inside(cols, W)[None, :])[None, :, :]
    v = neighbourhood.load(base + offs, inside, border_value, 0, (), (), neighbourhood.UNIT, BORDER, valid)
    # padding channels are zero everywhere, so they add nothing to the distances
    return tl.where(valid, v, 0.0)


@triton.jit
def _distance2(diff, L1: tl.constexpr):
    """Squared colour distance of (C, BH, BW) differences: (sum |d|)^2 or sum d^2."""
    if L1:
        d = tl.sum(tl.abs(diff), axis=0)
        return d * d
    else:
        return tl.sum(diff * diff, axis=0)


@triton.jit
def _distance2_grad(diff, L1: tl.constexpr):
    """d(_distance2(a - b)) / da, per channel (sign(0) = 0, as torch's abs)."""
    if L1:
        d = tl.sum(tl.abs(diff), axis=0)
        return 2.0 * d[None, :, :] * tl.where(diff > 0, 1.0, tl.where(diff < 0, -1.0, 0.0))
    else:
        return 2.0 * diff


@triton.jit
def _output_tile(COLOR, SPACE, H, W, CP: tl.constexpr, CGP: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """This program's image, its colour and space coefficients, the channel ranges and the
    rows and columns of its output tile."""
    b, _, h0, w0 = tile_origin(tl.program_id(0), 1, H, W, BH, BW)
    return (b, tl.load(COLOR + b), tl.load(SPACE + b), tl.arange(0, CP), tl.arange(0, CGP),
            h0 + tl.arange(0, BH), w0 + tl.arange(0, BW))


@triton.jit
def _row(base, r, cols, H, W, sc, sh, sw, border_value, N: tl.constexpr, PRO: tl.constexpr, pro_args,
         BORDER: tl.constexpr, NEAR: tl.constexpr, dx=0, INSIDE: tl.constexpr = False):
    """The N channel vectors of row ``r`` at columns ``cols + dx`` (indices through the
    border: within one image size of it when NEAR), PRO of unit scale, and the constant
    border's value outside the image (``neighbourhood.load``). A tuple of N (BW,) vectors.
    INSIDE: ``cols + dx`` lie inside the image (``bilateral_kernel``'s clamped columns), so
    the loads of every compile-time dx share one address a channel, dx its constant
    offset (without it, two integer additions a load: 5 % of the 9 x 9 kernel)."""
    if INSIDE:
        row = base + borders.remap_near(r, H, BORDER) * sh
        col = cols * sw
        inside = borders.inside(r, H)
    elif NEAR:
        row = base + borders.remap_near(r, H, BORDER) * sh
        col = borders.remap_near(cols + dx, W, BORDER) * sw
        inside = borders.inside(cols + dx, W) & borders.inside(r, H)
    else:
        row = base + borders.remap(r, H, BORDER) * sh
        col = borders.remap(cols + dx, W, BORDER) * sw
        inside = borders.inside(cols + dx, W) & borders.inside(r, H)
    out = ()
    for c in tl.static_range(N):
        at = row + c * sc + col
        if INSIDE:
            at += dx * sw
        out = out + (neighbourhood.load(at, inside, border_value, c, PRO, pro_args, neighbourhood.UNIT, BORDER),)
    return out


@triton.jit
def _scaled(vectors, s):
    """Each vector times s."""
    out = ()
    for c in tl.static_range(len(vectors)):
        out = out + (vectors[c] * s,)
    return out


@triton.jit
def _wide(strides, OFF64: tl.constexpr):
    """The strides as int64 when in-image offsets can pass 2**31, so every product with
    them is int64; else as they are. (``tl.cast``, not ``.to``: Triton passes an integer
    argument equal to 1, such as a contiguous image's column stride, as the constant 1.)"""
    if OFF64:
        out = ()
        for i in tl.static_range(len(strides)):
            out = out + (tl.cast(strides[i], tl.int64),)
        return out
    else:
        return strides


@triton.jit
def _exponent(spatial, g, centre, L1: tl.constexpr):
    """spatial - D^2, the guide vectors being prescaled by sqrt(-COLOR) so that D^2 is
    sum d^2 (l2) or (sum |d|)^2 (l1) over the channels: one FFMA a channel for l2."""
    if L1:
        s = tl.abs(g[0] - centre[0])
        for c in tl.static_range(1, len(g)):
            s += tl.abs(g[c] - centre[c])
        return spatial - s * s
    else:
        e = spatial
        for c in tl.static_range(len(g)):
            d = g[c] - centre[c]
            e -= d * d
        return e


def _guide_batch_stride(guide, batch):
    """The guide's batch stride: 0 when one guide serves every image."""
    return guide.stride(0) if guide.shape[0] == batch else 0
