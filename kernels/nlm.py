"""Non-local means (pixelwise, uniform patch weights): one launch, nothing beyond the output.

Each program owns one output tile of one image, all channels. Its blocks are ``TH x TW``
*patch pixels*: the tile and the patch halo ``f = P // 2`` around it, so the tile has
``TH - P + 1`` rows and ``TW - P + 1`` columns. For every search offset ``d = (dy, dx)``
it forms on chip the channel-summed squared difference

    D(y, x) = sum_c (I_c(y, x) - I_c(y + dy, x + dx))^2

and its ``P x P`` box sums, at a cost independent of P: a running sum along the row
(``tl.cumsum``) minus itself P columns earlier (``tl.gather``, a warp shuffle), then the
same down the columns (the gather goes through shared memory). At block position (i, j),
i, j >= P - 1, that is the box sum over the patch that ends there, i.e. the patch
distance of the output pixel (i - f, j - f). Nothing per offset leaves the chip; the
centre values stay in registers across all offsets.

Tiles whose every read lies inside the image (all but a ring R + P wide) address their
loads as one loop-invariant offset block plus a scalar per offset; the others remap
every row and column through the border.

Channels are separate ``(TH, TW)`` planes (C <= 4, a constexpr) rather than one
``(C, TH, TW)`` block, so the channel sum stays inside each thread.

The symmetry w(p, q) = w(q, p) is not used: the weight of offset -d at p is the weight of
d at p - d, a block shifted by up to R in both directions, which would have to be
computed on a block R wider on every side and moved through shared memory; at R = 10 and
these block sizes that costs more than the half of the offsets it saves.
"""
import triton
import triton.language as tl

from .core import borders, pixels, pointwise
from .core.launch import Tuning, launch as launch_kernel, tile_config
from .core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, size_class, tile_origin

LOG2E = 1.4426950408889634
MAX_CHANNELS = 4
MAX_PATCH = 15
MAX_RADIUS = 35


@triton.jit
def _plane(base, c: tl.constexpr, sc, offs, ok, border_value, BORDER: tl.constexpr, PRO: tl.constexpr,
           pro_args):
    """Channel ``c`` at the in-image offsets ``offs``, the constant border's value where not
    ``ok``, through the prologue."""
    v = pixels.load(base + c * sc + offs)
    if BORDER == borders.CONSTANT:
        v = tl.where(ok, v, border_value)
    return pointwise.apply_chain(v, c, PRO, pro_args)


@triton.jit
def _distance(base, sc, offs, ok, p0, p1, p2, p3, border_value, C: tl.constexpr, BORDER: tl.constexpr,
              PRO: tl.constexpr, pro_args):
    """sum_c (p_c - I_c[offs])^2 over the C channels."""
    d = p0 - _plane(base, 0, sc, offs, ok, border_value, BORDER, PRO, pro_args)
    s = d * d
    if C > 1:
        d = p1 - _plane(base, 1, sc, offs, ok, border_value, BORDER, PRO, pro_args)
        s += d * d
    if C > 2:
        d = p2 - _plane(base, 2, sc, offs, ok, border_value, BORDER, PRO, pro_args)
        s += d * d
    if C > 3:
        d = p3 - _plane(base, 3, sc, offs, ok, border_value, BORDER, PRO, pro_args)
        s += d * d
    return s


@triton.jit
def _planes(base, sc, offs, ok, border_value, C: tl.constexpr, BORDER: tl.constexpr, PRO: tl.constexpr,
            pro_args):
    """The C channel planes at ``offs`` (unused channels repeat channel 0)."""
    v0 = _plane(base, 0, sc, offs, ok, border_value, BORDER, PRO, pro_args)
    v1 = v0
    v2 = v0
    v3 = v0
    if C > 1:
        v1 = _plane(base, 1, sc, offs, ok, border_value, BORDER, PRO, pro_args)
    if C > 2:
        v2 = _plane(base, 2, sc, offs, ok, border_value, BORDER, PRO, pro_args)
    if C > 3:
        v3 = _plane(base, 3, sc, offs, ok, border_value, BORDER, PRO, pro_args)
    return v0, v1, v2, v3


@triton.jit
def _grid(rows, cols, H, W, sh, sw, BORDER: tl.constexpr, OFF64: tl.constexpr):
    """In-image offsets of the border-remapped (rows x cols) grid, and where it lies inside."""
    offs = (offset(borders.remap(rows, H, BORDER), sh, OFF64)[:, None]
            + offset(borders.remap(cols, W, BORDER), sw, OFF64)[None, :])
    ok = borders.inside(rows, H)[:, None] & borders.inside(cols, W)[None, :]
    return offs, ok


@triton.jit
def _store(Y, b, c: tl.constexpr, y, x_in, rows, cols, mask, syb, syc, syh, syw, EPI: tl.constexpr, epi_args,
           OFF64: tl.constexpr):
    y = pointwise.apply_epilogue(y, x_in, c, EPI, epi_args)
    offs = offset(rows, syh, OFF64)[:, None] + offset(cols, syw, OFF64)[None, :]
    pixels.store(Y + b * syb + c * syc + offs, y, mask)


@triton.jit
def _search(base, ys, xs, i, j, H, W, sxc, sxh, sxw, coef, floor, border_value,
            e0, e1, e2, e3, PRO: tl.constexpr, pro_args, C: tl.constexpr, P: tl.constexpr, R: tl.constexpr,
            BORDER: tl.constexpr, OFF64: tl.constexpr, INSIDE: tl.constexpr):
    """The weighted sums over the search window: per-channel numerators and the weight sum
    of every block position; e are the centre planes. INSIDE: every read is in the image
    (no remapping, no border value)."""
    f: tl.constexpr = P // 2
    # running sums lose their value P back only where that position is inside the block
    col_in = (j >= P).to(tl.float32)[None, :]
    row_in = (i >= P).to(tl.float32)[:, None]
    fixed = offset(ys, sxh, OFF64)[:, None] + offset(xs, sxw, OFF64)[None, :]
    left = tl.broadcast_to(tl.maximum(j - P, 0)[None, :], fixed.shape)
    up = tl.broadcast_to(tl.maximum(i - P, 0)[:, None], fixed.shape)
    num0 = tl.zeros(fixed.shape, dtype=tl.float32)
    num1 = tl.zeros(fixed.shape, dtype=tl.float32)
    num2 = tl.zeros(fixed.shape, dtype=tl.float32)
    num3 = tl.zeros(fixed.shape, dtype=tl.float32)
    den = tl.zeros(fixed.shape, dtype=tl.float32)
    for dy in range(-R, R + 1):
        for dx in range(-R, R + 1):
            if INSIDE:  # one scalar pointer per pattern; REPLICATE: no border value to insert
                q = base + (dy * sxh + dx * sxw)
                d = _distance(q, sxc, fixed, True, e0, e1, e2, e3, border_value, C, borders.REPLICATE, PRO,
                              pro_args)
                v0, v1, v2, v3 = _planes(q - f * sxh - f * sxw, sxc, fixed, True, border_value, C,
                                         borders.REPLICATE, PRO, pro_args)
            else:
                o, ok = _grid(ys + dy, xs + dx, H, W, sxh, sxw, BORDER, OFF64)
                d = _distance(base, sxc, o, ok, e0, e1, e2, e3, border_value, C, BORDER, PRO, pro_args)
                # the value at the neighbour of the patch centre that ends at (ys, xs)
                o, ok = _grid(ys + dy - f, xs + dx - f, H, W, sxh, sxw, BORDER, OFF64)
                v0, v1, v2, v3 = _planes(base, sxc, o, ok, border_value, C, BORDER, PRO, pro_args)
            run = tl.cumsum(d, axis=1)
            run -= col_in * tl.gather(run, left, axis=1)
            box = tl.cumsum(run, axis=0)
            box -= row_in * tl.gather(box, up, axis=0)
            w = tl.exp2(coef * tl.maximum(box - floor, 0.0))
            num0 += w * v0
            if C > 1:
                num1 += w * v1
            if C > 2:
                num2 += w * v2
            if C > 3:
                num3 += w * v3
            den += w
    return num0, num1, num2, num3, den


@triton.jit
def nlm_kernel(X, Y, COEF, FLOOR, H, W, sxb, sxc, sxh, sxw, syb, syc, syh, syw, border_value,
               PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
               C: tl.constexpr, P: tl.constexpr, R: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
               SIZE_CLASS, TH: tl.constexpr, TW: tl.constexpr):
    """Y = sum_d w_d X~[p + d] / sum_d w_d over the (2R+1)^2 offsets d, with
    w_d = exp2(COEF[b] * max(S_d - FLOOR[b], 0)), S_d the P x P box sum of D. COEF[b] is
    -log2(e) / (h^2 P^2 C) and FLOOR[b] is 2 sigma^2 P^2 C for image b."""
    f: tl.constexpr = P // 2
    b, _, r0, c0 = tile_origin(tl.program_id(0), 1, H, W, TH - P + 1, TW - P + 1)
    coef = tl.load(COEF + b)
    floor = tl.load(FLOOR + b)
    base = X + b * sxb
    i = tl.arange(0, TH)
    j = tl.arange(0, TW)
    ys = r0 - f + i  # patch-pixel rows and columns of the blocks
    xs = c0 - f + j
    # the centre side of every distance, kept in registers for all offsets
    o, ok = _grid(ys, xs, H, W, sxh, sxw, BORDER, OFF64)
    e0, e1, e2, e3 = _planes(base, sxc, o, ok, border_value, C, BORDER, PRO, pro_args)
    # Tiles whose every read lies inside the image (all but a ring of width R + P) skip the
    # border remapping: their addresses are a loop-invariant offset block plus one scalar.
    inside = ((r0 - f - P - R >= 0) & (r0 - f + TH + R <= H) & (c0 - f - P - R >= 0) & (c0 - f + TW + R <= W))
    if inside:
        num0, num1, num2, num3, den = _search(base, ys, xs, i, j, H, W, sxc, sxh, sxw, coef, floor, border_value,
                                              e0, e1, e2, e3, PRO, pro_args, C, P, R, BORDER, OFF64, True)
    else:
        num0, num1, num2, num3, den = _search(base, ys, xs, i, j, H, W, sxc, sxh, sxw, coef, floor, border_value,
                                              e0, e1, e2, e3, PRO, pro_args, C, P, R, BORDER, OFF64, False)

    rows = ys - f  # the output pixel of each block position
    cols = xs - f
    mask = ((i >= P - 1) & (rows < H))[:, None] & ((j >= P - 1) & (cols < W))[None, :]
    o, ok = _grid(rows, cols, H, W, sxh, sxw, BORDER, OFF64)
    x0, x1, x2, x3 = _planes(base, sxc, o, ok, border_value, C, BORDER, PRO, pro_args)
    _store(Y, b, 0, num0 / den, x0, rows, cols, mask, syb, syc, syh, syw, EPI, epi_args, OFF64)
    if C > 1:
        _store(Y, b, 1, num1 / den, x1, rows, cols, mask, syb, syc, syh, syw, EPI, epi_args, OFF64)
    if C > 2:
        _store(Y, b, 2, num2 / den, x2, rows, cols, mask, syb, syc, syh, syw, EPI, epi_args, OFF64)
    if C > 3:
        _store(Y, b, 3, num3 / den, x3, rows, cols, mask, syb, syc, syh, syw, EPI, epi_args, OFF64)


def block_tiles(meta):
    """``TILES`` whose blocks hold two patches (the gathers reach P back), and fewer
    pixels as channels grow (more planes live); the first is the default."""
    P, C = meta["P"], meta["C"]
    kept = [t for t in TILES if min(t["TH"], t["TW"]) >= 2 * P and C * t["TH"] * t["TW"] <= 8192]
    return [tile_config(**t) for t in kept or [max(TILES, key=lambda t: t["TH"])]]


# Measured on the H200 (4K RGB float32, P = 7, R = 10): 16x32 in one warp 25.3 ms, 32x32 in
# four 27.6, 64x32 in four 30.6, 32x64 in eight 39.9. One warp keeps the column sums and
# their gathers inside the warp (no shared memory, no barriers), which outweighs the
# larger patch halo of a 16-row block.
TILES = [dict(TH=16, TW=32, num_warps=1), dict(TH=32, TW=32, num_warps=4), dict(TH=64, TW=32, num_warps=4),
         dict(TH=16, TW=64, num_warps=4)]
tuning = Tuning(block_tiles, key=["C", "P", "R", "BORDER", "PRO", "EPI", "SIZE_CLASS"])


def launch(x, y, coef, floor, patch_size, radius, border=0, border_value=0.0, pro=((), ()), epi=((), ()),
           tile=None):
    """Non-local means of 4-D ``x`` (B, C <= 4, H, W) into ``y``; ``coef`` and ``floor`` are
    float32 per-image tensors on the device (see ``nlm_kernel``). ``tile`` (a ``TILES``
    entry) forces one block size, so that tests reach interior tiles in the interpreter."""
    B, C, H, W = x.shape
    args = (x, y, coef, floor, H, W, *x.stride(), *y.stride(), float(border_value), pro[0], pro[1], epi[0],
            epi[1])
    meta = dict(C=C, P=patch_size, R=radius, BORDER=border, OFF64=needs_int64(x, y), SIZE_CLASS=size_class(H, W))
    grid = lambda m: (programs(B, H, W, m["TH"] - patch_size + 1, m["TW"] - patch_size + 1),)
    if tile is not None:
        fixed = tile_config(**tile)
    elif interpreting():  # one block covers the image
        fixed = tile_config(TH=pow2_at_least(H + patch_size - 1, 16, 128), TW=pow2_at_least(W + patch_size - 1, 16, 128))
    else:
        fixed = None
    launch_kernel(nlm_kernel, grid, args, meta, x, fixed, tuning)
