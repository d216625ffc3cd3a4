"""Morphology's marching kernels: ``march_kernel`` (a column window, one column a
thread), ``lanes_kernel`` (rectangles up to ``plan.LANES_HEIGHT`` x ``plan.LANES_WIDTH``
in one pass), ``runs_kernel`` (a mask's row runs of every length in one launch) and
``pair_kernel`` (an opening or closing in one launch)."""
import triton
import triton.language as tl

from ..core import borders, neighbourhood
from ..core.tiling import offset, tile_origin
from .common import _finish, _load, _pick


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
