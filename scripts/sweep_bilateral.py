"""Time the bilateral forward's tiles one by one on the GPU (no autotuner), and the cold
compile of a new variant: the measurements behind the tile table in
``kernels/bilateral/tiles.py`` (PERFORMANCE.md keeps the results).

    python scripts/sweep_bilateral.py [--compile]

Every timed launch is first checked against the float64 reference on a crop.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton

from imgfilters import _image
from imgfilters.kernels import bilateral as kb
from imgfilters.reference import bilateral as ref

K4 = (1, 3, 2160, 3840)
CASES = [  # (name, shape, dtype, radius, window, distance)
    ("5x5", K4, torch.float32, 2, "square", "l2"),
    ("9x9", K4, torch.float32, 4, "square", "l2"),
    ("15x15 u8", K4, torch.uint8, 7, "square", "l2"),
    ("9x9 disk l1 u8", K4, torch.uint8, 4, "disk", "l1"),
    ("9x9 16x1080p", (16, 3, 1080, 1920), torch.float32, 4, "square", "l2"),
]
TILES = kb.tiles.SLIDE_TILES + [dict(SLIDE=True, K=128, BW=256, num_warps=8),
                                dict(SLIDE=True, K=32, BW=128, num_warps=4),
                                dict(SLIDE=True, K=128, BW=64, num_warps=2)] + kb.tiles.ROW_TILES


def coefficients(sigma, batch):
    return torch.full((batch,), -kb.LOG2E.value / (2 * sigma * sigma), device="cuda")


def run(x, radius, window, dist, cfg):
    y = torch.empty_like(x)
    B = x.shape[0]
    kb.launch(x, x, y, coefficients(0.1, B), coefficients(1.5, B), radius, window == "disk", dist == "l1", False,
              tile=triton.Config({k: v for k, v in cfg.items() if k != "num_warps"}, num_warps=cfg["num_warps"],
                                 num_stages=1))
    return y


def check(x, radius, window, dist, cfg):
    crop = x[:1, :, :96, :300].contiguous()
    y = run(crop, radius, window, dist, cfg)
    u = _image.to_unit(crop.cpu())
    r = ref.bilateral(u, u, 0.1, 1.5, radius, window, dist)
    err = (_image.to_unit(y.cpu()) - r).abs().max().item()
    limit = 1.0 / 255 + 1e-6 if x.dtype == torch.uint8 else 1e-5
    assert err <= limit, (cfg, err)


def cold_compile(radius, dtype):
    """Seconds for a first call of a new variant, in a fresh process with an empty cache,
    autotuning included."""
    code = ("import time, torch, imgfilters; x = torch.rand(1, 3, 1080, 1920, device='cuda')"
            f".mul(255).to({dtype}); torch.cuda.synchronize(); t = time.time(); "
            f"imgfilters.bilateral(x, 0.1, 1.5, radius={radius}); torch.cuda.synchronize(); "
            "print(time.time() - t)")
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(), IMGFILTERS_AUTOTUNE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return out.stdout.strip() or out.stderr[-300:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true", help="also time cold compiles")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, triton {triton.__version__}")
    for name, shape, dtype, radius, window, dist in CASES:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.rand(shape, generator=g, device="cuda")
        x = (x * 255).round().to(dtype) if dtype == torch.uint8 else x
        row = []
        for cfg in TILES:
            slots = (2 * radius + 1) * 7
            if cfg["SLIDE"] and slots > kb.tiles.SLIDE_VECTORS:
                continue
            t0 = time.time()
            check(x, radius, window, dist, cfg)
            compile_s = time.time() - t0
            ms = triton.testing.do_bench(lambda a=(x, radius, window, dist, cfg): run(*a), return_mode="median")
            tag = f"{'S' if cfg['SLIDE'] else 'R'}{cfg['K']}x{cfg['BW']}/{cfg['num_warps']}w"
            row.append(f"{tag} {ms:.3f}")
            print(f"{name:16s} {tag:14s} {ms:.4f} ms  (first call {compile_s:.1f} s)", flush=True)
    if args.compile:
        for radius, dtype in [(3, "torch.float32"), (5, "torch.uint8"), (12, "torch.float32")]:
            print(f"cold first call, radius {radius} {dtype}: {cold_compile(radius, dtype)} s", flush=True)


if __name__ == "__main__":
    main()
