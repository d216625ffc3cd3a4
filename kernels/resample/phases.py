"""``phases_kernel``: resampling by a ratio F / D per axis with constant phase weights, a
strip of columns sliding down the rows, and its launch plan (``phases_plan``)."""
import dataclasses
import functools

import triton
import triton.language as tl

from ..core import pixels, pointwise
from ..core.launch import Meta, Plan, launch as launch_kernel, tile_config
from ..core.tiling import interpreted, needs_int64, next_pow2, offset, pow2_at_least, programs, tile_origin
from . import tiles


# ``phases_kernel`` resamples an axis by F outputs per D source pixels; F is one of these
# (the output phases interleave with tl.join: powers of two), D any that MAX_SLOTS allows.
GROW_FACTORS = (1, 2, 4)
# Blocks of source pixels a lane reads on each side (2 M + 1 in all; doubling with
# Lanczos-3 needs 3), and source pixels a lane reads a row (the blocks times D, padded to
# a power of two): wider kernels (Lanczos shrinking by 4: 28, a 35 s compile offline and
# 224 registers) take the general kernel.
MAX_REACH, MAX_SLOTS = 3, 20


@triton.jit
def interleaved(ph):
    """N vectors of BW values (N a power of two) -> a (BW, N) block, vector o in column o:
    an output row in memory order, each thread holding N neighbouring values, so that its
    store is one contiguous (vector) store. Joining vectors o and o + N / 2 and repeating
    on the halves interleaves them into that order without a permutation (a 1-D reshape
    went through shared memory and scalar stores)."""
    level = (ph[0][:, None],) if len(ph) == 1 else ph
    for _ in tl.static_range(4):  # (log2 N <= 4 levels)
        if len(level) > 1:
            joined = ()
            for o in tl.static_range(len(level) // 2):
                j = tl.join(level[o], level[o + len(level) // 2])
                joined = joined + (tl.reshape(j, (j.shape[0], j.numel // j.shape[0])),)
            level = joined
    return level[0]


@triton.jit
def columns_of(block, S: tl.constexpr):
    """A (BW, S) block -> its S columns as (BW, 1) blocks, in order (the inverse of
    ``interleaved``: splitting off even and odd columns and keeping the evens first)."""
    level = (block,)
    for _ in tl.static_range(4):  # (log2 S <= 4 levels)
        if len(level) < S:
            evens = ()
            odds = ()
            for t in tl.static_range(len(level)):
                a, b = tl.split(tl.reshape(level[t], (block.shape[0], level[t].shape[1] // 2, 2)))
                evens = evens + (a,)
                odds = odds + (b,)
            level = evens + odds
    return level


@triton.jit
def _entries(T: tl.constexpr, r: tl.constexpr, s0: tl.constexpr, D: tl.constexpr, DP: tl.constexpr):
    """The entries T[r][s0 .. s0 + D - 1] of a constant table as (1, DP), zero-padded
    to the power of two DP."""
    q = tl.arange(0, DP)[None, :]
    v = tl.zeros((1, DP), tl.float32)
    for i in tl.static_range(D):
        v = tl.where(q == i, T[r][s0 + i], v)
    return v


@triton.jit
def _lane_weights(lanes, n_lanes, T: tl.constexpr, p: tl.constexpr, b: tl.constexpr, E: tl.constexpr,
                  F: tl.constexpr, D: tl.constexpr, DP: tl.constexpr):
    """The (BW, DP) weights of phase p on block b for each lane: ``phase_tables``' interior
    row, or its row for the lanes within E of either edge."""
    w = tl.zeros((lanes.shape[0], DP), tl.float32) + _entries(T, p, b * D, D, DP)
    for e in tl.static_range(E):
        w = tl.where((lanes == e)[:, None], _entries(T, (1 + e) * F + p, b * D, D, DP), w)
        w = tl.where((lanes == n_lanes - 1 - e)[:, None], _entries(T, (1 + E + e) * F + p, b * D, D, DP), w)
    return w


@triton.jit
def _load_rows(base, r0, n: tl.constexpr, H, sxh, offs, OFF64: tl.constexpr):
    """Source rows r0 .. r0 + n - 1 (clamped into the image: their weights are 0 or fold) as
    loaded, one tuple of blocks each (``offs``: ``phases_kernel``'s)."""
    rows = ()
    for q in tl.static_range(n):
        row_ptr = base + offset(tl.minimum(tl.maximum(r0 + q, 0), H - 1), sxh, OFF64)
        blocks = ()
        for i in tl.static_range(len(offs)):
            blocks = blocks + (tl.load(row_ptr + offs[i]),)
        rows = rows + (blocks,)
    return rows


@triton.jit
def _row_phases(raw, wx, c, PRO: tl.constexpr, pro_args, NZ: tl.constexpr, MIXED: tl.constexpr,
                F: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, M: tl.constexpr, S: tl.constexpr,
                CLAMP: tl.constexpr):
    """One source row's horizontal phases, a tuple of S F (BW,) vectors (slot s, phase p at
    s F + p), from its blocks as loaded (``_load_rows``: M blocks of D source columns before
    each thread's S lanes, their S blocks in one load, M after). Slot s's phase p is the
    per-lane weighted sum over blocks s .. s + 2 M (a block no phase weighs is dead code the
    compiler drops). A weight that is 0 in some lanes (``MIXED``) reads nothing there: 0 *
    NaN is NaN; nor do the slots that pad a block of D to DP (they reread its last pixel)."""
    BX: tl.constexpr = 2 * M + 1
    blocks = ()
    for i in tl.static_range(BX):
        vb = pointwise.apply_chain(pixels.to_float(raw[i]), c, PRO, pro_args)
        if DP != D:
            vb = tl.where(tl.arange(0, DP)[None, :] < D, vb, 0.0)
        if i == M:
            blocks = blocks + columns_of(vb, S)
        else:
            blocks = blocks + (vb,)
    out = ()
    for s in tl.static_range(S):
        for p in tl.static_range(F):
            acc = tl.zeros(blocks[0].shape, tl.float32)
            for i in tl.static_range(BX):
                w = wx[(s * F + p) * BX + i]
                if NZ[p][i]:
                    if MIXED[p][i]:
                        acc += tl.where(w != 0.0, w * blocks[s + i], 0.0)
                    else:
                        acc += w * blocks[s + i]
            h = tl.sum(acc, axis=1)
            if CLAMP:
                h = tl.minimum(tl.maximum(h, 0.0), 1.0)
            out = out + (h,)
    return out


@triton.jit
def _column(full, T: tl.constexpr, r: tl.constexpr, o: tl.constexpr, ROWS: tl.constexpr):
    """Column o of the combination of the window's rows with the constants T[r] (zero
    weights skipped when compiling)."""
    acc = tl.zeros(full[0][0].shape, tl.float32)
    for i in tl.static_range(ROWS):
        if T[r][i] != 0.0:
            acc += T[r][i] * full[i][o]
    return acc


@triton.jit
def _edge_column(full, k, n_steps, T: tl.constexpr, q: tl.constexpr, o: tl.constexpr, E: tl.constexpr,
                 F: tl.constexpr, ROWS: tl.constexpr):
    """``_column`` for step k within E of either edge: its row of T, chosen at run time;
    a weight of 0 reads nothing."""
    acc = tl.zeros(full[0][0].shape, tl.float32)
    for i in tl.static_range(ROWS):
        w = T[q][i]
        for e in tl.static_range(E):
            w = tl.where(k == e, T[(1 + e) * F + q][i], w)
            w = tl.where(k == n_steps - 1 - e, T[(1 + E + e) * F + q][i], w)
        acc += tl.where(w != 0.0, w * full[i][o], 0.0)
    return acc


@triton.jit
def phases_kernel(X, Y, C, H, W, HO, WO, x_strides, y_strides,
                  PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                  TY: tl.constexpr, TX: tl.constexpr, NZX: tl.constexpr, MIXX: tl.constexpr,
                  FY: tl.constexpr, FX: tl.constexpr, DY: tl.constexpr, DX: tl.constexpr, DXP: tl.constexpr,
                  MY: tl.constexpr, MX: tl.constexpr, EY: tl.constexpr, EX: tl.constexpr,
                  CLAMP_ROWS: tl.constexpr, OFF64: tl.constexpr, BW: tl.constexpr, SEG: tl.constexpr,
                  S: tl.constexpr, PRE: tl.constexpr):
    """Y (HO x WO) resampled from X (H x W) by a ratio per axis: F outputs per D source
    pixels (n_out / n_in = F / D in lowest terms). Then the weights are constants per
    output phase (``TY``, ``TX``: ``phase_tables``, the float64 reference's, with their own
    rows for the EY / EX lanes and steps nearest each edge, where taps fold or truncate).

    A lane is a block of D source columns and its F output columns; a step a block of D
    source rows and its F output rows. A program owns S BW lanes (S neighbouring lanes a
    thread) of SEG steps of one plane and marches down its steps ("row slide"): each step
    reads the DY new source rows it needs, each once, as contiguous blocks of DX columns
    per lane (DXP loaded: the power of two; their offsets clamped once per program, so no
    index math in the loop), turns each into its FX horizontal phases, and keeps the last
    2 MY + 1 blocks of rows in a loop-carried window; it then writes its FY output rows,
    FX S BW contiguous values each.

    A thread's S lanes (DX = 1, the lane count a multiple of S) read their S source pixels
    a row as one load and the MX blocks on each side as their own (clamped) loads, and
    write S FX contiguous outputs a row as one store: a uint8 thread of one lane loaded
    five bytes and stored two a row for its four outputs, and the instructions per output
    (address, conversion, store) bounded the kernel. With PRE a step loads the next step's
    rows before its sums, so that their latency overlaps the sums and the stores instead of
    stalling each step (the rows cost registers until they are used)."""
    tl.static_assert(S == 1 or DX == 1, "several lanes a thread read single source pixels")
    sxb, sxc, sxh, sxw = x_strides
    syb, syc, syh, syw = y_strides
    BX: tl.constexpr = 2 * MX + 1
    ROWS: tl.constexpr = (2 * MY + 1) * DY
    n_steps = HO // FY
    n_lanes = WO // FX
    b, c, k0, j0 = tile_origin(tl.program_id(0), C, n_steps, n_lanes, SEG, S * BW)
    base = X + b * sxb + c * sxc
    first = j0 + S * tl.arange(0, BW)  # each thread's first lane
    # Block offsets: blocks past the edge read the edge block (their weights are 0, or the
    # edge pixel's own where D = 1): clamping the start keeps a block contiguous, so it is one
    # load; the thread's own S blocks (the middle) are clamped as one (lanes past the last
    # read the last thread's).
    if DXP == DX:
        slots = tl.arange(0, DXP)[None, :]
    else:  # (the padded slots reread the last pixel; a clamped arange would make the loads scalar)
        slots = tl.minimum(tl.arange(0, DXP), DX - 1)[None, :]
    offs = ()
    for i in tl.static_range(BX):
        if i == MX:
            start = tl.minimum(DX * first, W - S * DX)
            offs = offs + (offset(start[:, None] + tl.arange(0, S)[None, :] + slots, sxw, OFF64),)
        else:  # block i's lane, relative to the first: -MX .. -1, then S .. S + MX - 1
            if i < MX:
                lane = first + (i - MX)
            else:
                lane = first + (i - MX + S - 1)
            start = tl.minimum(tl.maximum(DX * lane, 0), W - DX)
            offs = offs + (offset(start[:, None] + slots, sxw, OFF64),)
    wx = ()
    for s in tl.static_range(S):
        for p in tl.static_range(FX):
            for i in tl.static_range(BX):
                wx = wx + (_lane_weights(first + s, n_lanes, TX, p, i, EX, FX, DX, DXP),)
    out_cols = FX * first[:, None] + tl.arange(0, S * FX)[None, :]
    out_offs = offset(out_cols, syw, OFF64)
    out_mask = out_cols < WO
    out_base = Y + b * syb + c * syc
    # the window: source rows DY (k + m) + q for m = -MY .. MY - 1 (the newest block is read
    # by each step)
    above = _load_rows(base, DY * (k0 - MY), ROWS - DY, H, sxh, offs, OFF64)
    win = ()
    for i in tl.static_range(ROWS - DY):
        win = win + (_row_phases(above[i], wx, c, PRO, pro_args, NZX, MIXX, FX, DX, DXP, MX, S, CLAMP_ROWS),)
    if PRE:
        new = _load_rows(base, DY * (k0 + MY), DY, H, sxh, offs, OFF64)
    for k in range(k0, tl.minimum(k0 + SEG, n_steps)):
        if not PRE:
            new = _load_rows(base, DY * (k + MY), DY, H, sxh, offs, OFF64)
        full = win
        for q in tl.static_range(DY):
            full = full + (_row_phases(new[q], wx, c, PRO, pro_args, NZX, MIXX, FX, DX, DXP, MX, S, CLAMP_ROWS),)
        if PRE:  # (past the last step: rows clamped into the image, read and unused)
            new = _load_rows(base, DY * (k + 1 + MY), DY, H, sxh, offs, OFF64)
        edge = (k < EY) | (k >= n_steps - EY)
        for q in tl.static_range(FY):
            y = interleaved(_inner_row(full, TY, q, S * FX, ROWS))
            if EY > 0:
                if edge:  # (a uniform branch: the steps nearest the top and bottom weigh their own way)
                    y = interleaved(_edge_row(full, k, n_steps, TY, q, EY, FY, S * FX, ROWS))
            y = pointwise.apply_epilogue(y, y, b, c, EPI, epi_args)
            # streamed: the upscaled output (4 times the input at x2) would otherwise evict
            # from the L2 the source rows that the next steps read (H200, x2 bicubic float32
            # 0.0431 -> 0.0406 ms, bilinear 0.0395 -> 0.0378; uint8 and the 4K -> 1080p
            # downscale within 1 %)
            pixels.store_streaming(out_base + offset(FY * k + q, syh, OFF64) + out_offs, y, out_mask)
        win = full[DY:]


@triton.jit
def _inner_row(full, T: tl.constexpr, q: tl.constexpr, N: tl.constexpr, ROWS: tl.constexpr):
    """Output row phase q's N columns (a thread's lanes times their phases), inside
    (constant weights T[q])."""
    out = ()
    for o in tl.static_range(N):
        out = out + (_column(full, T, q, o, ROWS),)
    return out


@triton.jit
def _edge_row(full, k, n_steps, T: tl.constexpr, q: tl.constexpr, E: tl.constexpr, FY: tl.constexpr,
              N: tl.constexpr, ROWS: tl.constexpr):
    """``_inner_row`` for a step within E of either edge."""
    out = ()
    for o in tl.static_range(N):
        out = out + (_edge_column(full, k, n_steps, T, q, o, E, FY, ROWS),)
    return out




def strip_tile(x, steps, lanes, strip):
    """The GPU tile ``strip`` of a row-slide program on ``x`` ((threads, steps, warps, ...)),
    in the interpreter with one strip of every step per plane where it fits (the rest of
    the tile as on the GPU)."""
    if interpreted(x):
        return (pow2_at_least(lanes, 16, 128), steps, 1, *strip[3:])
    return strip


def _lanes_per_thread(itemsize, px, n_lanes, load_bytes):
    """S, the lanes a thread of ``phases_kernel`` takes: as many single source pixels (DX
    = 1) of ``itemsize`` bytes as fill ``load_bytes``, halved until S divides the lane
    count (a thread's lanes are then all inside or all past the end); else 1."""
    s = max(1, load_bytes // itemsize) if px.D == 1 else 1
    while n_lanes % s:
        s //= 2
    return s


@dataclasses.dataclass(frozen=True)
class PhasePlan:
    """One axis of ``phases_kernel``: F outputs per source pixel or one per D; blocks of D
    source pixels a lane reads on each side (M); lanes or steps at each edge with their own
    weights (E); the weight table (rows: the F interior phases, then F per edge lane from
    the first, then F per edge lane from the last; entries over the 2 M + 1 blocks of D);
    for the columns, per phase and block, whether any weight is nonzero and whether some
    are zero (``phase_tables`` in ``imgfilters/ops/resample.py`` builds them). Hashed
    once: the launch plans are memoised by it (``phases_plan``, ``adjoint_plan``), and its
    tables take microseconds to hash."""
    F: int
    D: int
    M: int
    E: int
    table: tuple
    nonzero: tuple
    mixed: tuple

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.F, self.D, self.M, self.E, self.table, self.nonzero,
                                                self.mixed)))

    def __hash__(self):
        return self._hash


@functools.lru_cache(maxsize=4096)
def phases_plan(py, px, planes, HO, WO, itemsize, strip, clamp, off64):
    """The launch of ``phases_kernel`` for ``planes`` planes resampled to HO x WO by the
    ``PhasePlan``s ``py`` (rows) and ``px`` (columns), source pixels of ``itemsize``
    bytes, in the strip ``strip`` (``strip_tile``)."""
    n_steps, n_lanes = HO // py.F, WO // px.F
    bw, seg, warps, load_bytes, pre = strip
    s = _lanes_per_thread(itemsize, px, n_lanes, load_bytes)
    meta = Meta(TY=py.table, TX=px.table, NZX=px.nonzero, MIXX=px.mixed, FY=py.F, FX=px.F, DY=py.D, DX=px.D,
                DXP=next_pow2(px.D), MY=py.M, MX=px.M, EY=py.E, EX=px.E, CLAMP_ROWS=clamp, OFF64=off64)
    return Plan(meta, tile_config(BW=bw, SEG=seg, S=s, PRE=pre, num_warps=warps),
                (programs(planes, n_steps, n_lanes, seg, s * bw),))


def launch_phases(x, y, phases, clamp_rows, pro, epi):
    """``launch`` for integer factors (``PhasePlan`` rows, columns)."""
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    py, px = phases
    strip = strip_tile(x, HO // py.F, WO // px.F, tiles.STRIPS[py.D])
    plan = phases_plan(py, px, B * C, HO, WO, x.element_size(), strip,
                       bool(clamp_rows), needs_int64(x, y))
    args = (x, y, C, H, W, HO, WO, x.stride(), y.stride(), pro[0], pro[1], epi[0], epi[1])
    launch_kernel(phases_kernel, plan.grid, args, plan.meta, x, plan.tile)
