"""General (non-separable) 2-D correlation, one kernel per image or one for the batch.

``filter2d_kernel``: a program owns a strip of ``T*S`` output columns (``S`` pixels per
lane) and ``SEG`` output rows, and marches down its ``SEG + 2*RY`` input rows once, ``P``
rows a step, as ``separable.strip_kernel`` does. Input row ``r`` feeds the ``2*RY + 1``
output rows within ``RY`` of it, each through its own kernel row: for every horizontal
tap ``v`` (a run-time loop; each tap one shifted load of the P rows, L1 hits after the
first) the loaded pixels are multiplied into the ``2*RY + P`` pending
output rows (a tuple of registers, unrolled). The P rows completed are stored, the others
shift by P slots. So each input pixel is read from memory once per strip and every tap
costs one FMA per pixel. The taps are run-time values, loaded as scalars, so a new
kernel never recompiles (only a new size); a tap load serves P rows x S columns of a
lane, which keeps the load pipe (one warp-wide load a cycle per SM, a quarter of the FMA
rate) from being the limit.

The output grid may be larger than the input and start before it (``OY``, ``OX``): the
adjoint used by autograd evaluates the flipped kernel on the zero-extended gradient. The
autotune candidates are ``tiles.py``'s.
"""
import triton
import triton.language as tl

from ..core import borders, neighbourhood, pixels, pointwise
from ..core.launch import Tuning, launch as launch_kernel, tile_config
from ..core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, size_class, tile_origin
from .tiles import ALL_TILES, MAX_RADIUS, candidates

__all__ = ["ALL_TILES", "MAX_RADIUS", "launch", "tuning"]


@triton.jit
def _tap(row_ptr, in_cols, v, W, c, row_in, border_value, PRO: tl.constexpr, pro_args, NEAR: tl.constexpr,
         RX: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr):
    """The row's pixels under horizontal tap ``v`` of every output column, through the
    border (``neighbourhood.load``: constant, the border value outside; ``row_in``: the
    row lies in the image). ``NEAR``: every column read lies within
    one image width of the image, so the cheap single fold remaps it. One code path for
    interior and border strips: a second copy of the march doubled the compile time, and
    the fold costs about 5 integer operations a tap next to 2*RY + 1 FMAs a row."""
    cv = in_cols + (v - RX)
    col = borders.remap_within(cv, W, BORDER, NEAR)
    return neighbourhood.load(row_ptr + offset(col, SXW, OFF64), borders.inside(cv, W) & row_in, border_value, c,
                              PRO, pro_args, neighbourhood.LINEAR, BORDER)


@triton.jit
def _taps(k_base, v, RX: tl.constexpr, RY: tl.constexpr):
    """Column v of the kernel: K[u, v] for u = 0 .. 2*RY, scalars."""
    taps = ()
    for u in tl.static_range(2 * RY + 1):
        taps = taps + (tl.load(k_base + (u * (2 * RX + 1) + v)),)
    return taps


@triton.jit
def _feed(acc, xs, taps, RY: tl.constexpr, P: tl.constexpr):
    """One horizontal tap of the P input rows ``xs`` into the 2*RY + P pending output rows:
    input row p feeds pending row k through kernel row u = 2*RY - (k - p). Each tap serves
    the P rows (P * S FMAs a load)."""
    out = ()
    for k in tl.static_range(2 * RY + P):
        a = acc[k]
        for p in tl.static_range(P):
            if k >= p:
                if k - p <= 2 * RY:
                    a += taps[2 * RY - k + p] * xs[p]
        out = out + (a,)
    return out


@triton.jit
def _rows_at(x_base, r, H, sxh, BORDER: tl.constexpr, OFF64: tl.constexpr, P: tl.constexpr):
    """Row pointers of input rows r .. r + P - 1 (remapped) and whether each is in the image."""
    ptrs = ()
    ins = ()
    for p in tl.static_range(P):
        ptrs = ptrs + (x_base + offset(borders.remap(r + p, H, BORDER), sxh, OFF64),)
        ins = ins + ((r + p >= 0) & (r + p < H),)
    return ptrs, ins


@triton.jit
def _loads(row_ptrs, row_ins, in_cols, v, W, c, border_value, PRO: tl.constexpr, pro_args, NEAR: tl.constexpr,
           RX: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr, P: tl.constexpr):
    """``_tap`` of each of the P rows."""
    xs = ()
    for p in tl.static_range(P):
        xs = xs + (_tap(row_ptrs[p], in_cols, v, W, c, row_ins[p], border_value, PRO, pro_args, NEAR,
                        RX, SXW, BORDER, OFF64),)
    return xs


@triton.jit
def _march(x_base, y_base, k_base, b, c, h0, r0, n_rows, o_end, H, W, sxh, syh, scale, border_value,
           in_cols, in_off, out_off, out_ok, NEAR: tl.constexpr,
           PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, OY,
           RX: tl.constexpr, RY: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
           T: tl.constexpr, S: tl.constexpr, P: tl.constexpr, PRE: tl.constexpr):
    """March down input rows r0 .. r0 + n_rows - 1, P at a step, storing each completed
    output row below ``o_end``."""
    pending = ()
    for _ in tl.static_range(2 * RY):
        pending = pending + (tl.zeros((T, S), dtype=tl.float32),)
    for i in range(0, n_rows, P):
        row_ptrs, row_ins = _rows_at(x_base, r0 + i, H, sxh, BORDER, OFF64, P)
        acc = pending
        for _ in tl.static_range(P):
            acc = acc + (tl.zeros((T, S), dtype=tl.float32),)
        if PRE:  # the next tap's pixels and column of the kernel load while this one's FMAs run
            xs = _loads(row_ptrs, row_ins, in_cols, 0, W, c, border_value, PRO, pro_args, NEAR, RX, SXW, BORDER,
                        OFF64, P)
            taps = _taps(k_base, 0, RX, RY)
            for v in range(2 * RX + 1):
                vn = tl.minimum(v + 1, 2 * RX)
                xs_next = _loads(row_ptrs, row_ins, in_cols, vn, W, c, border_value, PRO, pro_args, NEAR, RX,
                                 SXW, BORDER, OFF64, P)
                taps_next = _taps(k_base, vn, RX, RY)
                acc = _feed(acc, xs, taps, RY, P)
                xs = xs_next
                taps = taps_next
        else:
            for v in range(2 * RX + 1):
                xs = _loads(row_ptrs, row_ins, in_cols, v, W, c, border_value, PRO, pro_args, NEAR, RX, SXW,
                            BORDER, OFF64, P)
                acc = _feed(acc, xs, _taps(k_base, v, RX, RY), RY, P)
        for p in tl.static_range(P):  # pending rows 0 .. P-1 are complete
            o = h0 + i + p - 2 * RY
            y = acc[p] * scale
            if len(EPI) > 0:
                xr = borders.remap(o + OY, H, BORDER)
                x_in = neighbourhood.load(x_base + offset(xr, sxh, OFF64) + in_off, None, 0.0, c, PRO, pro_args,
                                          neighbourhood.UNIT, BORDER)
                y = pointwise.apply_epilogue(y, x_in, b, c, EPI, epi_args)
            pixels.store(y_base + offset(o, syh, OFF64) + out_off, y, out_ok & (o >= h0) & (o < o_end))
        pending = ()
        for k in tl.static_range(P, 2 * RY + P):
            pending = pending + (acc[k],)


# Sizes, offsets and the strides other than the last (constexpr) are not specialised:
# random resizes before a blur (the degradation pipelines) met a new pattern of them being
# 1 or a multiple of 16 every few calls, a compile of 1-2 s each on the H200's host.
@triton.jit(do_not_specialize=["C", "H", "W", "HO", "WO", "OY", "OX", "skb", "sxb", "sxc", "sxh", "syb", "syc", "syh",
                               "SIZE_CLASS"])
def filter2d_kernel(X, Y, K, C, H, W, HO, WO, OY, OX, skb,
                    sxb, sxc, sxh, syb, syc, syh, border_value,
                    PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                    RX: tl.constexpr, RY: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
                    BORDER: tl.constexpr, OFF64: tl.constexpr, NEAR: tl.constexpr, SIZE_CLASS,
                    T: tl.constexpr, S: tl.constexpr, P: tl.constexpr, SEG: tl.constexpr,
                    PRE: tl.constexpr):
    """Y[b, c, i, j] = EPI(sum_{u,v} K[b, u, v] PRO(X~[b, c, i+OY+u-RY, j+OX+v-RX])) for
    (i, j) in [0, HO) x [0, WO), X~ being X extended by the border; K is float32
    (B or 1, 2*RY+1, 2*RX+1) contiguous, image b's kernel at K + b * skb (skb = 0: one
    kernel for the batch). ``SIZE_CLASS`` only feeds the autotune key."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, SEG, T * S)
    x_base = X + b * sxb + c * sxc
    y_base = Y + b * syb + c * syc
    k_base = K + b * skb
    scale = neighbourhood.linear_scale(X.dtype.element_ty, PRO)  # applied once, to the result
    bv = border_value / scale
    lane = tl.arange(0, T)[:, None] * S + tl.arange(0, S)[None, :]
    out_cols = w0 + lane
    in_cols = out_cols + OX
    r0 = h0 + OY - RY
    o_end = tl.minimum(h0 + SEG, HO)
    n_rows = o_end - h0 + 2 * RY
    out_off = offset(out_cols, SYW, OFF64)
    _march(x_base, y_base, k_base, b, c, h0, r0, n_rows, o_end, H, W, sxh, syh, scale, bv,
           in_cols, offset(borders.remap(in_cols, W, BORDER), SXW, OFF64), out_off, out_cols < WO, NEAR,
           PRO, pro_args, EPI, epi_args, OY, RX, RY, SXW, BORDER, OFF64, T, S, P, PRE)


@triton.jit
def plane_kernel(X, Y, K, C, H, W, HO, WO, OY, OX, skb,
                 sxb, sxc, sxh, syb, syc, syh, border_value,
                 PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                 RX: tl.constexpr, RY: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
                 BORDER: tl.constexpr, OFF64: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                 KHP: tl.constexpr, KWP: tl.constexpr):
    """``filter2d_kernel``'s result for the interpreter, one program per BH x BW tile (one
    per plane where the tensor limit allows): one (KHP, KWP, BH, BW) gather of the pixels
    under every tap, one product summed over the taps. The interpreter's cost is per operation and per call of a
    jitted helper (milliseconds each): the strip's per-row, per-tap steps cost it seconds
    a plane."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, BH, BW)
    x_base = X + b * sxb + c * sxc
    k_base = K + b * skb
    scale = neighbourhood.linear_scale(X.dtype.element_ty, PRO)
    out_rows = h0 + tl.arange(0, BH)[:, None]
    out_cols = w0 + tl.arange(0, BW)[None, :]
    u = tl.arange(0, KHP)[:, None, None, None]  # the taps, padded to powers of two
    v = tl.arange(0, KWP)[None, :, None, None]
    r = out_rows[None, None, :, :] + (OY - RY) + u
    row_ptr = x_base + offset(borders.remap(r, H, BORDER), sxh, OFF64)
    x = _tap(row_ptr, out_cols[None, None, :, :] + OX, v, W, c, (r >= 0) & (r < H), border_value / scale, PRO,
             pro_args, False, RX, SXW, BORDER, OFF64)
    taps = tl.load(k_base + (u * (2 * RX + 1) + v), mask=(u < 2 * RY + 1) & (v < 2 * RX + 1), other=0.0)
    acc = tl.sum(tl.sum(taps * x, axis=0), axis=0)
    y = acc * scale
    if len(EPI) > 0:
        xr = borders.remap(out_rows + OY, H, BORDER)
        xc = borders.remap(out_cols + OX, W, BORDER)
        x_in = neighbourhood.load(x_base + offset(xr, sxh, OFF64) + offset(xc, SXW, OFF64), None, 0.0, c, PRO,
                                  pro_args, neighbourhood.UNIT, BORDER)
        y = pointwise.apply_epilogue(y, x_in, b, c, EPI, epi_args)
    mask = (out_rows < HO) & (out_cols < WO)
    pixels.store(Y + b * syb + c * syc + offset(out_rows, syh, OFF64) + offset(out_cols, SYW, OFF64), y, mask)


tuning = Tuning(lambda meta: [tile_config(**t) for t in candidates(meta["RY"])],
                key=["RX", "RY", "C", "SXW", "SYW", "BORDER", "OFF64", "NEAR", "PRO", "EPI", "SIZE_CLASS"])


def launch(x, y, k, oy=0, ox=0, border=0, border_value=0.0, pro=((), ()), epi=((), ()), tile=None):
    """Correlate 4-D ``x`` (B, C, H, W) into 4-D ``y`` (B, C, HO, WO) with float32 kernels
    ``k`` (B or 1, kh, kw), contiguous on the device, odd sizes. ``pro``/``epi`` are
    (steps, args) chains, ``border`` a code from ``core.borders``; ``tile`` (one of
    ``ALL_TILES``) bypasses autotuning."""
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    ry, rx = (k.shape[-2] - 1) // 2, (k.shape[-1] - 1) // 2
    skb = k.stride(0) if k.shape[0] > 1 else 0
    args = (x, y, k, C, H, W, HO, WO, oy, ox, skb, x.stride(0), x.stride(1), x.stride(2),
            y.stride(0), y.stride(1), y.stride(2), float(border_value), pro[0], pro[1], epi[0], epi[1])
    meta = dict(RX=rx, RY=ry, SXW=x.stride(3), SYW=y.stride(3), BORDER=border, OFF64=needs_int64(x, y))
    if interpreting() and tile is None:
        khp, kwp = pow2_at_least(2 * ry + 1, 1, 128), pow2_at_least(2 * rx + 1, 1, 128)
        room = tl.TRITON_MAX_TENSOR_NUMEL // (khp * kwp)  # pixels a tile may hold under every tap
        bw = pow2_at_least(WO, 1, room)
        bh = pow2_at_least(HO, 1, room // bw)
        launch_kernel(plane_kernel, lambda m: (programs(B * C, HO, WO, bh, bw),), args, meta, x,
                      tile_config(BH=bh, BW=bw, KHP=khp, KWP=kwp))
        return
    # every column read (the last strip's beyond WO aside) lies within one width of the image
    near = ox - rx > -W and ox + WO - 1 + rx < 2 * W - 1
    grid = lambda m: (programs(B * C, HO, WO, m["SEG"], m["T"] * m["S"]),)
    meta.update(NEAR=near, SIZE_CLASS=size_class(HO, WO))
    launch_kernel(filter2d_kernel, grid, args, meta, x, None if tile is None else tile_config(**tile), tuning)
