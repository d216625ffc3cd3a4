"""Triton kernels of imgfilters (installed as ``imgfilters.kernels``).

Triton only: no argument checking and no public API here; the host modules in
``imgfilters.ops`` validate inputs and launch these kernels.
"""
