"""``estimate_noise``'s patch sums on the CPU engine (``ops.noise``: the method, the
rounds and Chen et al.'s variance).

The float64 reference cuts out every sampled 7 x 7 patch and computes, in each of the
three rounds, every patch's gradient energy as the quadratic form ``p' D p`` and the sums
of ``q q'`` over the kept ones. Here one kernel reads each sampled patch once, in place,
into a row of ``Q`` (its 49 values in the image's stored units and a 1, float64) and
computes its energy once, from the patch's 35 horizontal and 35 vertical central
differences (``p' D p`` with ``D = Dh'Dh + Dv'Dv`` is their sum of squares); each round
then keeps the patches below its limit and sums ``q q'`` over them as one float64 matrix
product.
"""
import numpy as np
import torch

from imgfilters import cpu
from imgfilters.cpu import core
from imgfilters.cpu.core import IMAGE, INT, TABLE

PATCH = 7
F64_2D = core.array("float64", 2, "C")
F64_3D = core.array("float64", 3, "C")


@core.kernel(*IMAGE, INT, F64_3D, F64_2D, TABLE)
def _patches(lo, hi, xu8, xu16, xf32, kind, stride, Q, E, p):
    """Tasks lo .. hi - 1 of ``B * C * rows`` (a row of patch positions of one plane):
    Q[b, n] = the patch's 49 values and 1, E[b, n] = its gradient energy, n numbering the
    patches of image b by channel, row and column. Buffer: the patch rows ``p`` (7, W)."""
    B, C, H, W = core.shape(xu8, xu16, xf32, kind)
    rows, cols = (H - PATCH) // stride + 1, (W - PATCH) // stride + 1
    for t in range(lo, hi):
        b, rest = t // (C * rows), t % (C * rows)
        c, pr = rest // rows, rest % rows
        for i in range(PATCH):
            core.load_row(xu8, xu16, xf32, kind, b, c, pr * stride + i, p[i], np.float32(1.0))
        for pc in range(cols):
            n = (c * rows + pr) * cols + pc
            x0 = pc * stride
            q = Q[b, n]
            energy = 0.0
            for i in range(PATCH):
                for j in range(PATCH):
                    q[i * PATCH + j] = p[i, x0 + j]
            q[PATCH * PATCH] = 1.0
            for i in range(PATCH):
                for j in range(PATCH - 2):
                    d = 0.5 * (q[i * PATCH + j + 2] - q[i * PATCH + j])
                    energy += d * d
            for i in range(PATCH - 2):
                for j in range(PATCH):
                    d = 0.5 * (q[(i + 2) * PATCH + j] - q[i * PATCH + j])
                    energy += d * d
            E[b, n] = energy


def patch_moments(x4, stride):
    """``(Q, E)`` of the (B, C, H, W) CPU batch: every sampled patch (rows and columns 0,
    stride, 2 stride, ... of every channel) as a row of Q (B, N, 50) float64 tensor, its
    49 values in stored units and a 1, and its gradient energy in E (B, N)."""
    B, C, H, W = x4.shape
    rows, cols = (H - PATCH) // stride + 1, (W - PATCH) // stride + 1
    Q = np.empty((B, C * rows * cols, PATCH * PATCH + 1), np.float64)
    E = np.empty((B, C * rows * cols), np.float64)
    cpu.run(_patches, B * C * rows, *cpu.image_args(x4), stride, Q, E, scratch=(((PATCH, W), np.float32),))
    return torch.from_numpy(Q), torch.from_numpy(E)


def patch_stats(moments, limits):
    """``reference.noise.patch_stats`` from ``patch_moments``: per image, the sums of
    ``q q'`` (B, 50, 50) float64 over its patches whose energy is below its entry of
    ``limits`` (B,)."""
    Q, E = moments
    out = torch.empty(Q.shape[0], Q.shape[2], Q.shape[2], dtype=torch.float64)
    for b in range(Q.shape[0]):
        limit = float(limits[b])
        q = Q[b] if limit == np.inf else Q[b].index_select(0, (E[b] < limit).nonzero().squeeze(1))
        torch.mm(q.T, q, out=out[b])
    return out
