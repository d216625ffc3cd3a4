"""Pointwise chains on the CPU engine (``imgfilters.pointwise``): each row loaded in unit
scale, the chain run over it (``core.apply_chain``), stored in the output's dtype."""
import numpy as np

from imgfilters import _image, cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import CHAIN, IMAGE, INT, ROW


@core.kernel(*IMAGE, *IMAGE, CHAIN, INT, INT, ROW)
def _pointwise(lo, hi, xu8, xu16, xf32, kin, yu8, yu16, yf32, kout, steps, n_bands, band_rows, row):
    """Tasks ``lo .. hi - 1`` of ``planes * n_bands``: Y = steps(X) row by row (``row``: W)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kin)
    unit = np.float32(1.0) if kin == 2 else np.float32(1.0 / (255.0 if kin == 0 else 65535.0))
    for t in range(lo, hi):
        plane, band = t // n_bands, t % n_bands
        b, c = plane // C, plane % C
        for i in range(band * band_rows, min(H, (band + 1) * band_rows)):
            core.load_row(xu8, xu16, xf32, kin, b, c, i, row, unit)
            core.apply_chain(row, row, W, steps[c])
            core.store_row(yu8, yu16, yf32, kout, b, c, i, row)


def pointwise(img, steps, dtype):
    """``steps`` (``ops.pointwise.Step``) over ``img`` in one pass, stored as ``dtype``."""
    x4 = _image.as_planes(img)
    B, C, H, W = x4.shape
    y = _image.new_image(img, dtype=dtype)
    out = cpu.Output(_image.as_planes(y))
    n_bands, band_rows = cpu.bands(B * C, H, min_rows=1)
    cpu.run(_pointwise, B * C * n_bands, *cpu.image_args(x4), *out.args, cpu.chain(steps, C), n_bands, band_rows,
            scratch=(((W,), np.float32),))
    out.finish()
    return y
