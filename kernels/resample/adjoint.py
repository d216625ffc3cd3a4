"""The gradient of upsampling by 1 or 2 per axis (torch's clamping modes, no
align_corners): ``upsample_phases_adjoint_kernel``, from the forward's ``PhasePlan``s."""
import functools

import triton
import triton.language as tl

from ..core import pixels
from ..core.launch import Meta, Plan, launch as launch_kernel, tile_config
from ..core.tiling import needs_int64, offset, programs, tile_origin
from . import phases, tiles
from .modes import AREA, CUBIC, LINEAR, NEAREST, NEAREST_EXACT


# Modes whose weights, for n_out = f * n_in without align_corners, depend only on the output
# phase (o mod f) and whose borders clamp the taps into the image (replicate): torch's
# bilinear (its clamp of a negative source coordinate to 0 gives the same value as
# replicating pixel 0), bicubic, nearest, nearest-exact and area (both copy pixel o // f).
# (int codes: comparing with the constexpr codes costs microseconds a call on the host)
ADJOINT_MODES = frozenset(m.value for m in (NEAREST, NEAREST_EXACT, LINEAR, CUBIC, AREA))
# The adjoint's factors: 1 and 2 (at 4 its (BW, 4) gradient blocks spill: 255 registers and
# 10 s compiles with Triton 3.6; those gradients take the matrix products).
ADJOINT_FACTORS = (1, 2)
# Source offsets a phase reads: -2 .. 2 around the source pixel o // f.
REACH: tl.constexpr = tl.constexpr(2)


def adjoint_factor(mode, n_in, n_out, scale, align_corners):
    """The integer factor f of an axis that ``upsample_phases_adjoint_kernel`` handles,
    else None."""
    if align_corners or mode not in ADJOINT_MODES:
        return None
    f = n_out // n_in
    return f if f in ADJOINT_FACTORS and n_out == f * n_in and scale * f == 1.0 else None


@functools.lru_cache(maxsize=None)
def adjoint_weights(plan):
    """For ``upsample_phases_adjoint_kernel``, from the forward's ``PhasePlan`` of the axis
    (D = 1; its interior rows, the reference's weights of output phase q over the source
    offsets -M .. M around o // F): rows k F + q, k = 0 inside, 1 for the first and 2 for
    the last source index, 3 and 4 what those two gather beyond the inside weights (rows 1
    and 2 less row 0, 0 for the positions outside the image, which read 0: the columns add
    them to the inside sum where needed); entry s the weight with which output phase q of
    source position i + s - 2 feeds source index i in the adjoint (one level of rows:
    Triton 3.6 indexes constexpr tables two deep at most). Inside, that is the one tap d =
    2 - s; clamping maps taps past a border onto the first or the last index only, so index
    0 gathers every tap d <= 2 - s and index n - 1 every tap d >= 2 - s (so n >= 2 on both
    axes)."""
    f, m = plan.F, plan.M
    assert m <= REACH.value, "the adjoint reads source offsets -2 .. 2"
    tap = lambda q, d: plan.table[q][d + m] if -m <= d <= m else 0.0
    inner = tuple(tuple(tap(q, 2 - s) for s in range(5)) for q in range(f))
    first = tuple(tuple(sum(tap(q, d) for d in range(-2, 3) if d <= 2 - s) for s in range(5)) for q in range(f))
    last = tuple(tuple(sum(tap(q, d) for d in range(-2, 3) if d >= 2 - s) for s in range(5)) for q in range(f))
    # what the first (last) index gathers beyond ``inner`` from positions in the image, s >= 2 (s <= 2)
    beyond = lambda edge, kept: tuple(tuple(edge[q][s] - inner[q][s] if kept(s) else 0.0 for s in range(5))
                                      for q in range(f))
    return inner + first + last + beyond(first, lambda s: s >= 2) + beyond(last, lambda s: s <= 2)


@triton.jit
def _adjoint_blocks(start, n: tl.constexpr, VEC: tl.constexpr):
    """Each thread's gradient columns start .. start + n - 1 (``start``: (BW,)) as (BW,
    VEC) blocks (one (BW, n) block where n <= VEC): a thread holds a block's VEC
    contiguous columns, one vector load where the columns' stride is 1."""
    if n <= VEC:
        blocks = (start[:, None] + tl.arange(0, n)[None, :],)
    else:
        blocks = ()
        for v in tl.static_range(n // VEC):
            blocks = blocks + (start[:, None] + (v * VEC + tl.arange(0, VEC))[None, :],)
    return blocks


@triton.jit
def _adjoint_gather(cols, WA: tl.constexpr, k: tl.constexpr, t: tl.constexpr, FX: tl.constexpr,
                    MX: tl.constexpr, S: tl.constexpr):
    """A thread's source column t (of its S) resampled along x with ``adjoint_weights``
    table k (constant weights, zero ones skipped): the sum over its taps s, q of the
    gradient column FX (t + s - 2) + q (relative to the thread's first source column),
    which is ``cols[FX (t + s - 2 + MX) + q]`` (``_adjoint_row``'s). A tap outside the
    thread's span has weight 0 inside; an edge row's tap there is outside the image."""
    acc = tl.zeros(cols[0].shape, tl.float32)
    for s in tl.static_range(5):
        if t + s - 2 + MX >= 0:
            if t + s - 2 < S + MX:
                for q in tl.static_range(FX):
                    if WA[k * FX + q][s] != 0.0:
                        acc += WA[k * FX + q][s] * cols[FX * (t + s - 2 + MX) + q]
    return acc


@triton.jit
def _adjoint_row(row_ptr, live, g_offs, g_mask, first, W, at_first, at_last, WX: tl.constexpr,
                 FX: tl.constexpr, MX: tl.constexpr, S: tl.constexpr):
    """One gradient row resampled by the adjoint along x, for each thread's S source columns
    first .. first + S - 1: a tuple of S (BW,) vectors. The thread loads its gradient
    columns FX (first - MX) .. FX (first + S + MX) - 1 (``g_offs``: its own FX S and the
    FX MX on each side, zero outside the image) once, as vectors, and splits them into
    one (BW,) vector per column, which the S sums share. Only the first and the last source
    columns gather more (the clamped taps): their programs (``at_first``, ``at_last``: a
    uniform branch) add those taps' sums where the column is theirs."""
    cols = ()
    for i in tl.static_range(len(g_offs)):
        block = tl.load(row_ptr + g_offs[i], g_mask[i] & live, other=0.0).to(tl.float32)
        split = phases.columns_of(block, block.shape[1])
        for o in tl.static_range(len(split)):
            cols = cols + (tl.reshape(split[o], (block.shape[0],)),)
    out = ()
    for t in tl.static_range(S):
        out = out + (_adjoint_gather(cols, WX, 0, t, FX, MX, S),)
    if at_first:
        out = (out[0] + tl.where(first == 0, _adjoint_gather(cols, WX, 3, 0, FX, MX, S), 0.0),) + out[1:]
    if at_last:
        edged = ()
        for t in tl.static_range(S):
            edged = edged + (out[t] + tl.where(first + t == W - 1, _adjoint_gather(cols, WX, 4, t, FX, MX, S), 0.0),)
        out = edged
    return out


@triton.jit
def _adjoint_rows(G, k, HO, sgh, g_offs, g_mask, first, W, at_first, at_last, WX: tl.constexpr,
                  FX: tl.constexpr, MX: tl.constexpr, S: tl.constexpr, FY: tl.constexpr, OFF64: tl.constexpr):
    """The FY gradient rows FY k + q (zero outside the output), each resampled along x."""
    rows = ()
    for q in tl.static_range(FY):
        r = FY * k + q
        rows = rows + (_adjoint_row(G + offset(r, sgh, OFF64), (r >= 0) & (r < HO), g_offs, g_mask, first, W,
                                    at_first, at_last, WX, FX, MX, S),)
    return rows


@triton.jit
def _adjoint_column(win, new, WA: tl.constexpr, k: tl.constexpr, FY: tl.constexpr, S: tl.constexpr):
    """Source row i of the adjoint, as a (BW, S) block (each thread's S columns, in
    order): the rows FY (i + s - 2) + q of the x-resampled gradient (``win`` holds s = 0 ..
    3, ``new`` s = 4) weighted by ``adjoint_weights`` table k (0 inside, 1 for the first
    row, 2 for the last)."""
    out = ()
    for t in tl.static_range(S):
        acc = tl.zeros(new[0][0].shape, tl.float32)
        for q in tl.static_range(FY):
            for s in tl.static_range(4):
                if WA[k * FY + q][s] != 0.0:
                    acc += WA[k * FY + q][s] * win[s][q][t]
            if WA[k * FY + q][4] != 0.0:
                acc += WA[k * FY + q][4] * new[q][t]
        out = out + (acc,)
    return phases.interleaved(out)


@triton.jit
def upsample_phases_adjoint_kernel(G, Y, C, H, W, HO, WO, g_strides, y_strides,
                                   WY: tl.constexpr, WX: tl.constexpr, FY: tl.constexpr, FX: tl.constexpr,
                                   MX: tl.constexpr, VEC: tl.constexpr, OFF64: tl.constexpr, BW: tl.constexpr,
                                   SEG: tl.constexpr, S: tl.constexpr):
    """The adjoint (transpose) of ``phases_kernel`` upsampling in torch's modes: Y (H x W)
    from the gradient G (HO = FY H x WO = FX W). Source pixel (i, j) gathers the output pixels that read it:
    along each axis the FX outputs of the five source positions around it (a strided
    correlation), with the replicated borders' clamped taps folded into the edge pixels.
    ``WY``/``WX``: ``adjoint_weights``; MX: the source positions a tap reaches along x
    (the forward plan's M); VEC: the gradient elements of a 16-byte load.

    The same row slide as the forward: a program owns S BW source columns (S neighbouring
    ones a thread) of SEG source rows; each step reads the FY gradient rows of one new
    source position, each thread its FX (S + 2 MX) columns of each as a few vector loads
    (a gradient element is loaded by its own thread and by a neighbour's halo, not once for
    each of the five source columns it feeds), resamples them along x with constant
    weights, keeps them for the next four steps, and writes each thread's S columns of
    source row i as one vector."""
    sgb, sgc, sgh, sgw = g_strides
    syb, syc, syh, syw = y_strides
    b, c, r0, j0 = tile_origin(tl.program_id(0), C, H, W, SEG, S * BW)
    first = j0 + S * tl.arange(0, BW)  # each thread's first source column
    g_cols = (_adjoint_blocks(FX * (first - MX), FX * MX, VEC) + _adjoint_blocks(FX * first, FX * S, VEC)
              + _adjoint_blocks(FX * (first + S), FX * MX, VEC))
    g_offs = ()
    g_mask = ()
    for o in tl.static_range(len(g_cols)):
        g_offs = g_offs + (offset(g_cols[o], sgw, OFF64),)
        g_mask = g_mask + ((g_cols[o] >= 0) & (g_cols[o] < WO),)
    at_first = j0 == 0
    at_last = j0 + S * BW >= W
    base = G + b * sgb + c * sgc
    y_cols = first[:, None] + tl.arange(0, S)[None, :]
    out = Y + b * syb + c * syc + offset(y_cols, syw, OFF64)
    # the window's rows (source positions r0 - 2 .. r0 + 1) come from the loop's first four
    # steps, which store nothing: one copy of the row code, not five
    zeros = ()
    for _ in tl.static_range(S):
        zeros = zeros + (tl.zeros((BW,), tl.float32),)
    rows = ()
    for _ in tl.static_range(FY):
        rows = rows + (zeros,)
    win = (rows, rows, rows, rows)
    for step in range(-4, tl.minimum(SEG, H - r0)):
        i = r0 + step  # (a tensor, also in the interpreter, whose loop indices are ints: ``offset`` casts it)
        new = _adjoint_rows(base, i + 2, HO, sgh, g_offs, g_mask, first, W, at_first, at_last, WX, FX, MX, S, FY,
                            OFF64)
        if i == 0:
            y = _adjoint_column(win, new, WY, 1, FY, S)
        elif i == H - 1:
            y = _adjoint_column(win, new, WY, 2, FY, S)
        else:
            y = _adjoint_column(win, new, WY, 0, FY, S)
        pixels.store(out + offset(i, syh, OFF64), y, (y_cols < W) & (step >= 0))
        win = (win[1], win[2], win[3], new)




@functools.lru_cache(maxsize=4096)
def adjoint_plan(py, px, planes, H, W, itemsize, strip, off64):
    """The launch of ``upsample_phases_adjoint_kernel`` for the forward's ``PhasePlan``s
    ``py`` (rows) and ``px`` (columns): the gradient of ``planes`` H x W source planes, read
    in vectors of 16 bytes of ``itemsize``, in the strip ``strip`` (``phases.strip_tile``)."""
    threads, seg, warps, s = strip
    meta = Meta(WY=adjoint_weights(py), WX=adjoint_weights(px), FY=py.F, FX=px.F, MX=px.M,
                VEC=max(1, 16 // itemsize), OFF64=off64)
    return Plan(meta, tile_config(BW=threads, SEG=seg, S=s, num_warps=warps),
                (programs(planes, H, W, seg, s * threads),))


def launch_adjoint(g, y, pair):
    """The gradient ``y`` (B, C, H, W) of ``phases_kernel`` upsampling from ``g`` (B, C, fy H,
    fx W) by the ``PhasePlan`` pair ``pair`` (rows, columns): D = 1, factors in
    ADJOINT_FACTORS, torch's clamping modes (ADJOINT_MODES), H and W at least 2."""
    B, C, H, W = y.shape
    py, px = pair
    strip = phases.strip_tile(g, H, -(-W // tiles.ADJOINT_STRIP[3]), tiles.ADJOINT_STRIP)
    plan = adjoint_plan(py, px, B * C, H, W, g.element_size(), strip, needs_int64(g, y))
    launch_kernel(upsample_phases_adjoint_kernel, plan.grid, (g, y, C, H, W, *g.shape[-2:], g.stride(), y.stride()),
                  plan.meta, g, plan.tile)
