"""Time every tile of the filter2d strip kernel on the issue's SR batch (H200 sweep).

    python scripts/sweep_filter2d.py [--sizes 5 21 31] [--jobs 16]

Compiles every (size, tile) variant in parallel processes first (they share Triton's
cache), then times each with ``do_bench`` (median) in this process, next to BasicSR's
grouped ``F.conv2d`` with and without TF32 and cuDNN's benchmark mode.
"""
import argparse
import itertools
import multiprocessing as mp

import torch
import torch.nn.functional as F
import triton

SHAPE = (32, 3, 256, 256)
def candidates(ksize):
    """Tiles whose pending rows, (2*ry + P) * S registers a lane, stay at most 72, with and
    without the prefetch of the next tap."""
    ry = ksize // 2
    return [dict(T=t, S=s, P=p, SEG=seg, PRE=pre, num_warps=max(1, t // 32))
            for s in (1, 2, 4) for p in (1, 2, 4, 8, 16) if (2 * ry + p) * s <= 72
            for t in (32, 64, 128) for seg in (64, 128, 256) for pre in (1, 0)]


def _inputs(ksize):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(SHAPE, generator=g, device="cuda")
    k = torch.rand(SHAPE[0], ksize, ksize, generator=g, device="cuda")
    return x, k / k.sum((1, 2), keepdim=True)


def _run(x, k, tile):
    from imgfilters.kernels import filter2d
    y = torch.empty_like(x)
    filter2d.launch(x, y, k, tile=tile)
    return y


def _compile(job):
    ksize, tile = job
    x, k = _inputs(ksize)
    try:
        _run(x, k, tile)
        torch.cuda.synchronize()
        return None
    except Exception as e:  # too many registers, out of shared memory: reported by the timing pass
        return f"{ksize} {tile}: {type(e).__name__}: {str(e)[:200]}"


def grouped_conv2d(x, k):
    b, c, h, w = x.shape
    r = k.shape[-1] // 2
    p = F.pad(x, (r, r, r, r), mode="reflect").reshape(1, b * c, h + 2 * r, w + 2 * r)
    return F.conv2d(p, k.repeat_interleave(c, 0)[:, None], groups=b * c).reshape(b, c, h, w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[5, 21, 31])
    ap.add_argument("--jobs", type=int, default=16)
    args = ap.parse_args()
    jobs = [(s, t) for s in args.sizes for t in candidates(s)]
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for err in pool.imap_unordered(_compile, jobs):
            if err:
                print("compile failed:", err, flush=True)
    from imgfilters.reference.filter2d import filter2d as reference
    for ksize in args.sizes:
        x, k = _inputs(ksize)
        expected = reference(x[:2].double(), k[:2])
        peers = {}
        for tf32, bench in itertools.product((True, False), (False, True)):
            torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = tf32, bench
            grouped_conv2d(x, k)
            ms = triton.testing.do_bench(lambda x=x, k=k: grouped_conv2d(x, k), return_mode="median")
            err = (grouped_conv2d(x, k)[:2].double() - expected).abs().max().item()
            peers[f"conv2d tf32={tf32} bench={bench}"] = ms
            print(f"{ksize}x{ksize} grouped conv2d tf32={tf32} cudnn.benchmark={bench}: {ms:.4f} ms, "
                  f"max error {err:.1e}", flush=True)
        best = min(peers.values())
        results = []
        for tile in candidates(ksize):
            try:
                y = _run(x, k, tile)
                ms = triton.testing.do_bench(lambda x=x, k=k, tile=tile: _run(x, k, tile), return_mode="median")
            except Exception as e:
                print(f"{ksize}x{ksize} {tile}: failed {type(e).__name__}", flush=True)
                continue
            err = (y[:2].double() - expected).abs().max().item()
            results.append((ms, tile))
            print(f"{ksize}x{ksize} {tile}: {ms:.4f} ms  ({best / ms:.1f}x the fastest conv2d)  "
                  f"max error {err:.1e}", flush=True)
        results.sort(key=lambda r: r[0])
        print(f"== {ksize}x{ksize} best:", *(f"{ms:.4f} {t}" for ms, t in results[:4]), sep="\n  ")


if __name__ == "__main__":
    main()
