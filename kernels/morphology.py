"""Morphology: one erosion or dilation pass by a structuring element, in one to a few launches.

A pass computes ``Y[i, j] = min (max for dilation) over mask[u, v] of X~[i + u - ay,
j + v - ax]`` (``X~``: X extended by the border; the default border, "never wins", is the
constant +inf for erosion and -inf for dilation). The host (``plan``) picks one of three
shapes of work from the mask:

- **Rectangles** (an all-True mask): up to ``LANES_HEIGHT`` x ``LANES_WIDTH`` one launch
  of ``lanes_kernel``, no buffer: a program's lanes hold S adjacent output columns each
  and march down the rows; each input row is loaded once a lane (S + kw - 1 columns), its
  S row-window minima taken in registers by van Herk over the tuple (``_window_mins``:
  prefix minima of segments of ``kw`` and suffix minima back from each segment's end,
  about 3 min/max an output whatever ``kw``) and kept for the ``kh`` output rows that use
  them. Larger rectangles are separable: the row pass (``lanes_kernel`` with one row)
  into a buffer of the image's dtype (float32 after a prologue), then ``march_kernel``
  over it: a program owns 16 output rows of 128 columns, each thread a column; it reads
  the ``16 + kh - 1`` rows once into a tuple of registers and takes the window minima
  there by the same van Herk. Windows longer than 31 (the rectangles OpenCV's rule makes
  for iterations) take ``row_kernel`` / ``column_kernel`` instead: van Herk by two
  segmented ``tl.associative_scan`` s of a tile (a window is the suffix minimum of its
  first position's segment and the prefix minimum of the next segment up to its last
  position), whose tile of ``BW`` positions gives ``BW - k + 1`` outputs. The default
  border ("never wins") is the replicated one for a rectangle, which holds its anchor and
  so the edge pixels replication reads: no select a load. An opening or closing of float
  pixels by a rectangle up to ``PAIR_SIDE`` with that border is one launch of
  ``pair_kernel``: both passes in the lanes, the first pass's image never stored.
- **Direct** (other masks of at most ``DIRECT_TAPS`` positions: 5 x 5 ellipses, crosses):
  one launch of ``taps_kernel`` on the image, each output the min over its taps; interior
  tiles unroll the taps as constants (row pointers once, columns as immediate offsets).
- **General masks** (more than ``DIRECT_TAPS`` positions, not all True: ellipses, crosses,
  any mask up to 63 x 63): each mask row is a set of runs of True. A row pass computes,
  for each distinct run length ``w``, the min over ``w`` columns starting at each column
  from ``-ax`` to ``W + kw - 1 - ax`` into one plane of a stacked buffer (one launch of
  ``runs_kernel`` for all the lengths up to ``MARCH_WIDTH``: the image read once; longer
  ones a launch a length); then one ``taps_kernel`` launch takes each output's min over
  the runs (a tap per run: row ``i + u - ay`` of the plane of its length, column ``j +
  a``). A 15 x 15 ellipse has 5 distinct lengths and 15 runs: one read of the image and 5
  planes written, then 15 loads and 14 min/max an output instead of its 169 positions.

Loads (``_load``, ``SOURCE``): integer images and buffers without a prologue load their
stored integers as int32 (a min or max one integer instruction), stored as they are when
nothing follows, else converted to unit scale once after the min (``_unit``); the rest in
unit scale through the prologue. Tiles whose reads all lie inside the image (most of
them) take plain offsets: no border remapping, one address add a tap.

The finishing (``_finish``): ``SUB`` subtracts the pass's result from, or subtracts from
it, a second image ``Z`` (the compound operations: gradient, tophat, blackhat), then the
epilogue and the typed store. NaN: every min/max propagates NaN (``tl.PropagateNan``):
an output whose window holds a NaN is NaN, whatever the order of the taps.

Costs per output pixel, counted in the sm_90a SASS that Triton 3.8 compiles offline
(``scripts/offline_sass.py``; PERFORMANCE.md, "The lanes", has the table and the H100's
times): the lanes' row loop 17 instructions an output for a 3 x 3 rectangle on uint8 (S =
8), 24 for 5 x 5, 30 for 5 x 5 float32 (S = 4, memory-bound: 200 MB a pass); a direct
pass about 23 for nine taps, 40 with its store.

In the interpreter (which pays per operation and per program) every kernel takes one
tile per plane.
"""
import functools
import math

import triton
import triton.language as tl

from .core import borders, neighbourhood
from .core.launch import launch as launch_kernel, tile_config
from .core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin
from .morphology_common import _NAN, _finish, _index, _load, _pick

MAX_SIDE = 63  # a mask's sides
MAX_RECT = 1023  # an all-True mask after OpenCV's enlargement for iterations
DIRECT_TAPS = 25  # masks of at most this many positions: one launch reading the image
MARCH_HEIGHT = 31  # column windows up to this: ``march_kernel``; taller: the scans
MARCH_WIDTH = 31  # row windows up to this: ``lanes_kernel``; wider: the scans
# GPU tiles, 4 warps each: the direct taps' (rows, columns); the van Herk passes' (elements
# a tile, the fewest positions along the scanned axis: at least twice the window); the
# column march's (output rows, columns: one column a thread); the lanes' (lanes, outputs a
# lane, rows a program) for float32 and for stored integers (``lanes_raw``), and the same of
# a mask's row runs (``runs``). From the sm_90a SASS and the H100 (PERFORMANCE.md).
TILES = dict(taps=(32, 64), row_scan=(1024, 128), column_scan=(2048, 64), march=(16, 128), lanes=(128, 4, 32),
             lanes_raw=(128, 8, 16), pair=(128, 4, 16), runs=(128, 4, 32))
# Rectangles up to LANES_HEIGHT x LANES_WIDTH: one launch of ``lanes_kernel`` (each output
# takes the min of HEIGHT rows' minima: tall windows want the column march's van Herk)
LANES_HEIGHT = 7
LANES_WIDTH = 15
# Openings and closings of float pixels by rectangles up to PAIR_SIDE a side with the
# default border: one launch of ``pair_kernel`` (stored integers, whose passes are
# compute-bound, run faster as two ``lanes_kernel`` passes: PERFORMANCE.md)
PAIR_SIDE = 5
# pair_kernel's registers a thread: four programs of 128 threads an SM (the compiler's 138
# fit three: the opening 5x5 float32 on 4K RGB took 0.144 ms, capped 0.126, on an H100)
PAIR_REGISTERS = 128

@triton.jit
def _seg_min(av, aseg, bv, bseg):
    """Segmented minimum: the combine of a scan that restarts where the segment changes."""
    return tl.where(aseg == bseg, tl.minimum(av, bv, propagate_nan=_NAN), bv), bseg


@triton.jit
def _seg_max(av, aseg, bv, bseg):
    return tl.where(aseg == bseg, tl.maximum(av, bv, propagate_nan=_NAN), bv), bseg


@triton.jit
def _van_herk(first, last, seg_first, seg_last, AXIS: tl.constexpr, DILATE: tl.constexpr):
    """Window minima (maxima) of ``k`` positions along AXIS: ``first`` holds the values at
    each window's first position, ``last`` at its last (``k - 1`` further), ``seg_*`` their
    segment numbers (position // k along the tile): the reversed segmented scan of
    ``first`` meets the forward one of ``last``."""
    if DILATE:
        suffix, _ = tl.associative_scan((first, seg_first), AXIS, _seg_max, reverse=True)
        prefix, _ = tl.associative_scan((last, seg_last), AXIS, _seg_max)
    else:
        suffix, _ = tl.associative_scan((first, seg_first), AXIS, _seg_min, reverse=True)
        prefix, _ = tl.associative_scan((last, seg_last), AXIS, _seg_min)
    return _pick(suffix, prefix, DILATE)


@triton.jit
def _line(x_base, fixed_off, first, n, stride, border_value, c, PRO: tl.constexpr, pro_args,
          LENGTH: tl.constexpr, AXIS: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
          DILATE: tl.constexpr, SOURCE: tl.constexpr, INTERIOR: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """The min over ``LENGTH`` positions along AXIS from ``first`` (indices along that axis
    of an axis of ``n`` pixels, ``stride`` apart; ``fixed_off`` the offsets of the other
    axis) by van Herk's two scans of the tile: ``first`` counts tile positions, LENGTH of
    which make a segment."""
    last = first + (LENGTH - 1)
    if INTERIOR:  # the indices as they are, no select (a None from a helper fails to compile on Triton 3.6)
        x1 = _load(x_base + fixed_off + offset(first, stride, OFF64), None, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
        x2 = _load(x_base + fixed_off + offset(last, stride, OFF64), None, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
    else:
        i1, in1 = _index(first, n, BORDER)
        i2, in2 = _index(last, n, BORDER)
        x1 = _load(x_base + fixed_off + offset(i1, stride, OFF64), in1, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
        x2 = _load(x_base + fixed_off + offset(i2, stride, OFF64), in2, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
    if AXIS == 1:
        t = tl.arange(0, BW)[None, :]
    else:
        t = tl.arange(0, BH)[:, None]
    return _van_herk(x1, x2, tl.broadcast_to(t // LENGTH, (BH, BW)), tl.broadcast_to((t + (LENGTH - 1)) // LENGTH,
                                                                                      (BH, BW)), AXIS, DILATE)


@triton.jit(do_not_specialize=["C", "H", "W", "WO", "S0", "sxb", "sxc", "sxh", "syb", "syc", "syh"])
def row_kernel(X, Y, C, H, W, WO, S0, sxb, sxc, sxh, syb, syc, syh, border_value,
               PRO: tl.constexpr, pro_args, WIDTH: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
               BORDER: tl.constexpr, OFF64: tl.constexpr, DILATE: tl.constexpr, SOURCE: tl.constexpr,
               BH: tl.constexpr, BW: tl.constexpr, STEP: tl.constexpr):
    """Y[b, c, i, j] = min over t < WIDTH of X~[b, c, i, j + S0 + t] for j < WO (columns
    through the border, rows i < H as they are), for windows wider than ``MARCH_WIDTH``, by
    van Herk's scans: a program's tile is BH rows by BW positions, STEP = BW - WIDTH + 1 of
    which are outputs. Tiles whose columns all lie inside the image read them without the
    border's remapping."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, WO, BH, STEP)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    t = tl.arange(0, BW)[None, :]
    row_off = offset(tl.minimum(rows, H - 1), sxh, OFF64)
    first = w0 + S0 + t
    if (w0 + S0 >= 0) & (w0 + S0 + BW + WIDTH - 1 <= W):
        y = _line(x_base, row_off, first, W, SXW, border_value, c, PRO, pro_args, WIDTH, 1, BORDER, OFF64, DILATE,
                  SOURCE, True, BH, BW)
    else:
        y = _line(x_base, row_off, first, W, SXW, border_value, c, PRO, pro_args, WIDTH, 1, BORDER, OFF64, DILATE,
                  SOURCE, False, BH, BW)
    ok = (rows < H) & (t < STEP) & (w0 + t < WO)
    y_ptrs = Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(w0 + t, SYW, OFF64)
    _finish(y, X.dtype.element_ty, SOURCE, y_ptrs, y_ptrs, ok, b, c, PRO, pro_args, (), (), 0, False, 0)


@triton.jit(do_not_specialize=["C", "H", "W", "S0", "sxb", "sxc", "sxh", "syb", "syc", "syh", "szb", "szc", "szh"])
def column_kernel(X, Y, Z, C, H, W, S0, sxb, sxc, sxh, syb, syc, syh, szb, szc, szh, border_value,
                  PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, HEIGHT: tl.constexpr,
                  SXW: tl.constexpr, SYW: tl.constexpr, SZW: tl.constexpr, BORDER: tl.constexpr,
                  OFF64: tl.constexpr, DILATE: tl.constexpr, SOURCE: tl.constexpr,
                  SUB: tl.constexpr, Z_INPUT: tl.constexpr, LEVELS: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                  STEP: tl.constexpr):
    """Y[b, c, i, j] = finish(min over t < HEIGHT of X~[b, c, i + S0 + t, j]) (rows through
    the border), for windows taller than ``MARCH_HEIGHT``: ``row_kernel`` along the other
    axis, STEP output rows a tile."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, STEP, BW)
    x_base = X + b * sxb + c * sxc
    t = tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    col_off = offset(tl.minimum(cols, W - 1), SXW, OFF64)
    first = h0 + S0 + t
    if (h0 + S0 >= 0) & (h0 + S0 + BH + HEIGHT - 1 <= H):
        y = _line(x_base, col_off, first, H, sxh, border_value, c, PRO, pro_args, HEIGHT, 0, BORDER, OFF64, DILATE,
                  SOURCE, True, BH, BW)
    else:
        y = _line(x_base, col_off, first, H, sxh, border_value, c, PRO, pro_args, HEIGHT, 0, BORDER, OFF64, DILATE,
                  SOURCE, False, BH, BW)
    out_rows = h0 + t
    ok = (t < STEP) & (out_rows < H) & (cols < W)
    _finish(y, X.dtype.element_ty, SOURCE,
            Y + b * syb + c * syc + offset(out_rows, syh, OFF64) + offset(cols, SYW, OFF64),
            Z + b * szb + c * szc + offset(out_rows, szh, OFF64) + offset(cols, SZW, OFF64), ok, b, c, PRO, pro_args,
            EPI, epi_args, SUB, Z_INPUT, LEVELS)


@triton.jit
def _window_mins(vals, K: tl.constexpr, R: tl.constexpr, DILATE: tl.constexpr):
    """The mins (maxes) of the R windows ``vals[o:o + K]`` of a tuple of ``R + K - 1`` values
    held by each thread, as a tuple: van Herk over the tuple (prefix minima of segments of K
    from index 0, suffix minima back from each segment's end; a window is a suffix and the
    next segment's prefix), about 3 min/max an output whatever K."""
    L: tl.constexpr = R + K - 1
    pre = ()
    for j in tl.static_range(L):
        if j % K == 0:
            pre = pre + (vals[j],)
        else:
            pre = pre + (_pick(pre[j - 1], vals[j], DILATE),)
    rsuf = ()  # the suffix minima from the end: rsuf[m] is index L - 1 - m's
    for m in tl.static_range(L):
        if (L - 1 - m) % K == K - 1 or m == 0:
            rsuf = rsuf + (vals[L - 1 - m],)
        else:
            rsuf = rsuf + (_pick(rsuf[m - 1], vals[L - 1 - m], DILATE),)
    out = ()
    for o in tl.static_range(R):
        if o % K == 0:
            out = out + (rsuf[L - 1 - o],)
        else:
            out = out + (_pick(rsuf[L - 1 - o], pre[o + K - 1], DILATE),)
    return out


@triton.jit
def _march_rows(x_base, col_off, first, sxh, border_value, c, PRO: tl.constexpr, pro_args, HEIGHT: tl.constexpr,
                BORDER: tl.constexpr, OFF64: tl.constexpr, DILATE: tl.constexpr,
                SOURCE: tl.constexpr, R: tl.constexpr):
    """``march_kernel``'s R window minima from rows ``first`` .. ``first + R + HEIGHT - 2``
    (all inside the image)."""
    vals = ()
    ptrs = x_base + offset(first, sxh, OFF64) + col_off
    for _ in tl.static_range(R + HEIGHT - 1):
        vals = vals + (_load(ptrs, None, border_value, c, PRO, pro_args, SOURCE, BORDER),)
        ptrs += sxh
    return _window_mins(vals, HEIGHT, R, DILATE)


@triton.jit(do_not_specialize=["C", "H", "W", "S0", "sxb", "sxc", "sxh", "syb", "syc", "syh", "szb", "szc", "szh"])
def march_kernel(X, Y, Z, C, H, W, S0, sxb, sxc, sxh, syb, syc, syh, szb, szc, szh, border_value,
                 PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, HEIGHT: tl.constexpr,
                 SXW: tl.constexpr, SYW: tl.constexpr, SZW: tl.constexpr, BORDER: tl.constexpr,
                 OFF64: tl.constexpr, DILATE: tl.constexpr, SOURCE: tl.constexpr, SUB: tl.constexpr,
                 Z_INPUT: tl.constexpr, LEVELS: tl.constexpr, R: tl.constexpr, BW: tl.constexpr):
    """Y = finish(min over the column window of HEIGHT rows from S0 of X~), for HEIGHT up
    to ``MARCH_HEIGHT``: the column pass of a separable rectangle, or a whole one-column
    rectangle. A program owns R output rows of BW columns, each thread a column of them:
    it reads the R + HEIGHT - 1 input rows once (immediate offsets of one pointer) into a
    tuple of registers and takes the windows' minima there (``_window_mins``): about (R +
    HEIGHT - 1) / R loads and 3 min/max an output. Tiles at the image's top and bottom
    take the window's rows in a run-time loop through the border instead (small code: the
    unrolled march is compiled once)."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, R, BW)
    x_base = X + b * sxb + c * sxc
    cols = w0 + tl.arange(0, BW)
    col_off = offset(tl.minimum(cols, W - 1), SXW, OFF64)
    if (h0 + S0 >= 0) & (h0 + S0 + R + HEIGHT - 1 <= H):
        out = _march_rows(x_base, col_off, h0 + S0, sxh, border_value, c, PRO, pro_args, HEIGHT, BORDER, OFF64,
                          DILATE, SOURCE, R)
        for o in tl.static_range(R):
            row = h0 + o
            _finish(out[o], X.dtype.element_ty, SOURCE, Y + b * syb + c * syc + offset(row, syh, OFF64)
                    + offset(cols, SYW, OFF64), Z + b * szb + c * szc + offset(row, szh, OFF64)
                    + offset(cols, SZW, OFF64), (cols < W) & (row < H), b, c, PRO, pro_args, EPI, epi_args, SUB,
                    Z_INPUT, LEVELS)
    else:  # tiles at the image's top and bottom: the window's rows in a run-time loop, through the border
        rows = h0 + tl.arange(0, R)[:, None]
        cols2 = cols[None, :]
        col_off2 = col_off[None, :]
        y = _load(x_base + offset(borders.remap(rows + S0, H, BORDER), sxh, OFF64) + col_off2,
                  borders.inside(rows + S0, H), border_value, c, PRO, pro_args, SOURCE, BORDER)
        for k in range(1, HEIGHT):
            rr = rows + S0 + k
            y = _pick(y, _load(x_base + offset(borders.remap(rr, H, BORDER), sxh, OFF64) + col_off2,
                               borders.inside(rr, H), border_value, c, PRO, pro_args, SOURCE, BORDER), DILATE)
        _finish(y, X.dtype.element_ty, SOURCE, Y + b * syb + c * syc + offset(rows, syh, OFF64)
                + offset(cols2, SYW, OFF64), Z + b * szb + c * szc + offset(rows, szh, OFF64)
                + offset(cols2, SZW, OFF64), (cols2 < W) & (rows < H), b, c, PRO, pro_args, EPI, epi_args, SUB, Z_INPUT,
                LEVELS)


@triton.jit
def _stack_mins(rows, N: tl.constexpr, HEIGHT: tl.constexpr, DILATE: tl.constexpr):
    """The mins (maxes) down HEIGHT rows of N values held as one tuple (row u at u * N)."""
    out = ()
    for t in tl.static_range(N):
        y = rows[t]
        for u in tl.static_range(1, HEIGHT):
            y = _pick(y, rows[u * N + t], DILATE)
        out = out + (y,)
    return out


@triton.jit
def _store_lanes(vals, in_dtype: tl.constexpr, SOURCE: tl.constexpr, y_row, z_row, lanes, WO, SYW: tl.constexpr,
                 SZW: tl.constexpr, OFF64: tl.constexpr, b, c, PRO: tl.constexpr, pro_args, EPI: tl.constexpr,
                 epi_args, SUB: tl.constexpr, Z_INPUT: tl.constexpr, LEVELS: tl.constexpr):
    """Finish and store a lane's S = len(vals) adjacent outputs of one row (columns from
    ``lanes``, those before ``WO``)."""
    for s in tl.static_range(len(vals)):
        cols = lanes + s
        _finish(vals[s], in_dtype, SOURCE, y_row + offset(cols, SYW, OFF64), z_row + offset(cols, SZW, OFF64),
                cols < WO, b, c, PRO, pro_args, EPI, epi_args, SUB, Z_INPUT, LEVELS)


@triton.jit
def _lane_row(x_base, r, H, col_offs, col_ins, sxh, border_value, c, PRO: tl.constexpr, pro_args,
              SOURCE: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr):
    """Input row ``r``'s values at a lane's columns (``col_offs``, remapped), through the
    border."""
    row_ptr = x_base + offset(borders.remap_within(r, H, BORDER, NEAR), sxh, OFF64)
    row_in = borders.inside(r, H)
    vals = ()
    for d in tl.static_range(len(col_offs)):
        vals = vals + (_load(row_ptr + col_offs[d], row_in & col_ins[d], border_value, c, PRO, pro_args, SOURCE,
                             BORDER),)
    return vals


@triton.jit(do_not_specialize=["C", "H", "W", "WO", "S0", "SX0", "sxb", "sxc", "sxh", "syb", "syc", "syh", "szb",
                               "szc", "szh"])
def lanes_kernel(X, Y, Z, C, H, W, WO, S0, SX0, sxb, sxc, sxh, syb, syc, syh, szb, szc, szh, border_value,
                 PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, HEIGHT: tl.constexpr, KW: tl.constexpr,
                 SXW: tl.constexpr, SYW: tl.constexpr, SZW: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
                 OFF64: tl.constexpr, DILATE: tl.constexpr, SOURCE: tl.constexpr, SUB: tl.constexpr,
                 Z_INPUT: tl.constexpr, LEVELS: tl.constexpr, BW: tl.constexpr, S: tl.constexpr, SEG: tl.constexpr):
    """Y = finish(min over the HEIGHT x KW rectangle at (S0, SX0) of X~) at output columns
    j < WO (the row pass of wider rectangles and of masks' runs: HEIGHT = 1, WO past W for
    a runs buffer): rectangles up to ``LANES_HEIGHT`` x ``LANES_WIDTH`` in one launch. A
    program's BW lanes hold S adjacent output columns each and march down SEG output rows
    (the median's sorted columns' scheme). Each output row loads one input row's S + KW - 1
    columns at the lane (the next row's a row ahead: its latency passes while this row is
    reduced), takes its S row-window minima over KW columns (``_window_mins``) and keeps
    them for the HEIGHT output rows that use them; an output is the min of its HEIGHT
    rows' minima. Per output: (S + KW - 1) / S loads, about 3 + HEIGHT - 1 min/max, one
    store; the border's remapping once a program (columns) and once a row."""
    N: tl.constexpr = S + KW - 1  # the columns a lane reads
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, WO, SEG, BW * S)
    x_base = X + b * sxb + c * sxc
    lanes = w0 + S * tl.arange(0, BW)  # a lane's first output column
    col_offs, col_ins = neighbourhood.columns(lanes + SX0, N, W, SXW, BORDER, NEAR, OFF64)
    kept = ()  # the row minima of input rows o + S0 .. o + S0 + HEIGHT - 2: row u's S at u * S
    for u in tl.static_range(HEIGHT - 1):
        kept = kept + _window_mins(_lane_row(x_base, h0 + S0 + u, H, col_offs, col_ins, sxh, border_value, c, PRO,
                                             pro_args, SOURCE, BORDER, NEAR, OFF64), KW, S, DILATE)
    ahead = _lane_row(x_base, h0 + S0 + HEIGHT - 1, H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args,
                      SOURCE, BORDER, NEAR, OFF64)
    for o in range(h0, tl.minimum(h0 + SEG, H)):
        window = kept + _window_mins(ahead, KW, S, DILATE)
        ahead = _lane_row(x_base, o + S0 + HEIGHT, H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args,
                          SOURCE, BORDER, NEAR, OFF64)
        _store_lanes(_stack_mins(window, S, HEIGHT, DILATE), X.dtype.element_ty, SOURCE, Y + b * syb + c * syc
                     + offset(o, syh, OFF64), Z + b * szb + c * szc + offset(o, szh, OFF64), lanes, WO, SYW, SZW,
                     OFF64, b, c, PRO, pro_args, EPI, epi_args, SUB, Z_INPUT, LEVELS)
        kept = neighbourhood.drop_row(window, S)



@triton.jit(do_not_specialize=["C", "H", "W", "WO", "SX0", "sxb", "sxc", "sxh", "syd", "syb", "syc", "syh"])
def runs_kernel(X, Y, C, H, W, WO, SX0, sxb, sxc, sxh, syd, syb, syc, syh, border_value, PRO: tl.constexpr,
                pro_args, LENGTHS: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                NEAR: tl.constexpr, OFF64: tl.constexpr, DILATE: tl.constexpr, SOURCE: tl.constexpr,
                BW: tl.constexpr, S: tl.constexpr, SEG: tl.constexpr):
    """Y[d, ..., j] = min over LENGTHS[d] columns of X~ from column j + SX0, for j < WO and
    every d: the row pass of a mask's runs (``launch``'s "runs"), all its lengths in one
    launch. The lanes as ``lanes_kernel``'s with one row: a lane loads its S + max(LENGTHS)
    - 1 columns of a row once (the next row's a row ahead) and takes every length's S
    window minima from them (``_window_mins``, about 3 min/max an output a length)."""
    N: tl.constexpr = S + LENGTHS[len(LENGTHS) - 1] - 1  # the columns a lane reads (LENGTHS ascending)
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, WO, SEG, BW * S)
    x_base = X + b * sxb + c * sxc
    lanes = w0 + S * tl.arange(0, BW)
    col_offs, col_ins = neighbourhood.columns(lanes + SX0, N, W, SXW, BORDER, NEAR, OFF64)
    ahead = _lane_row(x_base, h0, H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args, SOURCE, BORDER, NEAR,
                      OFF64)
    for o in range(h0, tl.minimum(h0 + SEG, H)):
        vals = ahead
        ahead = _lane_row(x_base, o + 1, H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args, SOURCE, BORDER,
                          NEAR, OFF64)
        y_row = Y + b * syb + c * syc + offset(o, syh, OFF64)
        for d in tl.static_range(len(LENGTHS)):
            plane = y_row + tl.full((), d, tl.int64) * syd  # (the planes together may pass 2**31)
            _store_lanes(_window_mins(vals, LENGTHS[d], S, DILATE), X.dtype.element_ty, SOURCE, plane, plane, lanes,
                         WO, SYW, SYW, OFF64, b, c, PRO, pro_args, (), (), 0, False, 0)


@triton.jit
def _pair_step(vals, rho, H, kept, e_ins, neutral, KW: tl.constexpr, HEIGHT: tl.constexpr, S: tl.constexpr,
               DILATE: tl.constexpr):
    """``pair_kernel``'s step: an input row's values at a lane (S + 2 KW - 2 columns) in;
    the first pass's row ``rho`` at the lane's S + KW - 1 columns (the min down this row's
    and ``kept``'s KW-column minima; positions outside the image ``neutral``, which never
    wins the second pass), then that row's S minima of the second pass across KW columns.
    Returns (kept moved on a row, those S values)."""
    NE: tl.constexpr = S + KW - 1
    rows = kept + _window_mins(vals, KW, NE, DILATE)
    first = _stack_mins(rows, NE, HEIGHT, DILATE)
    row_in = borders.inside(rho, H)
    masked = ()
    for t in tl.static_range(NE):
        masked = masked + (tl.where(row_in & e_ins[t], first[t], neutral),)
    return neighbourhood.drop_row(rows, NE), _window_mins(masked, KW, S, not DILATE)


@triton.jit(do_not_specialize=["C", "H", "W", "S0", "SX0", "sxb", "sxc", "sxh", "syb", "syc", "syh", "szb", "szc",
                               "szh"])
def pair_kernel(X, Y, Z, C, H, W, S0, SX0, sxb, sxc, sxh, syb, syc, syh, szb, szc, szh, neutral,
                PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, HEIGHT: tl.constexpr, KW: tl.constexpr,
                SXW: tl.constexpr, SYW: tl.constexpr, SZW: tl.constexpr, OFF64: tl.constexpr, DILATE: tl.constexpr,
                SOURCE: tl.constexpr, SUB: tl.constexpr, Z_INPUT: tl.constexpr, BW: tl.constexpr, S: tl.constexpr,
                SEG: tl.constexpr):
    """Y = finish(the opening (DILATE: the closing) by the HEIGHT x KW rectangle at (S0,
    SX0) with the default border) in one launch, the eroded (dilated) image never stored:
    ``lanes_kernel``'s lanes, each marching two passes. A lane reads S + 2 KW - 2 columns
    of each input row; the first pass's rows (S + KW - 1 columns) come from the HEIGHT
    latest rows' KW-column minima, and the second pass's S outputs of a row from the
    HEIGHT latest first-pass rows' minima. The default border of both passes is exact so:
    the first pass's reads replicate the edge (a rectangle holds its anchor), and its
    positions outside the image are the second pass's neutral value, as the second pass's
    window always holds the edge position they would replicate. Float pixels only (the
    images and prologues whose results are not stored levels): no LEVELS at the store.
    The reads replicate the edge, which one clamp (``NEAR``) does at any distance."""
    NEAR: tl.constexpr = True
    NE: tl.constexpr = S + KW - 1  # the first pass's columns a lane needs
    NX: tl.constexpr = NE + KW - 1  # the input columns a lane reads
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, SEG, BW * S)
    x_base = X + b * sxb + c * sxc
    lanes = w0 + S * tl.arange(0, BW)  # a lane's first output column
    col_offs, col_ins = neighbourhood.columns(lanes + 2 * SX0, NX, W, SXW, borders.REPLICATE, NEAR, OFF64)
    e_ins = ()
    for t in tl.static_range(NE):
        e_ins = e_ins + (borders.inside(lanes + SX0 + t, W),)
    r0 = h0 + 2 * S0  # the first input row read: the first pass's row h0 + S0 reads from it
    # The rows before the first output are run-time loops over tuples of a fixed size,
    # first filled with values that leave them before any result is stored: one copy of
    # each step to compile (unrolled, the 2 (HEIGHT - 1) rows before it cost 5x5 float32
    # about 3 s of a cold call's compile).
    fill = tl.zeros((BW,), dtype=tl.float32)
    kept = ()  # the KW-column minima of the HEIGHT - 1 latest input rows: row u's NE at u * NE
    for _ in tl.static_range((HEIGHT - 1) * NE):
        kept = kept + (fill,)
    for r in range(r0, r0 + HEIGHT - 1):
        row = _window_mins(_lane_row(x_base, r, H, col_offs, col_ins, sxh, neutral, c, PRO, pro_args, SOURCE,
                                     borders.REPLICATE, NEAR, OFF64), KW, NE, DILATE)
        kept = neighbourhood.drop_row(kept + row, NE)
    seconds = ()  # the second pass's row minima of first-pass rows o + S0 .. o + S0 + HEIGHT - 2
    for _ in tl.static_range((HEIGHT - 1) * S):
        seconds = seconds + (fill,)
    first_o = h0 - (HEIGHT - 1)  # its HEIGHT - 1 steps only fill ``seconds``
    ahead = _lane_row(x_base, first_o + 2 * S0 + 2 * HEIGHT - 2, H, col_offs, col_ins, sxh, neutral, c, PRO, pro_args,
                      SOURCE, borders.REPLICATE, NEAR, OFF64)
    for o in range(first_o, tl.minimum(h0 + SEG, H)):
        vals = ahead
        ahead = _lane_row(x_base, o + 2 * S0 + 2 * HEIGHT - 1, H, col_offs, col_ins, sxh, neutral, c, PRO, pro_args,
                          SOURCE, borders.REPLICATE, NEAR, OFF64)
        kept, second = _pair_step(vals, o + S0 + HEIGHT - 1, H, kept, e_ins, neutral, KW, HEIGHT, S, DILATE)
        window = seconds + second
        if o >= h0:
            _store_lanes(_stack_mins(window, S, HEIGHT, not DILATE), X.dtype.element_ty, SOURCE,
                         Y + b * syb + c * syc + offset(o, syh, OFF64), Z + b * szb + c * szc + offset(o, szh, OFF64),
                         lanes, W, SYW, SZW, OFF64, b, c, PRO, pro_args, EPI, epi_args, SUB, Z_INPUT, 0)
        seconds = neighbourhood.drop_row(window, S)


@triton.jit
def _table_tap(x_base, ptrs, rows, cols, TAPS, k, H, W, XW, sxd, sxh, border_value, c, PRO: tl.constexpr, pro_args,
               SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr, SOURCE: tl.constexpr,
               STACKED: tl.constexpr, INTERIOR: tl.constexpr):
    """Tap ``k`` of the table (du, dv, d): the image at (rows + du, cols + dv) through the
    border, or plane d of the stacked buffer there (its columns always inside); ``ptrs``
    the tile's pointers when ``INTERIOR``."""
    du = tl.load(TAPS + 3 * k).to(tl.int32)
    dv = tl.load(TAPS + 3 * k + 1).to(tl.int32)
    plane = 0
    if STACKED:  # (the planes together may pass 2**31 where one does not)
        plane = tl.load(TAPS + 3 * k + 2).to(tl.int64) * sxd
    if INTERIOR:
        return _load(ptrs + (offset(du, sxh, OFF64) + offset(dv, SXW, OFF64) + plane), None, border_value, c, PRO,
                     pro_args, SOURCE, BORDER)
    else:
        r, r_in = _index(rows + du, H, BORDER)
        if STACKED:
            q = tl.minimum(cols + dv, XW - 1)
            inside = r_in
        else:
            q, q_in = _index(cols + dv, W, BORDER)
            inside = r_in & q_in
        return _load(x_base + plane + offset(r, sxh, OFF64) + offset(q, SXW, OFF64), inside, border_value, c, PRO,
                     pro_args, SOURCE, BORDER)


@triton.jit
def _taps_min(x_base, rows, cols, TAPS, NT, H, W, XW, sxd, sxh, border_value, c, PRO: tl.constexpr, pro_args,
              SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr, DILATE: tl.constexpr,
              SOURCE: tl.constexpr, STACKED: tl.constexpr, INTERIOR: tl.constexpr, DTAPS: tl.constexpr):
    """``taps_kernel``'s min over its taps, for a tile whose reads all lie inside the image
    (``INTERIOR``: plain offsets) or not (remapped, the constant border). Interior tiles of
    a direct pass take the taps as constants (``DTAPS``), unrolled: a row's pointers once,
    its columns as the loads' immediate offsets; the rest loop over the table at run time
    (a small program: the border tiles are few; unrolled, the runs of a 15 x 15 ellipse
    took 0.379 ms against the table's 0.345 on the H100, PERFORMANCE.md)."""
    ptrs = x_base
    if INTERIOR:
        ptrs = x_base + offset(rows, sxh, OFF64) + offset(cols, SXW, OFF64)
    if INTERIOR and len(DTAPS) > 0:
        y = _load(ptrs + offset(tl.full((), DTAPS[0][0], tl.int32), sxh, OFF64) + DTAPS[0][1] * SXW, None,
                  border_value, c, PRO, pro_args, SOURCE, BORDER)
        for k in tl.static_range(1, len(DTAPS)):
            row_ptrs = ptrs + offset(tl.full((), DTAPS[k][0], tl.int32), sxh, OFF64)
            y = _pick(y, _load(row_ptrs + DTAPS[k][1] * SXW, None, border_value, c, PRO, pro_args, SOURCE, BORDER),
                      DILATE)
    else:
        y = _table_tap(x_base, ptrs, rows, cols, TAPS, 0, H, W, XW, sxd, sxh, border_value, c, PRO, pro_args, SXW,
                       BORDER, OFF64, SOURCE, STACKED, INTERIOR)
        for k in range(1, NT):
            y = _pick(y, _table_tap(x_base, ptrs, rows, cols, TAPS, k, H, W, XW, sxd, sxh, border_value, c, PRO,
                                    pro_args, SXW, BORDER, OFF64, SOURCE, STACKED, INTERIOR), DILATE)
    return y


@triton.jit(do_not_specialize=["NT", "DU0", "DU1", "DV0", "DV1", "C", "H", "W", "XW", "sxd", "sxb", "sxc", "sxh",
                               "syb", "syc", "syh", "szb", "szc", "szh"])
def taps_kernel(X, Y, Z, TAPS, NT, DU0, DU1, DV0, DV1, C, H, W, XW, sxd, sxb, sxc, sxh, syb, syc, syh, szb, szc,
                szh, border_value, PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, SXW: tl.constexpr,
                SYW: tl.constexpr, SZW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
                DILATE: tl.constexpr, SOURCE: tl.constexpr, STACKED: tl.constexpr, SUB: tl.constexpr,
                Z_INPUT: tl.constexpr, LEVELS: tl.constexpr, DTAPS: tl.constexpr, BH: tl.constexpr,
                BW: tl.constexpr):
    """Y[b, c, i, j] = finish(min over the NT taps (du, dv, d) of X~[d, b, c, i + du, j + dv]):
    ``TAPS`` holds (du, dv, d) triples as floats, du in [DU0, DU1], dv in [DV0, DV1]; or
    ``DTAPS`` the (du, dv) pairs as constants (direct passes: one compile per mask).
    ``SOURCE``: how X is read (``_load``). ``STACKED``: X is the row pass's
    stacked buffer of ``XW`` columns, plane d a run length, read at columns j + dv (always
    inside); otherwise one plane of the image's size, columns through the border."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    if STACKED:
        cols_inside = True
    else:
        cols_inside = (w0 + DV0 >= 0) & (w0 + BW + DV1 <= W)
    if (h0 + DU0 >= 0) & (h0 + BH + DU1 <= H) & cols_inside:
        y = _taps_min(x_base, rows, cols, TAPS, NT, H, W, XW, sxd, sxh, border_value, c, PRO, pro_args, SXW, BORDER,
                      OFF64, DILATE, SOURCE, STACKED, True, DTAPS)
    else:
        y = _taps_min(x_base, rows, cols, TAPS, NT, H, W, XW, sxd, sxh, border_value, c, PRO, pro_args, SXW, BORDER,
                      OFF64, DILATE, SOURCE, STACKED, False, DTAPS)
    ok = (rows < H) & (cols < W)
    _finish(y, X.dtype.element_ty, SOURCE, Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, SYW, OFF64),
            Z + b * szb + c * szc + offset(rows, szh, OFF64) + offset(cols, SZW, OFF64), ok, b, c, PRO, pro_args,
            EPI, epi_args, SUB, Z_INPUT, LEVELS)


# ---- the host side ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def plan(rows, kw, ay, ax):
    """How a pass by the mask whose rows are the bit sets ``rows`` (bit v: column v) and
    ``kw`` columns, anchored at (ay, ax), runs: ("direct", taps), ("rect",) or ("runs",
    lengths, taps), taps as (du, dv, d) triples (du, dv relative to the anchor for direct
    taps; for runs dv is the run's first column, d the index of its length)."""
    kh = len(rows)
    cells = [(u, v) for u in range(kh) for v in range(kw) if rows[u] >> v & 1]
    if len(cells) == kh * kw:
        return ("rect",)
    if len(cells) <= DIRECT_TAPS:
        return ("direct", tuple((u - ay, v - ax, 0) for u, v in cells))
    runs = []
    for u in range(kh):
        v = 0
        while v < kw:
            if rows[u] >> v & 1:
                a = v
                while v < kw and rows[u] >> v & 1:
                    v += 1
                runs.append((u, a, v - a))
            else:
                v += 1
    lengths = tuple(sorted({w for _, _, w in runs}))
    return ("runs", lengths, tuple((u - ay, a, lengths.index(w)) for u, a, w in runs))


def _flat(taps):
    return tuple(float(v) for tap in taps for v in tap)


def _source(x, inp, pro, border, value):
    """(SOURCE, the border value in its scale) of a launch reading ``x`` (the image when
    ``inp``): RAW for integers without a prologue, its border value a stored level (the
    default border's infinities the largest and smallest: as stored, a window wholly in it
    gives them), unless the constant border's value is no stored level (then unit scale,
    as the float path)."""
    levels = {1: 255.0, 2: 65535.0}.get(x.element_size()) if not x.is_floating_point() else None
    if levels is not None and not (inp and len(pro[0]) > 0):
        if border != borders.border_code("constant"):
            return 2, 0.0
        if math.isinf(value):
            return 2, levels if value > 0 else 0.0
        level = value * levels
        if level == round(level) and 0 <= level <= levels:
            return 2, level
    return (1 if inp else 0), value


def _row(x, y, width, s0, border, value, pro, dilate, inp):
    """y[..., j] = min over ``width`` columns of x~ from column j + s0, for j < y's width."""
    if width <= MARCH_WIDTH:
        _lanes(x, y, y, 1, width, 0, s0, border, value, pro, ((), ()), dilate, inp, 0, False, 0)
        return
    B, C, H, W = x.shape
    source, value = _source(x, inp, pro, border, value)
    WO = y.shape[3]
    if interpreting():
        bh, bw = pow2_at_least(H, 1, 1 << 20), pow2_at_least(WO + width - 1, 1, 1 << 20)
    else:
        elements, least = TILES["row_scan"]
        bw = pow2_at_least(2 * width, least, 4096)
        bh = max(1, elements // bw)
    cfg = tile_config(BH=bh, BW=bw, num_warps=1 if interpreting() else 4)
    step = bw - width + 1
    args = (x, y, C, H, W, WO, s0, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2),
            float(value), pro[0], pro[1])
    meta = dict(WIDTH=width, SXW=x.stride(3), SYW=y.stride(3), BORDER=border, OFF64=needs_int64(x, y),
                DILATE=bool(dilate), SOURCE=source, STEP=step)
    launch_kernel(row_kernel, lambda m: (programs(B * C, H, WO, bh, step),), args, meta, x, cfg)


def _column(x, y, z, height, s0, border, value, pro, epi, dilate, inp, sub, z_input, levels):
    B, C, H, W = x.shape
    source, value = _source(x, inp, pro, border, value)
    if height <= MARCH_HEIGHT:
        if interpreting():
            r, bw = pow2_at_least(H, 1, 8), pow2_at_least(W, 1, 1 << 20)
        else:
            r, bw = TILES["march"]
        args = (x, y, z, C, H, W, s0, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1),
                y.stride(2), z.stride(0), z.stride(1), z.stride(2), float(value), pro[0], pro[1], epi[0], epi[1])
        meta = dict(HEIGHT=height, SXW=x.stride(3), SYW=y.stride(3), SZW=z.stride(3), BORDER=border,
                    OFF64=needs_int64(x, y, z), DILATE=bool(dilate), SOURCE=source, SUB=sub, Z_INPUT=bool(z_input),
                    LEVELS=levels if sub else 0)
        launch_kernel(march_kernel, lambda m: (programs(B * C, H, W, r, bw),), args, meta, x,
                      tile_config(R=r, BW=bw, num_warps=1 if interpreting() else 4))
        return
    if interpreting():
        bh, bw = pow2_at_least(H + height - 1, 1, 1 << 20), pow2_at_least(W, 1, 1 << 20)
    else:
        elements, least = TILES["column_scan"]
        bh = pow2_at_least(2 * height, least, 2048)
        bw = max(2, elements // bh)
    cfg = tile_config(BH=bh, BW=bw, num_warps=1 if interpreting() else 4)
    step = bh - height + 1
    args = (x, y, z, C, H, W, s0, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2),
            z.stride(0), z.stride(1), z.stride(2), float(value), pro[0], pro[1], epi[0], epi[1])
    meta = dict(HEIGHT=height, SXW=x.stride(3), SYW=y.stride(3), SZW=z.stride(3), BORDER=border,
                OFF64=needs_int64(x, y, z), DILATE=bool(dilate), SOURCE=source, SUB=sub,
                Z_INPUT=bool(z_input), LEVELS=levels if sub else 0, STEP=step)
    launch_kernel(column_kernel, lambda m: (programs(B * C, H, W, step, bw),), args, meta, x, cfg)


def _taps(x, y, z, taps, planes_stride, xw, border, value, pro, epi, dilate, inp, stacked, sub, z_input, levels):
    B, C, H, W = y.shape
    source, value = _source(x, inp, pro, border, value)
    if interpreting():
        bh, bw = pow2_at_least(H, 1, 1 << 20), pow2_at_least(W, 1, 1 << 20)
        cfg = tile_config(BH=bh, BW=bw, num_warps=1)
    else:
        bh, bw = TILES["taps"]
        cfg = tile_config(BH=bh, BW=bw, num_warps=4)
    from imgfilters import _image  # (the constant cache of small device vectors)
    table = _image.on(_flat(taps), x.device)
    du = [t[0] for t in taps]
    dv = [t[1] for t in taps]
    args = (x, y, z, table, len(taps), min(du), max(du), min(dv), max(dv), C, H, W, xw, planes_stride,
            x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2), z.stride(0), z.stride(1),
            z.stride(2), float(value),
            pro[0], pro[1], epi[0], epi[1])
    meta = dict(SXW=x.stride(3), SYW=y.stride(3), SZW=z.stride(3), BORDER=border, OFF64=needs_int64(x, y, z),
                DILATE=bool(dilate), SOURCE=source, STACKED=bool(stacked), SUB=sub, Z_INPUT=bool(z_input),
                LEVELS=levels if sub else 0, DTAPS=() if stacked else tuple((int(a), int(b)) for a, b, _ in taps))
    launch_kernel(taps_kernel, lambda m: (programs(B * C, H, W, bh, bw),), args, meta, x, cfg)


def _lanes(x, y, z, kh, kw, s0, sx0, border, value, pro, epi, dilate, inp, sub, z_input, levels):
    B, C, H, W = x.shape
    WO = y.shape[3]
    source, value = _source(x, inp, pro, border, value)
    if interpreting():  # (one program a plane; S = 2 keeps the lanes' column arithmetic in the tests)
        s, seg = 2, H
        bw = pow2_at_least(-(-WO // s), 1, 1 << 20)
    else:
        bw, s, seg = TILES["lanes_raw" if source == 2 else "lanes"]
    args = (x, y, z, C, H, W, WO, s0, sx0, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1),
            y.stride(2), z.stride(0), z.stride(1), z.stride(2), float(value), pro[0], pro[1], epi[0], epi[1])
    # NEAR: every position read lies within one image size of the image (one fold remaps it)
    near = -H < s0 and H + s0 + kh - 2 < 2 * H - 1 and -W < sx0 and WO + sx0 + kw - 2 < 2 * W - 1
    meta = dict(HEIGHT=kh, KW=kw, SXW=x.stride(3), SYW=y.stride(3), SZW=z.stride(3), BORDER=border,
                NEAR=near, OFF64=needs_int64(x, y, z), DILATE=bool(dilate), SOURCE=source, SUB=sub,
                Z_INPUT=bool(z_input), LEVELS=levels if sub else 0)
    launch_kernel(lanes_kernel, lambda m: (programs(B * C, H, WO, seg, bw * s),), args, meta, x,
                  tile_config(BW=bw, S=s, SEG=seg, num_warps=1 if interpreting() else 4))


def _runs(x, stacked, lengths, sx0, border, value, pro, dilate, inp):
    """stacked[d, ..., j] = min over ``lengths[d]`` columns of x~ from column j + sx0: one
    launch of ``runs_kernel`` for all the lengths (ascending, at most ``MARCH_WIDTH``)."""
    B, C, H, W = x.shape
    WO = stacked.shape[4]
    source, value = _source(x, inp, pro, border, value)
    if interpreting():  # (one program a plane; S = 2 keeps the lanes' column arithmetic in the tests)
        s, seg = 2, H
        bw = pow2_at_least(-(-WO // s), 1, 1 << 20)
    else:
        bw, s, seg = TILES["runs"]
    args = (x, stacked, C, H, W, WO, sx0, x.stride(0), x.stride(1), x.stride(2), stacked.stride(0),
            stacked.stride(1), stacked.stride(2), stacked.stride(3), float(value), pro[0], pro[1])
    near = -W < sx0 and WO + sx0 + lengths[-1] - 2 < 2 * W - 1  # as ``_lanes``'s NEAR
    meta = dict(LENGTHS=tuple(lengths), SXW=x.stride(3), SYW=stacked.stride(4), BORDER=border, NEAR=near,
                OFF64=needs_int64(x, stacked[0]), DILATE=bool(dilate), SOURCE=source)
    launch_kernel(runs_kernel, lambda m: (programs(B * C, H, WO, seg, bw * s),), args, meta, x,
                  tile_config(BW=bw, S=s, SEG=seg, num_warps=1 if interpreting() else 4))


def pair(x, y, z, kh, kw, anchor, dilate, pro=((), ()), epi=((), ()), sub=0, z_input=False):
    """The opening of 4-D ``x`` into ``y`` (``dilate``: the closing; ``sub`` and ``z`` as
    ``launch``'s) by the kh x kw rectangle anchored at ``anchor`` with the default border,
    in one launch (``pairs``: float pixels, or integers through a prologue)."""
    B, C, H, W = x.shape
    source, _ = _source(x, True, pro, borders.border_code("replicate"), 0.0)
    assert source != 2, "pair_kernel takes float pixels"
    if interpreting():  # (one program a plane; S = 2 keeps the lanes' column arithmetic in the tests)
        bw, s, seg = pow2_at_least(-(-W // 2), 1, 1 << 20), 2, H
    else:
        bw, s, seg = TILES["pair"]
    # the second pass's value that never wins
    args = (x, y, z, C, H, W, -anchor[0], -anchor[1], x.stride(0), x.stride(1), x.stride(2), y.stride(0),
            y.stride(1), y.stride(2), z.stride(0), z.stride(1), z.stride(2), math.inf if dilate else -math.inf,
            pro[0], pro[1], epi[0], epi[1])
    meta = dict(HEIGHT=kh, KW=kw, SXW=x.stride(3), SYW=y.stride(3), SZW=z.stride(3), OFF64=needs_int64(x, y, z),
                DILATE=bool(dilate), SOURCE=source, SUB=sub, Z_INPUT=bool(z_input))
    if interpreting():
        cfg = tile_config(BW=bw, S=s, SEG=seg, num_warps=1)
    else:
        cfg = tile_config(BW=bw, S=s, SEG=seg, num_warps=4, maxnreg=PAIR_REGISTERS)
    launch_kernel(pair_kernel, lambda m: (programs(B * C, H, W, seg, bw * s),), args, meta, x, cfg)


def pairs(kh, kw, raw):
    """Whether the opening or closing by a kh x kw rectangle (default border) is one
    launch of ``pair_kernel``; ``raw``: the pixels load as stored integers (an integer
    image without a prologue)."""
    return not raw and kh <= PAIR_SIDE and kw <= PAIR_SIDE


def lanes(kh, kw):
    """Whether a kh x kw rectangle is one launch of ``lanes_kernel``."""
    return kh <= LANES_HEIGHT and kw <= LANES_WIDTH


def row_launches(lengths):
    """The launches of a mask's runs' row pass (``lengths`` ascending): one
    ``runs_kernel`` for all of them up to ``MARCH_WIDTH``, else one a length."""
    return 1 if lengths[-1] <= MARCH_WIDTH else len(lengths)


def one_march(kh, kw):
    """Whether a kh x kw rectangle is one launch (``lanes_kernel``, or ``march_kernel``
    for one column), no buffer."""
    return kw == 1 or lanes(kh, kw)


def launch(x, y, rows, kw, dilate, border=0, border_value=0.0, pro=((), ()), epi=((), ()), inp=True, z=None,
           sub=0, z_input=False, buffer_dtype=None, anchor=None, levels=0):
    """One erosion (``dilate``: dilation) pass of 4-D ``x`` (B, C, H, W) into 4-D ``y`` by
    the mask of bit-set ``rows`` and ``kw`` columns, anchored at ``anchor`` (row, column;
    default the centre, ``(kh // 2, kw // 2)``).

    ``border`` is a code from ``core.borders`` (the default border is the constant one with
    ``border_value`` +-inf); ``pro`` applies to ``x`` when ``inp`` (``x`` is the image;
    otherwise a buffer of an earlier pass) and to ``z`` when ``z_input``; ``epi`` and
    ``sub`` (1: ``y - z``, 2: ``z - y``, the result first quantized to ``levels`` when
    nonzero: the operation's images are integers) at the store. Buffers between launches
    are ``buffer_dtype`` (default ``x``'s)."""
    import torch
    B, C, H, W = x.shape
    kh = len(rows)
    ay, ax = (kh // 2, kw // 2) if anchor is None else anchor
    how = plan(tuple(rows), kw, ay, ax)
    z = y if z is None else z
    buffer_dtype = buffer_dtype or x.dtype
    if how[0] == "direct":
        _taps(x, y, z, how[1], 0, W, border, border_value, pro, epi, dilate, inp, False, sub, z_input, levels)
    elif how[0] == "rect":
        if border == borders.CONSTANT and border_value == (-math.inf if dilate else math.inf):
            # the border that never wins is the replicated one here: a rectangle that holds
            # its anchor holds the edge pixels that replication reads (no select a load)
            border = borders.border_code("replicate")
        if lanes(kh, kw):  # one launch, no buffer
            _lanes(x, y, z, kh, kw, -ay, -ax, border, border_value, pro, epi, dilate, inp, sub, z_input, levels)
            return
        if kw == 1:
            _column(x, y, z, kh, -ay, border, border_value, pro, epi, dilate, inp, sub, z_input, levels)
            return
        t = torch.empty(B, C, H, W, dtype=buffer_dtype, device=x.device)
        _row(x, t, kw, -ax, border, border_value, pro, dilate, inp)
        _column(t, y, z, kh, -ay, border, border_value, pro, epi, dilate, False, sub, z_input, levels)
    else:
        _, lengths, taps = how
        xw = W + kw - 1
        stacked = torch.empty(len(lengths), B, C, H, xw, dtype=buffer_dtype, device=x.device)
        if row_launches(lengths) == 1:
            _runs(x, stacked, lengths, -ax, border, border_value, pro, dilate, inp)
        else:
            for d, w in enumerate(lengths):
                _row(x, stacked[d], w, -ax, border, border_value, pro, dilate, inp)
        _taps(stacked[0], y, z, taps, stacked.stride(0), xw, border, border_value, pro, epi, dilate, False,
              True, sub, z_input, levels)
