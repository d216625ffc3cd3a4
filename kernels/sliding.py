"""Box sums that slide: the sums of many terms over (2R + 1)^2 windows at a few adds a term
an output, whatever R (the guided filter's launches: ``models_kernel`` in
``kernels/guided.py`` and ``box_kernel`` here).

A program owns BLOCK lanes, lane j on column ``x0 - R + j``, and marches down SEG output
rows. For each term it keeps D_j: the sum over the window's 2R + 1 rows of the term at
the lane's column, minus the same sum at the column 2R + 1 to its left (lanes j > 2R;
none below). A row entering the window adds its values, the row leaving subtracts them.
The inclusive prefix sum of D along the lanes (``tl.cumsum``) telescopes into the sum of
the 2R + 1 columns ending at lane j: lanes 2R and up hold the window sums of the outputs
``x0 + j - 2R``; the first 2R lanes are the halo. A row step costs four loads and four
adds a term and one scan of the lanes, against 2R + 1 loads and adds a term along each
axis for direct sums.

A running sum keeps a NaN or inf after its row has left the window, and the scan carries
it to every lane right of it: from the row where a program's D is not finite to the end
of its rows, the window sums are summed tap by tap, so that a NaN or inf reaches only the
windows that hold it, as in the definition.
"""
import triton
import triton.language as tl

from .core import borders, pixels
from .core.launch import launch, tile_config
from .core.tiling import cdiv, interpreted, needs_int64, next_pow2, offset, pow2_at_least


@triton.jit
def plus(a, b, SIGN: tl.constexpr):
    """The tuples a + SIGN * b, term by term."""
    s = ()
    for q in tl.static_range(len(a)):
        s = s + ((a[q] + b[q]) if SIGN > 0 else (a[q] - b[q]),)
    return s


@triton.jit
def not_finite(sums):
    """How many lanes hold a sum that is not finite."""
    z = sums[0] * 0.0
    for q in tl.static_range(1, len(sums)):
        z += sums[q] * 0.0
    return tl.sum((z != z).to(tl.int32))


@triton.jit
def lanes(x0, x_end, W, R: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, BLOCK: tl.constexpr):
    """The lanes of the block whose first output column is x0 (outputs end at x_end): (each
    lane's column and the one 2R + 1 to its left, remapped into the image; the masks of
    their loads; the output column of each lane and the mask of the lanes that hold an
    output). A lane past the block's last window loads nothing; the constant border loads
    nothing outside."""
    j = tl.arange(0, BLOCK)
    col = x0 - R + j
    back = col - (2 * R + 1)
    used = col < x_end + R
    own_ok = used
    back_ok = used & (j > 2 * R)
    if BORDER == borders.CONSTANT:
        own_ok = own_ok & borders.inside(col, W)
        back_ok = back_ok & borders.inside(back, W)
    out_col = col - R
    return (borders.remap_within(col, W, BORDER, NEAR), own_ok, borders.remap_within(back, W, BORDER, NEAR), back_ok,
            out_col, (j >= 2 * R) & (out_col < x_end))


@triton.jit
def row_masks(r, H, own_ok, back_ok, BORDER: tl.constexpr, NEAR: tl.constexpr):
    """Input row r remapped into the image, and the lanes' load masks for it (the constant
    border loads nothing outside)."""
    if BORDER == borders.CONSTANT:
        row_in = borders.inside(r, H)
        own_ok = own_ok & row_in
        back_ok = back_ok & row_in
    return borders.remap_within(r, H, BORDER, NEAR), own_ok, back_ok


@triton.jit
def cumsums(d):
    """Each term's inclusive prefix sum along the lanes."""
    s = ()
    for q in tl.static_range(len(d)):
        s = s + (tl.cumsum(d[q], 0),)
    return s


@triton.jit
def _plane_rows(m_img, r, H, smp, smh, own, own_ok, back, back_ok, P: tl.constexpr, BORDER: tl.constexpr,
                NEAR: tl.constexpr, OFF64: tl.constexpr):
    """Row r of the P planes at the lanes' columns less at their columns 2R + 1 left."""
    rm, own_ok, back_ok = row_masks(r, H, own_ok, back_ok, BORDER, NEAR)
    row = m_img + offset(rm, smh, OFF64)
    d = ()
    for p in tl.static_range(P):
        d = d + (tl.load(row + p * smp + own, own_ok, 0.0) - tl.load(row + p * smp + back, back_ok, 0.0),)
    return d


@triton.jit
def _plane_direct(m_img, o, H, W, smp, smh, cols, ok, R: tl.constexpr, P: tl.constexpr, BORDER: tl.constexpr,
                  NEAR: tl.constexpr, OFF64: tl.constexpr):
    """The P planes' window sums around output row o and columns ``cols``, each tap read
    (the rows where a running sum is not finite)."""
    sums = ()
    for _ in tl.static_range(P):
        sums = sums + (tl.zeros(cols.shape, tl.float32),)
    for r in range(o - R, o + R + 1):
        rm, row_ok, unused = row_masks(r, H, ok, ok, BORDER, NEAR)
        row = m_img + offset(rm, smh, OFF64)
        for k in range(-R, R + 1):
            col = cols + k
            tap_ok = row_ok
            if BORDER == borders.CONSTANT:
                tap_ok = tap_ok & borders.inside(col, W)
            at = row + borders.remap_within(col, W, BORDER, NEAR)
            grown = ()
            for p in tl.static_range(P):
                grown = grown + (sums[p] + tl.load(at + p * smp, tap_ok, 0.0),)
            sums = grown
    return sums


@triton.jit
def box_kernel(M, OUT, GUIDE, DY, D_GUIDE, H, W, R0, ROWS, X0, COLS, m_strides, out_strides, g_strides, dy_strides,
               R: tl.constexpr, P: tl.constexpr, APPLY_G: tl.constexpr, VJP: tl.constexpr, BORDER: tl.constexpr,
               NEAR: tl.constexpr, OFF64: tl.constexpr, BLOCK: tl.constexpr, SEG: tl.constexpr):
    """The means over (2R + 1)^2 windows of the P float32 planes M[b] (H x W, columns of
    unit stride; the border extends them, the constant border with zeros) at the ROWS rows
    from R0 and the COLS columns from X0 (under the constant border these may lie outside
    the image), stored as OUT[b]'s P float32 planes (their rows and columns from 0).
    APPLY_G > 0 instead stores the guided filter's output for a guide of APPLY_G channels,
    M being its models (``kernels.guided.models``: a's G * C planes, then b's C):
    OUT[b, c] = sum_g mean[g * C + c] * GUIDE[b, g] + mean[G * C + c], GUIDE read (unit
    scale) and OUT stored in their own dtypes and strides, their rows from 0 at M's row
    R0. Under VJP (with APPLY_G) DY is that output's gradient, read: the gradients to the
    means (DY[b, c] GUIDE[b, g] for a's, DY[b, c] for b's) are stored as OUT[b]'s P
    float32 planes and those to the guide (sum_c DY[b, c] mean[g * C + c]) into D_GUIDE[b]
    (float32, contiguous, ROWS x COLS): the means are never stored."""
    smb, smp, smh = m_strides
    sob, soc, soh, sow = out_strides
    sgb, sgc, sgh, sgw = g_strides
    sdb, sdc, sdh, sdw = dy_strides
    if OFF64:  # (a plane's index times its stride passes 2**31)
        smp, soc, sgc, sdc = smp.to(tl.int64), soc.to(tl.int64), sgc.to(tl.int64), sdc.to(tl.int64)
    col_blocks = tl.cdiv(COLS, BLOCK - 2 * R)
    per_image = col_blocks * tl.cdiv(ROWS, SEG)
    b = (tl.program_id(0) // per_image).to(tl.int64)
    t = tl.program_id(0) % per_image
    h0 = R0 + (t // col_blocks) * SEG
    own, own_ok, back, back_ok, cols, ok = lanes(X0 + (t % col_blocks) * (BLOCK - 2 * R), X0 + COLS, W, R, BORDER,
                                                 NEAR, BLOCK)
    m_img = M + b * smb
    d = ()
    for _ in tl.static_range(P):
        d = d + (tl.zeros((BLOCK,), tl.float32),)
    # (the first 2R steps only enter rows: one loop body, so the kernel is compiled once)
    for o in range(h0 - 2 * R, tl.minimum(h0 + SEG, R0 + ROWS)):
        d = plus(d, _plane_rows(m_img, o + R, H, smp, smh, own, own_ok, back, back_ok, P, BORDER, NEAR, OFF64), 1)
        if o >= h0:
            d = _box_row(d, o, OUT, GUIDE, DY, D_GUIDE, m_img, b, H, W, R0, ROWS, X0, COLS, (smp, smh),
                         (sob, soc, soh, sow), (sgb, sgc, sgh, sgw), (sdb, sdc, sdh, sdw), (own, own_ok, back, back_ok),
                         cols, ok, R, P, APPLY_G, VJP, BORDER, NEAR, OFF64)


@triton.jit
def _box_row(d, o, OUT, GUIDE, DY, D_GUIDE, m_img, b, H, W, R0, ROWS, X0, COLS, m_strides, out_strides, g_strides,
             dy_strides, columns, cols, ok, R: tl.constexpr, P: tl.constexpr, APPLY_G: tl.constexpr,
             VJP: tl.constexpr, BORDER: tl.constexpr, NEAR: tl.constexpr, OFF64: tl.constexpr):
    """``box_kernel``'s output row o from the sums ``d`` that hold its window's rows (the
    tensors' strides as ``box_kernel`` takes them, the plane strides in int64 under OFF64;
    ``columns``: ``lanes``' four loads' columns and masks); the sums without the row
    leaving the window."""
    smp, smh = m_strides
    sob, soc, soh, sow = out_strides
    sgb, sgc, sgh, sgw = g_strides
    sdb, sdc, sdh, sdw = dy_strides
    own, own_ok, back, back_ok = columns
    if not_finite(d) > 0:
        sums = _plane_direct(m_img, o, H, W, smp, smh, cols, ok, R, P, BORDER, NEAR, OFF64)
    else:
        sums = cumsums(d)
    means = ()
    for p in tl.static_range(P):
        means = means + (sums[p] * (1.0 / ((2 * R + 1) * (2 * R + 1))),)
    out = OUT + b * sob + offset(o - R0, soh, OFF64) + offset(cols - X0, sow, OFF64)
    if APPLY_G > 0:
        C: tl.constexpr = P // (APPLY_G + 1)
        guide = GUIDE + b * sgb + offset(o - R0, sgh, OFF64) + offset(cols - X0, sgw, OFF64)
        gs = ()
        for g in tl.static_range(APPLY_G):
            gs = gs + (pixels.load(guide + g * sgc, ok),)
        if VJP:
            dy = DY + b * sdb + offset(o - R0, sdh, OFF64) + offset(cols - X0, sdw, OFF64)
            d_guide = ()
            for _g in tl.static_range(APPLY_G):
                d_guide = d_guide + (tl.zeros(cols.shape, tl.float32),)
            for c in tl.static_range(C):
                dy_c = tl.load(dy + c * sdc, ok, 0.0).to(tl.float32)
                tl.store(out + (APPLY_G * C + c) * soc, dy_c, ok)
                grown = ()
                for g in tl.static_range(APPLY_G):
                    tl.store(out + (g * C + c) * soc, dy_c * gs[g], ok)
                    grown = grown + (d_guide[g] + dy_c * means[g * C + c],)
                d_guide = grown
            for g in tl.static_range(APPLY_G):
                tl.store(D_GUIDE + ((b * APPLY_G + g) * ROWS + (o - R0)) * COLS + (cols - X0), d_guide[g], ok)
        else:
            for c in tl.static_range(C):
                acc = means[APPLY_G * C + c]
                for g in tl.static_range(APPLY_G):
                    acc += means[g * C + c] * gs[g]
                pixels.store(out + c * soc, acc, ok)
    else:
        for p in tl.static_range(P):
            tl.store(out + p * soc, means[p], ok)
    return plus(d, _plane_rows(m_img, o - R, H, smp, smh, own, own_ok, back, back_ok, P, BORDER, NEAR, OFF64), -1)


def tile(radius, lanes):
    """The GPU's tile for ``box_kernel`` and ``models_kernel`` (BLOCK lanes, SEG rows,
    warps): a halo of 2 radius lanes at most a quarter of the block; ``lanes`` a thread; 64
    rows, over which the first 2 radius rows' sums are spread."""
    block = max(128, next_pow2(8 * radius))
    return block, 64, block // (32 * lanes)


def programs(x, radius, width, rows, lanes=2):
    """(tile, programs) for ``rows`` rows of the (B, ..., H, ``width``) tensor ``x``, with
    ``lanes`` lanes a thread. Two by default: the scan's shuffles and barriers then serve
    twice the lanes (PERFORMANCE.md, offline sm_90a counts, colour guide, radius 8: about
    740 instructions an output for the models and 545 for the box against 1,100 and 765
    at one lane a thread; at four the models' running sums spill). In the interpreter
    (whose cost is per operation) one program an image."""
    if interpreted(x):
        block, seg, warps = pow2_at_least(width + 2 * radius, 16, 1 << 16), rows, 1
    else:
        block, seg, warps = tile(radius, lanes)
    return (block, seg, warps), x.shape[0] * cdiv(width, block - 2 * radius) * cdiv(rows, seg)


def _launch_box(planes, radius, border, rows, cols, out, guide=None, grad=None, d_guide=None):
    B, P, H, W = planes.shape
    n, m = rows[1] - rows[0], cols[1] - cols[0]
    # (21 planes, the guided models' gradients, spill at two lanes a thread: 156 bytes)
    (block, seg, warps), grid = programs(planes, radius, m, n, 2 if P <= 12 else 1)
    g = out if guide is None else guide
    dy = out if grad is None else grad
    launch(box_kernel, (grid,),
           (planes, out, g, dy, out if d_guide is None else d_guide, H, W, rows[0], n, cols[0], m,
            planes.stride()[:3], out.stride(), g.stride(), dy.stride()),
           dict(R=radius, P=P, APPLY_G=0 if guide is None else guide.shape[1], VJP=grad is not None,
                BORDER=borders.border_code(border), NEAR=radius < min(H, W),
                OFF64=needs_int64(planes, out, g, dy)),
           planes, tile_config(num_warps=warps, BLOCK=block, SEG=seg))


def box(planes, radius, border, rows=None, cols=None, guide=None, out=None):
    """The means over (2 radius + 1)^2 windows of the (B, P, H, W) float32 ``planes``
    (columns of unit stride; ``border`` extends them, ``"constant"`` with zeros) at rows
    ``rows`` and columns ``cols`` (first, end; default all; under the constant border
    they may reach outside): into ``out`` (default new) (B, P, rows, cols) float32 planes
    or, with a (B, G, rows, W) ``guide``, the guided filter's output from its models
    ``planes`` (``kernels.guided.models``) stored into ``out`` (B, C, rows, W), both of any
    supported dtype and strides."""
    B, P, H, W = planes.shape
    rows = (0, H) if rows is None else rows
    cols = (0, W) if cols is None else cols
    if out is None:
        out = planes.new_empty(B, P, rows[1] - rows[0], cols[1] - cols[0])
    _launch_box(planes, radius, border, rows, cols, out, guide)
    return out


def box_vjp(planes, guide, grad, radius, border):
    """For the gradient ``grad`` (B, C, H, W, any strides) of ``box(planes, radius, border,
    guide=guide, ...)``'s output: the gradients to its box means (B, P, H, W; the caller
    takes them through the box's adjoint) and to the guide (B, G, H, W), float32 and
    contiguous, the means summed again on the way (never stored)."""
    B, P, H, W = planes.shape
    d_means = planes.new_empty(B, P, H, W)
    d_guide = planes.new_empty(B, guide.shape[1], H, W)
    _launch_box(planes, radius, border, (0, H), (0, W), d_means, guide, grad, d_guide)
    return d_means, d_guide
