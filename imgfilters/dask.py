"""Every public filter on dask arrays: ``imgfilters.dask.bilateral(darr, ...)`` and the
rest, same names and signatures, for ``(..., C, H, W)`` dask arrays (``pip install
imgfilters[dask]``); all but ``joint_bilateral_upsample``, which cannot be split into
blocks (``tiling.NOT_TILED`` says why).

Every argument is checked when the graph is built, as the in-memory call checks them
(``tiling.Call`` calls the filter on meta tensors of the whole array's shape), so a bad
one fails before the graph runs or anything is stored. Filters run through
``dask.array.map_overlap`` with ``depth`` = the filter's halo and ``boundary="none"``: a
block gets its neighbours' pixels on the sides where it has neighbours and nothing where
the image ends, so the filter's own border mode applies at the true edges only; each
block then drops the halo on the sides that ``block_info`` says have a neighbour.
Resampling builds each output block from the source rows and columns that its output
span reads, with the float64 reference's arithmetic (``tiling.resample_tile``). Either
way the result equals the in-memory call (exactly on the float64 path; within float32
rounding, one level for integers, on a GPU).

Each task moves its block to the worker's GPU (the current CUDA device, so one worker
per GPU: ``dask_cuda.LocalCUDACluster``, or workers started with one
``CUDA_VISIBLE_DEVICES`` each), filters it and returns a numpy block; workers without
a GPU run the same code on the CPU (the float64 reference). Chunks along H and W smaller
than the halo are merged with their neighbours; the channel axis must be one chunk.
Per-image parameters (``PER_IMAGE``) are cut to each block's images; a guide shared by
the batch is broadcast over it. ``nl_means`` without ``sigma`` estimates it once, when
the graph is built, from a deterministic sample of crops (``noise.sample_windows``).
"""
import functools
import math

import dask
import dask.array as da
import numpy as np
import torch

import imgfilters
from imgfilters import _image, tiling

__all__ = ["separable_filter", "gaussian_blur", "box_blur", "unsharp_mask", "filter2d", "median_blur", "erode",
           "dilate", "morphology", "sobel", "scharr", "laplacian", "gradient_magnitude", "guided_filter", "bilateral",
           "joint_bilateral", "nl_means", "pointwise", "resize", "upsample", "imresize"]

# parameters that may hold one value per image, by name: a 1-D tensor of one value per image
# (the sigmas, h, unsharp_mask's amount), separable_filter's (B, K) rows of taps or
# filter2d's (B, kh, kw) stack of kernels (its dims a tensor has then)
PER_IMAGE = {"sigma_color": 1, "sigma_space": 1, "h": 1, "sigma": 1, "amount": 1, "kernel": 3, "eps": 1,
             "kernel_x": 2, "kernel_y": 2}


def _device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _torch_dtype(dtype):
    try:
        t = torch.from_numpy(np.empty(0, dtype)).dtype
    except TypeError:
        t = None
    if t not in _image.DTYPES:
        raise TypeError(f"dtype {dtype} is not supported; use uint8, uint16, float16, float32 or float64")
    return t


def _check(darr, name, fn):
    if not isinstance(darr, da.Array):
        raise TypeError(f"{name} must be a dask.array.Array, got {type(darr).__name__} (imgfilters.{fn} "
                        f"takes tensors)")
    if any(math.isnan(n) for n in darr.shape):
        raise ValueError(f"{name} has unknown chunk sizes (shape {darr.shape}): call "
                         f"{name}.compute_chunk_sizes() first")
    if darr.ndim < 2:
        raise ValueError(f"{name} must have shape (..., C, H, W) or (H, W), got {darr.shape}")
    _torch_dtype(darr.dtype)
    if darr.ndim > 2 and len(darr.chunks[-3]) > 1:
        raise ValueError(f"{name} has {len(darr.chunks[-3])} chunks along the channel axis; the filters need "
                         f"every channel of a pixel in one block: rechunk it with .rechunk({{{darr.ndim - 3}: -1}})")


def _meta(darr):
    return torch.empty(darr.shape, dtype=_torch_dtype(darr.dtype), device="meta")


def _call(fn, darr, args, params):
    """The ``tiling.Call`` of ``fn`` on ``darr``, every argument checked, with the dask
    arrays among the image arguments (a guide) collected in ``call.images``."""
    _check(darr, "img", fn.__name__)
    images = []

    def image(key, value):
        _check(value, key, fn.__name__)
        images.append(value)
        return _meta(value)

    def read(rows, cols):
        return torch.from_numpy(np.ascontiguousarray(darr[..., slice(*rows), slice(*cols)].compute()))

    call = tiling.Call(fn, _meta(darr), args, params, image)
    call.prepare(read, _device())
    call.images = images
    return call


def _filter(fn, darr, *args, **params):
    call = _call(fn, darr, args, params)
    if call.halo is None:
        return _resample(call, darr)
    x = darr if darr.ndim > 2 else darr[None]  # (a channel axis, which a guide's blocks line up with)
    lead = x.shape[:-3]
    chunks = {x.ndim - 2 + axis: _at_least(x.chunks[axis - 2], h) for axis, h in enumerate(call.halo)}
    arrays = [x.rechunk(chunks)]
    for g in call.images:  # a guide: blocks aligned with the image's
        g = _with_lead(g, lead)
        arrays.append(g.rechunk({**{d: arrays[0].chunks[d] for d in range(len(lead))}, g.ndim - 3: -1, **chunks}))
    # an axis in one chunk has no neighbours to overlap with (and dask refuses a depth beyond its size)
    depth = {d: call.halo[d - x.ndim + 2] if d in chunks and len(arrays[0].chunks[d]) > 1 else 0
             for d in range(x.ndim)}
    dtype = _numpy(call.out.dtype)
    # (the blocks are aligned above: dask's own alignment would also give a guide the image's channels)
    y = da.map_overlap(_block, *arrays, depth=depth, boundary="none", trim=False, align_arrays=False,
                       dtype=dtype, chunks=arrays[0].chunks, meta=np.empty((0,) * x.ndim, dtype), fn=fn,
                       params=call.params, halo=call.halo, batch=math.prod(lead), lead=lead)
    return y if darr.ndim > 2 else y[0]


def _with_lead(g, lead):
    """The guide ``g`` with the image's leading dims ``lead``: one shared by the batch
    broadcast over it (nothing copied), a batch of other leading dims reshaped."""
    g = g if g.ndim > 2 else g[None]
    if g.shape[:-3] == lead:
        return g
    if math.prod(g.shape[:-3]) == 1:
        return da.broadcast_to(g.reshape(g.shape[-3:]), (*lead, *g.shape[-3:]))
    return g.reshape((*lead, *g.shape[-3:]))


def _at_least(chunks, depth):
    """``chunks`` along one axis with neighbours merged until each is at least ``depth``
    (dask's overlap needs it); one chunk when the axis is shorter."""
    out = []
    for c in chunks:
        if out and out[-1] < depth:
            out[-1] += c
        else:
            out.append(c)
    if len(out) > 1 and out[-1] < depth:
        last = out.pop()
        out[-1] += last
    return tuple(out)


def _block(x, *guides, fn, params, halo, batch, lead, block_info=None):
    """One block with its halo -> the filtered block without it (a numpy array)."""
    info = block_info[0]
    device = _device()
    params = _params_of_block(params, batch, lead, info["array-location"][:len(lead)])
    y = fn(*(torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in (x, *guides)), **params)
    where = [slice(None)] * y.ndim
    for axis, h in zip((-2, -1), halo):  # the halo lies only on the sides with a neighbour
        k, n = info["chunk-location"][axis], info["num-chunks"][axis]
        where[axis] = slice(h if k > 0 else 0, y.shape[axis] - h if k < n - 1 else None)
    return y[tuple(where)].cpu().numpy()


def _params_of_block(params, batch, lead, location):
    """The per-image parameters (``PER_IMAGE``: one value, or kernel, per image of the
    whole array) cut to the images of this block."""
    if batch == 1:
        return params
    index = torch.arange(batch).reshape(lead)[tuple(slice(*loc) for loc in location)].reshape(-1)
    return {k: v[index] if isinstance(v, torch.Tensor) and v.ndim == PER_IMAGE.get(k) and v.shape[0] == batch
            else v for k, v in params.items()}


def _numpy(dtype):
    return torch.empty(0, dtype=dtype).numpy().dtype


def _resample(call, darr):
    """Each output block from the source rows and columns it reads; the output chunked as
    the input (its chunk sizes, capped at the output size), leading axes in one block."""
    darr = darr.rechunk({d: -1 for d in range(darr.ndim - 2)})
    lead = darr.shape[:-2]
    spans = []  # per axis: (output span, source span)
    for axis, chunks in enumerate(darr.chunks[-2:]):
        n, step = call.out.shape[-2 + axis], max(chunks)
        spans.append([])
        for s in range(0, n, step):
            out = (s, min(s + step, n))
            first, stop, _ = tiling.support(*call.axes[axis](*out))
            spans[-1].append((out, (first, stop)))
    task = dask.delayed(_resample_block, pure=True)
    (ph, kh), (pw, kw) = ((p.args, p.keywords) for p in call.axes)
    rows = []
    for r, rs in spans[0]:
        row = []
        for c, cs in spans[1]:
            block = task(darr[..., slice(*rs), slice(*cs)], (*ph, *r), (*pw, *c), kh, kw, call.integer)
            row.append(da.from_delayed(block, (*lead, r[1] - r[0], c[1] - c[0]), dtype=_numpy(call.out.dtype)))
        rows.append(row)
    return da.block(rows)


def _resample_block(crop, rows, cols, rows_kw, cols_kw, integer):
    """One output block: the taps of its spans (rebuilt here, not shipped in the graph:
    they are as large as the block) applied to its source crop."""
    from imgfilters.reference.resample import row_taps
    _, _, wh = tiling.support(*row_taps(*rows, **rows_kw))
    _, _, ww = tiling.support(*row_taps(*cols, **cols_kw))
    x = torch.from_numpy(np.ascontiguousarray(crop)).to(_device())
    return tiling.resample_tile(x, wh, ww, integer).cpu().numpy()


def _public(fn):
    @functools.wraps(fn)
    def on_dask(*args, **params):
        if not args:
            raise TypeError(f"imgfilters.dask.{fn.__name__} takes the image (a dask array) first")
        return _filter(fn, *args, **params)
    on_dask.__doc__ = (f"``imgfilters.{fn.__name__}`` on a ``(..., C, H, W)`` dask array, lazily; returns a dask "
                       f"array (module docstring).\n\n" + (fn.__doc__ or ""))
    return on_dask


def __getattr__(name):
    if name in tiling.NOT_TILED:
        raise AttributeError(f"imgfilters.dask has no {name}: {tiling.NOT_TILED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


separable_filter = _public(imgfilters.separable_filter)
gaussian_blur = _public(imgfilters.gaussian_blur)
box_blur = _public(imgfilters.box_blur)
unsharp_mask = _public(imgfilters.unsharp_mask)
bilateral = _public(imgfilters.bilateral)
joint_bilateral = _public(imgfilters.joint_bilateral)
nl_means = _public(imgfilters.nl_means)
pointwise = _public(imgfilters.pointwise)
resize = _public(imgfilters.resize)
upsample = _public(imgfilters.upsample)
imresize = _public(imgfilters.imresize)
filter2d = _public(imgfilters.filter2d)
median_blur = _public(imgfilters.median_blur)
erode = _public(imgfilters.erode)
dilate = _public(imgfilters.dilate)
morphology = _public(imgfilters.morphology)
sobel = _public(imgfilters.sobel)
scharr = _public(imgfilters.scharr)
laplacian = _public(imgfilters.laplacian)
gradient_magnitude = _public(imgfilters.gradient_magnitude)
guided_filter = _public(imgfilters.guided_filter)
