"""Tile geometry, launch grids and autotune configuration sets shared by every family.

Kernels launch a 1-D grid of ``planes * tiles_per_plane`` programs, tiles of one plane
(one channel of one image) being consecutive so that neighbouring programs share their
halo in L2. Under ``TRITON_INTERPRET=1`` the interpreter's cost is per program and per
operation, not per element, so each family uses one large tile there and no tuning.
"""
import functools
import itertools
import os

import triton
import triton.language as tl


def interpreting() -> bool:
    """True when Triton kernels run in Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def autotuning() -> bool:
    """False when ``IMGFILTERS_AUTOTUNE=0``: kernels then use their family's default tile
    instead of timing every candidate on the first call of each shape class (the tests
    set this on the GPU, where tuning each of hundreds of variants would take minutes)."""
    return os.environ.get("IMGFILTERS_AUTOTUNE", "1") != "0"


@functools.lru_cache(maxsize=None)
def sm_count(device) -> int:
    """Multiprocessors of a CUDA device (cached: the query costs microseconds per call)."""
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


def pow2_at_least(n: int, lo: int, hi: int) -> int:
    """The smallest power of two >= n, clamped to [lo, hi]."""
    return max(lo, min(hi, triton.next_power_of_2(max(int(n), 1))))


def size_class(h: int, w: int) -> int:
    """A coarse size bucket for autotune keys: retune per octave of pixel count, not per
    exact shape (data loaders see many shapes; tuning each would cost seconds)."""
    return (h * w).bit_length()


def configs(**axes):
    """Every combination of the given meta-parameter values as ``triton.Config`` objects.

    ``num_warps`` and ``num_stages`` are taken out as launch options; the rest are
    constexpr meta-parameters of the kernel.
    """
    names = list(axes)
    out = []
    for values in itertools.product(*(axes[n] for n in names)):
        kw = dict(zip(names, values))
        warps = kw.pop("num_warps", 4)
        stages = kw.pop("num_stages", 1)
        out.append(triton.Config(kw, num_warps=warps, num_stages=stages))
    return out


def programs(planes: int, h: int, w: int, bh: int, bw: int) -> int:
    """Programs for ``planes`` planes of ``h x w`` outputs in ``bh x bw`` tiles."""
    return planes * triton.cdiv(h, bh) * triton.cdiv(w, bw)


@triton.jit
def tile_origin(pid, C, H, W, BH: tl.constexpr, BW: tl.constexpr):
    """(batch index, channel, first output row, first output column) of program ``pid``
    in the grid of ``programs``; tiles are ``BH x BW`` over ``H x W`` outputs.

    Batch and channel come back as int64 so that plane offsets never overflow.
    """
    tiles_w = tl.cdiv(W, BW)
    tiles_per_plane = tiles_w * tl.cdiv(H, BH)
    plane = pid // tiles_per_plane
    t = pid - plane * tiles_per_plane
    th = t // tiles_w
    tw = t - th * tiles_w
    plane = plane.to(tl.int64)
    b = plane // C
    return b, plane - b * C, th * BH, tw * BW
