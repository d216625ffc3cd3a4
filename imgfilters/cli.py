"""``imgfilters-denoise`` / ``python -m imgfilters`` / ``python scripts/denoise.py``: denoise image files.

    imgfilters-denoise in.png out.png            # non-local means, automatic parameters
    imgfilters-denoise photos/ denoised/         # every image below photos/, sub-folders mirrored
    imgfilters-denoise in.jpg out.jpg --method bilateral --sigma-color 0.08 --quality 95
    imgfilters-denoise in.png out.png --method median --kernel-size 5   # salt-and-pepper noise

Exit codes: 0 done; 1 some files of a directory failed (or an unexpected error); 2 usage
error (bad option, missing or unreadable file, unsupported mode, refused overwrite), with
one line of explanation and no traceback unless ``--debug``.

torch, Pillow and the kernels are imported only once the options are checked, so
``--help``, ``--version`` and usage errors answer at once.
"""
import argparse
import math
import os
import shutil
import sys
from pathlib import Path

import imgfilters  # (its own module only: the rest loads on first use)

PROG = "imgfilters-denoise"
BATCH = 8                 # images read at once in directory mode; equal sizes share one launch
CPU_BUDGET = 2 * 2 ** 30  # bytes of working memory for one CPU (float64 reference) call
STREAM_PIXELS = 2 ** 27   # TIFFs larger than this (and .zarr arrays) stream from disk to disk, tile by tile
STREAM_TILE = 2048
SIGMA_COLOR, SIGMA_SPACE = 0.1, 1.5  # the bilateral defaults
KERNEL_SIZE = 3  # the median's default window
# Larger images are refused unless --max-megapixels says otherwise: decompression bombs,
# and CPU runs of hours (non-local means takes about 10 us per value there).
MAX_MEGAPIXELS = 100
# A CPU run of more values than this (about a second or more) is filtered in tiles of
# PROGRESS_TILE pixels a side (a bar step every few seconds; the halo adds about 10 %), and
# a run of several tiles shows its progress bar once it has taken PROGRESS_DELAY seconds.
PROGRESS_VALUES, PROGRESS_TILE, PROGRESS_DELAY = 2 ** 18, 512, 1.0
# each method's own options: given with the other method they would do nothing
METHOD_OPTIONS = {"nlm": ("sigma", "h", "patch_size", "search_radius"),
                  "bilateral": ("sigma_color", "sigma_space", "radius"), "median": ("kernel_size",)}


class UsageError(Exception):
    """Bad arguments or files: one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise UsageError(message)


def build_parser():
    p = _Parser(prog=PROG, description="Denoise images with non-local means (default), a bilateral filter or a "
                "median filter, on the GPU when there is one.")
    p.add_argument("input", help="an image file, or a folder: every PNG/JPEG/TIFF/WebP below it")
    p.add_argument("output", help="the output file (format from its extension), or a folder for folder input")
    p.add_argument("--version", action="version", version=f"%(prog)s {imgfilters.__version__}")
    p.add_argument("--method", choices=("nlm", "bilateral", "median"), default="nlm",
                   help="non-local means, a bilateral filter or a median filter (default nlm)")
    nlm = p.add_argument_group("non-local means (--method nlm; unit intensity scale: 10/255 = 0.0392)")
    nlm.add_argument("--sigma", type=float, help="noise sigma, > 0; default: estimated per image")
    nlm.add_argument("--h", type=float, help="filtering strength; default: IPOL's factor times sigma")
    nlm.add_argument("--patch-size", type=int, help="odd patch side; default: from sigma (IPOL table)")
    nlm.add_argument("--search-radius", type=int, help="search window radius; default: from sigma")
    bil = p.add_argument_group("bilateral (--method bilateral)")
    bil.add_argument("--sigma-color", type=float, help=f"range sigma, unit scale (default {SIGMA_COLOR})")
    bil.add_argument("--sigma-space", type=float, help=f"spatial sigma in pixels (default {SIGMA_SPACE})")
    bil.add_argument("--radius", type=int, help="window radius (default ceil(2 sigma_space))")
    med = p.add_argument_group("median (--method median; the edge pixel reflected, reflect-101)")
    med.add_argument("--kernel-size", type=int, help=f"odd window side, 1 to 31 (default {KERNEL_SIZE})")
    p.add_argument("--strength", type=float, default=1.0,
                   help="multiplies h (nlm) or sigma_color (bilateral); not with median (default 1.0)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="where to filter; auto: the GPU when there is one (default auto)")
    p.add_argument("--quality", type=int, help="JPEG / WebP quality, 1-100 (default: Pillow's)")
    p.add_argument("--tile", type=int, help="process in N x N tiles (default: only when memory requires, "
                   f"or on the CPU {PROGRESS_TILE} for the progress bar of large images)")
    p.add_argument("--max-megapixels", type=float, default=MAX_MEGAPIXELS,
                   help=f"refuse larger images (decompression bombs, hours on a CPU); 0: no limit "
                   f"(default {MAX_MEGAPIXELS})")
    p.add_argument("--print-params", action="store_true", help="print the estimated sigma and parameters used")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


class Settings:
    """Validated options (``argparse.Namespace``) and the ``torch.device``. (Not a
    dataclass: the dataclasses module imports inspect, a good part of ``--help``'s time.)"""

    def __init__(self, args, device):
        self.args, self.device = args, device


def main(argv=None):
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        _check_options(args)
        return _run(_settings(args))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            raise
        if isinstance(e, UsageError) or _is_image_error(e):
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
        # unexpected: one line unless --debug
        print(f"{PROG}: error: {type(e).__name__}: {e} (run with --debug for the traceback)", file=sys.stderr)
        return 1


def _is_image_error(e):
    """A file that cannot be read or written (``imgfilters.io.ImageError``; the module is
    loaded if such an error can have happened)."""
    io = sys.modules.get("imgfilters.io")
    return io is not None and isinstance(e, io.ImageError)


def _check_options(args):
    """Usage errors in the options alone, before torch or any file is touched; fills in
    the bilateral defaults."""
    for method, names in METHOD_OPTIONS.items():
        given = [n for n in names if getattr(args, n) is not None]
        if method != args.method and given:
            flag = "--" + given[0].replace("_", "-")
            raise UsageError(f"{flag} is a --method {method} option; it does nothing with --method {args.method}")
    if args.sigma == 0:
        raise UsageError("--sigma 0 means no noise: there is nothing to denoise (leave --sigma out to estimate it)")
    if args.method == "median":
        args.kernel_size = KERNEL_SIZE if args.kernel_size is None else args.kernel_size
        from imgfilters.kernels.median import MAX_SIZE
        if args.kernel_size < 1 or args.kernel_size % 2 == 0 or args.kernel_size > MAX_SIZE:
            raise UsageError(f"--kernel-size must be odd, from 1 to {MAX_SIZE}, got {args.kernel_size}")
        if args.strength != 1.0:
            raise UsageError("--strength does nothing with --method median (use --kernel-size)")
    args.sigma_color = SIGMA_COLOR if args.sigma_color is None else args.sigma_color
    args.sigma_space = SIGMA_SPACE if args.sigma_space is None else args.sigma_space
    checks = [("--sigma", args.sigma, 0, True), ("--h", args.h, 0, False),
              ("--sigma-color", args.sigma_color, 0, False),
              ("--sigma-space", args.sigma_space, 0, False), ("--strength", args.strength, 0, False),
              ("--max-megapixels", args.max_megapixels, 0, True)]
    for name, value, low, inclusive in checks:
        if value is not None and (not math.isfinite(value) or value < low or (value == low and not inclusive)):
            raise UsageError(f"{name} must be a finite number {'>=' if inclusive else '>'} {low}, got {value}")
    if args.quality is not None and not 1 <= args.quality <= 100:
        raise UsageError(f"--quality must be 1 to 100, got {args.quality}")
    if args.tile is not None and args.tile < 16:
        raise UsageError(f"--tile must be at least 16, got {args.tile}")
    # the library's own limits (the kernel modules load Triton: only when they are given)
    if args.patch_size is not None:
        from imgfilters.kernels.nlm import MAX_PATCH
        if args.patch_size < 1 or args.patch_size % 2 == 0 or args.patch_size > MAX_PATCH:
            raise UsageError(f"--patch-size must be odd, 1 to {MAX_PATCH}, got {args.patch_size}")
    if args.search_radius is not None or args.radius is not None:
        from imgfilters.kernels import bilateral, nlm
        for name, value, top in (("--search-radius", args.search_radius, nlm.MAX_RADIUS),
                                 ("--radius", args.radius, bilateral.MAX_RADIUS)):
            if value is not None and not 0 <= value <= top:
                raise UsageError(f"{name} must be 0 to {top}, got {value}")


def _settings(args):
    """The device for valid options."""
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA GPU is available")
    return Settings(args, torch.device("cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu"))


def _run(s):
    from imgfilters.io import output_format, write_image
    src, dst = Path(s.args.input), Path(s.args.output)
    if not src.exists():
        raise UsageError(f"{src}: no such file or folder")
    if src.suffix.lower() == ".zarr" or (src.suffix.lower() in (".tif", ".tiff") and _tiff_pixels(src) > STREAM_PIXELS):
        return _run_streamed(s, src, dst)
    if src.is_dir():
        return _run_folder(s, src, dst)
    if dst.is_dir():
        dst = dst / src.name
    output_format(dst)
    _check_output(s, src, dst)
    _check_folder(dst)
    pic = _read(s, src, dst)
    try:
        _denoise_pictures(s, [pic], [src])
    except ValueError as e:  # parameters the library refuses for this image (size, radius...)
        raise UsageError(f"{src}: {e}") from e
    write_image(dst, pic, s.args.quality)
    return 0


def _read(s, src, dst):
    """``src`` read (within --max-megapixels), once ``dst``'s format is known to hold it:
    a 16-bit or alpha image bound for JPEG stops here, not after its filtering."""
    from imgfilters.io import output_format, read_image
    pic = read_image(src, round(s.args.max_megapixels * 1e6))
    output_format(dst, pic)
    return pic


def _check_folder(dst):
    """Refuse an output file whose folder is missing or read-only, before any work."""
    if not dst.parent.is_dir():
        raise UsageError(f"{dst}: the folder {dst.parent} does not exist")
    _check_writable(dst.parent)


def _check_writable(folder):
    """Create ``folder`` if needed and write a scratch file into it: a read-only output
    stops the run before the first image is computed, with one line."""
    import tempfile
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise UsageError(f"{folder}: cannot write into this folder ({e.strerror or e})") from None


def _check_output(s, src, dst):
    """Refuse an output that overlaps the input (``_check_apart``), or that exists unless
    --overwrite."""
    _check_apart(src, dst)
    if dst.exists() and not s.args.overwrite:
        raise UsageError(f"{dst}: exists (use --overwrite to replace it)")


def _check_apart(src, dst):
    """Refuse an output that is the input, contains it or lies inside it, however the paths
    are spelled (relative, through symlinks): replacing a folder or .zarr store that holds
    the input would delete it, and writing into the input would change it. Every path
    (file, folder, streamed) checks here, before it writes anything."""
    a, b = src.resolve(), dst.resolve()
    relation = "is" if a == b else "contains" if b in a.parents else "is inside" if a in b.parents else None
    if relation:
        raise UsageError(f"{dst}: refusing to write there: the output {relation} the input {src}")


def _run_folder(s, src, dst):
    from tqdm import tqdm

    from imgfilters.io import FORMATS, ImageError, write_image
    if dst.exists() and not dst.is_dir():
        raise UsageError(f"{dst}: is a file; folder input needs an output folder")
    _check_apart(src, dst)
    _check_writable(dst)
    files = sorted(p for p in src.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS)
    failed, done = [], 0
    bar = tqdm(total=len(files), unit="image", disable=s.args.quiet, file=sys.stderr)
    for start in range(0, len(files), BATCH):
        chunk = []
        for path in files[start:start + BATCH]:
            out = dst / path.relative_to(src)
            try:
                _check_output(s, path, out)
                chunk.append((path, out, _read(s, path, out)))
            except (UsageError, ImageError) as e:
                failed.append(str(e))
                bar.update(1)
        try:
            _denoise_pictures(s, [c[2] for c in chunk], [c[0] for c in chunk])
        except Exception:  # the whole chunk failed: retry each alone, to name the culprit
            if s.args.debug:
                raise
            for c in chunk:
                try:
                    _denoise_pictures(s, [c[2]], [c[0]])
                except Exception as e1:
                    failed.append(f"{c[0]}: {type(e1).__name__}: {e1}")
                    c[2].planes = None
        for _, out, pic in chunk:
            if pic.planes is not None:
                try:
                    out.parent.mkdir(parents=True, exist_ok=True)
                    write_image(out, pic, s.args.quality)
                    done += 1
                except ImageError as e:  # (its message names the file)
                    failed.append(str(e))
                except OSError as e:
                    failed.append(f"{out}: cannot create the folder {out.parent} ({e.strerror or e})")
            bar.update(1)
    bar.close()
    if not s.args.quiet:
        print(f"{done} of {len(files)} images denoised into {dst}" + (f"; {len(failed)} failed:" if failed else ""),
              file=sys.stderr)
    for line in failed:
        print(f"  {line}", file=sys.stderr)
    return 1 if failed else 0


def _denoise_pictures(s, pics, names):
    """Denoise the planes of ``pics`` in place (alpha untouched): equal sizes and dtypes
    in one batch, unless the image needs tiles."""
    import torch
    groups, results = {}, {}
    for k, pic in enumerate(pics):
        groups.setdefault((tuple(pic.planes.shape), pic.planes.dtype), []).append(k)
    for idx in groups.values():
        x = torch.stack([pics[k].planes for k in idx])
        results.update(zip(idx, _denoise(s, x, [names[k] for k in idx])))
    for k, out in results.items():  # only once every group succeeded: a retry starts from the inputs
        pics[k].planes = out


def _denoise(s, x, names):
    """(B, C, H, W) uint8/uint16 CPU images -> denoised CPU images, tiled when needed."""
    import torch

    a = s.args
    B, C = x.shape[:2]
    tile = a.tile or _auto_tile(s, x)
    if a.method == "median":
        opts = [dict(kernel_size=a.kernel_size)] * B
        if a.print_params:
            for n in names:
                print(f"{n}: median kernel_size={a.kernel_size}")
    elif a.method == "bilateral":
        from imgfilters.reference.bilateral import default_radius
        radius = a.radius if a.radius is not None else default_radius(a.sigma_space)
        opts = [dict(sigma_color=a.sigma_color * a.strength, sigma_space=a.sigma_space, radius=radius)] * B
        if a.print_params:
            for n in names:
                print(f"{n}: bilateral sigma_color={opts[0]['sigma_color']:.4g} sigma_space={a.sigma_space:g} "
                      f"radius={radius}")
    else:
        if a.sigma is not None:
            sigma = [a.sigma] * B
        else:
            sigma = _estimate(s, x, tile).tolist()
        opts = [_nlm_options(a, sg, C) for sg in sigma]
        if a.print_params:
            for n, o in zip(names, opts):
                print(f"{n}: nlm sigma={o['sigma']:.4g} ({255 * o['sigma']:.2f}/255) h={o['h']:.4g} "
                      f"patch_size={o['patch_size']} search_radius={o['search_radius']}")
    tile = tile or _progress_tile(s, x)
    out = torch.empty_like(x)
    # images with the same parameters share a launch
    keyed = {}
    for b, o in enumerate(opts):
        keyed.setdefault(tuple((k, v) for k, v in o.items() if k not in ("h", "sigma", "sigma_color")), []).append(b)
    for idx in keyed.values():
        part = torch.stack([x[b] for b in idx])  # (list indexing lacks uint16 support)
        y = _filter(s, part, [opts[b] for b in idx], tile)
        for k, b in enumerate(idx):
            out[b] = y[k]
    return out


def _nlm_options(a, sigma, channels):
    """nl_means's options for noise ``sigma``: the options given, else IPOL's table."""
    from imgfilters.ops.nlm import parameters
    patch, radius, h = parameters(sigma, channels)
    return dict(h=(a.h if a.h is not None else max(h, 1e-4)) * a.strength, sigma=sigma,
                patch_size=a.patch_size or patch,
                search_radius=a.search_radius if a.search_radius is not None else radius)


def _filter(s, x, opts, tile, out=None):
    """``x`` filtered with ``opts`` (one dict per image): whole on the device, or through
    ``imgfilters.tiled`` into ``out`` when ``tile`` is set (``x`` then any host array it
    takes)."""
    import torch

    import imgfilters
    per = lambda key: torch.tensor([o[key] for o in opts], dtype=torch.float64)
    o = opts[0]
    if s.args.method == "median":
        fn, args, params = imgfilters.median_blur, (o["kernel_size"],), {}
    elif s.args.method == "bilateral":
        fn, args, params = imgfilters.bilateral, (per("sigma_color"), o["sigma_space"]), dict(radius=o["radius"])
    else:
        fn, args = imgfilters.nl_means, (per("h"),)
        params = dict(sigma=per("sigma"), patch_size=o["patch_size"], search_radius=o["search_radius"])
    if not tile:
        return fn(x.to(s.device), *args, **params).cpu()
    # tiled's bar shows once a call has taken a second (PROGRESS_DELAY); at 0, at once
    progress = False if s.args.quiet else (True if PROGRESS_DELAY <= 0 else None)
    return imgfilters.tiled(fn, x, *args, tile=tile, out=out, device=s.device, progress=progress, **params)


def _estimate(s, x, tile):
    """Per-image noise sigma; a tiled image is estimated on the library's sample of crops
    (``noise.estimate_sampled``), so memory stays bounded."""
    import imgfilters
    from imgfilters.ops import noise
    if tile:
        return noise.estimate_sampled(lambda r0, r1, c0, c1: x[..., r0:r1, c0:c1].to(s.device), *x.shape[-2:])
    return noise.check_estimated(imgfilters.estimate_noise(x.to(s.device)).cpu().double())


def _auto_tile(s, x):
    """None when the whole batch fits; else a square tile size that does. The kernels need
    the input and output; the CPU path (float64 reference) about 16 float64 planes."""
    import torch
    B, C, H, W = x.shape
    if s.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(s.device)
        per_pixel, budget = B * C * (2 * x.element_size() + 16), free // 2  # + the noise estimate's float32 planes
    else:
        per_pixel, budget = B * C * 16 * 8, CPU_BUDGET
    if H * W * per_pixel <= budget:
        return None
    return max(256, int(math.sqrt(budget / per_pixel)) // 64 * 64)


def _progress_tile(s, x):
    """A tile size that splits a long CPU run into steps a progress bar can count (the CPU
    result is the untiled one exactly); None on the GPU, where a run takes milliseconds."""
    if s.device.type == "cpu" and x.numel() > PROGRESS_VALUES and max(x.shape[-2:]) > PROGRESS_TILE:
        return PROGRESS_TILE
    return None


def _tiff_pixels(path):
    """Pixels per plane of a TIFF's first image, from its header (0 when tifffile is
    missing or cannot read it: Pillow then reads the file as any other)."""
    try:
        import tifffile
        with tifffile.TiffFile(path) as tif:
            shape = tif.series[0].shape
    except Exception:
        return 0
    return math.prod(shape[:2]) if len(shape) >= 2 else 0


def _run_streamed(s, src, dst):
    """A large TIFF or a .zarr array ((H, W) or (H, W, C), uint8 or uint16) denoised tile
    by tile into a BigTIFF or a .zarr array: neither is ever whole in memory."""
    import tempfile

    import torch

    from imgfilters.io import ImageError, check_one_picture
    try:
        import tifffile
        import zarr
    except ImportError:
        raise UsageError(f"{src}: large TIFF and .zarr images need tifffile and zarr "
                         "(pip install 'imgfilters[dask]')") from None
    if dst.is_dir() and dst.suffix.lower() != ".zarr":
        dst = dst / src.name
    if dst.suffix.lower() not in (".tif", ".tiff", ".zarr"):
        raise UsageError(f"{dst}: a large image is written as .tif, .tiff or .zarr")
    _check_output(s, src, dst)
    _check_folder(dst)
    store = None
    try:
        if src.suffix.lower() == ".zarr":
            arr = zarr.open_array(str(src), mode="r")
        else:
            with tifffile.TiffFile(src) as tif:
                check_one_picture(src, [page.subfiletype for page in tif.pages])
            store = tifffile.imread(src, aszarr=True, level=0)  # (a pyramid: its full resolution)
            arr = zarr.open_array(store, mode="r")
    except ImageError:
        raise
    except Exception as e:
        raise UsageError(f"{src}: cannot read the image ({e})") from None
    if arr.dtype not in ("uint8", "uint16") or arr.ndim not in (2, 3) or arr.ndim == 3 and arr.shape[2] not in (1, 3):
        raise UsageError(f"{src}: streamed images must be grey or RGB (H, W) / (H, W, C), uint8 or uint16; "
                         f"got shape {arr.shape}, dtype {arr.dtype}")
    channels = arr.shape[2] if arr.ndim == 3 else 1
    if s.args.method == "median":
        opts = dict(kernel_size=s.args.kernel_size)
    elif s.args.method == "bilateral":
        from imgfilters.reference.bilateral import default_radius
        a = s.args
        opts = dict(sigma_color=a.sigma_color * a.strength, sigma_space=a.sigma_space,
                    radius=a.radius if a.radius is not None else default_radius(a.sigma_space))
    else:
        from imgfilters.ops import noise
        read = lambda r0, r1, c0, c1: torch.from_numpy(arr[r0:r1, c0:c1]).reshape(r1 - r0, c1 - c0, -1).permute(2, 0, 1)
        sigma = s.args.sigma if s.args.sigma is not None else float(noise.estimate_sampled(read, *arr.shape[:2]))
        opts = _nlm_options(s.args, sigma, channels)
    if s.args.print_params:
        print(f"{src}: {s.args.method} " + " ".join(f"{k}={v:.4g}" for k, v in opts.items()))
    # made in a new folder beside dst, then renamed into place: a fixed temporary name could
    # be the input's, or another run's
    tmp = Path(tempfile.mkdtemp(dir=dst.parent, prefix=".imgfilters-")) / dst.name
    try:
        if dst.suffix.lower() == ".zarr":
            out = zarr.create_array(str(tmp), shape=arr.shape, dtype=arr.dtype, chunks=arr.chunks)
        else:
            out = tifffile.memmap(tmp, shape=arr.shape, dtype=arr.dtype, bigtiff=True,
                                  photometric="rgb" if channels == 3 else "minisblack")
        try:
            _filter(s, arr, [opts], s.args.tile or STREAM_TILE, out=out)
        finally:
            if hasattr(out, "flush"):
                out.flush()
            del out
        if dst.exists():  # --overwrite
            shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
        os.replace(tmp, dst)
    except ValueError as e:
        raise UsageError(f"{src}: {e}") from e
    finally:
        shutil.rmtree(tmp.parent)
        if store is not None:
            store.close()
    return 0


if __name__ == "__main__":  # python -m imgfilters.cli
    sys.exit(main())
