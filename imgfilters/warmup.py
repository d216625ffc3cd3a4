"""Compile, and on the GPU tune, the kernels of common calls ahead of time:

    python -m imgfilters.warmup [--device cuda|cpu] [--size 1080x1920 ...] [--only NAME ...] [--jobs N]
    python -m imgfilters.warmup --list

A new kernel variant's first call compiles it, and on the GPU times its candidate tiles: 1
to 6 s of waiting each (README, "Cold first calls"). Triton keeps what it compiles in its
cache (``~/.triton/cache``, or ``$TRITON_CACHE_DIR``), imgfilters its tile choices in its
tuning file (``~/.cache/imgfilters/tuning``), and the CPU engine its kernels in numba's
cache; all three are per machine, so one warm-up serves every later process there. This
runs each call of ``CALLS`` (in uint8 and float32, 3 channels, at each ``--size``) once:

1. in ``--jobs`` worker processes at once, which compiles every variant and every tile
   candidate in parallel (compiling is CPU work); the tile choices of this step, timed
   while the workers share the GPU, go to a scratch tuning file and are thrown away;
2. on the GPU, once more one call at a time in this process, which finds every kernel
   compiled and times the candidates alone, so the tuning file gets the choices an idle
   GPU makes.

A tuning key is a size class, not an exact shape: warm up at the sizes your images have.
"""
import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch

import imgfilters

__all__ = ["CALLS", "main"]

_BOX5 = [[1 / 25] * 5] * 5

# name -> calls of one (B, C, H, W) image, each ``fn(img)``
CALLS = {
    "gaussian_blur": (lambda x: imgfilters.gaussian_blur(x, 5, 1.0), lambda x: imgfilters.gaussian_blur(x, 15, 3.0)),
    "box_blur": (lambda x: imgfilters.box_blur(x, 5),),
    "unsharp_mask": (lambda x: imgfilters.unsharp_mask(x, 1.0, 1.0),),
    "filter2d": (lambda x: imgfilters.filter2d(x, _BOX5),),
    "bilateral": (lambda x: imgfilters.bilateral(x, 0.1, 1.5),),
    "nl_means": (lambda x: imgfilters.nl_means(x),),
    "guided_filter": (lambda x: imgfilters.guided_filter(x, None, 4, 1e-2),),
    "median_blur": (lambda x: imgfilters.median_blur(x, 3), lambda x: imgfilters.median_blur(x, 5)),
    "morphology": (lambda x: imgfilters.dilate(x, 3), lambda x: imgfilters.morphology(x, "opening", 5)),
    "derivatives": (lambda x: imgfilters.sobel(x, 1, 0), lambda x: imgfilters.gradient_magnitude(x)),
    "resize": (lambda x: imgfilters.resize(x, [x.shape[-2] // 2, x.shape[-1] // 2]),
               lambda x: imgfilters.resize(x, [x.shape[-2] // 2, x.shape[-1] // 2], "bicubic")),
    "upsample": (lambda x: imgfilters.upsample(x, 2.0, mode="bilinear"), lambda x: imgfilters.upsample(x, 2.0)),
}
DTYPES = ("uint8", "float32")


def _jobs(names, sizes):
    """Every (name, index of its call, dtype, size) to run."""
    return [(name, i, dtype, size) for name in names for i in range(len(CALLS[name])) for dtype in DTYPES
            for size in sizes]


def run_one(name, index, dtype, size, device):
    """One call of ``CALLS[name]`` on a random image; returns its seconds."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1, 3, *size, generator=g)
    x = (x * 255).round().to(torch.uint8) if dtype == "uint8" else x.to(getattr(torch, dtype))
    x = x.to(device)
    start = time.perf_counter()
    CALLS[name][index](x)
    if x.is_cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _worker_init(scratch):
    if scratch is not None:  # (the parallel step's tile choices: timed on a shared GPU, not kept)
        os.environ["IMGFILTERS_CACHE_DIR"] = scratch


def _size(text):
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size is HEIGHTxWIDTH, such as 1080x1920; got {text!r}") from None
    if h < 1 or w < 1:
        raise argparse.ArgumentTypeError(f"a size must be positive, got {text!r}")
    return h, w


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m imgfilters.warmup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda: the current GPU's kernels and tiles; cpu: the CPU engine's kernels")
    ap.add_argument("--size", type=_size, action="append", metavar="HxW",
                    help="image size, repeatable (default 1080x1920 on the GPU; 64x96 on the CPU, whose kernels do "
                    "not depend on it)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these calls only (see --list)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="worker processes (default: "
                    "the CPU count, at most 8)")
    ap.add_argument("--list", action="store_true", help="print the calls' names and exit")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(CALLS))
        return 0
    names = args.only or list(CALLS)
    unknown = [n for n in names if n not in CALLS]
    if unknown:
        ap.error(f"unknown call {unknown[0]!r} for --only; known: {', '.join(CALLS)}")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda needs a CUDA GPU (torch.cuda.is_available() is False); --device cpu warms the CPU "
                 "engine")
    jobs = _jobs(names, args.size or [(1080, 1920) if args.device == "cuda" else (64, 96)])
    with tempfile.TemporaryDirectory(prefix="imgfilters-warmup-") as scratch:
        # (spawn: a forked worker would inherit this process's CUDA state, which CUDA does not allow)
        context = multiprocessing.get_context("spawn")
        scratch = scratch if args.device == "cuda" else None
        with ProcessPoolExecutor(args.jobs, context, _worker_init, (scratch,)) as pool:
            futures = {pool.submit(run_one, *job, args.device): job for job in jobs}
            for done, future in enumerate(as_completed(futures), 1):
                name, index, dtype, (h, w) = futures[future]
                print(f"[{done}/{len(jobs)}] compiled {name} #{index + 1} {dtype} {h}x{w}: {future.result():.1f} s",
                      flush=True)
    if args.device == "cuda":  # the tiles, timed one call at a time on an otherwise idle GPU
        for done, job in enumerate(jobs, 1):
            name, index, dtype, (h, w) = job
            print(f"[{done}/{len(jobs)}] tuned {name} #{index + 1} {dtype} {h}x{w}: "
                  f"{run_one(*job, args.device):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
