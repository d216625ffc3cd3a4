"""Bilateral and joint bilateral filtering: one launch, no allocation beyond the output.

Each program owns a ``BH x BW`` tile of one image, all channels at once: pixel vectors are
``(CP, BH, BW)`` blocks (CP, a power of two >= C, masked), because the range weight
couples the channels. For every offset of the window it loads the neighbours' guide
vectors (shifted loads of the same lines: L1/L2 hits), forms the distance, and takes
*one* exponential per tap: the spatial and range terms share one ``exp2`` whose
coefficients are prescaled by log2(e). Rows are a run-time loop and columns are unrolled,
so compile time grows with the diameter, not its square.
"""
import triton
import triton.language as tl

from .core import borders, pixels, pointwise
from .core.tiling import (autotuning, interpreting, needs_int64, offset, pow2_at_least, programs,
                          size_class, tile_configs, tile_origin)

LOG2E = 1.4426950408889634
MAX_RADIUS = 32


@triton.jit
def _vectors(base, ch, n_ch, sc, rows, row_ok, cols, H, W, sh, sw, border_value,
             BORDER: tl.constexpr, OFF64: tl.constexpr):
    """The (CP, BH, BW) block base[ch, rows, remap(cols)] in unit scale, with the constant
    border's value outside the image; ``rows`` are already remapped, ``row_ok`` says which
    of them lay inside."""
    c_idx = borders.remap(cols, W, BORDER)
    offs = (offset(ch, sc, OFF64)[:, None, None] + offset(rows, sh, OFF64)[None, :, None]
            + (c_idx * sw)[None, None, :])
    valid = (ch < n_ch)[:, None, None]
    v = pixels.load(base + offs, valid)
    if BORDER == borders.CONSTANT:
        ok = row_ok[:, None] & borders.inside(cols, W)[None, :]
        v = tl.where(ok[None, :, :], v, border_value)
    # padding channels are zero everywhere, so they add nothing to the distances
    return tl.where(valid, v, 0.0)


@triton.jit
def _prologue(v, ch, n_ch, PRO: tl.constexpr, pro_args):
    """PRO on image vectors; padding channels stay zero (and index channel n_ch - 1, so
    per-channel steps never read past their vectors)."""
    chan = tl.minimum(ch, n_ch - 1)[:, None, None]
    return tl.where((ch < n_ch)[:, None, None], pointwise.apply_chain(v, chan, PRO, pro_args), 0.0)


@triton.jit
def bilateral_kernel(X, G, Y, COLOR, SPACE, C, CG, H, W,
                     sxb, sxc, sxh, sxw, sgb, sgc, sgh, sgw, syb, syc, syh, syw, border_value,
                     PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                     R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr, JOINT: tl.constexpr,
                     BORDER: tl.constexpr, OFF64: tl.constexpr, CP: tl.constexpr, CGP: tl.constexpr,
                     SIZE_CLASS, BH: tl.constexpr, BW: tl.constexpr):
    """Y = sum_q w X~[q] / sum_q w with w = exp2(SPACE[b] |p-q|^2 + COLOR[b] D^2), D the
    l1 or l2 distance of the guide vectors (G if JOINT, else PRO(X)). COLOR and SPACE hold
    per-image coefficients already multiplied by -log2(e) / 2 / sigma^2."""
    b, _, h0, w0 = tile_origin(tl.program_id(0), 1, H, W, BH, BW)
    color = tl.load(COLOR + b)
    space = tl.load(SPACE + b)
    x_base = X + b * sxb
    g_base = G + b * sgb
    ch = tl.arange(0, CP)
    chg = tl.arange(0, CGP)
    rows = h0 + tl.arange(0, BH)
    cols = w0 + tl.arange(0, BW)
    centre_rows = borders.remap(rows, H, BORDER)
    x_in = _prologue(
        _vectors(x_base, ch, C, sxc, centre_rows, rows < H, cols, H, W, sxh, sxw, border_value, BORDER, OFF64),
        ch, C, PRO, pro_args)
    if JOINT:
        g_in = _vectors(g_base, chg, CG, sgc, centre_rows, rows < H, cols, H, W, sgh, sgw, border_value,
                        BORDER, OFF64)
    else:
        g_in = x_in

    num = tl.zeros((CP, BH, BW), dtype=tl.float32)
    den = tl.zeros((BH, BW), dtype=tl.float32)
    for dy in range(-R, R + 1):
        q_rows = borders.remap(rows + dy, H, BORDER)
        q_ok = borders.inside(rows + dy, H)
        for dx in tl.static_range(-R, R + 1):
            if (not DISK) or (dx * dx + dy * dy <= R * R):
                v = _prologue(
                    _vectors(x_base, ch, C, sxc, q_rows, q_ok, cols + dx, H, W, sxh, sxw, border_value,
                             BORDER, OFF64),
                    ch, C, PRO, pro_args)
                if JOINT:
                    g = _vectors(g_base, chg, CG, sgc, q_rows, q_ok, cols + dx, H, W, sgh, sgw, border_value,
                                 BORDER, OFF64)
                else:
                    g = v
                diff = g - g_in
                if L1:
                    d = tl.sum(tl.abs(diff), axis=0)
                    d2 = d * d
                else:
                    d2 = tl.sum(diff * diff, axis=0)
                w = tl.exp2(space * (dx * dx + dy * dy) + color * d2)
                num += w[None, :, :] * v
                den += w

    y = num / den[None, :, :]
    y = pointwise.apply_epilogue(y, x_in, tl.minimum(ch, C - 1)[:, None, None], EPI, epi_args)
    offs = (offset(ch, syc, OFF64)[:, None, None] + offset(rows, syh, OFF64)[None, :, None]
            + (cols * syw)[None, None, :])
    mask = (ch < C)[:, None, None] & ((rows < H)[:, None] & (cols < W)[None, :])[None, :, :]
    pixels.store(Y + b * syb + offs, y, mask)


def _prune(configs_, named_args, **kwargs):
    """At most 4K pixel-channel accumulators a program: channels shrink the tile."""
    cp = max(kwargs["CP"], kwargs["CGP"])
    kept = [c for c in configs_ if cp * c.kwargs["BH"] * c.kwargs["BW"] <= 4096]
    return kept or [min(configs_, key=lambda c: c.kwargs["BH"] * c.kwargs["BW"])]


TILES = [dict(BH=16, BW=32, num_warps=4), dict(BH=16, BW=64, num_warps=4),
         dict(BH=32, BW=32, num_warps=4), dict(BH=8, BW=64, num_warps=4), dict(BH=8, BW=32, num_warps=2)]
CONFIGS = tile_configs(TILES)
bilateral_tuned = triton.autotune(
    configs=CONFIGS,
    key=["R", "DISK", "L1", "JOINT", "BORDER", "CP", "CGP", "PRO", "EPI", "SIZE_CLASS"],
    prune_configs_by={"early_config_prune": _prune},
)(bilateral_kernel)


def launch(x, guide, y, color, space, radius, disk, l1, joint, border=0, border_value=0.0,
           pro=((), ()), epi=((), ())):
    """Filter 4-D ``x`` (B, C, H, W) into ``y`` with the guide ``guide`` (batch B or 1;
    ignored unless ``joint``). ``color``/``space`` are float32 per-image coefficients
    (-log2(e) / (2 sigma^2)) on the device."""
    B, C, H, W = x.shape
    CG = guide.shape[1]
    sgb = guide.stride(0) if guide.shape[0] == B else 0
    args = (x, guide, y, color, space, C, CG, H, W, *x.stride(), sgb, *guide.stride()[1:], *y.stride(),
            float(border_value), pro[0], pro[1], epi[0], epi[1])
    meta = dict(R=radius, DISK=disk, L1=l1, JOINT=joint, BORDER=border, OFF64=needs_int64(x, guide, y),
                CP=triton.next_power_of_2(C), CGP=triton.next_power_of_2(CG) if joint else 1,
                SIZE_CLASS=size_class(H, W))
    grid = lambda m: (programs(B, H, W, m["BH"], m["BW"]),)
    if interpreting():
        tile = dict(BH=pow2_at_least(H, 1, 128), BW=pow2_at_least(W, 1, 128))
        bilateral_kernel[grid(tile)](*args, **meta, **tile)
    elif not autotuning():
        cfg = _prune(CONFIGS, None, **meta)[0]
        bilateral_kernel[grid(cfg.kwargs)](*args, **meta, **cfg.kwargs, num_warps=cfg.num_warps)
    else:
        bilateral_tuned[grid](*args, **meta)
