"""Bilateral, joint bilateral filtering and joint bilateral upsampling, with their
backward kernels. Each forward is one launch with no allocation beyond the output.

- ``forward.py``: ``bilateral_kernel`` (the filter, joint or not) and ``launch``;
- ``backward.py``: its gradient, ``bilateral_backward_kernel`` and ``launch_backward``;
- ``upsample.py``: joint bilateral upsampling and its gradient, ``launch_upsample`` and
  ``launch_upsample_backward``;
- ``plan.py``: the launch plans (``forward_plan``), pure functions of plain values;
- ``tiles.py``: the tile tables they choose from;
- ``common.py``: the device helpers the kernels share.
"""
from . import plan, tiles
from .backward import bilateral_backward_kernel, launch_backward
from .common import LOG2E
from .forward import bilateral_kernel, launch
from .plan import (column_group, disk_bands, expands, forward_plan, forward_tiles, forward_tuning, peak_fits,
                   prefetches, reads_inside, unrolls_columns, window_bands)
from .upsample import launch_upsample, launch_upsample_backward, upsample_backward_kernel, upsample_kernel

MAX_RADIUS = 32

__all__ = ["plan", "tiles", "LOG2E", "MAX_RADIUS", "bilateral_kernel", "bilateral_backward_kernel", "upsample_kernel",
           "upsample_backward_kernel", "launch", "launch_backward", "launch_upsample", "launch_upsample_backward",
           "forward_plan", "forward_tiles", "forward_tuning", "expands", "peak_fits", "unrolls_columns",
           "column_group", "disk_bands", "window_bands", "prefetches", "reads_inside"]
