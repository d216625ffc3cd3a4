"""Tile geometry and launch grids shared by every family.

Tiles are numbered plane by plane (a plane is one channel of one image, or one image for
kernels that need all its channels at once), so that neighbouring programs share their
halo in L2; a kernel walks them with a 1-D grid of one program per tile or, when it keeps
per-program scratch, a persistent grid. Under ``TRITON_INTERPRET=1`` the interpreter's
cost is per program and per operation, not per element, so each family uses one large
tile there and no tuning.
"""
import functools
import os

import triton
import triton.language as tl


def interpreting() -> bool:
    """True when Triton kernels run in Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def interpreted(x) -> bool:
    """Whether a launch on tensor ``x`` runs in Triton's interpreter (a CPU tensor while it
    is on): the plans then take the interpreter's tiles (whose cost is per operation)."""
    return not x.is_cuda and interpreting()


@functools.lru_cache(maxsize=None)
def sm_count(device) -> int:
    """Multiprocessors of a CUDA device (cached: the query costs microseconds per call)."""
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


# Host-side arithmetic in plain Python: triton.cdiv and triton.next_power_of_2 are
# constexpr functions in newer Triton, which cost a microsecond or two a call on the host.

def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for positive b."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def pow2_at_least(n: int, lo: int, hi: int) -> int:
    """The smallest power of two >= n, clamped to [lo, hi]."""
    return max(lo, min(hi, next_pow2(n)))


def size_class(h: int, w: int) -> int:
    """A coarse size bucket for autotune keys: retune per octave of pixel count, not per
    exact shape (data loaders see many shapes; tuning each would cost seconds)."""
    return (h * w).bit_length()


def programs(planes: int, h: int, w: int, bh: int, bw: int) -> int:
    """Programs for ``planes`` planes of ``h x w`` outputs in ``bh x bw`` tiles."""
    return planes * cdiv(h, bh) * cdiv(w, bw)


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
    for t in planes:
        (_, c, h, w), (_, sc, sh, sw) = t.shape, t.stride()
        if (c - 1) * sc + (h - 1) * sh + (w - 1) * sw >= 2 ** 31:
            return True
    return False


@triton.jit
def offset(index, stride, OFF64: tl.constexpr):
    """index * stride, in int64 only when ``needs_int64`` said so (int32 offsets halve the
    registers that unrolled tap loops keep live)."""
    if OFF64:
        return index.to(tl.int64) * stride
    else:
        return index * stride
