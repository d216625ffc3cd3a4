"""Resampling (resize / upsample): one launch, weights computed on the fly or tabled.

Every mode is separable: output pixel (i, j) is ``sum_a wy_i(a) sum_b wx_j(b) X[y_i(a),
x_j(b)]`` over a few source rows and columns per axis. Three kernels, by what the call
allows (``launch`` picks):

- ``phases_kernel``: a ratio F / D per axis (F outputs per D source pixels, F 1, 2 or 4,
  D any that MAX_SLOTS allows: x2, x4, 4/3, 1/2, 1/4, 2/3, ...; every mode, no
  align_corners). Every output phase has constant weights away from the edges, so a strip
  of columns slides down the rows, reading each source row once as contiguous blocks and
  writing coalesced, interleaved output rows (PERFORMANCE.md); the weights, and those of
  the lanes and rows next to the edges, come from the float64 reference as constant
  tables (``PhasePlan``).
- ``direct_kernel``: other factors of the modes with at most four taps and no widening
  (nearest, nearest-exact, bilinear, bicubic): each output gathers its taps itself.
- ``resample_kernel``: the rest (antialiased, Lanczos, area and MATLAB at other
  factors). Each program owns a ``BH x BW`` output tile of one plane; per axis it
  computes, for its rows (columns), the first source index, the tap count and every tap's
  weight from the mode's index mapping and kernel function (normalised where the mode
  normalises). It resamples along x each source row the tile needs, once, and combines
  those rows with a matrix of row weights on the tensor cores. Downsampling with
  antialias widens the kernel with the scale, and the source rows and taps per tile grow
  with it, in the same single launch.
- ``resample_rows_kernel`` then ``resample_columns_kernel``: the same work in two passes
  through a float32 (B, C, H, WO) intermediate, for downscales by 2 or more on both axes
  (``two_pass``), where each of ``resample_kernel``'s programs loops over many source rows,
  a few at a time, and neighbouring tiles resample the same rows again: the row pass is
  spread over every source row, once, and the column pass sums contiguous rows of the
  intermediate in float32. Never where the intermediate would outweigh the input.

The gradients of upsampling by 1 or 2 (torch's modes) are ``upsample_phases_adjoint_kernel``.

Modes (``MODE`` constexpr), as defined in ``imgfilters/reference/resample.py``:

- NEAREST: ``floor(i * scale)``; NEAREST_EXACT: ``floor((i + 0.5) * scale)`` (torch).
- LINEAR / CUBIC: torch's ``upsample_bilinear2d`` / ``upsample_bicubic2d`` (source
  ``(i + 0.5) * scale - 0.5``, or ``i * scale`` with align_corners; bilinear clamps a
  negative source to 0; bicubic A = -0.75 with its taps clamped into the image).
- AA_LINEAR / AA_CUBIC / LANCZOS: the antialiased, PIL-style scheme of torch's
  ``_upsample_*_aa`` and PIL: centre ``(i + 0.5) * scale``, support ``S * max(scale, 1)``,
  weights ``k((x - centre + 0.5) / max(scale, 1))`` normalised (triangle, cubic with
  A = -0.5, Lanczos-3).
- AREA: ``adaptive_avg_pool2d``: the mean over ``[floor(i in / out), ceil((i + 1) in / out))``.
- MATLAB: ``imresize`` bicubic (A = -0.5; with antialias the kernel widens by the scale
  when shrinking), symmetric index padding at the borders, weights normalised.

``scale`` is the source step per output pixel (``in / out``, or torch's ``1 / scale_factor``).

Files:

- ``modes.py``: the mode codes and each mode's index mapping and tap weights (device
  helpers) and tap counts (``taps``);
- ``general.py``: ``resample_kernel`` and ``direct_kernel`` (``launch_general``);
- ``two_pass.py``: ``resample_rows_kernel`` and ``resample_columns_kernel``;
- ``phases.py``: ``phases_kernel``, ``PhasePlan`` and its launch plan ``phases_plan``;
- ``adjoint.py``: ``upsample_phases_adjoint_kernel`` and its launch plan ``adjoint_plan``;
- ``tiles.py``: the GPU tiles and strips they launch with.
"""

from . import adjoint, general, modes, tiles, two_pass
from .adjoint import ADJOINT_FACTORS, ADJOINT_MODES, adjoint_factor, adjoint_plan, launch_adjoint
from .modes import MODES, taps
from .phases import GROW_FACTORS, MAX_REACH, MAX_SLOTS, PhasePlan, launch_phases, phases_plan


def launch(x, y, mode, scale_y, scale_x, align_corners=False, antialias=False, clamp_rows=False, pro=((), ()),
           epi=((), ()), phases=None):
    """Resample 4-D ``x`` (B, C, H, W) into ``y`` (B, C, HO, WO) with mode code ``mode``
    and source steps ``scale_y``/``scale_x`` per output pixel; with ``phases``, a pair
    of ``PhasePlan`` (rows, columns) for integer factors, by ``phases_kernel``."""
    if phases is not None:
        return launch_phases(x, y, phases, clamp_rows, pro, epi)
    return general.launch_general(x, y, mode, scale_y, scale_x, align_corners, antialias, clamp_rows, pro, epi)


__all__ = ["adjoint", "general", "modes", "phases", "tiles", "two_pass", "ADJOINT_FACTORS", "ADJOINT_MODES",
           "GROW_FACTORS", "MAX_REACH", "MAX_SLOTS", "MODES", "PhasePlan", "adjoint_factor", "adjoint_plan", "launch",
           "launch_adjoint", "launch_phases", "phases_plan", "taps"]
