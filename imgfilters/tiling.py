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

Every argument is checked before any tile is read or written: ``Call`` calls the filter
once on meta tensors of the whole image's shape, which runs the public function's checks
and its op's shape inference, and the families' ``halo`` hooks check the values of
per-image tensors, which a meta call cannot read.

On a GPU the tiles flow through pinned buffers and three CUDA streams, so the
host-to-device copy of one tile, the filter on the one before and the device-to-host
copy of the one before that overlap, while the host reads and writes the tiles of the
next slots; GPU memory holds a few tiles whatever the image size. Tiles are full-width
bands by default, and every copy keeps the array's own memory order (``_Host.order``:
channels last for numpy-like arrays, a tensor's strides): a band of a C-contiguous
array is then one block of memory, copied into the pinned buffer with one parallel
``copy_`` (no transpose on the host) and to the GPU in one transfer, where the filter
reads it in place as a channels-last tensor. A pinned tensor needs no pinned buffer: its
bands go straight between it and the GPU, block by block.
"""
import inspect
import math
import mmap
import operator
import os
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from imgfilters import _image
from imgfilters.ops import noise

__all__ = ["tiled"]

SLOTS = 3  # tiles in flight on the GPU: one copying in, one filtering, one copying out
TILE = 2048  # a default tile holds TILE x TILE pixels (on a GPU, BAND_TILES times that)
# Bands on a GPU hold BAND_TILES tiles' pixels: each band costs the host a few hundred
# microseconds (its copies, launch and events), and with one tile's pixels a band a
# 20000 x 20000 image's 96 bands took 30-60 ms on the H200 as the host's pace varied,
# against 40 ms of copies.
BAND_TILES = 4
MIN_BAND_ROWS = 64  # (bands of very wide images: the halo stays a small part of a band)
IMAGE_ARGUMENTS = ("guide",)  # arguments after the image that are images of its size, tiled with it (None: none)
RESAMPLING = ("resize", "upsample", "imresize")
FILTERS = ("bilateral", "joint_bilateral", "nl_means", "separable_filter", "gaussian_blur", "box_blur",
           "unsharp_mask", "filter2d", "median_blur", "erode", "dilate", "morphology", "sobel", "scharr", "laplacian",
           "gradient_magnitude", "guided_filter", "pointwise") + RESAMPLING
# why the other public functions cannot be tiled
NOT_TILED = {
    "joint_bilateral_upsample": "its output lies on the guide's grid and its samples on lowres's, at fractional "
                                "positions set by the two whole sizes, which crops of the two keep only where "
                                "both are cut where the grids meet; tiles are not cut so",
    "estimate_noise": "it returns one value per image, not an image",
}


def tiled(fn, img, *args, tile=None, out=None, device=None, progress=None, **params):
    """``fn(img, *args, **params)`` computed tile by tile, for images that do not fit on
    the GPU (or in host memory).

    Args:
        fn: a public filter: ``imgfilters.bilateral``, ``joint_bilateral``,
            ``nl_means``, ``separable_filter``, ``gaussian_blur``, ``box_blur``,
            ``unsharp_mask``, ``filter2d``, ``median_blur``, ``erode``, ``dilate``,
            ``morphology``, ``sobel``, ``scharr``, ``laplacian``, ``gradient_magnitude``
            (without ``direction``), ``guided_filter`` (``subsample=1``), ``pointwise``,
            ``resize``, ``upsample`` or
            ``imresize`` (``joint_bilateral_upsample`` cannot be tiled: ``NOT_TILED``).
        img: a CPU tensor ``(..., C, H, W)`` or ``(H, W)``; or a numpy array, memmap, zarr
            array or anything with numpy slicing, channels last: ``(..., H, W, C)`` or
            ``(H, W)``. Only the crops of the tiles are read.
        *args, **params: ``fn``'s other arguments. A ``guide`` (``joint_bilateral``) is an
            array of the same kind, layout and height and width, tiled with ``img``.
        tile: the output tiles' size: an int (square tiles) or ``(rows, cols)``; default
            full-width bands of 2048 x 2048 pixels (four times as many on a GPU), their
            rows a multiple of a zarr output's chunk rows.
        out: where the result goes: an array of ``img``'s kind with the result's shape and
            dtype, sharing no memory with ``img`` or the guide (a memmap or zarr array
            keeps it on disk); allocated when None (a numpy array for numpy-like inputs,
            a zarr array in memory for zarr inputs, a tensor in the untiled result's
            layout for a tensor, pinned if ``img`` is).
        device: where the tiles are filtered: ``"cuda"`` (or ``"cuda:N"``) or ``"cpu"``;
            default the first GPU, else the CPU (the float64 reference, or the
            interpreter under ``TRITON_INTERPRET=1``).
        progress: a progress bar on stderr: None shows it once the call has taken a
            second, True at once, False never.

    Every argument is checked before any tile is read or written. ``nl_means`` with
    ``sigma=None`` estimates the noise once, on a deterministic sample of crops
    (``noise.sample_windows``; the whole image up to 2048 x 2048), not per tile. The
    result carries no gradient. Returns ``out``.
    """
    device = _device(device)
    src = _Host(img, "img", device)
    sources = [src]

    def image(key, value):  # a guide: an image of img's kind, tiled with it
        extra = _Host(value, key, device)
        if extra.torch != src.torch:
            raise TypeError(f"{key} must be {'a tensor' if src.torch else 'an array'} like img")
        sources.append(extra)
        return extra.meta()

    call = Call(fn, src.meta(), args, params, image)
    dst = _output(sources, out, call.out, device)
    size = _tile_size(tile, call.out.shape[-2:], call.in_size, dst.chunk_rows, device)
    call.prepare(src.read, device)
    rows, cols = call.spans(size)
    jobs = [(r, c) for r in rows for c in cols]
    from tqdm import tqdm
    bar = tqdm(total=len(jobs), unit="tile", disable=progress is False or len(jobs) < 2,
               delay=0 if progress else 1.0, file=sys.stderr, leave=False)
    try:
        with torch.no_grad():
            if device.type == "cuda":
                _pipeline(call, sources, dst, jobs, device, bar)
            else:
                for r, c in jobs:
                    dst.write(r.out, c.out, call.compute([s.read(r.src, c.src) for s in sources], r, c))
                    bar.update()
    finally:
        bar.close()
    return dst.array


def _device(device):
    """``device`` checked: a CUDA device that exists, or the CPU; default the first GPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError):
        d = None
    if d is None or d.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda' (or 'cuda:N'), got {device!r}")
    if d.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device is {device!r}, but there is no CUDA GPU here (use device='cpu')")
    if d.type == "cuda" and d.index is not None and d.index >= torch.cuda.device_count():
        raise ValueError(f"device is {device!r}, but there are {torch.cuda.device_count()} CUDA GPUs")
    return d


@dataclass
class _Span:
    """Along one axis: the output pixels of a tile, the source pixels they need, and (for
    resampling) their taps, columns counted from the first source pixel."""
    out: tuple
    src: tuple
    taps: tuple = None


def _tile_size(tile, out_size, in_size, chunk_rows, device):
    """(rows, cols) of the output tiles: ``tile`` checked, or the default bands (module
    docstring), whose source crops hold no more pixels than the band either."""
    if tile is None:
        pixels = TILE * TILE * (BAND_TILES if device.type == "cuda" else 1)
        width = max(out_size[1], in_size[1] * -(-in_size[0] // out_size[0]))  # (a band's source pixels a row)
        rows = max(MIN_BAND_ROWS, pixels // width)
        if chunk_rows:  # whole chunks: a partly written chunk would be read, merged and written again
            rows = -(-rows // chunk_rows) * chunk_rows
        return rows, out_size[1]
    pair = tuple(tile) if isinstance(tile, (tuple, list)) else (tile, tile)
    try:
        if len(pair) != 2 or any(isinstance(t, bool) for t in pair):
            raise TypeError
        pair = tuple(operator.index(t) for t in pair)  # ints, numpy and 0-d torch integers
    except TypeError:
        raise TypeError(f"tile must be a positive integer or a pair of them, got {tile!r}") from None
    if min(pair) < 1:
        raise ValueError(f"tile must be a positive integer or a pair of them, got {tile!r}")
    return pair


class _Host:
    """A host image of any kind, read and written by crop as ``(..., C, h, w)`` tensors:
    a CPU tensor; a numpy array or memmap (through a tensor on its memory) or any array
    with numpy slicing (zarr...), channels last (``(..., H, W, C)``).

    ``order``: the ``(..., C, H, W)`` dims from outermost to innermost in the array's
    memory; crops are staged in that order, so that every host copy moves whole rows,
    never transposes. ``pinned``: a pinned tensor, tiled on a GPU."""

    def __init__(self, arr, name, device):
        self.array, self.name = arr, name
        if isinstance(arr, torch.Tensor):
            if arr.device.type != "cpu":
                raise TypeError(f"{name} is on {arr.device}: tiled takes host images (call the filter directly)")
            self.torch, view, dtype = True, arr, arr.dtype
        elif all(hasattr(arr, a) for a in ("shape", "dtype", "__getitem__")):
            self.torch, view = False, _tensor_of(arr)
            try:
                dtype = torch.from_numpy(np.empty(0, np.dtype(arr.dtype).newbyteorder("="))).dtype
            except TypeError:
                dtype = None
        else:
            raise TypeError(f"{name} must be a CPU tensor or an array with numpy slicing (numpy, memmap, zarr), "
                            f"got {type(arr).__name__}")
        if dtype not in _image.DTYPES:
            raise TypeError(f"{name} has dtype {arr.dtype}; supported dtypes: {_image.DTYPE_NAMES}")
        self.dtype = dtype
        shape = tuple(int(n) for n in arr.shape)  # the array's own order
        if len(shape) < 2 or 0 in shape:
            raise ValueError(f"{name} must have shape (..., C, H, W) or (H, W) (arrays: (..., H, W, C)), "
                             f"got {shape}")
        self.channels_last = channels_last = not self.torch and len(shape) > 2
        self.planes = (*shape[:-3], shape[-1], shape[-3], shape[-2]) if channels_last else shape
        n = len(shape)
        if view is not None:
            self.view = view.movedim(-1, -3) if channels_last else view
            self.order = sorted(range(n), key=lambda d: (-self.view.stride(d), -self.view.shape[d]))
        else:
            self.view = None
            self.order = [*range(n - 3), n - 2, n - 1, n - 3] if channels_last else list(range(n))
        chunks = getattr(arr, "chunks", None) if view is None else None
        self.chunk_rows = chunks[self.order.index(n - 2)] if isinstance(chunks, tuple) and all(
            isinstance(c, int) for c in chunks) and len(chunks) == n else None
        self.pinned = self.torch and device.type == "cuda" and arr.is_pinned()
        self._kept = {}  # chunk rows (_chunk_row)

    def meta(self):
        """A meta tensor of the image's ``(..., C, H, W)`` shape, dtype and memory order."""
        shape = [self.planes[d] for d in self.order]
        return torch.empty(shape, dtype=self.dtype, device="meta").permute(_inverse(self.order))

    def read(self, rows, cols, into=None):
        """The crop ``rows x cols`` (pairs of bounds) as a ``(..., C, h, w)`` tensor: a view
        of the array where it has one and ``into`` is None; else copied into ``into`` (a
        flat buffer) in the array's order."""
        if self.view is not None:
            crop = self.view[..., slice(*rows), slice(*cols)]
            return crop if into is None else _in_order(into, crop.shape, self.order).copy_(crop)
        shape = (*self.planes[:-2], rows[1] - rows[0], cols[1] - cols[0])
        if into is None:
            into = torch.empty(math.prod(shape), dtype=self.dtype)
        crop = _in_order(into, shape, self.order)
        self._fill(rows, cols, crop.permute(self.order).numpy())  # (the array's own order: a view of into)
        return crop

    def _fill(self, rows, cols, stored):
        """Decode the crop ``rows x cols`` into ``stored``, a numpy array in the array's
        order. A chunked array's full-width crops go chunk row by chunk row, the last two
        kept: consecutive bands share them through their halos, and then decode each once."""
        step = self.chunk_rows
        if step is None or cols[1] - cols[0] < self.planes[-1]:
            self._decode(self._index(rows, cols), stored)
            return
        for k in range(rows[0] // step, -(-rows[1] // step)):
            lo, hi = max(rows[0], k * step), min(rows[1], k * step + step)
            part = self._chunk_row(k)[self._index((lo - k * step, hi - k * step), (0, None))]
            stored[self._index((lo - rows[0], hi - rows[0]), (0, None))] = part

    def _chunk_row(self, k):
        """The full-width rows of chunk row ``k``, decoded once for the bands that read them."""
        if k not in self._kept:
            step, (H, W) = self.chunk_rows, self.planes[-2:]
            spare = [v for j, v in self._kept.items() if j < k - 1]  # (bands go down the image)
            self._kept = {j: v for j, v in self._kept.items() if j == k - 1}
            whole = spare[0] if spare else np.empty(self.shape_of((*self.planes[:-2], step, W)),
                                                    dtype=_numpy_dtype(self.dtype))
            rows = (k * step, min(H, k * step + step))
            self._kept[k] = whole[self._index((0, rows[1] - rows[0]), (0, None))]
            self._decode(self._index(rows, (0, None)), self._kept[k])
        return self._kept[k]

    def _decode(self, index, stored):
        if hasattr(self.array, "get_basic_selection"):  # zarr: decoded straight into stored
            from zarr.core.buffer import cpu
            self.array.get_basic_selection(index, out=cpu.NDBuffer.from_numpy_array(stored))
        else:
            stored[...] = self.array[index]

    def write(self, rows, cols, tile):
        """Store the ``(..., C, h, w)`` tensor ``tile`` at ``rows x cols``."""
        if self.view is not None:
            self.view[..., slice(*rows), slice(*cols)].copy_(tile)
        else:
            self.array[self._index(rows, cols)] = tile.permute(self.order).numpy()

    def pinned_blocks(self, rows, cols):
        """The crop ``rows x cols`` as a ``(blocks, n)`` view of pinned memory whose every
        row is one block of the array's memory, for copies straight to or from the GPU;
        None where the array is no pinned tensor or the crop's rows are apart (narrower
        than the image)."""
        if not self.pinned:
            return None
        crop = self.view[..., slice(*rows), slice(*cols)].permute(self.order)
        inner = self.order.index(len(self.order) - 2)  # the dims from the rows inwards make a block
        try:
            return crop.view(-1, crop[(0,) * inner].numel())
        except RuntimeError:  # rows apart, or outer dims that do not merge
            return None

    def shape_of(self, planes):
        """The shape in this array's own convention of a ``(..., C, H, W)`` shape."""
        return (*planes[:-3], planes[-2], planes[-1], planes[-3]) if self.channels_last else tuple(planes)

    def _index(self, rows, cols):
        crop = (slice(*rows), slice(*cols))
        return (..., *crop, slice(None)) if self.channels_last else crop


def _tensor_of(arr):
    """A tensor on a numpy array's memory (None for other arrays, and for the few a tensor
    cannot view: reversed strides, foreign byte order): its crops are then copied with
    torch's parallel ``copy_``."""
    if not isinstance(arr, np.ndarray):
        return None
    try:
        with warnings.catch_warnings():  # (a read-only array: tiled never writes into an input)
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(arr)
    except (TypeError, ValueError):
        return None


def _in_order(flat, shape, order):
    """A view of the flat buffer ``flat`` with ``shape``, its dims laid out in ``order``
    (outermost first)."""
    return flat[:math.prod(shape)].view([shape[d] for d in order]).permute(_inverse(order))


def _inverse(order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return inv


def _numpy_dtype(dtype):
    return torch.empty(0, dtype=dtype).numpy().dtype


def _output(sources, out, result, device):
    """The output: ``out`` checked against the result (a meta tensor: its shape and dtype),
    its writability and the memory of the sources, or a new array of the image's kind."""
    src = sources[0]
    if out is None:
        if src.torch:
            out = torch.empty_strided(result.shape, result.stride(), dtype=result.dtype, pin_memory=src.pinned)
        elif type(src.array).__module__.split(".")[0] == "zarr":
            import zarr
            out = zarr.create_array(store={}, shape=src.shape_of(result.shape), dtype=_numpy_dtype(result.dtype),
                                    chunks=src.array.chunks)
        else:
            out = np.empty(src.shape_of(result.shape), dtype=_numpy_dtype(result.dtype))
    dst = _Host(out, "out", device)
    if dst.torch != src.torch:
        raise TypeError(f"out must be of img's kind ({'a tensor' if src.torch else 'an array'}), "
                        f"got {type(out).__name__}")
    if dst.planes != tuple(result.shape) or dst.dtype != result.dtype:
        raise ValueError(f"out must have shape {src.shape_of(result.shape)} and dtype {result.dtype}, got "
                         f"{tuple(out.shape)} and {dst.dtype}")
    if not dst.torch and (getattr(getattr(out, "flags", None), "writeable", True) is False
                          or getattr(out, "read_only", False) is True):
        raise ValueError("out is read-only")
    for s in sources:
        if _overlap(s.array, out):
            raise ValueError(f"out shares memory with {s.name}: tiles read their neighbours' pixels after "
                             f"others are written; give another out")
    return dst


def _overlap(a, b):
    """Whether the host arrays ``a`` and ``b`` may share memory: tensors and numpy arrays
    with common bytes, memmaps of one file with common bytes of it (two mappings of one
    file share no address), or zarr arrays of one store and path."""
    if a is b:
        return True
    if isinstance(a, (torch.Tensor, np.ndarray)) and isinstance(b, (torch.Tensor, np.ndarray)):
        a, b = _numpy_of(a), _numpy_of(b)
        if np.shares_memory(a, b):
            return True
        fa, fb = _file_span(a), _file_span(b)
        return fa is not None and fb is not None and fa[0] == fb[0] and fa[1] < fb[2] and fb[1] < fa[2]
    ka, kb = _zarr_key(a), _zarr_key(b)
    return ka is not None and ka == kb


def _numpy_of(x):
    if isinstance(x, np.ndarray):
        return x
    return (x.view(torch.int16) if x.dtype == torch.bfloat16 else x).detach().numpy()


def _file_span(x):
    """``(file, first byte, end)``: the bytes of the file that the numpy array ``x`` maps
    (a memmap or a view of one); None for other arrays."""
    root = x
    while isinstance(root, np.ndarray) and not (isinstance(root, np.memmap) and isinstance(root.base, mmap.mmap)):
        root = root.base
    try:
        stat = os.stat(root.filename)
    except (AttributeError, TypeError, OSError):  # (no memmap, or its file gone)
        return None
    bounds = getattr(np.lib, "array_utils", np).byte_bounds
    lo, hi = bounds(x)
    start = bounds(root)[0]
    return (stat.st_dev, stat.st_ino), root.offset + lo - start, root.offset + hi - start


def _zarr_key(a):
    """A zarr array's store and path (the folder's real path for a local store)."""
    store_path = getattr(a, "store_path", None)
    if store_path is None or type(a).__module__.split(".")[0] != "zarr":
        return None
    root = getattr(store_path.store, "root", None)
    if root is not None:
        return os.path.realpath(os.path.join(root, store_path.path))
    return str(store_path)


class Call:
    """One call of a filter over parts of an image (tiles here, blocks in
    ``imgfilters.dask``): the bound arguments, checked; NLM's one noise estimate; the halo
    or the resampling plan; and the computation of one part from its crops.

    ``img`` is a meta tensor of the image's ``(..., C, H, W)`` shape, dtype and memory
    order; ``image(key, value)`` is called for each image argument after the first
    (``IMAGE_ARGUMENTS``) and returns a meta tensor of it. Every argument is checked here,
    by calling ``fn`` on the meta tensors: the public function's checks and its op's
    shape inference, which read no pixel. ``out`` is that call's result: a meta tensor of
    the output's shape, dtype and memory order."""

    def __init__(self, fn, img, args, params, image):
        import imgfilters
        name = getattr(fn, "__name__", None)
        if name in NOT_TILED and getattr(imgfilters, name) is fn:
            raise TypeError(f"imgfilters.{name} cannot be tiled: {NOT_TILED[name]}")
        if name not in FILTERS or getattr(imgfilters, name) is not fn:
            raise TypeError(f"fn must be a public imgfilters filter (imgfilters.{', imgfilters.'.join(FILTERS)}), "
                            f"got {fn!r}")
        self.fn, self.name = fn, name
        try:
            bound = inspect.signature(fn).bind(img, *args, **params)
        except TypeError as e:
            raise TypeError(f"imgfilters.{name}: {e}") from None
        bound.apply_defaults()
        a = bound.arguments
        self.keys = [next(iter(a))] + [k for k in IMAGE_ARGUMENTS if a.get(k) is not None]
        for key in self.keys[1:]:
            a[key] = image(key, a[key])
        self.out = fn(*bound.args, **bound.kwargs)
        if not isinstance(self.out, torch.Tensor):
            raise TypeError(f"imgfilters.{name} with these arguments returns {len(self.out)} images; tiles and "
                            f"blocks hold one (call it once per result)")
        self.arguments = a
        self.in_size = tuple(img.shape[-2:])

    def prepare(self, read, device):
        """NLM's noise estimate (``read(rows, cols)`` gives a crop of the image as a CPU
        tensor), then the halo or the resampling plan."""
        from imgfilters.ops import resample
        a, img = self.arguments, self.arguments[self.keys[0]]
        H, W = self.in_size
        if self.name == "nl_means" and a["sigma"] is None:  # one estimate for the whole image
            sigma = noise.estimate_sampled(lambda *w: read(w[:2], w[2:]).to(device), H, W)
            a["sigma"] = sigma if sigma.numel() > 1 else float(sigma)
        if self.name in RESAMPLING:
            _, self.axes = resample.tile_plan(self.name, dict(a))
            self.halo = None
            self.integer = img.dtype in _image.MAX_VALUE
        else:
            self.halo = sys.modules[self.fn.__module__].halo(self.name, a, img.shape[-3] if img.ndim > 2 else 1)
        self.params = {k: v for k, v in a.items() if k not in self.keys}

    def spans(self, tile):
        """The output tiles' spans along H and along W."""
        out = []
        for axis, (n_in, n_out, t) in enumerate(zip(self.in_size, self.out.shape[-2:], tile)):
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
    """The tiles through SLOTS sets of buffers and three streams (module docstring). Slot
    k % SLOTS is reused for tile k only after tile k - SLOTS has come back, so its buffers
    are free."""
    staged = [any(s.pinned_blocks(r.src, c.src) is None for r, c in jobs) for s in sources]
    most_in = [max(_numel(s.planes, r.src, c.src) for r, c in jobs) for s in sources]
    out_staged = any(dst.pinned_blocks(r.out, c.out) is None for r, c in jobs)
    most_out = max(_numel(call.out.shape, r.out, c.out) for r, c in jobs) if out_staged else 0
    with torch.cuda.device(device):
        h2d, kernel, d2h = (torch.cuda.Stream() for _ in range(3))
        slots = [_Slot(sources, staged, most_in, most_out, call.out.dtype, device) for _ in range(SLOTS)]
        try:
            for k, (r, c) in enumerate(jobs):
                slot = slots[k % SLOTS]
                slot.finish(dst, bar)
                crops = []
                for s, pinned, buf in zip(sources, slot.pinned_in, slot.device_in):
                    shape = (*s.planes[:-2], r.src[1] - r.src[0], c.src[1] - c.src[0])
                    crop = _in_order(buf, shape, s.order)
                    blocks = s.pinned_blocks(r.src, c.src)
                    if blocks is None:  # through the pinned buffer: one host copy, one transfer
                        s.read(r.src, c.src, into=pinned)
                        with torch.cuda.stream(h2d):
                            buf[:crop.numel()].copy_(pinned[:crop.numel()], non_blocking=True)
                    else:
                        with torch.cuda.stream(h2d):
                            _copy_blocks(buf[:crop.numel()].view(blocks.shape), blocks)
                    crops.append(crop)
                slot.loaded.record(h2d)
                kernel.wait_event(slot.loaded)
                with torch.cuda.stream(kernel):
                    # in the output's memory order, so that each copy below is one transfer
                    y = call.compute(crops, r, c).permute(dst.order).contiguous()
                    slot.computed.record(kernel)
                d2h.wait_event(slot.computed)
                blocks = dst.pinned_blocks(r.out, c.out)
                with torch.cuda.stream(d2h):
                    if blocks is None:  # through the pinned buffer, stored by slot.finish
                        slot.result = slot.pinned_out[:y.numel()].view(y.shape).copy_(y, non_blocking=True)
                        slot.where = (r.out, c.out)
                    else:
                        _copy_blocks(blocks, y.view(blocks.shape))
                        slot.result, slot.where = blocks, None  # (already in place)
                    y.record_stream(d2h)  # y's memory is not reused before this copy has read it
                    slot.back.record(d2h)
            for k in range(len(jobs), len(jobs) + SLOTS):
                slots[k % SLOTS].finish(dst, bar)
        except BaseException:
            torch.cuda.synchronize()  # no copy may still be writing into buffers about to be freed
            raise


def _copy_blocks(dst, src):
    """Row by row between pinned host and device memory: each row one transfer."""
    for i in range(dst.shape[0]):
        dst[i].copy_(src[i], non_blocking=True)


class _Slot:
    """The buffers of one tile in flight: pinned host memory (for inputs that go through
    it) and device memory for each input, pinned memory for the output (unless it goes
    straight into a pinned tensor), and the events between the streams."""

    def __init__(self, sources, staged, most_in, most_out, out_dtype, device):
        self.pinned_in = [torch.empty(n if st else 0, dtype=s.dtype, pin_memory=True)
                          for s, st, n in zip(sources, staged, most_in)]
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
            dst.write(*self.where, self.result.permute(_inverse(dst.order)))
        self.result = None
        bar.update()


def _numel(planes, rows, cols):
    return math.prod(planes[:-2]) * (rows[1] - rows[0]) * (cols[1] - cols[0])
