"""Bilateral, joint bilateral filtering and joint bilateral upsampling, with their
backward kernels. Each forward is one launch with no allocation beyond the output.

The filter (``bilateral_kernel``) works on rows: every value is one row of one channel,
a (BW,) vector with one column per thread, so there is no padded channel and no axis
reduction. Each loaded input row serves every output row it is a tap of (up to 2R + 1),
through a rotating set of pending output rows (``SLIDE``) or, for windows too wide for
that, a block of K output rows; and a tap's weight is one ``exp2``, the guide being
prescaled so that the exponent is (spatial term - squared distance). See
``bilateral_kernel`` and PERFORMANCE.md for what each choice measured. Joint bilateral
upsampling (``upsample_kernel``) works on rows the same way: each low-resolution sample
a column reaches is read once for the K output rows of a program.

The two backward kernels still work on ``(CP, BH, BW)`` blocks (CP, a power of two >= C,
masked) of all channels at once, one exponential per tap, the window's rows and columns
as run-time loops: unrolled columns made Triton 3.6 keep every tap's shifted block live
(255 registers and spills, 74 s to compile the upsample gradient at radius 8).
"""
import dataclasses
import functools
from typing import Optional

import torch
import triton
import triton.language as tl

from .core import borders, neighbourhood, pixels, pointwise
from .core.launch import Meta, Tuning, launch as launch_kernel, tile_config
from .core.tiling import (cdiv, interpreting, needs_int64, next_pow2, offset, pow2_at_least, programs, size_class,
                          sm_count, tile_origin)

LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)
MAX_RADIUS = 32


@triton.jit
def _vectors(base, ch, n_ch, sc, rows, row_ok, cols, H, W, sh, sw, border_value,
             BORDER: tl.constexpr, OFF64: tl.constexpr):
    """The (CP, BH, BW) block base[ch, rows, remap(cols)] in unit scale, with the constant
    border's value outside the image; ``rows`` are already remapped, ``row_ok`` says which
    of them lay inside."""
    c_idx = borders.remap(cols, W, BORDER)
    offs = (offset(ch, sc, OFF64)[:, None, None] + offset(rows, sh, OFF64)[None, :, None]
            + offset(c_idx, sw, OFF64)[None, None, :])
    valid = (ch < n_ch)[:, None, None]
    inside = (row_ok[:, None] & borders.inside(cols, W)[None, :])[None, :, :]
    v = neighbourhood.load(base + offs, inside, border_value, 0, (), (), neighbourhood.UNIT, BORDER, valid)
    # padding channels are zero everywhere, so they add nothing to the distances
    return tl.where(valid, v, 0.0)


@triton.jit
def _distance2(diff, L1: tl.constexpr):
    """Squared colour distance of (C, BH, BW) differences: (sum |d|)^2 or sum d^2."""
    if L1:
        d = tl.sum(tl.abs(diff), axis=0)
        return d * d
    else:
        return tl.sum(diff * diff, axis=0)


@triton.jit
def _distance2_grad(diff, L1: tl.constexpr):
    """d(_distance2(a - b)) / da, per channel (sign(0) = 0, as torch's abs)."""
    if L1:
        d = tl.sum(tl.abs(diff), axis=0)
        return 2.0 * d[None, :, :] * tl.where(diff > 0, 1.0, tl.where(diff < 0, -1.0, 0.0))
    else:
        return 2.0 * diff


@triton.jit
def _output_tile(COLOR, SPACE, H, W, CP: tl.constexpr, CGP: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """This program's image, its colour and space coefficients, the channel ranges and the
    rows and columns of its output tile."""
    b, _, h0, w0 = tile_origin(tl.program_id(0), 1, H, W, BH, BW)
    return (b, tl.load(COLOR + b), tl.load(SPACE + b), tl.arange(0, CP), tl.arange(0, CGP),
            h0 + tl.arange(0, BH), w0 + tl.arange(0, BW))


@triton.jit
def _row(base, r, cols, H, W, sc, sh, sw, border_value, N: tl.constexpr, PRO: tl.constexpr, pro_args,
         BORDER: tl.constexpr, NEAR: tl.constexpr, dx=0, INSIDE: tl.constexpr = False):
    """The N channel vectors of row ``r`` at columns ``cols + dx`` (indices through the
    border: within one image size of it when NEAR), PRO of unit scale, and the constant
    border's value outside the image (``neighbourhood.load``). A tuple of N (BW,) vectors.
    INSIDE: ``cols + dx`` lie inside the image (``bilateral_kernel``'s clamped columns), so
    the loads of every compile-time dx share one address a channel, dx its constant
    offset (without it, two integer additions a load: 5 % of the 9 x 9 kernel)."""
    if INSIDE:
        row = base + borders.remap_near(r, H, BORDER) * sh
        col = cols * sw
        inside = borders.inside(r, H)
    elif NEAR:
        row = base + borders.remap_near(r, H, BORDER) * sh
        col = borders.remap_near(cols + dx, W, BORDER) * sw
        inside = borders.inside(cols + dx, W) & borders.inside(r, H)
    else:
        row = base + borders.remap(r, H, BORDER) * sh
        col = borders.remap(cols + dx, W, BORDER) * sw
        inside = borders.inside(cols + dx, W) & borders.inside(r, H)
    out = ()
    for c in tl.static_range(N):
        at = row + c * sc + col
        if INSIDE:
            at += dx * sw
        out = out + (neighbourhood.load(at, inside, border_value, c, PRO, pro_args, neighbourhood.UNIT, BORDER),)
    return out


@triton.jit
def _scaled(vectors, s):
    """Each vector times s."""
    out = ()
    for c in tl.static_range(len(vectors)):
        out = out + (vectors[c] * s,)
    return out


@triton.jit
def _wide(strides, OFF64: tl.constexpr):
    """The strides as int64 when in-image offsets can pass 2**31, so every product with
    them is int64; else as they are. (``tl.cast``, not ``.to``: Triton passes an integer
    argument equal to 1, such as a contiguous image's column stride, as the constant 1.)"""
    if OFF64:
        out = ()
        for i in tl.static_range(len(strides)):
            out = out + (tl.cast(strides[i], tl.int64),)
        return out
    else:
        return strides


@triton.jit
def _exponent(spatial, g, centre, L1: tl.constexpr):
    """spatial - D^2, the guide vectors being prescaled by sqrt(-COLOR) so that D^2 is
    sum d^2 (l2) or (sum |d|)^2 (l1) over the channels: one FFMA a channel for l2."""
    if L1:
        s = tl.abs(g[0] - centre[0])
        for c in tl.static_range(1, len(g)):
            s += tl.abs(g[c] - centre[c])
        return spatial - s * s
    else:
        e = spatial
        for c in tl.static_range(len(g)):
            d = g[c] - centre[c]
            e -= d * d
        return e


@triton.jit
def _expanded_exponent(a, g, centre):
    """``_exponent`` of the l2 distance as |g|^2 + |c|^2 - 2 g.c (EXPANDED): ``a`` is the
    loaded vectors' part (spatial term of dx - |g|^2), ``centre`` the slot's (2 c, spatial
    term of dy - |c|^2); one FADD and one FFMA a channel, against two FFMAs a channel."""
    e = a + centre[len(g)]
    for c in tl.static_range(len(g)):
        e += g[c] * centre[c]
    return e


@triton.jit
def _slot_centre(g, dy, space, EXPANDED: tl.constexpr):
    """A slot's guide entries for its output row's prescaled guide ``g``, dy rows from the
    input row: ``g``, or EXPANDED (2 g, spatial term of dy - |g|^2)."""
    if EXPANDED:
        b = space * (dy * dy)
        out = ()
        for c in tl.static_range(len(g)):
            b -= g[c] * g[c]
            out = out + (g[c] + g[c],)
        return out + (b,)
    else:
        return g


@triton.jit
def _kept_slots(centre, space, n: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, EXPANDED: tl.constexpr):
    """The guide entries of the first n slots as they move one slot on (the next input row
    is one row further from each of their output rows): EXPANDED, each slot's spatial term
    of dy becomes that of dy + 1."""
    if EXPANDED:
        out = ()
        for j in tl.static_range(n):
            s = centre[j * (CG + 1):j * (CG + 1) + CG + 1]
            out = out + s[:CG] + (s[CG] + space * (2 * (j - R) + 1),)
        return out
    else:
        return centre[:n * CG]


@triton.jit
def _values_and_guide(x_base, g_base, r, cols, gscale, H, W, sx, sg, border_value, PRO: tl.constexpr, pro_args,
                      C: tl.constexpr, CG: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr,
                      NEAR: tl.constexpr, dx=0, INSIDE: tl.constexpr = False):
    """Row r at columns ``cols + dx``: its values PRO(X) and its guide prescaled by gscale
    (G's, or those values)."""
    return _split(_raw(x_base, g_base, r, cols, H, W, sx, sg, border_value, PRO, pro_args, C, CG, JOINT, BORDER, NEAR,
                       dx, INSIDE), 0, gscale, C, CG, JOINT)


@triton.jit
def _raw(x_base, g_base, r, cols, H, W, sx, sg, border_value, PRO: tl.constexpr, pro_args, C: tl.constexpr,
         CG: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, dx=0,
         INSIDE: tl.constexpr = False):
    """Row r at ``cols + dx``: its C values PRO(X), then, when JOINT, its CG guide vectors
    (not yet prescaled: the compiler folds the prescaling into each tap's difference)."""
    v = _row(x_base, r, cols, H, W, sx[0], sx[1], sx[2], border_value, C, PRO, pro_args, BORDER, NEAR, dx, INSIDE)
    if JOINT:
        v = v + _row(g_base, r, cols, H, W, sg[0], sg[1], sg[2], border_value, CG, (), (), BORDER, NEAR, dx, INSIDE)
    return v


@triton.jit
def _shifted(x_base, g_base, r, cols, H, W, sx, sg, border_value, PRO: tl.constexpr, pro_args, C: tl.constexpr,
             CG: tl.constexpr, R: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
             INSIDE: tl.constexpr):
    """``_raw`` of row r at every column offset -R .. R, one after the other."""
    out = ()
    for dx in tl.static_range(-R, R + 1):
        out = out + _raw(x_base, g_base, r, cols, H, W, sx, sg, border_value, PRO, pro_args, C, CG, JOINT,
                         BORDER, NEAR, dx, INSIDE)
    return out


@triton.jit
def _split(raw, i: tl.constexpr, gscale, C: tl.constexpr, CG: tl.constexpr, JOINT: tl.constexpr):
    """The values and prescaled guide of the i-th ``_raw`` in ``raw``."""
    n: tl.constexpr = C + CG if JOINT else C
    v = raw[i * n:i * n + C]
    if JOINT:
        return v, _scaled(raw[i * n + C:i * n + n], gscale)
    else:
        return v, _scaled(v, gscale)


@triton.jit
def _column_taps(num, den, r, dx, cols, x_base, g_base, gscale, centre, space, H, W, sx, sg,
                 border_value, PRO: tl.constexpr, pro_args, C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr,
                 DISK: tl.constexpr, L1: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr,
                 NEAR: tl.constexpr, EXPANDED: tl.constexpr, INSIDE: tl.constexpr = False):
    """SLIDE: input row r at column offset dx, loaded once and added to each slot j of the
    sums (num[j C + c], den[j]), whose output row lies dy = j - R rows away. A
    compile-time dx (the caller's static range) costs nothing for the skipped taps
    (outside a disk, the centre) and makes the spatial terms loop-invariant."""
    v, g = _values_and_guide(x_base, g_base, r, cols, gscale, H, W, sx, sg, border_value, PRO, pro_args,
                             C, CG, JOINT, BORDER, NEAR, dx, INSIDE)
    return _slot_taps(num, den, v, g, centre, dx, -R, 1, space, C, CG, R, DISK, L1, EXPANDED)


@triton.jit
def _slot_taps(num, den, v, g, centre, dx, dy0, step: tl.constexpr, space, C: tl.constexpr, CG: tl.constexpr,
               R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr, EXPANDED: tl.constexpr):
    """The sums of every slot j (num[j C + c], den[j], guide entries ``_slot_centre``) with
    the tap of values ``v`` and prescaled guide ``g`` at offset (dx, dy0 + step j) from the
    slot's output row. Each slot's sums are rebuilt whole, not updated in place: slicing
    the whole tuple at every tap costs compile time."""
    if EXPANDED:
        n: tl.constexpr = CG + 1
        a = space * (dx * dx)
        for c in tl.static_range(CG):
            a -= g[c] * g[c]
    else:
        n: tl.constexpr = CG
    out_num = ()
    out_den = ()
    for j in tl.static_range(len(den)):
        dy = dy0 + step * j
        if EXPANDED:
            spatial = a
        else:
            spatial = space * (dx * dx) + space * (dy * dy)
        num_j, den_j = _slot_tap(num[j * C:j * C + C], den[j], _takes(dx, dy, R, DISK), spatial, v, g,
                                 centre[j * n:j * n + n], L1, EXPANDED)
        out_num = out_num + num_j
        out_den = out_den + (den_j,)
    return out_num, out_den


@triton.jit
def _takes(dx, dy, R: tl.constexpr, DISK: tl.constexpr):
    """Whether offset (dx, dy) is a tap: inside the window (a disk's, or any within R of
    a square's) and not the centre: the sums start with the centre's values and weight,
    exactly 1. (The compiler fuses the guide's prescaling into each tap's difference, one
    FFMA, so that a pixel minus itself is the prescaling's rounding error, not 0: with a
    tiny sigma_color even the centre's weight would underflow, and 0 / 0 follow.)
    Compile-time where dx and dy are."""
    if DISK:
        return (dx * dx + dy * dy <= R * R) & ((dx != 0) | (dy != 0))
    else:
        return (dy * dy <= R * R) & ((dx != 0) | (dy != 0))


@triton.jit
def _slot_tap(num, den, take, spatial, v, g, centre, L1: tl.constexpr, EXPANDED: tl.constexpr):
    """One slot's sums (its C value sums and its weight sum) with the tap of values ``v``
    and prescaled guide ``g`` added where ``take`` (a compile-time or a uniform run-time
    condition: skipped taps touch nothing, so a non-finite value outside a disk stays out)."""
    if take:
        if EXPANDED:
            w = tl.exp2(_expanded_exponent(spatial, g, centre))
        else:
            w = tl.exp2(_exponent(spatial, g, centre, L1))
        added = ()
        for c in tl.static_range(len(num)):
            added = added + (num[c] + w * v[c],)
        num = added
        den = den + w
    return num, den


@triton.jit
def _store_row(Y, b, x_base, r, ok, cols, num, den, k: tl.constexpr, H, W, sx, sy, border_value,
               PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, C: tl.constexpr, BORDER: tl.constexpr,
               NEAR: tl.constexpr, ADJOINT: tl.constexpr):
    """Output row r from slot k's sums (``ok`` masks the columns and rows written); under
    ADJOINT the backward's terms instead (``bilateral_kernel``)."""
    inv = 1.0 / den[k]
    y_row = Y + b * sy[0] + r * sy[2] + cols * sy[3]
    if ADJOINT:
        neg_beta = tl.zeros_like(inv)
        for c in tl.static_range(C):
            a = tl.load(y_row + c * sy[1], ok) * inv
            neg_beta -= a * (num[k * C + c] * inv)
            tl.store(y_row + c * sy[1], a, ok)
        tl.store(y_row + C * sy[1], neg_beta, ok)
    else:
        if len(EPI) > 0:
            x_in = _row(x_base, r, cols, H, W, sx[0], sx[1], sx[2], border_value, C, PRO, pro_args, BORDER, NEAR)
        for c in tl.static_range(C):
            y = num[k * C + c] * inv
            if len(EPI) > 0:
                y = pointwise.apply_epilogue(y, x_in[c], c, EPI, epi_args)
            pixels.store(y_row + c * sy[1], y, ok)


@triton.jit
def _edge_columns(X, G, Y, COLOR, SPACE, H, W, sx, sg, sgb, sy, border_value, PRO: tl.constexpr, pro_args,
                  EPI: tl.constexpr, epi_args, C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr,
                  DISK: tl.constexpr, L1: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr,
                  ADJOINT: tl.constexpr, images, part, parts, BW: tl.constexpr):
    """Share ``part`` of ``parts`` of the R columns at each edge of ``images`` images,
    which SLIDE under INSIDE does not store: a pixel a lane (image, row, edge column in
    that order), its taps in run-time loops through the border, in the order of SLIDE's
    so that the sums round alike."""
    n = images * H * (2 * R)
    share = tl.cdiv(n, parts)
    end = tl.minimum(part * share + share, n)
    one = tl.full((BW,), 1.0, dtype=tl.float32)
    for start in range(part * share, end, BW):
        i = start + tl.arange(0, BW)
        ok = i < end
        b = tl.minimum(i // (H * (2 * R)), images - 1).to(tl.int64)
        rows = (i // (2 * R)) % H
        j = i % (2 * R)
        cols = tl.where(j < R, j, W - 2 * R + j)
        space = tl.load(SPACE + b)
        gscale = tl.sqrt(-tl.load(COLOR + b))
        x_base = X + b * sx[0]
        g_base = G + b * sgb
        v, g = _values_and_guide(x_base, g_base, rows, cols, gscale, H, W, sx[1:], sg, border_value, PRO, pro_args,
                                 C, CG, JOINT, BORDER, True)
        num, den = v, one
        for dy in range(-R, R + 1):
            for dx in range(-R, R + 1):
                tv, tg = _values_and_guide(x_base, g_base, rows + dy, cols, gscale, H, W, sx[1:], sg, border_value,
                                           PRO, pro_args, C, CG, JOINT, BORDER, True, dx)
                num, den = _slot_tap(num, den, _takes(dx, dy, R, DISK), space * (dx * dx) + space * (dy * dy), tv,
                                     tg, g, L1, False)
        _store_row(Y, b, x_base, rows, ok, cols, num, (den,), 0, H, W, sx[1:], sy, border_value, PRO, pro_args,
                   EPI, epi_args, C, BORDER, True, ADJOINT)


# EDGES is the last run-time parameter (passed with the meta-parameters): where it stood
# among the first, every variant's parameters moved, and ptxas, given the same PTX but for
# that, kept the column loop's counters in vector registers instead of uniform ones and
# scheduled the loops differently (15 x 15 uint8: 1064 instructions against 1112, and 1.167
# ms against 1.040 on the H200; 5 x 5 0.156-0.162 against 0.150), also where EDGES is unused.
@triton.jit(do_not_specialize=["EDGES"])
def bilateral_kernel(X, G, Y, COLOR, SPACE, H, W,
                     sxb, sxc, sxh, sxw, sgb, sgc, sgh, sgw, syb, syc, syh, syw, border_value,
                     PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                     C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr,
                     JOINT: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr,
                     ADJOINT: tl.constexpr, UNROLL_DX: tl.constexpr, DX_GROUP: tl.constexpr,
                     PREFETCH: tl.constexpr, EXPANDED: tl.constexpr, INSIDE: tl.constexpr, SIZE_CLASS, EDGES,
                     SLIDE: tl.constexpr,
                     K: tl.constexpr, BW: tl.constexpr):
    """Y = sum_q w X~[q] / sum_q w with w = exp2(SPACE[b] |p-q|^2 + COLOR[b] D^2), D the
    l1 or l2 distance of the guide vectors (G if JOINT, else PRO(X); CG channels, C when
    not JOINT). COLOR and SPACE hold per-image coefficients already multiplied by
    -log2(e) / 2 / sigma^2. NEAR: the window is narrower than half the image (cheaper borders).
    ADJOINT (the backward's first pass): Y is float32 (B, C + 1, H, W) and holds dL/dY in
    its first C channels; they become A = dL/dY / DEN, DEN being the weight sums, and
    channel C receives -(A . Y): the per-pixel terms of ``bilateral_backward_kernel``.

    Every vector is one row of one channel, BW columns (one per thread); the guide is
    prescaled by sqrt(-COLOR[b]), so a tap's weight is one exp2 of (spatial term -
    squared scaled distance). A loaded input row serves every output row it is a tap of:

    - SLIDE: the program's column strip marches down K output rows. The 2R + 1 output
      rows that the current input row reaches are slots of a rotating tuple; for each
      column offset dx the row is loaded once and added to all of them (2R + 1 taps,
      all known at compile time; dx too under UNROLL_DX, otherwise a run-time loop; of
      DX_GROUP offsets a step where that is more than one, each offset's row then loaded
      during the previous one's taps).
      When the row is done, the oldest slot is complete: it is stored, and the next
      output row enters. Under PREFETCH (small windows, whose taps are too few to hide
      the loads' latency) the next input row's shifted vectors and the next entering row
      are loaded one step ahead, before this row's taps. EXPANDED (``expands``: l2, the
      grouped column loop, uint8 guides, sigma_color not too small): the squared
      distance as |g|^2 + |c|^2 - 2 g.c, with |g|^2 and dx's spatial term once a load,
      and 2 c and (dy's spatial term - |c|^2) once a slot and row, so that a tap costs 9
      instructions, not 12. INSIDE (``reads_inside``): each thread reads the columns
      around its own clamped R from the image's edges, so that a row's loads share one
      address a channel and take dx as a constant offset; the R columns at each edge are
      left to the last EDGES programs, after the strips (``_edge_columns``).
    - otherwise (wide windows or many channels, whose 2R + 1 slots would not fit the
      registers): the program owns K output rows; for each dx it loads each of their
      K + 2R input rows once and adds it to the output rows within R of it."""
    pid = tl.program_id(0)
    tiles_w = tl.cdiv(W, BW)
    tiles = tiles_w * tl.cdiv(H, K)
    sx = _wide((sxb, sxc, sxh, sxw), OFF64)
    sg = _wide((sgc, sgh, sgw), OFF64)
    sy = _wide((syb, syc, syh, syw), OFF64)
    # under INSIDE the last EDGES programs store the R columns at each edge of the images
    strips = tl.num_programs(0) - EDGES
    if INSIDE:
        edge = pid >= strips
    else:
        edge = False
    if edge:
        _edge_columns(X, G, Y, COLOR, SPACE, H, W, sx, sg, sgb, sy, border_value, PRO, pro_args, EPI, epi_args, C, CG,
                      R, DISK, L1, JOINT, BORDER, ADJOINT, strips // tiles, pid - strips, EDGES, BW)
    else:
        b = (pid // tiles).to(tl.int64)
        t = pid % tiles
        h0 = (t // tiles_w) * K
        cols = (t % tiles_w) * BW + tl.arange(0, BW)
        col_ok = cols < W
        color = tl.load(COLOR + b)
        space = tl.load(SPACE + b)
        gscale = tl.sqrt(-color)
        x_base = X + b * sxb
        g_base = G + b * sgb

        one = (tl.full((BW,), 1.0, dtype=tl.float32),)
        if SLIDE:
            # INSIDE: each thread reads the columns around its own clamped R from the
            # image's edges, so that no read needs the border; the R columns at each edge
            # are the last programs' (``_edge_columns``)
            if INSIDE:
                at = tl.minimum(tl.maximum(cols, R), W - 1 - R)
                stored = col_ok & (cols >= R) & (cols < W - R)
            else:
                at = cols
                stored = col_ok
            # slot j holds output row r + R - j while input row r is added (dy = j - R); a slot
            # starts with its row's centre tap (values, weight 1); the slots of rows above h0
            # are scratch (never stored), so they start as row h0
            v, g = _values_and_guide(x_base, g_base, h0, at, gscale, H, W, sx[1:], sg, border_value, PRO, pro_args,
                                     C, CG, JOINT, BORDER, NEAR, 0, INSIDE)
            num, centre, den = v, _slot_centre(g, -R, space, EXPANDED), one
            for j in tl.static_range(1, 2 * R + 1):
                num, centre, den = num + v, centre + _slot_centre(g, j - R, space, EXPANDED), den + one
            h1 = tl.minimum(h0 + K, H)
            if PREFETCH:
                # the input row's shifted vectors and the entering row, loaded one step ahead
                ahead = _shifted(x_base, g_base, h0 - R, at, H, W, sx[1:], sg, border_value, PRO, pro_args, C, CG,
                                 R, JOINT, BORDER, NEAR, INSIDE)
                entering = _raw(x_base, g_base, h0 + 1, at, H, W, sx[1:], sg, border_value, PRO, pro_args, C, CG,
                                JOINT, BORDER, NEAR, 0, INSIDE)
            for r in range(h0 - R, h1 + R):
                if PREFETCH:
                    # (the last steps load again the last rows the strip reads, not rows past them)
                    ahead_next = _shifted(x_base, g_base, tl.minimum(r + 1, h1 + R - 1), at, H, W, sx[1:], sg,
                                          border_value, PRO, pro_args, C, CG, R, JOINT, BORDER, NEAR, INSIDE)
                    entering_next = _raw(x_base, g_base, tl.minimum(r + R + 2, h1 + 2 * R), at, H, W, sx[1:], sg,
                                         border_value, PRO, pro_args, C, CG, JOINT, BORDER, NEAR, 0, INSIDE)
                    for dx in tl.static_range(-R, R + 1):
                        v, g = _split(ahead, dx + R, gscale, C, CG, JOINT)
                        num, den = _slot_taps(num, den, v, g, centre, dx, -R, 1, space, C, CG, R, DISK, L1, EXPANDED)
                elif UNROLL_DX:
                    for dx in tl.static_range(-R, R + 1):
                        num, den = _column_taps(num, den, r, dx, at, x_base, g_base, gscale, centre, space, H, W,
                                                sx[1:], sg, border_value, PRO, pro_args, C, CG, R, DISK, L1, JOINT,
                                                BORDER, NEAR, EXPANDED, INSIDE)
                elif DX_GROUP > 1:
                    # DX_GROUP offsets a loop step, each offset's row loaded during the taps of the
                    # one before
                    ahead = _raw(x_base, g_base, r, cols - R, H, W, sx[1:], sg, border_value, PRO, pro_args, C, CG,
                                 JOINT, BORDER, NEAR)
                    for dx in tl.range(-R, R + 1, loop_unroll_factor=DX_GROUP):
                        v, g = _split(ahead, 0, gscale, C, CG, JOINT)
                        ahead = _raw(x_base, g_base, r, cols + tl.minimum(dx + 1, R), H, W, sx[1:], sg, border_value,
                                     PRO, pro_args, C, CG, JOINT, BORDER, NEAR)
                        num, den = _slot_taps(num, den, v, g, centre, dx, -R, 1, space, C, CG, R, DISK, L1, EXPANDED)
                else:
                    for dx in range(-R, R + 1):
                        num, den = _column_taps(num, den, r, dx, cols, x_base, g_base, gscale, centre, space, H, W,
                                                sx[1:], sg, border_value, PRO, pro_args, C, CG, R, DISK, L1, JOINT,
                                                BORDER, NEAR, EXPANDED)
                done = r - R
                _store_row(Y, b, x_base, done, stored & (done >= h0), cols, num, den, 2 * R, H, W, sx[1:], sy,
                           border_value, PRO, pro_args, EPI, epi_args, C, BORDER, NEAR, ADJOINT)
                if PREFETCH:
                    v, g = _split(entering, 0, gscale, C, CG, JOINT)
                    ahead, entering = ahead_next, entering_next
                else:
                    v, g = _values_and_guide(x_base, g_base, r + R + 1, at, gscale, H, W, sx[1:], sg, border_value,
                                             PRO, pro_args, C, CG, JOINT, BORDER, NEAR, 0, INSIDE)
                num, den = v + num[:2 * R * C], one + den[:2 * R]
                centre = _slot_centre(g, -R, space, EXPANDED) + _kept_slots(centre, space, 2 * R, CG, R, EXPANDED)
        else:
            num = ()
            centre = ()
            den = ()
            for k in tl.static_range(K):
                v, g = _values_and_guide(x_base, g_base, h0 + k, cols, gscale, H, W, sx[1:], sg, border_value,
                                         PRO, pro_args, C, CG, JOINT, BORDER, NEAR)
                num, centre, den = num + v, centre + g, den + one
            for dx in range(-R, R + 1):
                for i in range(K + 2 * R):
                    r = h0 - R + i
                    v, g = _values_and_guide(x_base, g_base, r, cols + dx, gscale, H, W, sx[1:], sg, border_value,
                                             PRO, pro_args, C, CG, JOINT, BORDER, NEAR)
                    # output row k lies dy = i - R - k rows away
                    num, den = _slot_taps(num, den, v, g, centre, dx, i - R, -1, space, C, CG, R, DISK, L1, False)
            for k in tl.static_range(K):
                _store_row(Y, b, x_base, h0 + k, col_ok & (h0 + k < H), cols, num, den, k, H, W, sx[1:], sy,
                           border_value, PRO, pro_args, EPI, epi_args, C, BORDER, NEAR, ADJOINT)


@triton.jit
def _adjoint_row(AB, b, r, cols, H, W, C: tl.constexpr, OFF64: tl.constexpr):
    """Row r of ``bilateral_kernel``'s ADJOINT output AB (contiguous) at ``cols``: the C
    vectors of A and -beta, zero outside the image (no output there)."""
    inside = borders.inside(r, H) & borders.inside(cols, W)
    n = _wide((H, W), OFF64)
    plane = n[0] * n[1]
    row = AB + b * (C + 1) * plane + offset(tl.minimum(tl.maximum(r, 0), H - 1), W, OFF64)
    ptrs = row + tl.minimum(tl.maximum(cols, 0), W - 1)
    a = ()
    for c in tl.static_range(C):
        a = a + (tl.load(ptrs + c * plane, inside, other=0.0),)
    return a, tl.load(ptrs + C * plane, inside, other=0.0)


@triton.jit
def _pair(zv, zg, k: tl.constexpr, dx, dy, xp, gp, ap, nbp, xt, gt, at, nbt, space, color, natural,
          C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr,
          JOINT: tl.constexpr):
    """Add the pair (t, p), t being slot k's extended position and p = t + (dx, dy) the
    loaded one, into slot k's gradient sums (``bilateral_backward_kernel``); skipped (a
    uniform branch) outside a disk window and at the centre, whose value term A_t the sums
    start with and whose guide term is 0."""
    if DISK:
        take = (dx * dx + dy * dy <= R * R) & ((dx != 0) | (dy != 0))
    else:
        take = (dx != 0) | (dy != 0)
    if take:
        d = ()
        for c in tl.static_range(CG):
            d = d + (gt[k * CG + c] - gp[c],)
        if L1:
            s = tl.abs(d[0])
            for c in tl.static_range(1, CG):
                s += tl.abs(d[c])
            d2 = s * s
        else:
            d2 = d[0] * d[0]
            for c in tl.static_range(1, CG):
                d2 += d[c] * d[c]
        w = tl.exp2(space * (dx * dx) + space * (dy * dy) + color * d2)
        e = nbt[k] + nbp
        for c in tl.static_range(C):
            e += at[k * C + c] * xp[c]
            e += ap[c] * xt[k * C + c]
        # dL/dD^2 of the pair; w first, so that an underflowed weight gives 0, never 0 * inf
        f = ((e + e) * w) * natural
        if L1:
            f = f * s
        for c in tl.static_range(C):
            zv = zv[:k * C + c] + (zv[k * C + c] + w * ap[c],) + zv[k * C + c + 1:]
        for c in tl.static_range(CG):
            if L1:
                term = tl.where(d[c] > 0, f, tl.where(d[c] < 0, -f, 0.0))  # sign(0) = 0, as torch's abs
            else:
                term = f * d[c]
            if JOINT:
                zg = zg[:k * CG + c] + (zg[k * CG + c] + term,) + zg[k * CG + c + 1:]
            else:
                zv = zv[:k * C + c] + (zv[k * C + c] + term,) + zv[k * C + c + 1:]
    return zv, zg


@triton.jit
def _extended_position(x_base, g_base, AB, b, r, cols, H, W, sx, sg, border_value, C: tl.constexpr,
                       CG: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr,
                       OFF64: tl.constexpr):
    """Everything the gradient needs of row r at ``cols``: values, guide (the values unless
    JOINT), A and -beta."""
    x = _row(x_base, r, cols, H, W, sx[0], sx[1], sx[2], border_value, C, (), (), BORDER, NEAR)
    if JOINT:
        g = _row(g_base, r, cols, H, W, sg[0], sg[1], sg[2], border_value, CG, (), (), BORDER, NEAR)
    else:
        g = x
    a, nb = _adjoint_row(AB, b, r, cols, H, W, C, OFF64)
    return x, g, a, nb


@triton.jit
def _fold_row(D, b, r, cols, ok, z, k: tl.constexpr, N: tl.constexpr, H, W, R: tl.constexpr,
              BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr):
    """Add slot k's N gradient vectors, at the extended grid's row r and ``cols``, into the
    pixels of D (contiguous (B, N, H, W), zeroed) that the border reads those positions
    from (``borders.fold_add``): pixels within R + 1 of an edge receive several."""
    if NEAR:
        rr = borders.remap_near(r, H, BORDER)
        cc = borders.remap_near(cols, W, BORDER)
    else:
        rr = borders.remap(r, H, BORDER)
        cc = borders.remap(cols, W, BORDER)
    n = _wide((H, W), OFF64)
    plane = n[0] * n[1]
    ptrs = D + b * N * plane + offset(rr, W, OFF64) + cc
    inside = borders.inside(r, H) & borders.inside(cols, W)
    band = (rr <= R) | (rr >= H - 1 - R) | (cc <= R) | (cc >= W - 1 - R)
    for c in tl.static_range(N):
        borders.fold_add(ptrs + c * plane, z[k * N + c], ok, inside, band, BORDER)


@triton.jit
def bilateral_backward_kernel(X, G, AB, DX, DG, COLOR, SPACE, H, W, sxb, sxc, sxh, sxw, sgb, sgc, sgh, sgw,
                              border_value, C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr,
                              DISK: tl.constexpr, L1: tl.constexpr, JOINT: tl.constexpr, BORDER: tl.constexpr,
                              NEAR: tl.constexpr, OFF64: tl.constexpr, SLIDE: tl.constexpr, K: tl.constexpr,
                              BW: tl.constexpr):
    """The gradient of ``bilateral_kernel``: DX += dL/dX and, when JOINT, DG += dL/dG
    (contiguous float32 (B, C or CG, H, W), zeroed), from AB, the ADJOINT pass's A = dL/dY
    / DEN and -beta = -(A . Y) (``_adjoint_row``).

    The forward's output at p is Y_p = sum_q w(p, q) X_q / DEN_p. Gathered at each position
    t of the border-extended grid (H + 2R) x (W + 2R), over the window's offsets d with
    p = t + d: the value path DX[t] += w(p, t) A_p (p in the image), and the guide path
    DG[t] += (e(t, p) + e(p, t)) dD^2(g_t - g_p)/dg_t, where e(a, b) = k w(a, b) (A_a . X_b
    - A_a . Y_a), k the natural colour coefficient. The window and the distances are
    symmetric, so w(t, p) = w(p, t): one exp2 a pair serves both paths and both
    directions, and A and beta are zero outside the image. The border fold goes into the
    store (``_fold_row``). Without a guide (JOINT false) both paths go into DX.

    The positions are rows of BW columns, as the forward's outputs, with the same two
    ways of reusing a loaded row: SLIDE, 2R + 1 rotating slots of pending positions down
    a strip of K rows; otherwise blocks of K rows. A slot keeps its sums, values, guide, A
    and -beta: C + 1 vectors more than the forward's."""
    pid = tl.program_id(0)
    HE = H + 2 * R
    tiles_w = tl.cdiv(W + 2 * R, BW)
    tiles = tiles_w * tl.cdiv(HE, K)
    b = (pid // tiles).to(tl.int64)
    t = pid % tiles
    h0 = (t // tiles_w) * K - R  # this program's first row and columns, in image coordinates
    cols = (t % tiles_w) * BW - R + tl.arange(0, BW)
    col_ok = cols < W + R
    sx = _wide((sxc, sxh, sxw), OFF64)
    sg = _wide((sgc, sgh, sgw), OFF64)
    color = tl.load(COLOR + b)
    space = tl.load(SPACE + b)
    natural = color / LOG2E
    x_base = X + b * sxb
    g_base = G + b * sgb
    fresh = ()  # a slot's new guide sums: none without a guide
    if JOINT:
        for _ in tl.static_range(CG):
            fresh = fresh + (tl.zeros((BW,), dtype=tl.float32),)
    if SLIDE:
        # slot j holds position row r + R - j while input row r is added (dy = j - R); the
        # slots of rows above h0 are scratch (never stored), so they start as row h0
        x, g, a, nb = _extended_position(x_base, g_base, AB, b, h0, cols, H, W, sx, sg, border_value, C, CG,
                                         JOINT, BORDER, NEAR, OFF64)
        xt, gt, at, nbt, zv, zg = x, g, a, (nb,), a, fresh
        for _ in tl.static_range(2 * R):
            xt, gt, at, nbt, zv, zg = xt + x, gt + g, at + a, nbt + (nb,), zv + a, zg + fresh
        h1 = tl.minimum(h0 + K, H + R)
        for r in range(h0 - R, h1 + R):
            for dx in range(-R, R + 1):
                xp, gp, ap, nbp = _extended_position(x_base, g_base, AB, b, r, cols + dx, H, W, sx, sg,
                                                     border_value, C, CG, JOINT, BORDER, NEAR, OFF64)
                for j in tl.static_range(2 * R + 1):
                    zv, zg = _pair(zv, zg, j, dx, j - R, xp, gp, ap, nbp, xt, gt, at, nbt, space, color, natural,
                                   C, CG, R, DISK, L1, JOINT)
            done = r - R
            _fold_row(DX, b, done, cols, col_ok & (done >= h0), zv, 2 * R, C, H, W, R, BORDER, NEAR, OFF64)
            if JOINT:
                _fold_row(DG, b, done, cols, col_ok & (done >= h0), zg, 2 * R, CG, H, W, R, BORDER, NEAR, OFF64)
            x, g, a, nb = _extended_position(x_base, g_base, AB, b, r + R + 1, cols, H, W, sx, sg, border_value,
                                             C, CG, JOINT, BORDER, NEAR, OFF64)
            xt, gt, at, nbt = x + xt[:2 * R * C], g + gt[:2 * R * CG], a + at[:2 * R * C], (nb,) + nbt[:2 * R]
            zv, zg = a + zv[:2 * R * C], fresh + zg[:len(fresh) * 2 * R]
    else:
        xt, gt, at, nbt, zv, zg = (), (), (), (), (), ()
        for k in tl.static_range(K):
            x, g, a, nb = _extended_position(x_base, g_base, AB, b, h0 + k, cols, H, W, sx, sg, border_value, C,
                                             CG, JOINT, BORDER, NEAR, OFF64)
            xt, gt, at, nbt, zv, zg = xt + x, gt + g, at + a, nbt + (nb,), zv + a, zg + fresh
        for dx in range(-R, R + 1):
            for i in range(K + 2 * R):
                xp, gp, ap, nbp = _extended_position(x_base, g_base, AB, b, h0 - R + i, cols + dx, H, W, sx, sg,
                                                     border_value, C, CG, JOINT, BORDER, NEAR, OFF64)
                for k in tl.static_range(K):
                    dy = i - R - k
                    if dy * dy <= R * R:
                        zv, zg = _pair(zv, zg, k, dx, dy, xp, gp, ap, nbp, xt, gt, at, nbt, space, color, natural,
                                       C, CG, R, DISK, L1, JOINT)
        for k in tl.static_range(K):
            ok = col_ok & (h0 + k < H + R)
            _fold_row(DX, b, h0 + k, cols, ok, zv, k, C, H, W, R, BORDER, NEAR, OFF64)
            if JOINT:
                _fold_row(DG, b, h0 + k, cols, ok, zg, k, CG, H, W, R, BORDER, NEAR, OFF64)


@triton.jit
def _exact(i, WIDE: tl.constexpr):
    """Integer positions as int64 when their products with the sizes can pass 2**31."""
    if WIDE:
        return i.to(tl.int64)
    else:
        return i


@triton.jit
def _nearest_sample(i, n_low, n_high, WIDE: tl.constexpr):
    """The low-resolution sample nearest to output pixel i's centre, floor((i + 0.5) *
    n_low / n_high), in exact integers: float32 ratios put ties on the wrong side."""
    return ((_exact(2 * i + 1, WIDE) * n_low) // (2 * n_high)).to(tl.int32)


@triton.jit
def _twice_offset(i, a, n_low, n_high, WIDE: tl.constexpr):
    """2 n_high (u_i - a), u_i = (i + 0.5) n_low / n_high - 0.5 being output i's centre in
    low-resolution pixels: an integer, exact before its conversion. (Float32 positions
    lose ~1e-4 px at 2K, which a small sigma_color amplifies.)"""
    return (_exact(2 * i + 1, WIDE) * n_low - _exact(2 * a + 1, WIDE) * n_high).to(tl.float32)


@triton.jit
def _distance_to_sample2(i, a, n_low, n_high, WIDE: tl.constexpr):
    """(u_i - a)^2 in low-resolution pixels (``_twice_offset``)."""
    d = _twice_offset(i, a, n_low, n_high, WIDE) / (2.0 * n_high)
    return d * d


@triton.jit
def _bilinear_source(a, n_low, n_high, WIDE: tl.constexpr):
    """Pixel and weight of the bilinear sample at low-resolution sample a's centre on the
    high-resolution axis: (a + 0.5) n_high / n_low - 0.5, clamped at 0, in integers."""
    num = tl.maximum(_exact(2 * a + 1, WIDE) * n_high - n_low, 0)
    i0 = num // (2 * n_low)
    return i0.to(tl.int32), (num - i0 * 2 * n_low).to(tl.float32) / (2.0 * n_low)


@triton.jit
def _guide_sample(g_base, chg, n_ch, sgc, a, bcol, h, w, H, W, sgh, sgw, WIDE: tl.constexpr, OFF64: tl.constexpr):
    """The guide resampled at low-resolution samples (a, bcol) (in-range indices):
    bilinear at (a + 0.5) * H / h - 0.5 clamped at 0, as ``F.interpolate(...,
    mode="bilinear", align_corners=False)``. Returns (CGP, BH, BW)."""
    y0, ly = _bilinear_source(a, h, H, WIDE)
    x0, lx = _bilinear_source(bcol, w, W, WIDE)
    ly = ly[None, :, None]
    lx = lx[None, None, :]
    y1 = tl.minimum(y0 + 1, H - 1)
    x1 = tl.minimum(x0 + 1, W - 1)
    valid = (chg < n_ch)[:, None, None]
    c_off = offset(chg, sgc, OFF64)[:, None, None]
    r0 = offset(y0, sgh, OFF64)[None, :, None]
    r1 = offset(y1, sgh, OFF64)[None, :, None]
    k0 = offset(x0, sgw, OFF64)[None, None, :]
    k1 = offset(x1, sgw, OFF64)[None, None, :]
    top = ((1.0 - lx) * pixels.load(g_base + (c_off + r0 + k0), valid)
           + lx * pixels.load(g_base + (c_off + r0 + k1), valid))
    bot = ((1.0 - lx) * pixels.load(g_base + (c_off + r1 + k0), valid)
           + lx * pixels.load(g_base + (c_off + r1 + k1), valid))
    return tl.where(valid, (1.0 - ly) * top + ly * bot, 0.0)


@triton.jit
def _upsample_tap(l_base, g_base, ch, chg, C, CG, slc, sgc, a, a_ok, bcol, h, w, H, W, slh, slw, sgh, sgw,
                  border_value, BORDER: tl.constexpr, WIDE: tl.constexpr, OFF64: tl.constexpr):
    """Values and guide of the low-resolution samples (a, bcol), border applied."""
    ar = borders.remap(a, h, BORDER)
    vals = _vectors(l_base, ch, C, slc, ar, a_ok, bcol, h, w, slh, slw, border_value, BORDER, OFF64)
    g = _guide_sample(g_base, chg, CG, sgc, ar, borders.remap(bcol, w, BORDER), h, w, H, W, sgh, sgw, WIDE, OFF64)
    if BORDER == borders.CONSTANT:
        ok = a_ok[:, None] & borders.inside(bcol, w)[None, :]
        valid = (chg < CG)[:, None, None]
        g = tl.where(ok[None, :, :] & valid, g, tl.where(valid, border_value, 0.0))
    return vals, g


@triton.jit
def _where(ok, vectors, other):
    """Each vector where ``ok``, else ``other``."""
    out = ()
    for c in tl.static_range(len(vectors)):
        out = out + (tl.where(ok, vectors[c], other),)
    return out


@triton.jit
def upsample_kernel(L, G, Y, COLOR, SPACE, C, h, w, H, W, slb, slc, slh, slw, sgb, sgc, sgh, sgw, syb, syc, syh, syw,
                    border_value, CV: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, DISK: tl.constexpr,
                    L1: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, WIDE: tl.constexpr,
                    OFF64: tl.constexpr, SIZE_CLASS, K: tl.constexpr, BW: tl.constexpr):
    """Joint bilateral upsampling of L (B, C, h, w) to the guide's H x W (see
    ``reference.bilateral.joint_bilateral_upsample``). Positions are exact integer
    ratios. No prologue or epilogue: joint upsampling is not fusable (``imgfilters.fuse``
    has no transform that makes it).

    As the filter, on rows: every value is one row of one channel, BW output columns
    (one per thread). A program owns K output rows and CV of the C channels. For each
    low-resolution row that one of its rows reaches and each column offset dx, the
    samples (a, b0 + dx) of its columns (b0: each column's nearest) are read once, their
    CV values and their CG guide values (bilinear from the guide), and added to each of
    the K rows within R of them. The guide is prescaled by sqrt(-COLOR[b]), so the
    exponent is (spatial term - squared scaled distance).

    Unlike the filter, no tap is certain to weigh 1 (the centre), and with a small
    sigma_color every weight can underflow: the sums are kept relative to the largest
    exponent so far (online softmax's running maximum), with one exp2 a tap: 2^-|e - top|
    is the new tap's weight when e <= top, else the old sums' rescaling."""
    b, group, h0, w0 = tile_origin(tl.program_id(0), tl.cdiv(C, CV), H, W, K, BW)
    cols = w0 + tl.arange(0, BW)
    col_ok = cols < W
    cols = tl.minimum(cols, W - 1)  # (columns past the image are computed as the last, not stored)
    sl = _wide((slc, slh, slw), OFF64)
    sg = _wide((sgc, sgh, sgw), OFF64)
    sy = _wide((syc, syh, syw), OFF64)
    space = tl.load(SPACE + b)
    gscale = tl.sqrt(-tl.load(COLOR + b))
    graw = gscale * pixels.unit_scale(G.dtype.element_ty)  # stored guide values to prescaled ones
    c0 = (group * CV).to(tl.int32)
    l_base = L + b * slb
    g_base = G + b * sgb
    b0 = _nearest_sample(cols, w, W, WIDE)

    # per output row k: its nearest sample row, (2 i + 1) h for its spatial terms, its
    # prescaled guide values, its sums
    a0 = ()
    twice_u = ()
    centre = ()
    num = ()
    den = ()
    top = ()
    zero = tl.zeros((BW,), dtype=tl.float32)
    for k in tl.static_range(K):
        i = tl.minimum(h0 + k, H - 1)  # (rows past the image are computed as the last, not stored)
        a0 = a0 + (_nearest_sample(i, h, H, WIDE),)
        twice_u = twice_u + (_exact(2 * i + 1, WIDE) * h,)
        row = g_base + i * sg[1] + cols * sg[2]
        for c in tl.static_range(CG):
            centre = centre + (pixels.load_raw(row + c * sg[0]) * graw,)
        for _ in tl.static_range(CV):
            num = num + (zero,)
        den = den + (zero,)
        top = top + (zero - float("inf"),)
    # the spatial terms are exact integer offsets (``_twice_offset``) squared, times these
    space_u = space / (2.0 * H) / (2.0 * H)
    space_v = space / (2.0 * W) / (2.0 * W)
    for dx in range(-R, R + 1):
        # the columns' samples, and what of their bilinear guide and their distance the rows share
        bcol = b0 + dx
        if NEAR:
            br = borders.remap_near(bcol, w, BORDER)
        else:
            br = borders.remap(bcol, w, BORDER)
        x0, lx = _bilinear_source(br, w, W, WIDE)
        k0 = x0 * sg[2]
        k1 = tl.minimum(x0 + 1, W - 1) * sg[2]
        l_col = l_base + br * sl[2]
        t = _twice_offset(cols, bcol, w, W, WIDE)
        space_x = space_v * t * t
        for a in range(a0[0] - R, a0[K - 1] + R + 1):
            if NEAR:
                ar = borders.remap_near(a, h, BORDER)
            else:
                ar = borders.remap(a, h, BORDER)
            y0, ly = _bilinear_source(ar, h, H, WIDE)
            g_row0 = g_base + y0 * sg[1]
            g_row1 = g_base + tl.minimum(y0 + 1, H - 1) * sg[1]
            vals = ()
            for c in tl.static_range(CV):
                vals = vals + (pixels.load(l_col + tl.minimum(c0 + c, C - 1) * sl[0] + ar * sl[1]),)
            g = ()
            for c in tl.static_range(CG):
                t0 = pixels.load_raw(g_row0 + c * sg[0] + k0)
                t0 = t0 + lx * (pixels.load_raw(g_row0 + c * sg[0] + k1) - t0)
                t1 = pixels.load_raw(g_row1 + c * sg[0] + k0)
                t1 = t1 + lx * (pixels.load_raw(g_row1 + c * sg[0] + k1) - t1)
                g = g + ((t0 + ly * (t1 - t0)) * graw,)
            if BORDER == borders.CONSTANT:  # samples outside the grid are the border value
                ok = borders.inside(a, h) & borders.inside(bcol, w)
                vals = _where(ok, vals, border_value)
                g = _where(ok, g, border_value * gscale)
            twice_a = _exact(2 * a + 1, WIDE) * H
            for k in tl.static_range(K):
                dy = a - a0[k]
                take = dy * dy <= R * R
                if DISK:
                    take = take & (dx * dx + dy * dy <= R * R)
                if take:
                    u = (twice_u[k] - twice_a).to(tl.float32)
                    e = _exponent(space_u * u * u + space_x, g, centre[k * CG:k * CG + CG], L1)
                    d = e - top[k]
                    x = tl.exp2(-tl.abs(d))
                    up = d > 0
                    rescale = tl.where(up, x, 1.0)
                    wt = tl.where(up, 1.0, x)
                    for c in tl.static_range(CV):
                        num = num[:k * CV + c] + (num[k * CV + c] * rescale + wt * vals[c],) + num[k * CV + c + 1:]
                    den = den[:k] + (den[k] * rescale + wt,) + den[k + 1:]
                    top = top[:k] + (tl.maximum(top[k], e),) + top[k + 1:]

    y_base = Y + b * syb
    for k in tl.static_range(K):
        i = h0 + k
        inv = 1.0 / den[k]
        for c in tl.static_range(CV):
            pixels.store(y_base + (c0 + c) * sy[0] + i * sy[1] + cols * sy[2], num[k * CV + c] * inv,
                         col_ok & (i < H) & (c0 + c < C))


@triton.jit
def upsample_backward_kernel(L, G, GO, DL, DGL, DGH, COLOR, SPACE, C, CG, h, w, H, W,
                             slb, slc, slh, slw, sgb, sgc, sgh, sgw, border_value,
                             R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr, BORDER: tl.constexpr,
                             WIDE: tl.constexpr, OFF64: tl.constexpr, CP: tl.constexpr, CGP: tl.constexpr,
                             BH: tl.constexpr, BW: tl.constexpr):
    """The gradient of ``upsample_kernel``, on (CP, BH, BW) blocks of all channels. GO is
    dL/dY (contiguous float32); the program adds dL/dL into DL (B, C, h, w) and
    dL/d(resampled guide) into DGL (B, CG, h, w) with atomics (a low-resolution sample is
    shared by many outputs), and stores dL/dG at its own pixels into DGH (B, CG, H, W); all
    contiguous float32. The forward sums are recomputed first (relative to their running
    maximum, as the forward), so nothing per tap is ever stored."""
    b, color, space, ch, chg, rows, cols = _output_tile(COLOR, SPACE, H, W, CP, CGP, BH, BW)
    l_base = L + b * slb
    g_base = G + b * sgb
    inside_out = (rows < H)[:, None] & (cols < W)[None, :]
    a0 = _nearest_sample(rows, h, H, WIDE)
    b0 = _nearest_sample(cols, w, W, WIDE)
    g_p = _vectors(g_base, chg, CG, sgc, tl.minimum(rows, H - 1), rows < H, tl.minimum(cols, W - 1), H, W,
                   sgh, sgw, 0.0, borders.REPLICATE, OFF64)

    num = tl.zeros((CP, BH, BW), dtype=tl.float32)
    den = tl.zeros((BH, BW), dtype=tl.float32)
    top = tl.full((BH, BW), -float("inf"), dtype=tl.float32)
    for dy in range(-R, R + 1):
        a = a0 + dy
        a_ok = borders.inside(a, h)
        du2 = _distance_to_sample2(rows, a, h, H, WIDE)
        for dx in range(-R, R + 1):
            if (not DISK) or (dx * dx + dy * dy <= R * R):
                bcol = b0 + dx
                vals, g = _upsample_tap(l_base, g_base, ch, chg, C, CG, slc, sgc, a, a_ok, bcol, h, w, H, W, slh,
                                        slw, sgh, sgw, border_value, BORDER, WIDE, OFF64)
                dv2 = _distance_to_sample2(cols, bcol, w, W, WIDE)
                expo = space * (du2[:, None] + dv2[None, :]) + color * _distance2(g - g_p, L1)
                new_top = tl.maximum(top, expo)
                rescale = tl.exp2(top - new_top)
                wt = tl.exp2(expo - new_top)
                num = num * rescale[None, :, :] + wt[None, :, :] * vals
                den = den * rescale + wt
                top = new_top
    y = num / den[None, :, :]
    out_offs = ((b * C + ch)[:, None, None].to(tl.int64) * H * W
                + (rows[:, None].to(tl.int64) * W + cols[None, :])[None, :, :])
    out_mask = (ch < C)[:, None, None] & inside_out[None, :, :]
    k = color / LOG2E
    a_p = tl.load(GO + out_offs, out_mask, other=0.0) / den[None, :, :]
    beta = tl.sum(a_p * y, axis=0)
    dg_p = tl.zeros((CGP, BH, BW), dtype=tl.float32)
    for dy in range(-R, R + 1):
        a = a0 + dy
        a_ok = borders.inside(a, h)
        ar = borders.remap(a, h, BORDER)
        du2 = _distance_to_sample2(rows, a, h, H, WIDE)
        for dx in range(-R, R + 1):
            if (not DISK) or (dx * dx + dy * dy <= R * R):
                bcol = b0 + dx
                vals, g = _upsample_tap(l_base, g_base, ch, chg, C, CG, slc, sgc, a, a_ok, bcol, h, w, H, W,
                                        slh, slw, sgh, sgw, border_value, BORDER, WIDE, OFF64)
                dv2 = _distance_to_sample2(cols, bcol, w, W, WIDE)
                diff = g_p - g
                # the same weights relative to the same maximum as ``den``
                wt = tl.exp2(space * (du2[:, None] + dv2[None, :]) + color * _distance2(diff, L1) - top)
                wt = tl.where(inside_out, wt, 0.0)
                e = (tl.sum(a_p * vals, axis=0) - beta) * wt * k
                jac = _distance2_grad(diff, L1)
                dg_p += e[None, :, :] * jac
                # scatter to the sample read (a constant border's samples are no pixel)
                src = (ar[:, None].to(tl.int64) * w + borders.remap(bcol, w, BORDER)[None, :])[None, :, :]
                ok = inside_out
                if BORDER == borders.CONSTANT:
                    ok = ok & a_ok[:, None] & borders.inside(bcol, w)[None, :]
                tl.atomic_add(DL + (b * C + ch)[:, None, None].to(tl.int64) * h * w + src,
                              wt[None, :, :] * a_p, mask=(ch < C)[:, None, None] & ok[None, :, :])
                tl.atomic_add(DGL + (b * CG + chg)[:, None, None].to(tl.int64) * h * w + src,
                              -e[None, :, :] * jac, mask=(chg < CG)[:, None, None] & ok[None, :, :])
    g_offs = ((b * CG + chg)[:, None, None].to(tl.int64) * H * W
              + (rows[:, None].to(tl.int64) * W + cols[None, :])[None, :, :])
    tl.store(DGH + g_offs, dg_p, (chg < CG)[:, None, None] & inside_out[None, :, :])


# Forward tiles, one column per thread. SLIDE keeps 2R + 1 output rows of C + 1 sums
# and CG guide values live, so it serves windows and channel counts whose slots fit
# SLIDE_VECTORS; K is the strip's length. Otherwise each of K output rows keeps C + 1
# sums and CG guide values, and K shrinks as channels grow (ROW_VECTORS). The sets are
# the best of a sweep on the H200 (scripts/sweep_bilateral.py, PERFORMANCE.md), kept to
# two or three so that a new variant's first call, which compiles each, stays near 3 s.
SLIDE_TILES = [dict(SLIDE=True, K=128, BW=128, num_warps=4), dict(SLIDE=True, K=32, BW=128, num_warps=4),
               dict(SLIDE=True, K=128, BW=256, num_warps=8)]
# Where a column loop step takes several offsets (``column_group``), each tile compiles in
# about 2 s: only the tile that was fastest there in every measured case (15 x 15 on 4K:
# uint8 expanded 1.14 ms against 1.26 and 1.35, the direct form 1.23 against 1.35 and
# 1.48), so that a new variant's first call stays well under 5 s (6.3 s with the three
# SLIDE_TILES tuned, 4.4 s with two); its strips' length K is chosen at launch
# (``_filling_waves``).
GROUPED_TILES = SLIDE_TILES[:1]
ROW_TILES = [dict(SLIDE=False, K=8, BW=128, num_warps=4), dict(SLIDE=False, K=8, BW=256, num_warps=8)]
SLIDE_VECTORS = 128
ROW_VECTORS = 96
# SLIDE unrolls its column offsets up to this many taps (9 x 9): compile-time taps (-20 %
# instructions at 9 x 9, -38 % for a disk), but a body 2R + 1 times longer to compile
# (about 2 s at radius 4 on the H200's host). Two tiles, tuned up to radius
# UNROLLED_TUNED_RADIUS but SIZED_TILE_RADIUS (4K 5 x 5, PREFETCH: 128 x 256 0.150 ms, 72 x 128 0.159); beyond
# it one (``_single_tile``), so that a new variant's first call stays under 5 s: the first
# (with the columns read INSIDE, ``reads_inside``), its strips' length chosen at launch
# (``_filling_waves``), and with a guide the second, since the
# guide's vectors take the wide tile to 172 registers, one program an SM (joint 9 x 9:
# 0.619 and 0.491).
UNROLLED_TAPS = 81
# Up to this radius SLIDE loads each input row one step ahead (``PREFETCH``: a 5 x 5
# window's warps spent 38 % of their cycles waiting on loads); beyond it the loads'
# registers would cost programs an SM (199 at radius 4), and the compile time doubles.
PREFETCH_RADIUS = 2
# Column offsets a step of the run-time column loop (wider windows), where they divide 2R + 1:
# three offsets' taps a step give a warp three times the independent work, which the two or
# three warps a scheduler that these registers allow need (five: slower, and 1.7x the compile).
COLUMN_GROUP = 3
UNROLLED_TILES = [dict(SLIDE=True, K=128, BW=256, num_warps=8), dict(SLIDE=True, K=72, BW=128, num_warps=4)]
UNROLLED_TUNED_RADIUS = 3
# SIZED_TILE_RADIUS (3, the default window of sigma_space 1.5) compiles one of the two
# (both took its cold first call, 720p float32, to 5.8-6.0 s of CPU on the H200's host,
# over the 5 s bound): the first on planes of WIDE_TILE_SIZE_CLASS (4K) and more, where it won by 0.5-6 %
# (H100, ms: float32 0.2518 against 0.2533, uint8 0.2703 / 0.2863, disk l1 uint8 0.2016 /
# 0.2039, joint with a grey guide 0.2093 / 0.2227, a colour one 0.2855 / 0.2937), the second
# below (720p float32 0.0835 against 0.1521, 16 x 1080p 0.9356 / 1.0257).
SIZED_TILE_RADIUS, WIDE_TILE_SIZE_CLASS = 3, 23


def unrolls_columns(radius):
    """Whether SLIDE, when it takes this radius, unrolls its column offsets (``UNROLL_DX``)."""
    return (2 * radius + 1) ** 2 <= UNROLLED_TAPS


def column_group(radius):
    """Column offsets a step of SLIDE's run-time column loop takes (``DX_GROUP``): three
    where they divide the 2R + 1 offsets (15 x 15 uint8: 1.30 -> 1.14 ms with EXPANDED,
    PERFORMANCE.md), else one (a remainder would compile a second copy of the step), and
    one where the offsets are unrolled (no such loop)."""
    if unrolls_columns(radius) or (2 * radius + 1) % COLUMN_GROUP:
        return 1
    return COLUMN_GROUP


def prefetches(radius):
    """Whether SLIDE, when it takes this radius, loads its input rows one step ahead."""
    return unrolls_columns(radius) and radius <= PREFETCH_RADIUS


def _slides(meta, extra=0):
    """Whether the forward's tiles for a launch's ``meta`` are SLIDE's: where the 2R + 1
    slots (of ``extra`` more vectors each) fit."""
    return (2 * meta["R"] + 1) * (meta["C"] + 1 + meta["CG"] + extra) <= SLIDE_VECTORS


# EXPANDED's bound on the exponent's terms |g|^2 and |c|^2, CG * -COLOR for a uint8 guide
# (unit values in [0, 1]): there float32 rounds the exponent by at most about 2^-8, half of
# it the 2R updates of a slot's spatial term (the weights within 0.3 %, a uint8 output
# within 0.1 of a level: PERFORMANCE.md). Smaller sigma_color takes the direct form. Other
# dtypes' tolerances (float32 1e-5, uint16 one level in 65535) and value ranges (floats,
# prologues, a constant border's value) are beyond what the expansion keeps.
EXPANDED_TERMS = 4096.0


def expands(guide_dtype, meta, prologue, peak_fits, value_in_unit):
    """Whether the forward with ``meta`` computes its distances EXPANDED: l2, SLIDE with a
    column loop of several offsets a step (``column_group``) and slots that fit with
    EXPANDED's extra vector, a uint8 guide read as stored (no ``prologue`` when the image
    is its own guide), a constant border's value in [0, 1] (``value_in_unit``), and CG
    times the largest -COLOR of the batch within EXPANDED_TERMS (``peak_fits``); never for
    the backward's ADJOINT pass.
    (Where the offsets are unrolled, a loaded row serves too few taps to repay its |g|^2;
    with one offset a step the saved instructions did not show, and at radius 8 the
    slots' extra registers cost a program an SM: PERFORMANCE.md.)"""
    return (peak_fits and guide_dtype == torch.uint8 and not meta["L1"] and not meta["ADJOINT"]
            and column_group(meta["R"]) > 1 and (meta["JOINT"] or not prologue) and _slides(meta, extra=1)
            and (meta["BORDER"] != borders.CONSTANT.value or value_in_unit))


def peak_fits(guide_channels, color_peak):
    """``expands``'s bound on the exponent's terms: ``color_peak``, the largest -COLOR of
    the batch, known and within it for ``guide_channels`` channels."""
    return color_peak is not None and guide_channels * color_peak <= EXPANDED_TERMS


def forward_tiles(meta):
    """The forward's candidate tiles for a launch's ``meta``: SLIDE when the 2R + 1 slots
    fit (radius 3: one, by the image's size)."""
    if _slides(meta):
        if not meta["UNROLL_DX"]:
            return [tile_config(**t) for t in (SLIDE_TILES if meta["DX_GROUP"] == 1 else GROUPED_TILES)]
        # (beyond UNROLLED_TUNED_RADIUS ``launch`` picks one by ``_single_tile`` instead of timing them)
        if meta["R"] == SIZED_TILE_RADIUS:
            tiles = UNROLLED_TILES[:1] if meta["SIZE_CLASS"] >= WIDE_TILE_SIZE_CLASS else UNROLLED_TILES[1:]
        elif meta["JOINT"] and meta["R"] > UNROLLED_TUNED_RADIUS:
            tiles = UNROLLED_TILES[1:]
        else:
            tiles = UNROLLED_TILES
        return [tile_config(**t) for t in tiles]
    return _rows_within(ROW_TILES, meta["C"] + 1 + meta["CG"])


def _single_tile(meta):
    """The tile of a launch that tunes none (a new variant's first call
    would compile each tile it times), its strips' length still to be chosen
    (``_filling_waves``): the grouped column loop's one tile, or, for the unrolled radius
    beyond UNROLLED_TUNED_RADIUS, the first of ``forward_tiles``. (With the columns read
    INSIDE and the edge columns still stored by the strips, H200, 9 x 9 float32: 4K 0.386
    ms in 128 x 256 against 0.495 in 128 x 128 with 4 warps, 16 x 1080p 1.50 against 1.79:
    the 4-warp kernel stalls in dispatch, 0.81 cycles an instruction against 0.19.) None
    for every other launch."""
    if not _slides(meta):
        return None
    if not meta["UNROLL_DX"]:
        return tile_config(**GROUPED_TILES[0]) if meta["DX_GROUP"] > 1 else None
    if meta["R"] <= UNROLLED_TUNED_RADIUS:
        return None
    return forward_tiles(meta)[0]


# Warps an SM holds of the kernels whose tile ``_single_tile`` picks before they are
# compiled (Triton 3.6, sm_90a): the unrolled radius-4 one 16 (127 registers a thread), 12
# with a guide (168: three programs of 4 warps), the grouped column loop's 12 (164 to 168
# at radius 7).
UNROLLED_WARPS_AN_SM, GUIDED_WARPS_AN_SM, GROUPED_WARPS_AN_SM = 16, 12, 12
# Strip lengths ``_filling_waves`` chooses from: multiples of STRIP_QUANTUM (each compiles
# once) up to STRIP_ROWS_MAX. (The wave count is not all: 16 x 1080p at 9 x 9 in one wave
# of 540-row strips took 1.593 ms, in five waves of 99 rows 1.515, where waves x rows
# differ by 2 %.)
STRIP_QUANTUM, STRIP_ROWS_MAX = 8, 256


def _resident(tile, meta, sms):
    """The programs of ``tile`` that ``sms`` SMs hold at once, by the warps above."""
    if meta["UNROLL_DX"]:
        warps_an_sm = GUIDED_WARPS_AN_SM if meta["JOINT"] else UNROLLED_WARPS_AN_SM
    else:
        warps_an_sm = GROUPED_WARPS_AN_SM
    return max(1, warps_an_sm // tile.num_warps) * sms


def _filling_waves(tile, meta, B, H, W, sms):
    """``tile`` with the strip length ``_strip_rows`` picks for B images of H x W on
    ``sms`` SMs that hold the warps above."""
    k = _strip_rows(H, meta["R"], B * cdiv(W, tile.kwargs["BW"]), _resident(tile, meta, sms))[1]
    return tile_config(**dict(tile.kwargs, K=k), num_warps=tile.num_warps)


def reads_inside(meta):
    """Whether the forward's SLIDE tiles read their columns INSIDE for a launch's ``meta``:
    each thread's columns clamped R from the image's edges, so that a row's loads share one
    address a channel (without it, two integer additions a load), and the R columns at
    each edge stored by programs of their own (``_edge_programs``). Where the offsets
    are unrolled, at radius 4 (H200, 9 x 9 float32 in the 128 x 256 tile: 4K 0.398 ->
    0.3785 ms, 16 x 1080p 1.58 -> 1.495), without a guide, on images more than twice the
    window's radius wide and tall. In the 4-warp tile, at radii 1 to 3 and with a guide it
    was slower (PERFORMANCE.md)."""
    return (meta["UNROLL_DX"] and meta["NEAR"] and meta["R"] > UNROLLED_TUNED_RADIUS and not meta["JOINT"]
            and _slides(meta))


# An edge program takes at most this many blocks of lanes (BW edge pixels each, a run-time
# loop over the window each): about a quarter of a strip's time at 9 x 9.
EDGE_BLOCKS = 16


def _edge_programs(tile, B, H, W, R, resident):
    """The programs, after the strips of ``tile``, that store the R columns at each edge
    under INSIDE: the slots the strips leave idle in their last wave of ``resident``
    programs (0: unknown), and at least enough that none takes over EDGE_BLOCKS blocks."""
    strips = B * cdiv(H, tile.kwargs["K"]) * cdiv(W, tile.kwargs["BW"])
    idle = -strips % resident if resident else 0
    return max(idle, cdiv(B * H * 2 * R, tile.kwargs["BW"] * EDGE_BLOCKS))


@functools.lru_cache(maxsize=4096)
def _strip_rows(H, R, lanes, resident):
    """(cost, K): the strip length, a multiple of STRIP_QUANTUM up to STRIP_ROWS_MAX, for
    ``lanes`` columns of SLIDE programs (over the batch) on a device that holds
    ``resident`` programs at once. The programs run in waves of ``resident``, each about
    as long as the K + 2R + 1 input rows its strip loads: the cost, waves x (K + 2R + 1),
    is least where the strips fill whole waves with short strips. (H200, 4K, 15 x 15
    uint8, three programs an SM: strips of 128 rows run 1.3 waves, 1.145 ms; of 168 one,
    1.040. PERFORMANCE.md.)"""
    top = min(cdiv(H, STRIP_QUANTUM) * STRIP_QUANTUM, STRIP_ROWS_MAX)
    candidates = range(STRIP_QUANTUM, top + 1, STRIP_QUANTUM)
    return min((cdiv(lanes * cdiv(H, k), resident) * (k + 2 * R + 1), k) for k in candidates)


# The joint upsampling's tile: K output rows x BW columns of CV channels, each row keeping
# CV + 2 sums and CG guide values live: K shrinks as channels grow (ROW_VECTORS). The best
# of a sweep on the H200 (x4 to 4K, radius 2, PERFORMANCE.md): 6 x 256 (two columns a
# thread) 0.388 ms; 8 x 128 0.415, 12 rows and more or 4 rows 0.43-0.56. (Tuned against
# 8 x 128 until the two compiles took a cold first call over its 5 s: 5.2 s of CPU on the
# H200's host.)
UPSAMPLE_TILE = dict(K=6, BW=256, num_warps=4)
UPSAMPLE_CHANNELS = 4  # value channels a program: more are split over programs


def _rows_within(tiles, vectors_per_row):
    """``tiles`` with K capped so that K rows of ``vectors_per_row`` fit ROW_VECTORS
    (duplicates dropped)."""
    k_max = max(1, ROW_VECTORS // vectors_per_row)
    kept = {}
    for t in tiles:
        kept.setdefault((min(t["K"], k_max), t["BW"], t["num_warps"]), dict(t, K=min(t["K"], k_max)))
    return [tile_config(**t) for t in kept.values()]


def upsample_tile(meta):
    """The joint upsampling's tile for a launch's ``meta``."""
    return _rows_within([UPSAMPLE_TILE], meta["CV"] + 2 + meta["CG"])[0]


forward_tuning = Tuning(forward_tiles, key=["C", "CG", "R", "DISK", "L1", "JOINT", "BORDER", "NEAR", "PRO", "EPI",
                                            "EXPANDED", "SIZE_CLASS"])


def _guide_batch_stride(guide, batch):
    """The guide's batch stride: 0 when one guide serves every image."""
    return guide.stride(0) if guide.shape[0] == batch else 0


@dataclasses.dataclass(frozen=True)
class ForwardPlan:
    """A forward launch as ``forward_plan`` chose it: the constexprs, the tile (None:
    ``forward_tuning`` times the candidates on the first launch) and the grid (a function
    of the tile's meta-parameters where the tile is tuned)."""
    meta: Meta
    tile: Optional[triton.Config]
    grid: object


@functools.lru_cache(maxsize=4096)
def forward_plan(B, C, CG, H, W, guide_dtype, radius, disk, l1, joint, border, value_in_unit, adjoint, off64,
                 peak_fits, prologue, sms, tile=None):
    """The forward launch for B images of C channels and H x W pixels, guided by CG
    channels of ``guide_dtype`` (the image itself unless ``joint``), on a device of ``sms``
    SMs (0: Triton's interpreter, where each image takes one strip of every column: its
    cost is per operation). ``value_in_unit``: the border is not constant or its value is
    in [0, 1]; ``peak_fits`` and ``prologue`` as ``expands`` takes them. ``tile``, a
    ``triton.Config`` of SLIDE, K, BW and num_warps, bypasses the tile choice."""
    meta = dict(C=C, CG=CG, R=radius, DISK=disk, L1=l1, JOINT=joint, BORDER=border, NEAR=2 * radius < min(H, W),
                OFF64=off64, ADJOINT=adjoint, UNROLL_DX=unrolls_columns(radius), DX_GROUP=column_group(radius),
                PREFETCH=prefetches(radius), SIZE_CLASS=size_class(H, W))
    meta["EXPANDED"] = expands(guide_dtype, meta, prologue, peak_fits, value_in_unit)
    if tile is None and not sms:
        slide = forward_tiles(meta)[0].kwargs["SLIDE"]
        tile = triton.Config(dict(SLIDE=slide, K=H if slide else min(H, 16), BW=pow2_at_least(W, 16, 128)))
    elif tile is None:
        tile = _single_tile(meta)
        if tile is not None:
            tile = _filling_waves(tile, meta, B, H, W, sms)
        if tile is None and adjoint:  # it rewrites y in place, so it cannot be timed over and over: the default
            tile = forward_tiles(meta)[0]
    meta["INSIDE"] = tile is not None and tile.kwargs["SLIDE"] and reads_inside(meta)
    edges = _edge_programs(tile, B, H, W, radius, sms and _resident(tile, meta, sms)) if meta["INSIDE"] else 0
    meta["EDGES"] = edges
    grid = lambda m: (B * cdiv(H, m["K"]) * cdiv(W, m["BW"]) + edges,)
    return ForwardPlan(Meta(meta), tile, grid if tile is None else grid(tile.kwargs))


def launch(x, guide, y, color, space, radius, disk, l1, joint, border=0, border_value=0.0,
           pro=((), ()), epi=((), ()), adjoint=False, tile=None, color_peak=None):
    """Filter 4-D ``x`` (B, C, H, W) into ``y`` with the guide ``guide`` (batch B or 1;
    ignored unless ``joint``). ``color``/``space`` are float32 per-image coefficients
    (-log2(e) / (2 sigma^2)) on the device. With ``adjoint``, ``y`` is the backward's
    float32 (B, C + 1, H, W) buffer holding the output gradient in its first C channels
    (``bilateral_kernel``'s ADJOINT). ``tile``, a ``triton.Config`` of SLIDE, K, BW and
    num_warps, bypasses the tile choice. ``color_peak``, the largest -COLOR of the batch
    as a number, allows the EXPANDED distances (``expands``)."""
    B, C, H, W = x.shape
    CG = guide.shape[1] if joint else C
    plan = forward_plan(B, C, CG, H, W, (guide if joint else x).dtype, radius, disk, l1, joint, border,
                        border != borders.CONSTANT.value or 0.0 <= border_value <= 1.0, adjoint,
                        needs_int64(x, guide, y), peak_fits(CG, color_peak), bool(pro[0]),
                        sm_count(x.device) if x.is_cuda else 0, tile)
    args = (x, guide, y, color, space, H, W, *x.stride(), _guide_batch_stride(guide, B), *guide.stride()[1:],
            *y.stride(), float(border_value), pro[0], pro[1], epi[0], epi[1])
    launch_kernel(bilateral_kernel, plan.grid, args, plan.meta, x, plan.tile, forward_tuning)


# Backward tiles, fixed: the backward runs once per training step, and tuning would compile
# every candidate on the first call. A position keeps 3C + 1 vectors (2CG more with a
# guide): SLIDE where 2R + 1 of them fit SLIDE_VECTORS, else rows of as many as ROW_VECTORS
# holds.
BACKWARD_SLIDE_TILE = dict(SLIDE=True, K=64, BW=128, num_warps=4)
BACKWARD_ROW_TILE = dict(SLIDE=False, K=8, BW=128, num_warps=4)


def backward_tile(C, CG, radius, joint):
    """The backward's tile for these channels and radius."""
    position = 3 * C + 1 + (2 * CG if joint else 0)
    if (2 * radius + 1) * position <= SLIDE_VECTORS:
        return dict(BACKWARD_SLIDE_TILE)
    return dict(BACKWARD_ROW_TILE, K=max(1, min(BACKWARD_ROW_TILE["K"], ROW_VECTORS // position)))


def launch_backward(x, guide, ab, dx, dg, color, space, radius, disk, l1, joint, border=0, border_value=0.0,
                    tile=None):
    """Add the gradients of ``launch`` into ``dx`` (B, C, H, W) and, when ``joint``, ``dg``
    (B, CG, H, W), both contiguous float32 and zeroed, from ``ab``, ``launch``'s adjoint
    buffer. ``tile``, a dict of SLIDE, K, BW and num_warps, bypasses the tile choice."""
    B, C, H, W = x.shape
    CG = guide.shape[1] if joint else C
    HE, WE = H + 2 * radius, W + 2 * radius
    if tile is None:
        tile = backward_tile(C, CG, radius, joint)
        if interpreting():  # one column strip per image: the interpreter's cost is per operation
            tile.update(K=HE if tile["SLIDE"] else min(HE, 16), BW=pow2_at_least(WE, 16, 128))
    args = (x, guide, ab, dx, dg if joint else dx, color, space, H, W, *x.stride(), _guide_batch_stride(guide, B),
            *guide.stride()[1:], float(border_value))
    meta = dict(C=C, CG=CG, R=radius, DISK=disk, L1=l1, JOINT=joint, BORDER=border, NEAR=2 * radius < min(H, W),
                OFF64=needs_int64(x, guide, ab))
    launch_kernel(bilateral_backward_kernel, lambda m: (B * cdiv(HE, m["K"]) * cdiv(WE, m["BW"]),), args, meta, x,
                  tile_config(**tile))


def _upsample_meta(low, guide, radius, disk, l1, border, *tensors):
    """The constexprs shared by the upsampling kernels."""
    h, w = low.shape[-2:]
    H, W = guide.shape[-2:]
    # exact positions multiply indices (past the grid by up to R) by the other size
    wide = max((2 * (h + radius) + 1) * H, (2 * H + 1) * h, (2 * (w + radius) + 1) * W, (2 * W + 1) * w) >= 2 ** 31
    return dict(R=radius, DISK=disk, L1=l1, BORDER=border, WIDE=wide, OFF64=needs_int64(low, guide, *tensors))


def launch_upsample(low, guide, y, color, space, radius, disk, l1, border=0, border_value=0.0, tile=None):
    """Joint bilateral upsampling of 4-D ``low`` (B, C, h, w) into ``y`` (B, C, H, W) with
    ``guide`` (batch B or 1, CG, H, W). ``tile``, a ``triton.Config`` of K, BW and
    num_warps, bypasses the tile choice."""
    B, C, h, w = low.shape
    CG, H, W = guide.shape[1:]
    args = (low, guide, y, color, space, C, h, w, H, W, *low.stride(), _guide_batch_stride(guide, B),
            *guide.stride()[1:], *y.stride(), float(border_value))
    meta = dict(_upsample_meta(low, guide, radius, disk, l1, border, y), CV=min(C, UPSAMPLE_CHANNELS), CG=CG,
                NEAR=radius < min(h, w), SIZE_CLASS=size_class(H, W))
    groups = cdiv(C, meta["CV"])
    if tile is None and interpreting():  # few programs: the interpreter's cost is per operation
        tile = tile_config(K=min(H, 16), BW=pow2_at_least(W, 16, 128))
    launch_kernel(upsample_kernel, lambda m: (programs(B * groups, H, W, m["K"], m["BW"]),), args, meta, low,
                  tile or upsample_tile(meta))


def launch_upsample_backward(low, guide, grad, d_low, d_guide_low, d_guide, color, space, radius, disk, l1,
                             border=0, border_value=0.0):
    """The gradient of ``launch_upsample`` for the output gradient ``grad``: adds into
    ``d_low`` and ``d_guide_low`` (B, C or CG, h, w; zeroed) and stores ``d_guide`` (B, CG,
    H, W); all contiguous float32."""
    B, C, h, w = low.shape
    CG, H, W = guide.shape[1:]
    args = (low, guide, grad, d_low, d_guide_low, d_guide, color, space, C, CG, h, w, H, W, *low.stride(),
            _guide_batch_stride(guide, B), *guide.stride()[1:], float(border_value))
    meta = dict(_upsample_meta(low, guide, radius, disk, l1, border), CP=next_pow2(C), CGP=next_pow2(CG))
    # not worth tuning (once per step); 8 x 32 keeps its blocks in registers
    tile = (tile_config(BH=pow2_at_least(H, 1, 128), BW=pow2_at_least(W, 1, 128)) if interpreting()
            else tile_config(BH=8, BW=32))
    launch_kernel(upsample_backward_kernel, lambda m: (programs(B, H, W, m["BH"], m["BW"]),), args, meta, low, tile)
