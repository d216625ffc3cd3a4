"""Median filter: the exact median of a ``K x K`` window, by a bitwise radix select.

No sort. Each window value becomes an unsigned key whose integer order is the values'
order (``_key``): uint8 and uint16 images without a prologue use their stored values
(``KEY = RAW``, 8 or 16 bits); everything else (floats, and any image with a fused
prologue or a constant border value that is not a stored level) the float32 unit-scale
value's bits, the sign bit flipped for positives and all bits for negatives (``FLOAT``,
32 bits). The median is the ``M = (K*K - 1) / 2``-th smallest key, found one bit at a
time from the top: with ``prefix`` the bits found so far, the next bit is 1 exactly when
at most ``M`` keys lie below ``prefix | bit`` (``_step``). After ``BITS`` rounds
``prefix`` is the median's key, mapped back to its value. NaN: an output whose window
holds one is NaN (tracked beside the keys); infinities are ordered values.

Costs per output pixel (``n = K*K`` window values, ``BITS`` rounds): ``n`` loads (L1
hits but the first use of each pixel), then ``BITS * n`` compares and adds. 5 x 5 uint8:
25 loads, 8 * 25 = 200 compare-and-adds (about 400 integer instructions), no other
memory traffic than one read and one write of the image. 4K RGB uint8 (24.9 M outputs):
10 G instructions; the H200's 132 SMs at 64 integer lanes a clock and 1.98 GHz run
16.7 T a second: about 0.6 ms compute-bound, against 50 MB of memory traffic (0.01 ms
at 4.8 TB/s). Time grows as ``K*K * BITS``: 3 x 3 a third of 5 x 5, 7 x 7 twice, 15 x 15
nine times (and float images four times uint8's).

Two programs: ``median_kernel`` (the GPU's) gives each program a ``BH x BW`` tile of one
plane; for ``K <= KEEP`` it keeps the window's keys in registers (a tuple of ``n``
tiles, loaded once), for larger windows it reloads them every round (a run-time loop,
L1 hits). ``plane_kernel`` (the interpreter's, which pays per operation and per jitted
call) gathers the whole window as one ``(NP, BH, BW)`` tensor and counts with sums over
its first axis. ``ARG`` makes either store, instead of the median, its window position
``u * K + v`` (int32): among equal keys the one of rank ``M`` in row-major window order,
the float64 reference's rule (``reference.median.median_index``), for the gradient.
"""
import triton
import triton.language as tl

from .core import borders, neighbourhood, pixels, pointwise
from .core.launch import Tuning, launch as launch_kernel, tile_config
from .core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, size_class, tile_origin

MAX_SIZE = 31
KEEP = 7  # windows up to 7 x 7 keep their keys in registers
RAW: tl.constexpr = tl.constexpr(0)  # keys: the stored integer values
FLOAT: tl.constexpr = tl.constexpr(1)  # keys: float32 unit-scale values, order-preserving bits


@triton.jit
def _key(ptrs, inside, border_value, c, PRO: tl.constexpr, pro_args, BORDER: tl.constexpr, KEY: tl.constexpr):
    """(key, NaN) of the pixels at ``ptrs`` (remapped into the image), in
    ``neighbourhood.load``'s order: typed load, prologue, the constant border's value
    where not ``inside`` (``border_value``: a unit-scale float for FLOAT keys, a stored
    level for RAW ones)."""
    if KEY == FLOAT:
        x = neighbourhood.load(ptrs, inside, border_value, c, PRO, pro_args, neighbourhood.UNIT, BORDER)
        bits = x.to(tl.uint32, bitcast=True)
        # (^ 0xFFFFFFFF, not ~: the interpreter has no ~ of uint32)
        key = tl.where((bits >> 31) != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)
        return key, x != x
    else:
        key = tl.load(ptrs).to(tl.uint32)
        if BORDER == borders.CONSTANT:
            level = (tl.zeros((), dtype=tl.float32) + border_value).to(tl.uint32)  # (a float argument)
            key = tl.where(inside, key, level)
        return key, False


@triton.jit
def _value(key, unit, KEY: tl.constexpr):
    """A key back to its float32 unit-scale value."""
    if KEY == FLOAT:
        bits = tl.where((key >> 31) != 0, key ^ 0x80000000, key ^ 0xFFFFFFFF)
        return bits.to(tl.float32, bitcast=True)
    else:  # (2^23 + key as float bits, exact, minus 2^23: no slow integer conversion)
        return ((key | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0) * unit


@triton.jit
def _step(prefix, bit, below, M: tl.constexpr):
    """One round: the median's key has ``bit`` set iff at most M keys lie below ``prefix | bit``."""
    return tl.where(below <= M, prefix | bit, prefix)


@triton.jit
def _bit(i, BITS: tl.constexpr):
    """The bit round ``i`` decides, from the top (uint32)."""
    shift = tl.zeros((), dtype=tl.int32) + (BITS - 1 - i)  # (i: a constexpr, or a loop's tensor)
    return tl.full((), 1, tl.uint32) << shift.to(tl.uint32)


@triton.jit
def _window_ptrs(x_base, rows, cols, u, v, H, W, sxh, R: tl.constexpr, SXW: tl.constexpr,
                 BORDER: tl.constexpr, OFF64: tl.constexpr):
    """Pointers to window position (u, v) of the outputs at (rows, cols), remapped, and
    whether that position lies in the image."""
    rr = rows + (u - R)
    cc = cols + (v - R)
    ptrs = x_base + offset(borders.remap(rr, H, BORDER), sxh, OFF64) + offset(borders.remap(cc, W, BORDER), SXW, OFF64)
    return ptrs, borders.inside(rr, H) & borders.inside(cc, W)


@triton.jit
def _finish(prefix, nan, pos, x_base, y_ptrs, rows, cols, mask, c, H, W, sxh, unit, PRO: tl.constexpr, pro_args,
            EPI: tl.constexpr, epi_args, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
            KEY: tl.constexpr, ARG: tl.constexpr):
    """Store the median (NaN where the window held one, through the epilogue), or with
    ``ARG`` its window position ``pos``."""
    if ARG:
        tl.store(y_ptrs, pos, mask)
    else:
        y = _value(prefix, unit, KEY)
        if KEY == FLOAT:
            y = tl.where(nan, float("nan"), y)
        if len(EPI) > 0:
            x_in = neighbourhood.load(x_base + offset(borders.remap(rows, H, BORDER), sxh, OFF64)
                                      + offset(borders.remap(cols, W, BORDER), SXW, OFF64), None, 0.0, c, PRO,
                                      pro_args, neighbourhood.UNIT, BORDER)
            y = pointwise.apply_epilogue(y, x_in, c, EPI, epi_args)
        pixels.store(y_ptrs, y, mask)


@triton.jit
def _count_below(x_base, rows, cols, cand, c, H, W, sxh, border_value, PRO: tl.constexpr, pro_args,
                 K: tl.constexpr, R: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
                 KEY: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """(keys below ``cand``, keys equal to it, NaN) over the window, reloaded (large windows)."""
    below = tl.zeros((BH, BW), dtype=tl.int32)
    equal = tl.zeros((BH, BW), dtype=tl.int32)
    nan = tl.zeros((BH, BW), dtype=tl.int1)
    for u in range(K):
        for v in range(K):
            ptrs, ins = _window_ptrs(x_base, rows, cols, u, v, H, W, sxh, R, SXW, BORDER, OFF64)
            key, n = _key(ptrs, ins, border_value, c, PRO, pro_args, BORDER, KEY)
            below += (key < cand).to(tl.int32)
            equal += (key == cand).to(tl.int32)
            nan = nan | n
    return below, equal, nan


# Sizes and the strides other than the last are not specialised (one compile per window
# size, dtype and layout, whatever the image size).
@triton.jit(do_not_specialize=["C", "H", "W", "sxb", "sxc", "sxh", "syb", "syc", "syh", "SIZE_CLASS"])
def median_kernel(X, Y, C, H, W, sxb, sxc, sxh, syb, syc, syh, border_value,
                  PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                  K: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                  OFF64: tl.constexpr, KEY: tl.constexpr, BITS: tl.constexpr, ARG: tl.constexpr, SIZE_CLASS,
                  BH: tl.constexpr, BW: tl.constexpr):
    """Y[b, c, i, j] = EPI(median over u, v < K of PRO(X~[b, c, i + u - K//2, j + v - K//2])),
    X~ being X extended by the border; with ``ARG`` the median's window position instead
    (Y int32). ``SIZE_CLASS`` only feeds the autotune key."""
    R: tl.constexpr = K // 2
    M: tl.constexpr = (K * K - 1) // 2
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    unit = pixels.unit_scale(X.dtype.element_ty)
    prefix = tl.zeros((BH, BW), dtype=tl.uint32)
    pos = tl.zeros((BH, BW), dtype=tl.int32)
    if K <= KEEP:  # the window's keys in registers, loaded once
        col_ptrs = ()  # (the columns' remapped offsets, shared by the K rows)
        col_ins = ()
        for v in tl.static_range(K):
            cc = cols + (v - R)
            col_ptrs = col_ptrs + (offset(borders.remap(cc, W, BORDER), SXW, OFF64),)
            col_ins = col_ins + (borders.inside(cc, W),)
        keys = ()
        nan = tl.zeros((BH, BW), dtype=tl.int1)
        for u in tl.static_range(K):
            rr = rows + (u - R)
            row_ptr = x_base + offset(borders.remap(rr, H, BORDER), sxh, OFF64)
            row_in = borders.inside(rr, H)
            for v in tl.static_range(K):
                key, n = _key(row_ptr + col_ptrs[v], row_in & col_ins[v], border_value, c, PRO, pro_args, BORDER,
                              KEY)
                keys = keys + (key,)
                nan = nan | n
        for i in tl.static_range(BITS):
            bit = _bit(i, BITS)
            below = tl.zeros((BH, BW), dtype=tl.int32)
            for t in tl.static_range(K * K):
                below += (keys[t] < (prefix | bit)).to(tl.int32)
            prefix = _step(prefix, bit, below, M)
        if ARG:  # the median's position: rank M - (keys below it) among the keys equal to it
            target = tl.full((BH, BW), M, dtype=tl.int32)
            for t in tl.static_range(K * K):
                target -= (keys[t] < prefix).to(tl.int32)
            seen = tl.zeros((BH, BW), dtype=tl.int32)
            for t in tl.static_range(K * K):
                equal = keys[t] == prefix
                pos = tl.where(equal & (seen == target), t, pos)
                seen += equal.to(tl.int32)
    else:  # large windows: the keys reloaded every round (L1 hits)
        nan = tl.zeros((BH, BW), dtype=tl.int1)
        for i in range(BITS):
            bit = _bit(i, BITS)
            below, _, nan = _count_below(x_base, rows, cols, prefix | bit, c, H, W, sxh, border_value, PRO,
                                         pro_args, K, R, SXW, BORDER, OFF64, KEY, BH, BW)
            prefix = _step(prefix, bit, below, M)
        if ARG:
            below, _, nan = _count_below(x_base, rows, cols, prefix, c, H, W, sxh, border_value, PRO, pro_args,
                                         K, R, SXW, BORDER, OFF64, KEY, BH, BW)
            target = M - below
            seen = tl.zeros((BH, BW), dtype=tl.int32)
            for t in range(K * K):
                ptrs, ins = _window_ptrs(x_base, rows, cols, t // K, t % K, H, W, sxh, R, SXW, BORDER, OFF64)
                key, _ = _key(ptrs, ins, border_value, c, PRO, pro_args, BORDER, KEY)
                equal = key == prefix
                pos = tl.where(equal & (seen == target), t, pos)
                seen += equal.to(tl.int32)
    mask = (rows < H) & (cols < W)
    y_ptrs = Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, SYW, OFF64)
    _finish(prefix, nan, pos, x_base, y_ptrs, rows, cols, mask, c, H, W, sxh, unit, PRO, pro_args, EPI, epi_args,
            SXW, BORDER, OFF64, KEY, ARG)


@triton.jit
def plane_kernel(X, Y, C, H, W, sxb, sxc, sxh, syb, syc, syh, border_value,
                 PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                 K: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                 OFF64: tl.constexpr, KEY: tl.constexpr, BITS: tl.constexpr, ARG: tl.constexpr,
                 BH: tl.constexpr, BW: tl.constexpr, NP: tl.constexpr):
    """``median_kernel``'s result for the interpreter: the window as one ``(NP, BH, BW)``
    gather (``NP``: K*K padded to a power of two; the padding's keys are the largest,
    never below a candidate), each round one comparison and one sum over it."""
    R: tl.constexpr = K // 2
    M: tl.constexpr = (K * K - 1) // 2
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    t = tl.arange(0, NP)[:, None, None]
    valid = t < K * K
    ptrs, ins = _window_ptrs(x_base, rows[None], cols[None], t // K, t % K, H, W, sxh, R, SXW, BORDER, OFF64)
    key, nan = _key(ptrs, ins, border_value, c, PRO, pro_args, BORDER, KEY)
    key = tl.where(valid, key, 0xFFFFFFFF)
    nan = tl.max((nan & valid).to(tl.int32), axis=0) > 0
    prefix = tl.zeros((BH, BW), dtype=tl.uint32)
    for i in tl.static_range(BITS):
        bit = _bit(i, BITS)
        below = tl.sum((key < (prefix | bit)[None]).to(tl.int32), axis=0)
        prefix = _step(prefix, bit, below, M)
    pos = tl.zeros((BH, BW), dtype=tl.int32)
    if ARG:
        target = M - tl.sum((key < prefix[None]).to(tl.int32), axis=0)
        equal = (key == prefix[None]).to(tl.int32)
        seen = tl.cumsum(equal, axis=0) - equal  # equal keys before each position
        pos = tl.max(tl.where((equal > 0) & (seen == target[None]), t, 0), axis=0)
    mask = (rows < H) & (cols < W)
    y_ptrs = Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, SYW, OFF64)
    _finish(prefix, nan, pos, x_base, y_ptrs, rows, cols, mask, c, H, W, sxh, pixels.unit_scale(X.dtype.element_ty),
            PRO, pro_args, EPI, epi_args, SXW, BORDER, OFF64, KEY, ARG)


def _tile(BH, BW, num_warps):
    return dict(BH=BH, BW=BW, num_warps=num_warps)


# Candidate tiles (the first is the default): the keys of a kept window take K*K
# registers per output a lane holds, so small windows take small tiles per lane.
CANDIDATES = ((3, (_tile(16, 64, 4), _tile(8, 128, 4), _tile(32, 64, 8))),
              (5, (_tile(8, 64, 4), _tile(4, 128, 4), _tile(16, 64, 8), _tile(8, 32, 2))),
              (KEEP, (_tile(4, 64, 4), _tile(8, 32, 4), _tile(4, 32, 2))),
              (MAX_SIZE, (_tile(8, 64, 4), _tile(16, 64, 8))))
ALL_TILES = [t for _, tiles in CANDIDATES for t in tiles]


def candidates(k):
    """The autotune candidates for window side ``k``; the first is the default."""
    return next(tiles for limit, tiles in CANDIDATES if k <= limit)


tuning = Tuning(lambda meta: [tile_config(**t) for t in candidates(meta["K"])],
                key=["K", "C", "SXW", "SYW", "BORDER", "OFF64", "KEY", "BITS", "ARG", "PRO", "EPI", "SIZE_CLASS"])


def raw_keys(x, pro, border, border_value):
    """The stored level that RAW keys use for the constant border's value, or None when
    the keys must be FLOAT: a float image, a prologue, or a border value that is no level."""
    if x.is_floating_point() or len(pro[0]) > 0:
        return None
    levels = 255 if x.element_size() == 1 else 65535
    level = border_value * levels
    if border == borders.border_code("constant") and (level != round(level) or not 0 <= level <= levels):
        return None
    return float(round(level)) if border == borders.border_code("constant") else 0.0


def launch(x, y, k, border=0, border_value=0.0, pro=((), ()), epi=((), ()), arg=False, tile=None):
    """Median of 4-D ``x`` (B, C, H, W) over ``k x k`` windows into 4-D ``y`` (any
    supported dtype; int32 with ``arg``: the median's window position). ``pro``/``epi``
    are (steps, args) chains, ``border`` a code from ``core.borders``; ``tile`` (one of
    ``ALL_TILES``) bypasses autotuning and, in the interpreter, runs ``median_kernel``."""
    B, C, H, W = x.shape
    level = raw_keys(x, pro, border, border_value)
    key, bits = (0, 8 if x.element_size() == 1 else 16) if level is not None else (1, 32)
    args = (x, y, C, H, W, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2),
            float(border_value) if level is None else level, pro[0], pro[1], epi[0], epi[1])
    meta = dict(K=k, SXW=x.stride(3), SYW=y.stride(3), BORDER=border, OFF64=needs_int64(x, y), KEY=key, BITS=bits,
                ARG=bool(arg))
    if interpreting() and tile is None:
        n_p = pow2_at_least(k * k, 1, 1024)
        room = tl.TRITON_MAX_TENSOR_NUMEL // n_p
        bw = pow2_at_least(W, 1, room)
        bh = pow2_at_least(H, 1, room // bw)
        launch_kernel(plane_kernel, lambda m: (programs(B * C, H, W, bh, bw),), args, meta, x,
                      tile_config(BH=bh, BW=bw, NP=n_p))
        return
    meta.update(SIZE_CLASS=size_class(H, W))
    grid = lambda m: (programs(B * C, H, W, m["BH"], m["BW"]),)
    launch_kernel(median_kernel, grid, args, meta, x, None if tile is None else tile_config(**tile), tuning)
