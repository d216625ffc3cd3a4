"""The JPEG round trip on the CPU engine (``ops/jpeg.py``; the definition and its sources:
``reference/jpeg.py``), in float64 as its definition: it equals the reference but where a
sum of the other order lands on the other side of a rounding tie (about 1e-13 from it).

A task is a strip of one minimum-coded-unit row (16 rows for colour, 8 for grey) of one
image, every column: its pixels as 8-bit levels (edges extended by repeating the last row
and column), libjpeg's fixed-point YCbCr and chroma subsampling, each 8 x 8 block through
the DCT (two 8 x 8 products each way), the quantiser and back, then upsampled chroma and
RGB again, stored.
"""
import numpy as np
import torch

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import IMAGE, INT, ROW
from imgfilters.reference import jpeg as reference

F64 = core.array("float64", 2, "C")
QUANT = core.array("float64", 3, "C")  # (B, 8, 8)
PLANES = core.array("float64", 3, "C")


@core.jit
def _level(v):
    """A unit-scale value as the 8-bit level a codec takes (rounded half up, saturated)."""
    if not v > 0.0:  # (NaN too: a codec's input has no NaN; 0, as the kernel's clamp)
        return 0.0
    return np.floor(min(v, 1.0) * 255.0 + 0.5)


@core.jit
def _block(plane, r0, c0, q, cos, aa, t, s):
    """The 8 x 8 block of ``plane`` at (r0, c0) through the DCT, the quantisers ``q`` and
    back, in place (``t``, ``s``: 8 x 8 scratch)."""
    for u in range(8):  # t = K^T (X - 128)
        for y in range(8):
            acc = 0.0
            for x in range(8):
                acc += cos[x, u] * (plane[r0 + x, c0 + y] - 128.0)
            t[u, y] = acc
    for u in range(8):  # s = t K, quantised: level * q * a(u) a(v)
        for v in range(8):
            acc = 0.0
            for y in range(8):
                acc += t[u, y] * cos[y, v]
            ratio = acc / (q[u, v] / aa[u, v])
            level = np.floor(ratio + 0.5) if ratio >= 0 else -np.floor(0.5 - ratio)
            s[u, v] = level * (q[u, v] * aa[u, v])
    for x in range(8):  # t = K s
        for v in range(8):
            acc = 0.0
            for u in range(8):
                acc += cos[x, u] * s[u, v]
            t[x, v] = acc
    for x in range(8):  # back = t K^T + 128, as 8-bit samples
        for y in range(8):
            acc = 0.0
            for v in range(8):
                acc += t[x, v] * cos[y, v]
            plane[r0 + x, c0 + y] = min(max(np.floor(acc + 128.0 + 0.5), 0.0), 255.0)


@core.kernel(*IMAGE, *IMAGE, QUANT, QUANT, F64, F64, INT, ROW, PLANES, PLANES, PLANES, F64, F64)
def _jpeg(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, luma_q, chroma_q, cos, aa, strips, row, rgb, ycc,
          chroma, t, s):
    """Tasks ``lo .. hi - 1`` of ``B * strips``: each image's strip of one coded-unit row.
    Buffers: ``row`` (W), ``rgb`` (C, mcu, W padded), ``ycc`` (3, ...), ``chroma`` (2, 8,
    half that), ``t`` and ``s`` (8, 8)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    mcu = 16 if C == 3 else 8
    wp = -(-W // mcu) * mcu
    unit = 1.0 if kin == 2 else 1.0 / (255.0 if kin == 0 else 65535.0)
    for task in range(lo, hi):
        b, strip = task // strips, task % strips
        r0 = strip * mcu
        for c in range(C):  # 8-bit levels, the edges repeated
            for i in range(mcu):
                core.load_row(xu8, xu16, xf32, kin, b, c, min(r0 + i, H - 1), row, np.float32(1.0))
                line = rgb[c, i]
                for j in range(W):
                    line[j] = _level(row[j] * unit)
                for j in range(W, wp):
                    line[j] = line[W - 1]
        if C == 1:
            for bc in range(wp // 8):
                _block(rgb[0], 0, 8 * bc, luma_q[b], cos, aa, t, s)
        else:
            for i in range(mcu):  # libjpeg's YCbCr, 16-bit fixed point
                for j in range(wp):
                    r, g, bl = int(rgb[0, i, j]), int(rgb[1, i, j]), int(rgb[2, i, j])
                    ycc[0, i, j] = (19595 * r + 38470 * g + 7471 * bl + 32768) >> 16
                    ycc[1, i, j] = (-11059 * r - 21709 * g + 32768 * bl + 8421375) >> 16
                    ycc[2, i, j] = (32768 * r - 27439 * g - 5329 * bl + 8421375) >> 16
            for k in range(2):  # 4:2:0 by 2 x 2 means, biases 1, 2, 1, 2 along the row
                for i in range(8):
                    for j in range(wp // 2):
                        total = (ycc[1 + k, 2 * i, 2 * j] + ycc[1 + k, 2 * i, 2 * j + 1]
                                 + ycc[1 + k, 2 * i + 1, 2 * j] + ycc[1 + k, 2 * i + 1, 2 * j + 1])
                        chroma[k, i, j] = np.floor((total + 1 + j % 2) / 4)
            for br in range(2):
                for bc in range(wp // 8):
                    _block(ycc[0], 8 * br, 8 * bc, luma_q[b], cos, aa, t, s)
            for k in range(2):
                for bc in range(wp // 16):
                    _block(chroma[k], 0, 8 * bc, chroma_q[b], cos, aa, t, s)
            for i in range(mcu):  # chroma repeated 2 x 2, RGB in fixed point (into rgb)
                for j in range(wp):
                    y = int(ycc[0, i, j])
                    cb = int(chroma[0, i // 2, j // 2]) - 128
                    cr = int(chroma[1, i // 2, j // 2]) - 128
                    rgb[0, i, j] = min(max(y + ((91881 * cr + 32768) >> 16), 0), 255)
                    rgb[1, i, j] = min(max(y + ((-22554 * cb - 46802 * cr + 32768) >> 16), 0), 255)
                    rgb[2, i, j] = min(max(y + ((116130 * cb + 32768) >> 16), 0), 255)
        for c in range(C):
            plane = rgb[c]
            for i in range(min(mcu, H - r0)):
                line = plane[i]
                for j in range(W):
                    row[j] = np.float32(line[j] / 255.0)
                core.store_row(yu8, yu16, yf32, kout, b, c, r0 + i, row)


def round_trip(img, quality):
    """The JPEG round trip of ``img`` (B, C, H, W), C 1 or 3, at each image's ``quality``
    (a (B,) tensor: ``ops.jpeg.qualities``)."""
    B, C, H, W = img.shape
    y = _image.new_image(img)
    out = cpu.Output(y)
    q = quality.detach().to("cpu", dtype=torch.float64)
    luma = reference.quantisers(reference.LUMA_TABLE, q).contiguous().numpy()
    chroma = reference.quantisers(reference.CHROMA_TABLE, q).contiguous().numpy()
    cos, aa = (np.ascontiguousarray(a.numpy()) for a in reference.dct_parts())
    mcu = 16 if C == 3 else 8
    strips, wp = -(-H // mcu), -(-W // mcu) * mcu
    cpu.run(_jpeg, B * strips, *cpu.image_args(img), *out.args, luma, chroma, cos, aa, strips,
            scratch=(((W,), np.float32), ((C, mcu, wp), np.float64), ((3, mcu, wp), np.float64),
                     ((2, 8, wp // 2), np.float64), ((8, 8), np.float64), ((8, 8), np.float64)))
    out.finish()
    return y
