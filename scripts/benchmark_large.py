"""Throughput of the large-image paths on one GPU (the README's "Large images and clusters").

    python scripts/benchmark_large.py [--size 20000] [--sources] [--dask]

A ``1 x 3 x N x N`` uint8 image in pinned host memory, bilateral 5x5 (``sigma_color=0.1``,
``radius=2``), rates in GB/s of the image (one byte a value):

- kernel: the filter on the image resident on the GPU (``do_bench`` median);
- copies: the image host-to-device and device-to-host between pinned memory and the GPU,
  each timed alone (``do_bench``); the copy bound moves the image both ways, one after
  the other (the sum of the two times);
- tiled: ``imgfilters.tiled`` from the pinned image into a pinned output, the median of
  three timed calls after a warm-up call, and its peak GPU memory: with its default tiles
  (full-width bands, copied straight between the pinned tensors and the GPU) and with
  2048 x 2048 tiles (through the staging buffers, as every other input);
- the ratio of tiled to the smaller of the kernel and the copy bound.

With ``--sources`` (zarr needs ``pip install "imgfilters[dask]"``): the same image from the
host arrays users have, channels last (``(H, W, C)``, as tifffile, zarr and PIL give them),
each into an array of its kind: a numpy array; a ``numpy.memmap`` of a raw file in
``/dev/shm``; an uncompressed zarr array in ``/dev/shm`` (2048 x 2048 x 3 chunks). For
each, the first call (page faults, compiles) and the median of three more, and the
largest difference from the untiled call; a numpy array with ``out=None`` (a new output
each call, its pages faulted in); and two floors: the host's copies of the whole image
into pinned memory and back (what the pipeline's host does for a numpy array), and the
filter on the resident image laid out channels last (what the GPU does for one).

With ``--dask`` (``pip install "imgfilters[dask]"``): the same image as an uncompressed zarr
array in host memory (``/dev/shm``) through ``imgfilters.dask.bilateral`` on a
``distributed.LocalCluster`` of one worker process with two threads (this GPU), stored into
another such array; the same with a trivial filter (``pointwise`` with no steps: a copy
through the GPU), which shows what the reads, writes and copies cost alone; and the tasks
per second of that trivial filter on 256 x 256 chunks.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import triton

import imgfilters

CHANNELS, SIGMA_COLOR, RADIUS = 3, 0.1, 2


def gbs(nbytes, seconds):
    return nbytes / seconds / 1e9


def wall(fn, repeats=3):
    """Median seconds of ``repeats`` calls of ``fn`` (which synchronises itself)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def resident(src, dst):
    """Seconds of the two copies and of the kernel on the GPU-resident image, and its
    result (on the GPU)."""
    gpu = torch.empty_like(src, device="cuda")
    h2d = triton.testing.do_bench(lambda: gpu.copy_(src, non_blocking=True), return_mode="median") / 1e3
    d2h = triton.testing.do_bench(lambda: dst.copy_(gpu, non_blocking=True), return_mode="median") / 1e3
    gpu.copy_(src)
    kernel = triton.testing.do_bench(lambda: imgfilters.bilateral(gpu, SIGMA_COLOR, radius=RADIUS),
                                     return_mode="median") / 1e3
    return h2d, d2h, kernel, imgfilters.bilateral(gpu, SIGMA_COLOR, radius=RADIUS)


def tiled_rows(n):
    shape = (1, CHANNELS, n, n)
    src = torch.randint(0, 256, shape, dtype=torch.uint8).pin_memory()
    dst = torch.empty(shape, dtype=torch.uint8).pin_memory()
    nbytes = src.numel()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
          f"image {'x'.join(map(str, shape))} uint8 ({nbytes / 2 ** 30:.2f} GiB), bilateral 5x5")

    h2d, d2h, kernel, expected = resident(src, dst)
    copy_bound = gbs(nbytes, h2d + d2h)
    bound = min(gbs(nbytes, kernel), copy_bound)
    print(f"host-to-device {gbs(nbytes, h2d):.1f} GB/s, device-to-host {gbs(nbytes, d2h):.1f} GB/s, "
          f"both ways {copy_bound:.1f} GB/s")
    print(f"kernel on the resident image {kernel * 1e3:.1f} ms = {gbs(nbytes, kernel):.1f} GB/s")
    for tile in (None, 2048):
        def run(tile=tile):
            imgfilters.tiled(imgfilters.bilateral, src, SIGMA_COLOR, radius=RADIUS, out=dst, tile=tile,
                             progress=False)
            torch.cuda.synchronize()

        run()  # compiles and tunes the tiles' variants
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        seconds = wall(run)
        peak = torch.cuda.max_memory_allocated() - base
        off = (dst.cuda().int() - expected.int()).abs().max().item()  # (the tiled result is the untiled one)
        rate = gbs(nbytes, seconds)
        print(f"tiled, {'default tiles' if tile is None else f'{tile} x {tile} tiles'}: {seconds * 1e3:.1f} ms = "
              f"{rate:.1f} GB/s: {rate / bound:.2f} of the smaller bound ({bound:.1f} GB/s); peak GPU memory "
              f"{peak / 2 ** 20:.0f} MiB; largest difference from the untiled call: {off}")
    return src, expected


def floors(image):
    """The host's copies of ``image`` band by band into pinned memory and back, and the
    filter on it resident on the GPU, laid out channels last."""
    pinned = torch.empty(image.shape, dtype=torch.uint8).pin_memory()
    view, band = torch.from_numpy(image), 838  # (the default band's rows at this width)

    def copies():
        for r in range(0, image.shape[0], band):
            pinned[r:r + band].copy_(view[r:r + band])
        for r in range(0, image.shape[0], band):
            view[r:r + band].copy_(pinned[r:r + band])
    copies()
    seconds = wall(copies)
    print(f"host copies of the image into pinned memory and back, bands of {band} rows: {seconds * 1e3:.0f} ms "
          f"= {gbs(2 * image.nbytes, seconds):.1f} GB/s ({torch.get_num_threads()} threads)")
    gpu = torch.from_numpy(image).cuda().permute(2, 0, 1)[None]  # (1, C, H, W), channels last
    kernel = triton.testing.do_bench(lambda: imgfilters.bilateral(gpu, SIGMA_COLOR, radius=RADIUS),
                                     return_mode="median") / 1e3
    print(f"kernel on the resident image, channels last: {kernel * 1e3:.1f} ms = "
          f"{gbs(image.nbytes, kernel):.1f} GB/s")


def source_rows(src, expected):
    """``tiled`` from numpy, memmap and zarr (H, W, C) arrays into arrays of their kind."""
    image = src[0].permute(1, 2, 0).contiguous().numpy()  # (H, W, C), C-contiguous
    want = expected[0].permute(1, 2, 0)
    nbytes = image.nbytes

    def off(out):  # the largest difference from the untiled call
        return (torch.from_numpy(np.asarray(out[...])).cuda().int() - want.int()).abs().max().item()

    def timed(name, img, out):
        def run():
            result = imgfilters.tiled(imgfilters.bilateral, img, SIGMA_COLOR, radius=RADIUS, out=out,
                                      progress=False)
            torch.cuda.synchronize()
            return result
        t = time.perf_counter()
        result = run()
        first = time.perf_counter() - t
        seconds = wall(run)
        print(f"tiled, {name}: first call {first * 1e3:.0f} ms, then {seconds * 1e3:.0f} ms = "
              f"{gbs(nbytes, seconds):.1f} GB/s; largest difference from the untiled call: {off(result)}")

    floors(image)
    timed("numpy (H, W, C) into a numpy array", image, np.empty_like(image))
    timed("numpy (H, W, C), out=None (a new array each call)", image, None)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as folder:
        raw = np.memmap(os.path.join(folder, "in.raw"), dtype=np.uint8, mode="w+", shape=image.shape)
        raw[...] = image
        raw.flush()
        del raw
        timed(f"numpy.memmap in {folder} into another", np.memmap(os.path.join(folder, "in.raw"), dtype=np.uint8,
                                                                   mode="r", shape=image.shape),
              np.memmap(os.path.join(folder, "out.raw"), dtype=np.uint8, mode="w+", shape=image.shape))
        try:
            import zarr
        except ImportError:
            print("zarr rows skipped: pip install 'imgfilters[dask]'")
            return

        def array(name):  # uncompressed, written without zarr's scan for chunks equal to the fill value
            return zarr.create_array(store=os.path.join(folder, name), shape=image.shape, chunks=(2048, 2048, 3),
                                     dtype="uint8", compressors=None, config={"write_empty_chunks": True})
        z = array("in.zarr")
        z[...] = image
        timed(f"zarr in {folder}, uncompressed, chunks {z.chunks}, into another", z, array("out.zarr"))


def dask_rows(src):
    import dask.array as da
    import distributed
    import zarr

    import imgfilters.dask as idask

    def array(path, shape, chunks):
        # uncompressed, and written without zarr's scan for chunks that equal the fill value (it
        # triples the time of a write): the GPU, not the host's codecs, is what is timed
        return zarr.create_array(store=path, shape=shape, chunks=chunks, dtype="uint8", compressors=None,
                                 config={"write_empty_chunks": True})

    # zarr folders in host memory (/dev/shm where there is one): a task's graph holds the path, not
    # the data. One worker process on this GPU, as one of a cluster's; two threads, so that one
    # task's reading and writing overlaps another's GPU work.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as folder, \
            distributed.LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        image = src[0].numpy()
        z = array(os.path.join(folder, "in.zarr"), image.shape, (CHANNELS, 4096, 4096))
        z[...] = image
        out = array(os.path.join(folder, "out.zarr"), z.shape, z.chunks)
        img = da.from_zarr(z)

        def run():
            idask.bilateral(img, SIGMA_COLOR, radius=RADIUS).store(out, lock=False)

        def copy():  # the same reads, copies to and from the GPU and writes, without the filter
            idask.pointwise(img, []).store(out, lock=False)

        for name, fn in (("bilateral 5x5", run), ("a copy through the GPU (pointwise, no steps)", copy)):
            fn()  # the worker compiles
            seconds = wall(fn)
            print(f"dask, one worker (two threads) on this GPU, chunks {z.chunks}, {name}: {seconds * 1e3:.0f} ms "
                  f"= {gbs(z.nbytes, seconds):.1f} GB/s")
        crop = image[:, :4096, :4096]
        tiny = array(os.path.join(folder, "small.zarr"), crop.shape, (CHANNELS, 256, 256))
        tiny[...] = crop
        small = da.from_zarr(tiny)
        tasks = small.numblocks[1] * small.numblocks[2]
        idask.pointwise(small, []).compute()
        seconds = wall(lambda: idask.pointwise(small, []).compute())
        print(f"dask, trivial filter on {tasks} chunks of 256 x 256: {tasks / seconds:.0f} tasks/s")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=20000, help="the image's height and width (default 20000)")
    ap.add_argument("--sources", action="store_true", help="also numpy, memmap and zarr sources")
    ap.add_argument("--dask", action="store_true", help="also the Dask rows (needs imgfilters[dask])")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmark_large.py needs a CUDA GPU")
    src, expected = tiled_rows(args.size)
    if args.sources:
        source_rows(src, expected)
    del expected
    if args.dask:
        dask_rows(src)


if __name__ == "__main__":
    main()
