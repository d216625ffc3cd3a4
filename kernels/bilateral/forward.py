"""The bilateral and joint bilateral filter, ``bilateral_kernel``, and its launch.

The kernel works on rows: every value is one row of one channel, a (BW,) vector with one
column per thread, so there is no padded channel and no axis reduction. Each loaded input
row serves every output row it is a tap of (up to 2R + 1), through a rotating set of
pending output rows (``SLIDE``) or, for windows too wide for that, a block of K output
rows; and a tap's weight is one ``exp2``, the guide being prescaled so that the exponent
is (spatial term - squared distance). See ``bilateral_kernel`` and PERFORMANCE.md for
what each choice measured."""
import triton
import triton.language as tl

from . import plan as plans
from .common import _exponent, _guide_batch_stride, _row, _scaled, _wide
from ..core import borders, pixels, pointwise
from ..core.launch import launch as launch_kernel
from ..core.tiling import interpreted, needs_int64, sm_count


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
               R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr, EXPANDED: tl.constexpr,
               ALL: tl.constexpr = False):
    """The sums of every slot j (num[j C + c], den[j], guide entries ``_slot_centre``) with
    the tap of values ``v`` and prescaled guide ``g`` at offset (dx, dy0 + step j) from the
    slot's output row: where ``_takes`` says so, or in every slot where ALL (the caller
    knows each offset lies in the window and dx != 0). Each slot's sums are rebuilt whole,
    not updated in place: slicing the whole tuple at every tap costs compile time."""
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
        if ALL:
            take = True
        else:
            take = _takes(dx, dy, R, DISK)
        num_j, den_j = _slot_tap(num[j * C:j * C + C], den[j], take, spatial, v, g, centre[j * n:j * n + n], L1,
                                 EXPANDED)
        out_num = out_num + num_j
        out_den = out_den + (den_j,)
    return out_num, out_den


@triton.jit
def _band_taps(num, den, v, g, centre, dx, h: tl.constexpr, space, C: tl.constexpr, CG: tl.constexpr,
               R: tl.constexpr, L1: tl.constexpr, EXPANDED: tl.constexpr):
    """A disk band's tap (``bilateral_kernel``'s BANDS): values ``v`` and prescaled guide
    ``g`` at a run-time column offset dx != 0 whose column of the disk spans dy = -h .. h,
    added to the 2h + 1 middle slots only (output rows within h of the input row), the
    other slots passed through: no tap tests whether it lies in the disk."""
    n: tl.constexpr = CG + 1 if EXPANDED else CG
    lo: tl.constexpr = R - h
    hi: tl.constexpr = R + h + 1
    mid_num, mid_den = _slot_taps(num[lo * C:hi * C], den[lo:hi], v, g, centre[lo * n:hi * n], dx, -h, 1, space, C,
                                  CG, R, False, L1, EXPANDED, True)
    return num[:lo * C] + mid_num + num[hi * C:], den[:lo] + mid_den + den[hi:]


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
                y = pointwise.apply_epilogue(y, x_in[c], b, c, EPI, epi_args)
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
                     x_strides, g_strides, y_strides, border_value,
                     PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                     C: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, DISK: tl.constexpr, L1: tl.constexpr,
                     JOINT: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr,
                     ADJOINT: tl.constexpr, UNROLL_DX: tl.constexpr, DX_GROUP: tl.constexpr,
                     PREFETCH: tl.constexpr, EXPANDED: tl.constexpr, BANDS: tl.constexpr, INSIDE: tl.constexpr,
                     SIZE_CLASS, EDGES,
                     SLIDE: tl.constexpr,
                     K: tl.constexpr, BW: tl.constexpr):
    """Y = sum_q w X~[q] / sum_q w with w = exp2(SPACE[b] |p-q|^2 + COLOR[b] D^2), D the
    l1 or l2 distance of the guide vectors (G if JOINT, else PRO(X); CG channels, C when
    not JOINT). COLOR and SPACE hold per-image coefficients already multiplied by
    -log2(e) / 2 / sigma^2. ``x_strides``, ``g_strides``, ``y_strides``: each tensor's
    (batch, channel, row, column) strides, G's batch stride 0 where one guide serves every
    image. NEAR: the window is narrower than half the image (cheaper borders).
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
      during the previous one's taps; for a disk, BANDS: the offsets in bands whose
      column of the disk spans the same rows, each band's taps only in its slots,
      ``plan.disk_bands``).
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
    sx = _wide(x_strides, OFF64)
    sgb = g_strides[0]  # (0 where one guide serves every image)
    sg = _wide(g_strides[1:], OFF64)
    sy = _wide(y_strides, OFF64)
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
        x_base = X + b * x_strides[0]
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
                elif len(BANDS) > 0:
                    # a disk's column offsets: dx = 0 (every slot but the centre), then each band's
                    # dx = -hi .. -lo, lo .. hi in a run-time loop over its 2h + 1 slots; each
                    # offset's row loaded during the taps of the one before
                    ahead = _raw(x_base, g_base, r, cols, H, W, sx[1:], sg, border_value, PRO, pro_args, C, CG,
                                 JOINT, BORDER, NEAR)
                    for band in tl.static_range(len(BANDS)):
                        lo, hi, after = BANDS[band][0], BANDS[band][1], BANDS[band][3]
                        n = hi - lo + 1
                        if band == 0:
                            v, g = _split(ahead, 0, gscale, C, CG, JOINT)
                            ahead = _raw(x_base, g_base, r, cols + after, H, W, sx[1:], sg, border_value, PRO,
                                         pro_args, C, CG, JOINT, BORDER, NEAR)
                            num, den = _slot_taps(num, den, v, g, centre, 0, -R, 1, space, C, CG, R, DISK, L1,
                                                  EXPANDED)
                        else:
                            for i in range(2 * n):
                                dx = tl.where(i < n, i - hi, i - n + lo)
                                step = i + 1
                                following = tl.where(step < n, step - hi, step - n + lo)
                                following = tl.where(step < 2 * n, following, after)
                                v, g = _split(ahead, 0, gscale, C, CG, JOINT)
                                ahead = _raw(x_base, g_base, r, cols + following, H, W, sx[1:], sg, border_value,
                                             PRO, pro_args, C, CG, JOINT, BORDER, NEAR)
                                num, den = _band_taps(num, den, v, g, centre, dx, BANDS[band][2], space, C, CG, R,
                                                      L1, EXPANDED)
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
    plan = plans.forward_plan(B, C, CG, H, W, (guide if joint else x).dtype, radius, disk, l1, joint, border,
                              border != borders.CONSTANT.value or 0.0 <= border_value <= 1.0, adjoint,
                              needs_int64(x, guide, y), plans.peak_fits(CG, color_peak), bool(pro[0]),
                              0 if interpreted(x) else sm_count(x.device), tile)
    args = (x, guide, y, color, space, H, W, x.stride(), (_guide_batch_stride(guide, B), *guide.stride()[1:]),
            y.stride(), float(border_value), pro[0], pro[1], epi[0], epi[1])
    launch_kernel(bilateral_kernel, plan.grid, args, plan.meta, x, plan.tile, plans.forward_tuning)
