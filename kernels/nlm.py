"""Non-local means (pixelwise, uniform patch weights): one launch, nothing beyond the output.

Each program is one warp and owns a strip of one image: LANES = 32 patch-pixel columns
(one per lane) by TH output rows; its outputs are the LANES - P + 1 columns whose whole
patch lies in the strip. Every value is one image row of one channel, a (1, LANES)
vector with a column per lane, and a row of an image is a tuple of C of them: the channel
sum is C - 1 adds in the thread, with no shuffle and no padded channel. (A (1, LANES, C)
block would hold the same registers only where the compiler puts the channels in the
thread, which it no longer does: Triton 3.8 breaks ties between equally contiguous
dimensions from the right, spreads the channels over 4 lanes, and every row's D then
costs shuffles and a layout conversion through shared memory, 3.5x slower on 4K RGB.)
For every search offset ``d = (dy, dx)`` the strip marches down its TH + P - 1 patch
rows; for each it loads the shifted row I(y + dy, x + dx) (one load a channel) and forms

    D(y, x) = sum_c (I_c(y, x) - I_c(y + dy, x + dx))^2

against the centre rows, which stay in registers for all offsets. The patch distance is
D's P x P box sum: down the rows, the sum of the rows of a block of P so far plus the
previous block's sum from the window's first row on (no subtraction, so a non-finite D
stays in the windows that hold it; about two adds a row, like a running sum), then for
each completed output row the P-wide sum across the lanes, built from warp shuffles
(``tl.gather`` of lanes a constant distance away) by doubling: a width-2^k sum is two
width-2^(k-1) sums, so P = 7 costs five shuffles and four adds. The neighbour's value that the weight multiplies,
I(p + d), is the shifted row loaded f = P // 2 rows earlier at the same lane: no load of
its own. Integer images without a prologue stay in stored units (``RAW``).

Borders cost almost nothing: a row's index is a scalar, remapped once per dy for all of
the strip's rows, and the columns' once per offset for all rows.

The symmetry w(p, q) = w(q, p) is not used: the weight of offset -d at p is the weight of
d at p - d, which lies in another strip (see PERFORMANCE.md).
"""
import triton
import triton.language as tl

from .core import borders, neighbourhood, pixels, pointwise
from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import interpreting, needs_int64, next_pow2, offset, pow2_at_least, programs, tile_origin

LOG2E = 1.4426950408889634
MAX_CHANNELS = 4
MAX_PATCH = 15
MAX_RADIUS = 35
BIAS = neighbourhood.BIAS  # 2^23: RAW values are the floats 2^23 + value


@triton.jit
def _row(planes, row, row_ok, col_ok, border_value, C: tl.constexpr, BORDER: tl.constexpr, PRO: tl.constexpr,
         pro_args, RAW: tl.constexpr):
    """One image row: the tuple of its C channels' (S, LANES) values at the in-image row
    offset ``row`` (a scalar, or (S, 1) in the interpreter) of the channels' column
    pointers ``planes`` (a tuple of C (1, LANES) blocks; ``neighbourhood.load``): through
    the prologue in unit scale, or with RAW integers as the float 2^23 + value
    (``neighbourhood.BIASED``), whose differences are the distances' and which the caller
    unbiases only where it needs values; the constant border's value where not
    ``row_ok & col_ok``."""
    ok = row_ok & col_ok
    v = ()
    for c in tl.static_range(C):
        v = v + (neighbourhood.load(planes[c] + row, ok, border_value, c, PRO, pro_args,
                                    neighbourhood.BIASED if RAW else neighbourhood.UNIT, BORDER),)
    return v


@triton.jit
def _distance(a, b, C: tl.constexpr):
    """sum_c (a[c] - b[c])^2 of two rows (tuples of C channels): adds in the thread."""
    e = a[0] - b[0]
    d = e * e
    for c in tl.static_range(1, C):
        e = a[c] - b[c]
        d += e * e
    return d


@triton.jit
def _planes(base, stride, cols, C: tl.constexpr):
    """The C channels' pointers ``base + c * stride + cols`` (by additions: no product to
    overflow int32)."""
    plane = base
    planes = (plane + cols,)
    for _c in tl.static_range(1, C):
        plane += stride
        planes = planes + (plane + cols,)
    return planes


@triton.jit
def _shifted(v, lanes, k, LANES: tl.constexpr):
    """v at lane + k (clamped at the ends: those lanes are never outputs)."""
    return tl.gather(v, tl.broadcast_to(tl.minimum(tl.maximum(lanes + k, 0), LANES - 1), v.shape), 1)


@triton.jit
def _box(v, lanes, P: tl.constexpr, LANES: tl.constexpr):
    """The sum of v over lanes j - P // 2 .. j + P // 2 at lane j: sums of 2^k lanes by
    doubling, then one of each width in P's binary digits (P < 16)."""
    sums = (v,)  # sums[k] at lane j: v over lanes j .. j + 2^k - 1
    for k in tl.static_range(1, 4):
        if (1 << k) <= P:
            sums = sums + (sums[k - 1] + _shifted(sums[k - 1], lanes, 1 << (k - 1), LANES),)
    total = tl.zeros_like(v)
    for k in tl.static_range(3, -1, -1):  # widest first; each starts where the wider ones end
        if (P >> k) & 1:
            if ((P >> (k + 1)) << (k + 1)) == P // 2:
                total += sums[k]
            else:
                total += _shifted(sums[k], lanes, ((P >> (k + 1)) << (k + 1)) - P // 2, LANES)
    return total


@triton.jit
def nlm_kernel(X, Y, COEF, FLOOR, H, W, x_strides, y_strides, border_value,
               PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
               C: tl.constexpr, P: tl.constexpr, R: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
               RAW: tl.constexpr, TH: tl.constexpr, S: tl.constexpr, LANES: tl.constexpr):
    """Y = sum_d w_d X~[p + d] / sum_d w_d over the (2R+1)^2 offsets d, with
    w_d = exp2(COEF[b] * max(S_d - FLOOR[b], 0)), S_d the P x P box sum of D. COEF[b] is
    -log2(e) / (h^2 P^2 C) and FLOOR[b] is 2 sigma^2 P^2 C for image b. RAW (integer
    images without a prologue): distances and sums in stored units, scaled once.

    Values are (S, LANES) blocks: one row of one channel of S strips stacked TH rows apart
    (S = 1 on the GPU; the interpreter runs many one-row strips at once), a column per
    lane; an image row is a tuple of C of them (``_row``), and ``num`` holds C blocks an
    output row (``num[o * C + c]``). Nothing has a channel dimension, so every value and
    every shuffle (``tl.gather``) shares the one layout of a (S, LANES) block, whichever
    way the compiler orders the dimensions of a 3-D one."""
    sxb, sxc, sxh, sxw = x_strides
    syb, syc, syh, syw = y_strides
    f: tl.constexpr = P // 2
    b, _, r0, c0 = tile_origin(tl.program_id(0), 1, H, W, S * TH, LANES - 2 * f)
    coef = tl.load(COEF + b)
    cf = -coef * tl.load(FLOOR + b)  # exponent = min(coef * S + cf, 0), coef < 0
    unit = pixels.unit_scale(X.dtype.element_ty)
    if RAW:
        coef = coef * (unit * unit)
        border_value = border_value / unit + BIAS
    base = X + b * sxb
    lanes = tl.arange(0, LANES)[None, :]  # for (S, LANES) values
    xs = c0 - f + lanes  # the strip's patch-pixel columns; outputs at lanes f .. LANES - 1 - f
    if S > 1:  # the interpreter's stacked strips; on the GPU a row is a scalar, uniform across the warp
        r0 = r0 + TH * tl.arange(0, S)[:, None]  # each strip's first output row

    # the centre rows of the TH + P - 1 patch rows, kept in registers for all offsets
    planes = _planes(base, sxc, offset(borders.remap(xs, W, BORDER), sxw, OFF64), C)
    col_ok = borders.inside(xs, W)
    centre = ()
    for i in tl.static_range(TH + P - 1):
        y = r0 - f + i
        centre = centre + (_row(planes, offset(borders.remap(y, H, BORDER), sxh, OFF64), borders.inside(y, H),
                                col_ok, border_value, C, BORDER, PRO, pro_args, RAW),)
    num = ()
    den = ()
    for _ in tl.static_range(TH):
        den = den + (tl.zeros((S, LANES), tl.float32),)
        for _c in tl.static_range(C):
            num = num + (tl.zeros((S, LANES), tl.float32),)

    for dy in range(-R, R + 1):
        rows = ()  # the shifted rows, remapped once for every dx
        rows_ok = ()
        for i in tl.static_range(TH + P - 1):
            y = r0 - f + i + dy
            rows = rows + (offset(borders.remap(y, H, BORDER), sxh, OFF64),)
            rows_ok = rows_ok + (borders.inside(y, H),)
        for dx in range(-R, R + 1):
            planes = _planes(base, sxc, offset(borders.remap(xs + dx, W, BORDER), sxw, OFF64), C)
            col_ok = borders.inside(xs + dx, W)
            shifted = ()  # every row's shifted row; the compiler keeps the f + 1 still needed
            dist = ()  # every row's D
            tails = ()  # the last complete block's (below)
            new_num = ()
            new_den = ()
            for i in tl.static_range(TH + P - 1):
                v = _row(planes, rows[i], rows_ok[i], col_ok, border_value, C, BORDER, PRO, pro_args, RAW)
                shifted = shifted + (v,)
                d = _distance(centre[i], v, C)  # (S, LANES), like every value
                dist = dist + (d,)
                # D over the P rows ending here, from the rows in blocks of P: the sum of
                # this block's rows so far (head) and of the previous block's last rows
                # (tails[t]: rows t .. P - 1 of it). Only rows of the window are added, none
                # subtracted: a running sum's subtraction would carry an inf or NaN row (inf -
                # inf) into windows that do not hold it. It costs what the running sum did.
                if i % P == 0:
                    head = d
                else:
                    head += d
                if i >= P - 1:  # output row i - P + 1 has all its patch rows
                    run = head if i % P == P - 1 else tails[(i + 1) % P] + head
                    w = tl.exp2(tl.minimum(coef * _box(run, lanes, P, LANES) + cf, 0.0))
                    new_den = new_den + (den[i - P + 1] + w,)
                    v = shifted[i - P + 1 + f]
                    for c in tl.static_range(C):
                        vc = v[c]
                        if RAW:
                            vc = vc - BIAS
                        new_num = new_num + (num[(i - P + 1) * C + c] + w * vc,)
                if i % P == P - 1:  # the block is complete: its tails, for the windows starting in it
                    tails = (d,)
                    for t in tl.static_range(P - 2, -1, -1):
                        tails = (dist[i - P + 1 + t] + tails[0],) + tails
            num = new_num
            den = new_den

    mask = (lanes >= f) & (lanes < LANES - f) & (xs < W)
    out = _planes(Y + b * syb, syc, offset(xs, syw, OFF64), C)
    for o in tl.static_range(TH):
        row = offset(r0 + o, syh, OFF64)
        for c in tl.static_range(C):
            y = num[o * C + c] / den[o]
            x_in = centre[o + f][c]
            if RAW:
                y = y * unit
                x_in = (x_in - BIAS) * unit
            y = pointwise.apply_epilogue(y, x_in, b, c, EPI, epi_args)
            pixels.store(out[c] + row, y, mask & (r0 + o < H))


# One warp a program: the lanes' shuffles stay inside it. TH = 8 output rows: more rows
# share the patch halo's loads but unroll into code that compiles for longer (TH = 16
# takes about three times as long as 8) and keeps more registers.
TILE = dict(TH=8, S=1, LANES=32, num_warps=1)


def launch(x, y, coef, floor, patch_size, radius, border=0, border_value=0.0, pro=((), ()), epi=((), ()),
           tile=None):
    """Non-local means of 4-D ``x`` (B, C <= 4, H, W) into ``y``; ``coef`` and ``floor`` are
    float32 per-image tensors on the device (see ``nlm_kernel``). ``tile`` (a dict of TH, S,
    LANES and num_warps) forces one strip size, so that tests reach several strips in the
    interpreter."""
    B, C, H, W = x.shape
    args = (x, y, coef, floor, H, W, x.stride(), y.stride(), float(border_value), pro[0], pro[1], epi[0],
            epi[1])
    raw = not x.is_floating_point() and not pro[0]
    meta = dict(C=C, P=patch_size, R=radius, BORDER=border, OFF64=needs_int64(x, y), RAW=raw)
    grid = lambda m: (programs(B, H, W, m["S"] * m["TH"], m["LANES"] - patch_size + 1),)
    if tile is None and interpreting():
        # the interpreter's cost is per operation, and the kernel's operations grow with
        # the rows it unrolls: one program of one-row strips, all the image's rows at once
        tile = dict(TH=1, S=next_pow2(H), LANES=pow2_at_least(W + patch_size - 1, 16, 256))
    launch_kernel(nlm_kernel, grid, args, meta, x, tile_config(**(tile or TILE)))
