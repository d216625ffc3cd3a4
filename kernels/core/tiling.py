"""Tile geometry, launch grids and autotune configuration sets shared by every family.

Tiles are numbered plane by plane (a plane is one channel of one image, or one image for
kernels that need all its channels at once), so that neighbouring programs share their
halo in L2; a kernel walks them with a 1-D grid of one program per tile or, when it keeps
per-program scratch, a persistent grid. Under ``TRITON_INTERPRET=1`` the interpreter's
cost is per program and per operation, not per element, so each family uses one large
tile there and no tuning.
"""
import contextlib
import functools
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


def on_device(t):
    """Launch on ``t``'s GPU: Triton launches on the current CUDA device, which need not
    be the tensor's."""
    import torch
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


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


def tile_configs(tiles):
    """Autotune configurations from tile dicts: ``num_warps``/``num_stages`` become launch
    options, the other keys the kernel's constexpr meta-parameters."""
    out = []
    for t in tiles:
        meta = {k: v for k, v in t.items() if k not in ("num_warps", "num_stages")}
        out.append(triton.Config(meta, num_warps=t.get("num_warps", 4), num_stages=t.get("num_stages", 1)))
    return out


def launch_tile_or_tuned(kernel, tuned, grid, args, meta, fixed, x):
    """Launch on ``x``'s device: ``kernel`` with the ``fixed`` ``triton.Config`` when one is
    given, else ``tuned`` (its autotuned wrapper); ``grid`` maps a config's kwargs to the grid."""
    with on_device(x):
        if fixed is None:
            tuned[grid](*args, **meta)
        else:
            kernel[grid(fixed.kwargs)](*args, **meta, **fixed.kwargs, num_warps=fixed.num_warps,
                                       num_stages=fixed.num_stages)


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


def needs_int64(*planes) -> bool:
    """True when an offset inside one (C, H, W) image of these 4-D tensors can pass 2**31:
    kernels then index in int64. Every index is remapped into the image first, so the
    largest in-image offset bounds them all."""
    return any(sum((n - 1) * st for n, st in zip(t.shape[1:], t.stride()[1:])) >= 2 ** 31 for t in planes)


@triton.jit
def offset(index, stride, OFF64: tl.constexpr):
    """index * stride, in int64 only when ``needs_int64`` said so (int32 offsets halve the
    registers that unrolled tap loops keep live)."""
    if OFF64:
        return index.to(tl.int64) * stride
    else:
        return index * stride
