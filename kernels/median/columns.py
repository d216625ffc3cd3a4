"""``columns_kernel``: 3 x 3 and 5 x 5 medians from sorted columns shared between
neighbouring outputs."""
import triton
import triton.language as tl

from ..core import neighbourhood, pixels
from ..core.tiling import offset, tile_origin
from . import networks
from .common import FLOAT, RAW, _finish, _input_row


@triton.jit(do_not_specialize=["C", "H", "W", "sxb", "sxc", "sxh", "syb", "syc", "syh", "SIZE_CLASS"])
def columns_kernel(X, Y, C, H, W, sxb, sxc, sxh, syb, syc, syh, border_value,
                   PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                   K: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                   OFF64: tl.constexpr, KEY: tl.constexpr, NEAR: tl.constexpr, SIZE_CLASS,
                   BW: tl.constexpr, S: tl.constexpr, SEG: tl.constexpr):
    """``median_kernel``'s result for K = 3 or 5 (not ARG) with each column of a window
    sorted once for the K windows that hold it. A program's BW lanes hold S adjacent
    output columns each and march down SEG output rows, keeping the last K - 1 input rows'
    values at the S + K - 1 columns a lane reads; each output row loads one more input row,
    sorts its S + K - 1 columns of K values (``networks.sortK``) and selects each
    of the S outputs' median from its K sorted columns (``column_medianK``)."""
    R: tl.constexpr = K // 2
    N: tl.constexpr = S + 2 * R  # the columns a lane reads
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, SEG, BW * S)
    x_base = X + b * sxb + c * sxc
    y_base = Y + b * syb + c * syc
    lanes = w0 + S * tl.arange(0, BW)  # a lane's first output column
    unit = pixels.unit_scale(X.dtype.element_ty)
    col_offs, col_ins = neighbourhood.columns(lanes - R, N, W, SXW, BORDER, NEAR, OFF64)
    kept = ()  # input rows o - R .. o + R - 1, row-major: row u's column d at u * N + d
    for u in tl.static_range(2 * R):
        kept = kept + _input_row(x_base, h0 - R + u, H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args,
                                 BORDER, NEAR, OFF64, KEY)
    ahead = _input_row(x_base, h0 + R, H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args, BORDER, NEAR,
                       OFF64, KEY)
    for o in range(h0, tl.minimum(h0 + SEG, H)):
        window = kept + ahead
        # the next output row's input row, loaded a row ahead: its memory latency passes
        # while this row's medians are selected (one row in flight a lane is not enough)
        ahead = _input_row(x_base, o + R + 1, H, col_offs, col_ins, sxh, border_value, c, PRO, pro_args, BORDER,
                           NEAR, OFF64, KEY)
        columns = ()  # column d's value of rank u at d * K + u
        nans = ()
        for d in tl.static_range(N):
            column = ()
            for u in tl.static_range(K):
                column = column + (window[u * N + d],)
            if KEY == FLOAT:
                nan = column[0] != column[0]
                for u in tl.static_range(1, K):
                    nan = nan | (column[u] != column[u])
                nans = nans + (nan,)
            if K == 3:
                columns = columns + networks.sort3(column)
            else:
                columns = columns + networks.sort5(column)
        for s in tl.static_range(S):
            sorted_window = ()
            for q in tl.static_range(K * K):
                sorted_window = sorted_window + (columns[s * K + q],)
            if K == 3:
                y = networks.column_median3(sorted_window)
            else:
                y = networks.column_median5(sorted_window)
            cols = lanes + s
            y_ptrs = y_base + offset(o, syh, OFF64) + offset(cols, SYW, OFF64)
            if KEY == RAW and len(EPI) == 0 and Y.dtype.element_ty == X.dtype.element_ty:
                # the stored value is the low bits of 2^23 + value: no scaling and rounding back
                tl.store(y_ptrs, y.to(tl.int32, bitcast=True).to(Y.dtype.element_ty), cols < W)
            else:
                if KEY == FLOAT:
                    nan = nans[s]
                    for v in tl.static_range(1, K):
                        nan = nan | nans[s + v]
                else:
                    nan = False
                    y = (y - neighbourhood.BIAS) * unit
                _finish(y, nan, y, x_base, y_ptrs, o, cols, cols < W, b, c, H, W, sxh, PRO, pro_args, EPI, epi_args,
                        SXW, BORDER, OFF64, KEY, False)
        kept = neighbourhood.drop_row(window, N)

