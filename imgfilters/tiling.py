"""Halo tiling: ``imgfilters.tiled`` filters an image larger than the GPU, or than host
memory, tile by tile.

Each output tile is computed from its input crop: the tile plus the filter's halo (the
margin its output pixels read, given by each family's ``halo``), clipped to the image.
At a true image edge the crop ends where the image ends, so the filter applies its own
border mode there; at a seam between tiles the crop holds the real neighbours, and the
pixels next to the crop's own cut edges, which read the border extension, lie in the
halo and are dropped. The result therefore equals the untiled call. Resampling tiles
read the source support of their output span and apply the call's taps to it with the
float64 reference's own arithmetic (``reference.resample``: each output the sum of its
nonzero taps in a fixed order), so a tile equals the untiled call bit for bit on the
float64 path, and within float32 rounding of the kernels on the GPU.

On a GPU the tiles flow through pinned staging buffers and three CUDA streams, so the
host-to-device copy of one tile, the filter on the one before and the device-to-host
copy of the one before that overlap, while the host reads and writes the tiles of the
next slots; GPU memory holds a few tiles whatever the image size. A pinned CPU tensor
needs no staging where each plane of a crop is one block of memory (full-width tiles):
the copies then go straight between it and the GPU, and the host copies nothing. So its
tiles are full-width bands by default.
"""
import inspect
import sys
from dataclasses import dataclass

import numpy as np
import torch

from imgfilters import _image
from imgfilters.ops import noise

__all__ = ["tiled"]

SLOTS = 3  # tiles in flight on the GPU: one copying in, one filtering, one copying out
TILE = 2048  # the default tile's side
# Bands of a pinned tensor hold BAND_TILES tiles' pixels: each band costs the host a few
# hundred microseconds (its copies, launch and events), and with one tile's pixels a band
# a 20000 x 20000 image's 96 bands took 30-60 ms on the H200 as the host's pace varied,
# against 40 ms of copies.
BAND_TILES = 4
MIN_BAND_ROWS = 64  # (bands of very wide images: the halo stays a small part of a band)
IMAGE_ARGUMENTS = ("guide",)  # arguments after the image that are images of its size, tiled with it


def tiled(fn, img, *args, tile=None, out=None, device=None, progress=None, **params):
    """``fn(img, *args, **params)`` computed tile by tile, for images that do not fit on
    the GPU (or in host memory).

    Args:
        fn: a public filter: ``imgfilters.bilateral``, ``joint_bilateral``,
            ``nl_means``, ``separable_filter``, ``gaussian_blur``, ``box_blur``,
            ``unsharp_mask``, ``pointwise``, ``resize``, ``upsample`` or ``imresize``.
        img: a CPU tensor ``(..., C, H, W)`` or ``(H, W)``; or a numpy array, memmap, zarr
            array or anything with numpy slicing, channels last: ``(..., H, W, C)`` or
            ``(H, W)``. Only the crops of the tiles are read.
        *args, **params: ``fn``'s other arguments. A ``guide`` (``joint_bilateral``) is an
            array of the same kind, layout and height and width, tiled with ``img``.
        tile: the side of the output tiles (an int, or ``(rows, cols)``); default 2048,
            and for a pinned tensor on a GPU full-width bands of four times as many
            pixels (its copies then skip the host staging: module docstring).
        out: where the result goes: an array of ``img``'s kind with the result's shape and
            dtype (a memmap or zarr array keeps it on disk); allocated when None (a numpy
            array for numpy-like inputs, a zarr array in memory for zarr inputs, a
            tensor for a tensor, pinned if ``img`` is).
        device: where the tiles are filtered; default the first GPU, else the CPU (the
            float64 reference, or the interpreter under ``TRITON_INTERPRET=1``).
        progress: a progress bar on stderr: None shows it once the call has taken a
            second, True at once, False never.

    ``nl_means`` with ``sigma=None`` estimates the noise once, on a deterministic sample
    of crops (``noise.sample_windows``; the whole image up to 2048 x 2048), not per tile.
    Returns ``out``.
    """
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    src = _Host(img, "img", device)
    sources = [src]

    def image(key, value):  # a guide: an image of img's kind, tiled with it
        extra = _Host(value, key, device)
        if extra.torch != src.torch:
            raise TypeError(f"{key} must be {'a tensor' if src.torch else 'an array'} like img")
        sources.append(extra)
        return torch.empty(extra.planes, dtype=extra.dtype, device="meta")

    call = Call(fn, src.planes, src.dtype, args, params, src.read, device, image)
    dst = _output(src, out, call.out_shape, call.out_dtype, device)
    rows, cols = call.spans(_tile_size(tile, call.out_shape[-1], src.pinned))
    jobs = [(r, c) for r in rows for c in cols]
    from tqdm import tqdm
    bar = tqdm(total=len(jobs), unit="tile", disable=progress is False or len(jobs) < 2,
               delay=0 if progress else 1.0, file=sys.stderr, leave=False)
    try:
        if device.type == "cuda":
            _pipeline(call, sources, dst, jobs, device, bar)
        else:
            for r, c in jobs:
                dst.write(r.out, c.out, call.compute([s.read(r.src, c.src) for s in sources], r, c))
                bar.update()
    finally:
        bar.close()
    return dst.array


@dataclass
class _Span:
    """Along one axis: the output pixels of a tile, the source pixels they need, and (for
    resampling) their taps, columns counted from the first source pixel."""
    out: tuple
    src: tuple
    taps: tuple = None


def _tile_size(tile, width, bands):
    """(rows, cols) of the output tiles: ``tile`` checked, or the default (``bands``:
    full-width bands of the output's ``width``)."""
    if tile is None:
        return (max(MIN_BAND_ROWS, BAND_TILES * TILE * TILE // width), width) if bands else (TILE, TILE)
    pair = tuple(tile) if isinstance(tile, (tuple, list)) else (tile, tile)
    if len(pair) != 2 or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in pair):
        raise ValueError(f"tile must be a positive int or a pair of them, got {tile!r}")
    return pair


class _Host:
    """A host image of any kind, read and written as ``(..., C, H, W)`` torch tensors by
    crop: a CPU tensor as it is; a numpy-like array channels last (``(..., H, W, C)``).
    ``pinned``: a pinned tensor, tiled on the GPU ``device``."""

    def __init__(self, arr, name, device):
        self.array = arr
        if isinstance(arr, torch.Tensor):
            if arr.device.type != "cpu":
                raise TypeError(f"{name} is on {arr.device}: tiled takes host images (call the filter directly)")
            self.torch, dtype = True, arr.dtype
        elif all(hasattr(arr, a) for a in ("shape", "dtype", "__getitem__")):
            self.torch = False
            try:
                dtype = torch.from_numpy(np.empty(0, np.dtype(arr.dtype))).dtype
            except TypeError:
                dtype = None
        else:
            raise TypeError(f"{name} must be a CPU tensor or an array with numpy slicing (numpy, memmap, zarr), "
                            f"got {type(arr).__name__}")
        if dtype not in _image.DTYPES:
            raise TypeError(f"{name} has dtype {arr.dtype}; supported dtypes: {_image.DTYPE_NAMES}")
        self.dtype = dtype
        self.shape = tuple(int(n) for n in arr.shape)  # the array's own order
        if len(self.shape) < 2 or 0 in self.shape:
            raise ValueError(f"{name} must have shape (..., C, H, W) or (H, W) (arrays: (..., H, W, C)), "
                             f"got {self.shape}")
        self.channels_last = not self.torch and len(self.shape) > 2
        self.planes = _planes_order(self.shape, self.channels_last)
        self.pinned = self.torch and device.type == "cuda" and arr.is_pinned()

    def read(self, rows, cols, into=None):
        """The crop ``rows x cols`` (pairs of bounds) as a ``(..., C, h, w)`` tensor, copied
        into the pinned buffer ``into`` (flat) when given."""
        index = self._index(rows, cols)
        crop = self.array[index] if self.torch else torch.from_numpy(np.ascontiguousarray(self.array[index]))
        if into is not None:
            crop = into[:crop.numel()].view(crop.shape).copy_(crop)
        return crop.movedim(-1, -3) if self.channels_last else crop

    def write(self, rows, cols, tile):
        """Store the ``(..., C, h, w)`` tensor ``tile`` at ``rows x cols``."""
        tile = tile.movedim(-3, -1) if self.channels_last else tile
        if self.torch:
            self.array[self._index(rows, cols)].copy_(tile)
        else:
            self.array[self._index(rows, cols)] = tile.numpy()

    def pinned_planes(self, rows, cols):
        """The crop ``rows x cols`` as a ``(planes, h, w)`` view whose every plane is one
        block of pinned memory, for copies straight to or from the GPU; None where the
        array is no pinned tensor or the crop's rows are apart (narrower than the image)."""
        if not self.pinned:
            return None
        crop = self.array[self._index(rows, cols)]
        try:
            planes = crop.view(-1, *crop.shape[-2:])
        except RuntimeError:  # leading dimensions that do not merge
            return None
        return planes if planes[0].is_contiguous() else None

    def storage_shape(self, planes):
        """A ``(..., C, h, w)`` shape in this array's own order."""
        return _planes_order(planes, self.channels_last, inverse=True)

    def _index(self, rows, cols):
        crop = (slice(*rows), slice(*cols))
        return (..., *crop, slice(None)) if self.channels_last else (..., *crop)


def _planes_order(shape, channels_last, inverse=False):
    """(..., H, W, C) <-> (..., C, H, W)."""
    shape = tuple(shape)
    if not channels_last:
        return shape
    if inverse:
        return (*shape[:-3], shape[-2], shape[-1], shape[-3])
    return (*shape[:-3], shape[-1], shape[-3], shape[-2])


def _output(src, out, shape, dtype, device):
    """The output: ``out`` checked against the result's ``(..., C, H, W)`` shape and
    dtype, or a new array of ``src``'s kind."""
    storage = src.storage_shape(shape)
    if out is None:
        if src.torch:
            out = torch.empty(storage, dtype=dtype, pin_memory=src.pinned)
        elif type(src.array).__module__.split(".")[0] == "zarr":
            import zarr
            out = zarr.create_array(store={}, shape=storage, dtype=_numpy_dtype(dtype),
                                    chunks=getattr(src.array, "chunks", "auto"))
        else:
            out = np.empty(storage, dtype=_numpy_dtype(dtype))
    dst = _Host(out, "out", device)
    if dst.torch != src.torch:
        raise TypeError(f"out must be of img's kind ({'a tensor' if src.torch else 'an array'}), "
                        f"got {type(out).__name__}")
    if dst.shape != storage or dst.dtype != dtype:
        raise ValueError(f"out must have shape {storage} and dtype {dtype}, got {dst.shape} and {dst.dtype}")
    if dst.torch and out.data_ptr() == src.array.data_ptr():
        raise ValueError("out must not be img: tiles read their neighbours' pixels")
    return dst


def _numpy_dtype(dtype):
    return torch.empty(0, dtype=dtype).numpy().dtype


class Call:
    """One call of a filter over parts of an image (tiles here, blocks in
    ``imgfilters.dask``): the bound arguments, NLM's one noise estimate, the halo or the
    resampling plan, and the computation of one part from its crop.

    ``planes`` and ``dtype`` describe the image (``(..., C, H, W)``); ``read(rows, cols)``
    gives a crop of it as a tensor on ``device``; ``image(key, value)`` is called for
    each image argument after the first (``IMAGE_ARGUMENTS``) and returns a meta tensor
    of its ``(..., C, H, W)`` shape and dtype."""

    def __init__(self, fn, planes, dtype, args, params, read, device, image):
        import imgfilters
        from imgfilters.ops import resample
        name = getattr(fn, "__name__", None)
        if getattr(imgfilters, str(name), None) is not fn or not hasattr(sys.modules[fn.__module__], "halo") \
                and fn.__module__ != resample.__name__:
            raise TypeError(f"fn must be a public imgfilters filter (imgfilters.bilateral, ...), got {fn!r}")
        self.fn, self.name = fn, name
        try:
            bound = inspect.signature(fn).bind(torch.empty(planes, dtype=dtype, device="meta"), *args, **params)
        except TypeError as e:
            raise TypeError(f"imgfilters.{name}: {e}") from None
        bound.apply_defaults()
        a = bound.arguments
        self.keys = [next(iter(a))] + [k for k in IMAGE_ARGUMENTS if k in a]
        for key in self.keys[1:]:
            a[key] = image(key, a[key])
            if a[key].shape[-2:] != planes[-2:]:
                raise ValueError(f"{key} must have img's height and width {tuple(planes[-2:])}, got "
                                 f"{tuple(a[key].shape[-2:])}")
        H, W = planes[-2:]
        if name == "nl_means" and a["sigma"] is None:  # one estimate for the whole image
            sigma = noise.estimate_sampled(lambda *w: read(w[:2], w[2:]).to(device), H, W)
            a["sigma"] = sigma if sigma.numel() > 1 else float(sigma)
        self.out_dtype = a.get("dtype") or dtype
        if fn.__module__ == resample.__name__:
            size, self.axes = resample.tile_plan(name, dict(a))
            self.halo = None
            self.integer = dtype in _image.MAX_VALUE
        else:
            self.halo = sys.modules[fn.__module__].halo(name, a, planes[-3] if len(planes) > 2 else 1)
            size = (H, W)
        self.out_shape = (*planes[:-2], *size)
        self.params = {k: v for k, v in a.items() if k not in self.keys}
        self.in_size = (H, W)

    def spans(self, tile):
        """The output tiles' spans along H and along W."""
        out = []
        for axis, (n_in, n_out, t) in enumerate(zip(self.in_size, self.out_shape[-2:], tile)):
            spans = []
            for start in range(0, n_out, t):
                stop = min(start + t, n_out)
                if self.halo is None:
                    first, last, taps = support(*self.axes[axis](start, stop))
                    spans.append(_Span((start, stop), (first, last), taps))
                else:
                    h = self.halo[axis]
                    spans.append(_Span((start, stop), (max(0, start - h), min(n_in, stop + h))))
            out.append(spans)
        return out

    def compute(self, crops, r, c):
        """The output tile ``r x c`` from the crops of the image (and guide) on the device."""
        if self.halo is None:
            return resample_tile(crops[0], r.taps, c.taps, self.integer)
        y = self.fn(*crops, **self.params)
        return y[..., r.out[0] - r.src[0]:r.out[1] - r.src[0], c.out[0] - c.src[0]:c.out[1] - c.src[0]]


def support(cols, values):
    """The source pixels that taps ``(cols, values)`` (``reference.row_taps``) read:
    ``first, stop`` (those of nonzero weight), and the taps with their columns counted
    from ``first`` (those of weight 0, which read nothing, moved to ``first``)."""
    read = values != 0
    first = int(cols[read].min()) if read.any() else 0
    stop = int(cols[read].max()) + 1 if read.any() else 1
    return first, stop, (torch.where(read, cols - first, 0), values)


def resample_tile(x, rows, cols, integer):
    """A resampled tile: the taps ``rows`` and ``cols`` (``support``) on its source crop
    ``x``, by ``reference.resample`` in unit scale: float64 on the CPU and for float64
    images, as the untiled call's reference path; float32 for the others on a GPU."""
    from imgfilters.reference import resample as reference
    f = torch.float64 if x.device.type == "cpu" or x.dtype == torch.float64 else torch.float32
    y = reference.resample(_image.to_unit(x, f), rows, cols, intermediate_clamp=integer)
    return _image.from_unit(y, x.dtype)


def _pipeline(call, sources, dst, jobs, device, bar):
    """The tiles through SLOTS pinned and device buffers and three streams (module
    docstring). Slot k % SLOTS is reused for tile k only after tile k - SLOTS has come
    back, so its buffers are free."""
    most_in = [max(_numel(s.planes, r.src, c.src) for r, c in jobs) for s in sources]
    most_out = max(_numel(call.out_shape, r.out, c.out) for r, c in jobs)
    with torch.cuda.device(device):
        h2d, kernel, d2h = (torch.cuda.Stream() for _ in range(3))
        slots = [_Slot(sources, most_in, most_out, call.out_dtype, device) for _ in range(SLOTS)]
        try:
            for k, (r, c) in enumerate(jobs):
                slot = slots[k % SLOTS]
                slot.finish(dst, bar)
                crops = []
                for s, pinned, buf in zip(sources, slot.pinned_in, slot.device_in):
                    planes = s.pinned_planes(r.src, c.src)
                    if planes is None:  # through the staging buffer
                        host = s.read(r.src, c.src, into=pinned)
                        with torch.cuda.stream(h2d):
                            crops.append(_like(buf, host).copy_(host, non_blocking=True))
                        continue
                    crop = buf[:planes.numel()].view(planes.shape)
                    with torch.cuda.stream(h2d):
                        for p in range(planes.shape[0]):
                            crop[p].copy_(planes[p], non_blocking=True)
                    crops.append(crop.view(*s.planes[:-2], *planes.shape[-2:]))
                slot.loaded.record(h2d)
                kernel.wait_event(slot.loaded)
                with torch.cuda.stream(kernel):
                    y = call.compute(crops, r, c)
                    slot.computed.record(kernel)
                d2h.wait_event(slot.computed)
                planes = dst.pinned_planes(r.out, c.out)
                with torch.cuda.stream(d2h):
                    if planes is None:  # through the staging buffer, stored by slot.finish
                        slot.result = _like(slot.pinned_out, y, dst).copy_(y, non_blocking=True)
                    else:
                        y_planes = y.reshape(planes.shape)
                        for p in range(planes.shape[0]):
                            planes[p].copy_(y_planes[p], non_blocking=True)
                        slot.result = planes  # (already in place)
                    y.record_stream(d2h)  # y's memory is not reused before this copy has read it
                    slot.back.record(d2h)
                slot.where = (r.out, c.out) if planes is None else None
            for k in range(len(jobs), len(jobs) + SLOTS):
                slots[k % SLOTS].finish(dst, bar)
        except BaseException:
            torch.cuda.synchronize()  # no copy may still be writing into buffers about to be freed
            raise


class _Slot:
    """The buffers of one tile in flight: pinned host memory and device memory for each
    input, pinned memory for the output, and the events between the streams."""

    def __init__(self, sources, most_in, most_out, out_dtype, device):
        self.pinned_in = [torch.empty(n, dtype=s.dtype, pin_memory=True) for s, n in zip(sources, most_in)]
        self.device_in = [torch.empty(n, dtype=s.dtype, device=device) for s, n in zip(sources, most_in)]
        self.pinned_out = torch.empty(most_out, dtype=out_dtype, pin_memory=True)
        self.loaded, self.computed, self.back = (torch.cuda.Event() for _ in range(3))
        self.result = self.where = None

    def finish(self, dst, bar):
        """Wait for this slot's tile to come back and store it."""
        if self.result is None:
            return
        self.back.synchronize()
        if self.where is not None:
            dst.write(*self.where, self.result)
        self.result = None
        bar.update()


def _numel(planes, rows, cols):
    n = rows[1] - rows[0]
    for d in planes[:-2]:
        n *= d
    return n * (cols[1] - cols[0])


def _like(flat, tensor, host=None):
    """A view of the flat buffer ``flat`` with ``tensor``'s shape and the storage order of
    ``host`` (a ``_Host``; default: ``tensor``'s own dense order)."""
    if host is not None and host.channels_last:
        return flat[:tensor.numel()].view(host.storage_shape(tensor.shape)).movedim(-1, -3)
    if host is not None:
        return flat[:tensor.numel()].view(tensor.shape)
    order = _dense_order(tensor)
    return flat[:tensor.numel()].view([tensor.shape[d] for d in order]).permute(*_inverse(order))


def _dense_order(t):
    """The dims of ``t`` from outermost to innermost in memory."""
    return sorted(range(t.ndim), key=lambda d: (-t.stride(d), -t.shape[d]))


def _inverse(order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return inv
