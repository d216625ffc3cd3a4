"""Separable 2-D correlation in one launch, three kernels by radius.

``strip_kernel`` (vertical radius <= ``RING_MAX``, every filter the musts name): a program
owns a strip of ``T*S`` output columns (``S`` pixels per lane) and ``SEG`` output rows and
marches down its input rows once. Each input row's horizontal result is computed from
registers (narrow filters: each lane loads the blocks of ``S`` pixels around its own with
vector loads and splits them) or from shifted L1 loads (wide filters), then added into the
``2*RY`` pending output rows, a tuple of registers shifted by one slot per row; the row it
completes is stored. No scratch, each pixel read from memory once per strip, and every
loop over rows and taps is a run-time loop: only the ``2*RY + 1`` pending-row updates
(and the narrow filters' horizontal taps) are unrolled, which keeps compiles short.

``product_kernel`` (the larger radius in ``PRODUCT_RADII``, 20 to 32: where the strip
would read its taps as shifted L1 loads): the same march down a strip, 64 rows at a time,
with both passes as banded matrix products on the tensor cores (tf32x3).

``separable_kernel`` (taller filters, up to 127 taps): output tiles of ``BH x BW``; the
horizontal pass of the tile's rows goes to a per-program scratch slot (L1/L2-resident,
capped at the output's size), then after a barrier the vertical pass reads it back
shifted by whole rows. The pending rows of a 127-tap filter would not fit in registers.

The output grid may be larger than the input and start before it (``OY``, ``OX``): the
adjoint used by autograd evaluates the transposed filter on the zero-extended gradient.

- ``strip.py``: ``strip_kernel``, its plan (``strip_plan``, ``strip_config``) and launch;
- ``product.py``: ``product_kernel`` and its launch;
- ``scratch.py``: ``separable_kernel``, its tiles' tuning (``scratch_tuning``) and launch;
- ``tiles.py``: the tile tables and measured constants they choose from;
- ``common.py``: the device helpers the kernels share and the ``unsharp`` epilogues.

``launch`` (below) picks the kernel by radius; ``launch_adjoint`` runs the strip's
gradient.
"""
from . import tiles
from .common import unsharp, unsharp_per_image
from .product import _launch_product, product_kernel
from .scratch import _launch_scratch, halo_rows, scratch_tiles, scratch_tuning, separable_kernel
from .strip import StripPlan, _launch_strip, strip_config, strip_kernel, strip_plan
from .tiles import (INTERPRETER_RING_MAX, PRODUCT_RADII, PRODUCT_TILE, RESIDENT_PER_SM, RING_MAX, TILES,
                    UNROLL_TAPS)
from ..core import borders
from ..core.tiling import interpreted

MAX_RADIUS = 63  # 127 taps

__all__ = ["tiles", "MAX_RADIUS", "RING_MAX", "INTERPRETER_RING_MAX", "PRODUCT_RADII", "PRODUCT_TILE", "TILES",
           "RESIDENT_PER_SM", "UNROLL_TAPS", "strip_kernel", "product_kernel", "separable_kernel", "unsharp",
           "unsharp_per_image", "launch", "launch_adjoint", "strip_fits", "strip_config", "strip_plan", "StripPlan",
           "halo_rows", "scratch_tiles", "scratch_tuning"]


def launch(x, y, tx, ty, oy=0, ox=0, border=0, border_value=0.0, pro=((), ()), epi=((), ()),
           tile=None):
    """Run the filter from 4-D ``x`` (B, C, H, W) into 4-D ``y`` (B, C, HO, WO).

    ``tx``/``ty`` are float32 taps on the device (odd lengths), ``pro``/``epi`` are
    (steps, args) chains, ``border`` a code from ``core.borders``. The radii pick the
    kernel: the banded products for ``PRODUCT_RADII``, else the strip up to ``RING_MAX``,
    else the scratch kernel. ``tile`` picks a kernel and its tile instead: a
    ``PRODUCT_TILE``-like dict, a ``strip_config`` dict or one of ``TILES``.
    """
    rx, ry = (tx.shape[-1] - 1) // 2, (ty.shape[-1] - 1) // 2
    if tile is None and max(rx, ry) in tiles.PRODUCT_RADII:
        tile = tiles.PRODUCT_TILE
    if tile is not None and "B" in tile:
        _launch_product(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile)
    elif (tile is None and strip_fits(ry, x)) or (tile is not None and "SEG" in tile):
        _launch_strip(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile)
    else:
        _launch_scratch(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile)


def strip_fits(ry, x):
    """True when ``launch`` runs the strip kernel on tensor ``x`` for a vertical radius
    ``ry`` (which ``launch_adjoint`` needs); in Triton's interpreter (``interpreted``),
    whose cost is per operation, for fewer rows: the strip's per-row steps cost it seconds
    a row for tall filters, which the scratch kernel does in whole-tile steps."""
    return ry <= (tiles.INTERPRETER_RING_MAX if interpreted(x) else tiles.RING_MAX)


def launch_adjoint(g, y, fx, fy, fold):
    """The gradient ``y`` (B, C, H, W, float32, zeroed) of the filter under the border
    ``fold``, from the output gradient ``g`` (B, C, H, W); ``fx``/``fy`` are the filter's
    taps flipped. The flipped filter runs over the zero-extended ``g`` on the
    border-extended grid and adds each value into the pixel the border read it from. One
    launch; needs ``strip_fits`` of the vertical radius."""
    rx, ry = (fx.shape[-1] - 1) // 2, (fy.shape[-1] - 1) // 2
    _launch_strip(g, y, fx, fy, -ry, -rx, borders.CONSTANT.value, 0.0, ((), ()), ((), ()), fold=fold)
