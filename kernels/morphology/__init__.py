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

The package: ``plan.py`` (which shape of work a mask takes, from plain values),
``tiles.py`` (the GPU tiles), the kernels in ``marching.py``, ``scans.py`` and ``taps.py``,
their shared device helpers in ``common.py``, and here the launches.
"""
import math

from ..core import borders
from ..core.launch import launch as launch_kernel, tile_config
from ..core.tiling import interpreting, needs_int64, pow2_at_least, programs
from . import tiles
from .marching import lanes_kernel, march_kernel, pair_kernel, runs_kernel
from .plan import MARCH_HEIGHT, MARCH_WIDTH, MAX_RECT, MAX_SIDE, lanes, one_march, pairs, plan, row_launches
from .scans import column_kernel, row_kernel
from .taps import taps_kernel

__all__ = ["MAX_RECT", "MAX_SIDE", "launch", "one_march", "pair", "pairs", "plan", "row_launches", "tiles"]


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
        elements, least = tiles.TILES["row_scan"]
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
            r, bw = tiles.TILES["march"]
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
        elements, least = tiles.TILES["column_scan"]
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
        bh, bw = tiles.TILES["taps"]
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
        bw, s, seg = tiles.TILES["lanes_raw" if source == 2 else "lanes"]
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
        bw, s, seg = tiles.TILES["runs"]
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
        bw, s, seg = tiles.TILES["pair"]
    # the second pass's value that never wins
    args = (x, y, z, C, H, W, -anchor[0], -anchor[1], x.stride(0), x.stride(1), x.stride(2), y.stride(0),
            y.stride(1), y.stride(2), z.stride(0), z.stride(1), z.stride(2), math.inf if dilate else -math.inf,
            pro[0], pro[1], epi[0], epi[1])
    meta = dict(HEIGHT=kh, KW=kw, SXW=x.stride(3), SYW=y.stride(3), SZW=z.stride(3), OFF64=needs_int64(x, y, z),
                DILATE=bool(dilate), SOURCE=source, SUB=sub, Z_INPUT=bool(z_input))
    if interpreting():
        cfg = tile_config(BW=bw, S=s, SEG=seg, num_warps=1)
    else:
        cfg = tile_config(BW=bw, S=s, SEG=seg, num_warps=4, maxnreg=tiles.PAIR_REGISTERS)
    launch_kernel(pair_kernel, lambda m: (programs(B * C, H, W, seg, bw * s),), args, meta, x, cfg)


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
