"""CPU benchmark of the CPU engine against OpenCV (issue 43): ``python scripts/benchmark.py cpu``.

    python scripts/benchmark.py cpu [--threads N] [--repeat N] [--no-reference] [--no-first-call]
                                    [--no-cli] [--only NAME ...] [--markdown]

Every row runs imgfilters and its OpenCV peer in this process with the same thread count
(``torch.set_num_threads`` and ``cv2.setNumThreads``), interleaved, ``--repeat`` times
after a warm-up, and prints the best and the median of each, their ratio (ours / OpenCV's,
from the medians) against the issue's bound, and the float64 reference's time (one call,
the CPU engine switched off). A row whose op does not run on the engine yet (it ran the
reference: ``imgfilters.cpu.run`` was never called) is marked so and not timed further.

Then the first calls, each in a fresh process: cold (an empty kernel cache: the kernels
made from the IR the package ships, or compiled by numba where it does not apply) and
warm (the kernels cached on disk by the cold run), of each op on a small image; and the
command line, ``imgfilters-denoise`` on a noisy 1080p photo with no GPU, process start
included.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import imgfilters
from imgfilters import _image

ROOT = Path(__file__).resolve().parent.parent
HD = (1080, 1920)


def photo(size=HD, name="coffee", noise=0.0, seed=0):
    """A sample photo resized to ``size`` (bilinear), with Gaussian noise of ``noise``
    (unit scale), as a uint8 (1, 3, H, W) tensor."""
    clean = torch.from_numpy(np.asarray(Image.open(ROOT / "samples" / f"{name}.png")).copy())
    clean = clean.permute(2, 0, 1).float()[None] / 255
    clean = torch.nn.functional.interpolate(clean, size=size, mode="bilinear")
    if noise:
        clean = clean + noise * torch.randn(clean.shape, generator=torch.Generator().manual_seed(seed))
    return (clean.clamp(0, 1) * 255).round().to(torch.uint8)


def hwc(x):
    """An image (1, C, H, W) as OpenCV's contiguous (H, W, C) array."""
    return np.ascontiguousarray(x[0].permute(1, 2, 0).numpy())


def cases():
    """(name, must, ours, OpenCV's, float64 reference's) of the issue's table."""
    import cv2
    x = photo()
    xf = x.float() / 255
    a, af = hwc(x), hwc(xf)
    rows = []
    rows.append(("gaussian_blur 15x15 s3 uint8", 3.0, lambda: imgfilters.gaussian_blur(x, 15, 3.0),
                 lambda: cv2.GaussianBlur(a, (15, 15), 3.0, borderType=cv2.BORDER_REFLECT_101)))
    rows.append(("gaussian_blur 15x15 s3 float32", 3.0, lambda: imgfilters.gaussian_blur(xf, 15, 3.0),
                 lambda: cv2.GaussianBlur(af, (15, 15), 3.0, borderType=cv2.BORDER_REFLECT_101)))
    rows.append(("bilateral disk l1 d=7 uint8", 3.0,
                 lambda: imgfilters.bilateral(x, 0.1, 1.5, radius=3, window="disk", color_distance="l1"),
                 lambda: cv2.bilateralFilter(a, 7, 25.5, 1.5, borderType=cv2.BORDER_REFLECT_101)))
    rows.append(("bilateral square l2 r3 float32", 8.0,
                 lambda: imgfilters.bilateral(xf, 0.1, 1.5, radius=3, window="square", color_distance="l2"),
                 lambda: cv2.bilateralFilter(af, 7, 0.1, 1.5, borderType=cv2.BORDER_REFLECT_101)))
    rows.append(("resize x2 bicubic uint8", 3.0,
                 lambda: imgfilters.resize(x, (2 * HD[0], 2 * HD[1]), "bicubic", antialias=False),
                 lambda: cv2.resize(a, (2 * HD[1], 2 * HD[0]), interpolation=cv2.INTER_CUBIC)))
    small = (224, 224 * HD[1] // HD[0])
    rows.append(("resize 1080p to 224 antialiased uint8", 3.0, lambda: imgfilters.resize(x, 224),
                 lambda: cv2.resize(a, small[::-1], interpolation=cv2.INTER_AREA)))
    noisy = photo(noise=25 / 255)
    an = hwc(noisy)
    rows.append(("nl_means P7 R10 uint8", 2.0,
                 lambda: imgfilters.nl_means(noisy, 10 / 255, sigma=0.0, patch_size=7, search_radius=10),
                 lambda: cv2.fastNlMeansDenoisingColored(an, None, 10, 10, 7, 21)))
    g = torch.Generator().manual_seed(1)
    batch = torch.rand(32, 3, 256, 256, generator=g)
    k = torch.rand(32, 21, 21, generator=g)
    k /= k.sum((1, 2), keepdim=True)
    planes = [hwc(batch[i:i + 1]) for i in range(32)]
    kn = k.numpy()
    rows.append(("filter2d 21x21 per image, 32x3x256x256 float32", 2.0, lambda: imgfilters.filter2d(batch, k),
                 lambda: [cv2.filter2D(p, -1, kn[i], borderType=cv2.BORDER_REFLECT_101) for i, p in enumerate(planes)]))
    return rows


def on_engine(fn):
    """Whether ``fn()`` runs the CPU engine (calls ``imgfilters.cpu.run``), and its time in ms."""
    from imgfilters import cpu
    calls, original = [0], cpu.run

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)
    cpu.run = counting
    try:
        ms = timed(fn)
    finally:
        cpu.run = original
    return calls[0] > 0, ms


def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def speed(args):
    rows = []
    for name, must, ours, theirs in cases():
        if args.only and not any(o in name for o in args.only):
            continue
        engine, first_ms = on_engine(ours)  # (also the warm-up: compiles or loads the kernels)
        theirs()
        ours_ms, cv_ms = ([], []) if engine else ([first_ms], [])
        for _ in range(args.repeat if engine else 1):
            if engine:
                ours_ms.append(timed(ours))
            cv_ms.append(timed(theirs))
        ref_ms = float("nan") if engine else first_ms
        if args.reference and engine:
            with _image.cpu_engine(False):
                ref_ms = timed(ours)
        med, cv_med = statistics.median(ours_ms), statistics.median(cv_ms)
        ratio = med / cv_med
        row = dict(name=name, must=must, engine=engine, best=min(ours_ms), median=med, cv_best=min(cv_ms),
                   cv_median=cv_med, ratio=ratio, reference=ref_ms, met=engine and ratio <= must)
        rows.append(row)
        state = ("met" if row["met"] else "NOT met") if engine else "not on the engine (float64 reference)"
        print(f"{name:48s} ours {med:9.2f} ms (best {row['best']:8.2f})  OpenCV {cv_med:8.2f} ms "
              f"(best {row['cv_best']:7.2f})  {ratio:6.2f}x (must {must:g}x: {state})  "
              f"float64 reference {ref_ms:9.1f} ms", flush=True)
    return rows


FIRST_CALLS = {
    "gaussian_blur": "imgfilters.gaussian_blur(x, 5, 1.0)",
    "unsharp_mask": "imgfilters.unsharp_mask(x, 1.0, 0.5)",
    "filter2d": "imgfilters.filter2d(x, torch.ones(3, 3) / 9)",
    "resize": "imgfilters.resize(x, (50, 70), 'bicubic')",
    "pointwise": "imgfilters.pointwise(x, [imgfilters.ops.pointwise.gamma(2.2)])",
    "jpeg": "imgfilters.ops.jpeg.round_trip(x, 75)",
    "bilateral": "imgfilters.bilateral(x, 0.1, radius=2)",
    "nl_means": "imgfilters.nl_means(x, 0.04, sigma=0.02, patch_size=3, search_radius=2)",
    "estimate_noise": "imgfilters.estimate_noise(x)",
    "joint_bilateral_upsample": "imgfilters.joint_bilateral_upsample(x[..., ::4, ::4], x, 0.1, radius=2)",
    "median_blur": "imgfilters.median_blur(x, 5)",
    "sobel": "imgfilters.sobel(x, 1, 0)",
    "gradient_magnitude": "imgfilters.gradient_magnitude(x, direction=True)",
    "morphology": "imgfilters.morphology(x, 'opening', 5, shape='ellipse')",
    "guided_filter": "imgfilters.guided_filter(x, None, 4, 0.01)",
}

FIRST_CALL_SCRIPT = """
import sys, time
import torch, imgfilters, imgfilters.ops
from imgfilters import cpu
x = torch.randint(0, 256, (1, 3, 64, 80), dtype=torch.uint8)
{before}
runs, run = [], cpu.run
cpu.run = lambda *a, **k: runs.append(1) or run(*a, **k)
t, c = time.perf_counter(), time.process_time()
{call}
first, first_cpu = time.perf_counter() - t, time.process_time() - c
t = time.perf_counter()
{call}
print(first, first_cpu, time.perf_counter() - t, "numba" in sys.modules, bool(runs))
"""


def first_call(call, cache, before=""):
    """(first call's wall s, its CPU s, second call's wall s, whether the process imported
    numba (compiled), whether it ran the engine) of ``call`` in a fresh process with the
    kernel cache in ``cache``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), CUDA_VISIBLE_DEVICES="", IMGFILTERS_CPU_ENGINE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, "-c", FIRST_CALL_SCRIPT.format(call=call, before=before)], env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    *times, numba, engine = out.stdout.split()[-5:]
    return (*map(float, times), numba == "True", engine == "True")


def first_calls(args):
    """Each op's first call in fresh processes: cold (its own empty kernel cache: the
    kernels' machine code made from the shipped IR, ``imgfilters/cpu/native.py``, or where
    that does not apply numba's import, setup and compiles), warm (the machine code cached
    on disk by the cold run: loaded), and warm after another op's first call."""
    rows = []
    for name, call in FIRST_CALLS.items():
        if args.only and not any(o in name for o in args.only):
            continue
        other = FIRST_CALLS["gaussian_blur" if name != "gaussian_blur" else "pointwise"]
        with tempfile.TemporaryDirectory() as cache:
            try:
                cold, cold_cpu, _, cold_numba, engine = first_call(call, cache)
                warm, warm_cpu, again, compiled, _ = first_call(call, cache)
                first_call(other, cache)  # (the other op's kernels cached too)
                after, after_cpu, _, _, _ = first_call(call, cache, before=other)
            except RuntimeError as e:
                print(f"first call of {name}: failed: {str(e).splitlines()[-1]}")
                continue
        rows.append((name, engine, cold, cold_cpu, warm, warm_cpu, after, again))
        state = "" if engine else "  (not on the engine: the float64 reference)"
        state += "  (cold: numba compiled, the shipped IR did not apply)" if engine and cold_numba else ""
        state += "  (the warm process compiled: numba imported)" if engine and compiled else ""
        met = cold_cpu <= 3.0 and warm_cpu <= 0.3
        state += f"  (must 3 s / 0.3 s of CPU: {'met' if met else 'NOT met'})" if engine else ""
        print(f"first call {name:24s} cold {cold:6.2f} s (CPU {cold_cpu:5.2f})  warm process {warm:6.3f} s "
              f"(CPU {warm_cpu:5.3f})  after another op {after:6.3f} s  (second call {again * 1e3:7.2f} ms){state}",
              flush=True)
    return rows


def cli(args):
    """``imgfilters-denoise photo.png out.png`` on a 1080p RGB photo with Gaussian noise of
    sigma 25 (automatic parameters), no GPU, wall time with the process start; run twice
    (the first may compile)."""
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "photo.png", Path(d) / "out.png"
        Image.fromarray(hwc(photo(noise=25 / 255))).save(src)
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        env.pop("TRITON_INTERPRET", None)
        env.pop("IMGFILTERS_CPU_ENGINE", None)
        command = [sys.executable, "-c", "import sys; from imgfilters.cli import main; sys.exit(main())",
                   str(src), str(dst)]
        times = []
        for _ in range(2):
            dst.unlink(missing_ok=True)
            t = time.perf_counter()
            out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
            times.append(time.perf_counter() - t)
            if out.returncode != 0:
                print(f"imgfilters-denoise failed: {out.stderr[-1000:]}")
                return None
        print(f"imgfilters-denoise 1080p sigma 25, no GPU: {times[1]:.2f} s wall (first run {times[0]:.2f} s; "
              f"must 5 s: {'met' if times[1] <= 5 else 'NOT met'})", flush=True)
        return times


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmark.py cpu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=None, help="threads for imgfilters and OpenCV (default: torch's)")
    ap.add_argument("--repeat", type=int, default=9, help="timed calls of each (default 9)")
    ap.add_argument("--no-reference", dest="reference", action="store_false", help="skip the float64 reference")
    ap.add_argument("--no-first-call", dest="first_call", action="store_false", help="skip the first-call rows")
    ap.add_argument("--no-cli", dest="cli", action="store_false", help="skip the command line row")
    ap.add_argument("--only", nargs="*", help="rows whose name contains one of these")
    ap.add_argument("--markdown", action="store_true", help="print a README table")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        sys.exit("benchmark.py cpu: unset TRITON_INTERPRET (CPU tensors would run the interpreted kernels)")
    import cv2
    n = args.threads or torch.get_num_threads()
    torch.set_num_threads(n)
    cv2.setNumThreads(n)
    print(f"# CPU: {os.cpu_count()} CPUs, {n} threads; torch {torch.__version__}, OpenCV {cv2.__version__}, "
          f"numba {__import__('numba').__version__}")
    rows = speed(args)
    firsts = first_calls(args) if args.first_call else []
    cli_times = cli(args) if args.cli else None
    if args.markdown:
        print("\n| case | ours ms | OpenCV ms | ours / OpenCV | must | float64 reference ms |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            state = ("met" if r["met"] else "**not met**") if r["engine"] else "not on the engine"
            print(f"| {r['name']} | {r['median']:.2f} | {r['cv_median']:.2f} | {r['ratio']:.2f}x | "
                  f"{r['must']:g}x ({state}) | {r['reference']:.0f} |")
        if firsts:
            print("\n| op | cold first call s (CPU s) | warm process s (CPU s) | after another op s |")
            print("|---|---|---|---|")
            for name, engine, cold, cold_cpu, warm, warm_cpu, after, _ in firsts:
                note = "" if engine else " (float64 reference)"
                print(f"| {name}{note} | {cold:.2f} ({cold_cpu:.2f}) | {warm:.3f} ({warm_cpu:.3f}) | {after:.3f} |")
        if cli_times:
            print(f"\n`imgfilters-denoise` 1080p sigma 25, no GPU: {cli_times[1]:.2f} s (first run "
                  f"{cli_times[0]:.2f} s)")


if __name__ == "__main__":
    main()
