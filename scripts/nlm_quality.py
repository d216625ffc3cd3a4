"""The README's non-local-means quality table and before/after picture.

    python scripts/nlm_quality.py [--picture docs/nlm_before_after.png]

Each sample photo gets Gaussian noise at sigma = 10, 25 and 50 (0-255 units; seed 0,
clipped and rounded to uint8, as a real noisy file). Columns (PSNR in dB against the clean
photo): the noisy input; ``imgfilters.nl_means`` in automatic mode (sigma estimated, IPOL
parameters); OpenCV's ``fastNlMeansDenoisingColored`` (grey: ``fastNlMeansDenoising``)
with h = hColor = sigma and its default 7x7 patches and 21x21 window; scikit-image's
``denoise_nl_means`` as its gallery example runs it (sigma from ``estimate_sigma``,
h = 0.8 sigma, fast mode, 5x5 patches, patch_distance 6).
"""
import argparse
from pathlib import Path

import cv2
import numpy as np
import torch
from PIL import Image
from skimage.restoration import denoise_nl_means, estimate_sigma

import imgfilters

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = ("astronaut", "camera", "coffee", "chelsea")


def psnr(a, clean):
    return 10 * np.log10(255.0 ** 2 / np.mean((a.astype(float) - clean.astype(float)) ** 2))


def add_noise(clean, sigma):
    rng = np.random.default_rng(0)
    return np.clip(clean + sigma * rng.standard_normal(clean.shape), 0, 255).round().astype(np.uint8)


def ours(noisy):
    t = torch.from_numpy(noisy)
    t = t[None] if t.ndim == 2 else t.permute(2, 0, 1)
    y = imgfilters.nl_means(t.cuda() if torch.cuda.is_available() else t).cpu()
    return (y[0] if noisy.ndim == 2 else y.permute(1, 2, 0)).numpy()


def opencv(noisy, sigma):
    if noisy.ndim == 2:
        return cv2.fastNlMeansDenoising(noisy, None, sigma)
    return cv2.fastNlMeansDenoisingColored(noisy, None, sigma, sigma)


def skimage(noisy):
    axis = None if noisy.ndim == 2 else -1
    x = noisy / 255.0
    s = float(estimate_sigma(x, channel_axis=axis, average_sigmas=True))
    y = denoise_nl_means(x, h=0.8 * s, sigma=s, fast_mode=True, patch_size=5, patch_distance=6, channel_axis=axis)
    return np.clip(y * 255, 0, 255).round().astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--picture", help="write a noisy | denoised crop of astronaut at sigma 25 here")
    args = ap.parse_args()
    print("| photo | sigma | noisy | imgfilters (auto) | OpenCV (h = sigma) | scikit-image (gallery recipe) |")
    print("|---|---|---|---|---|---|")
    for name in NAMES:
        clean = np.asarray(Image.open(SAMPLES / f"{name}.png"))
        for sigma in (10, 25, 50):
            noisy = add_noise(clean, sigma)
            cols = [psnr(noisy, clean), psnr(ours(noisy), clean), psnr(opencv(noisy, sigma), clean),
                    psnr(skimage(noisy), clean)]
            print(f"| {name} | {sigma} | " + " | ".join(f"{c:.2f}" for c in cols) + " |", flush=True)
    if args.picture:
        clean = np.asarray(Image.open(SAMPLES / "astronaut.png"))
        noisy = add_noise(clean, 25)
        crop = (slice(20, 148), slice(64, 192))
        pair = np.concatenate([noisy[crop], np.full((128, 4, 3), 255, np.uint8), ours(noisy)[crop]], axis=1)
        Image.fromarray(pair).resize((pair.shape[1] * 2, 256), Image.NEAREST).save(args.picture, optimize=True)


if __name__ == "__main__":
    main()
