"""Image files <-> tensors for the command line, through Pillow.

``read_image`` gives the colour (or grey) planes as a ``(C, H, W)`` uint8 or uint16 tensor,
the alpha plane apart (it is carried through, never filtered), and what must be written
back: the mode, the ICC profile and the EXIF block. EXIF orientation is applied on
reading, so the pixels are upright and the written EXIF says orientation 1.
``write_image`` writes atomically: a temporary file in the target folder, then a rename.
"""
import contextlib
import io
import os
import stat
import tempfile
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from PIL import Image, ImageCms, ImageOps

__all__ = ["Picture", "ImageError", "read_image", "write_image", "output_format", "check_one_picture", "FORMATS"]

# extension -> Pillow format
FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF", ".webp": "WEBP"}
ORIENTATION = 0x0112
# A TIFF's own tag block is what Pillow returns as its EXIF; of it only these describe the
# picture rather than the file's layout (strips, samples, photometric), and only these are
# carried to the output.
DESCRIPTIVE_TAGS = (0x010E, 0x010F, 0x0110, 0x0131, 0x0132, 0x013B, 0x8298)
NEW_SUBFILE_TYPE = 0x00FE
# its bit 0: the page is a reduced-resolution copy of another (a thumbnail, a pyramid
# level), not a picture of its own
REDUCED_PAGE = 1


class ImageError(Exception):
    """A file that cannot be read or written as asked: a usage error, one line of text."""


@dataclass
class Picture:
    planes: torch.Tensor            # (C, H, W) uint8 or uint16: grey (C=1) or RGB (C=3)
    alpha: Optional[torch.Tensor]   # (1, H, W), same dtype, or None
    icc: Optional[bytes] = None
    exif: Optional[bytes] = None


def read_image(path, max_pixels=None) -> Picture:
    """Read PNG, JPEG, TIFF or WebP: 8-bit grey, RGB, RGBA, LA, palette (converted to RGB or
    RGBA), bilevel (to grey) and 16-bit grey, from a file of one picture (``check_one_picture``).
    Raises ImageError with a one-line reason.

    ``max_pixels``: refuse larger images before decoding them; this replaces Pillow's own
    decompression-bomb check (a raw ``DecompressionBombWarning`` above 89 megapixels, an
    error above 179). 0 means no limit; None keeps Pillow's check."""
    try:
        with _pillow_limit(None if max_pixels is not None else Image.MAX_IMAGE_PIXELS), Image.open(path) as im:
            pixels = im.width * im.height
            if max_pixels and pixels > max_pixels:  # (the exact count too: megapixels round)
                raise ImageError(f"{path}: {im.width} x {im.height} is {pixels:,} pixels ({pixels / 1e6:g} "
                                 f"megapixels), more than the limit of {max_pixels / 1e6:g} megapixels "
                                 "(--max-megapixels; 0 for no limit)")
            check_one_picture(path, _subfile_types(im))
            if im.mode in ("RGB", "RGBA") and any("16" in str(t[3]) for t in im.tile):
                raise ImageError(f"{path}: 16-bit colour images are not supported (Pillow would read them "
                                 "as 8-bit); use 16-bit grey or 8-bit colour")
            im.load()  # decode now: truncated or corrupt files fail here, not later
            icc = im.info.get("icc_profile")
            exif = _picture_exif(im)
            im = ImageOps.exif_transpose(im)
    except FileNotFoundError:
        raise ImageError(f"{path}: no such file") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError(f"{path}: cannot read the image ({e})") from None
    if ORIENTATION in exif:
        del exif[ORIENTATION]  # the pixels are upright now
    mode = im.mode
    if mode == "P":
        mode = "RGBA" if "transparency" in im.info else "RGB"
    elif mode == "PA":
        mode = "RGBA"
    elif mode == "1":
        mode = "L"
    elif mode == "CMYK" or mode == "YCbCr":
        mode = "RGB"
    if mode != im.mode:
        im, icc = _convert(im, mode, icc)
    if mode in ("I;16", "I;16L", "I;16B", "I"):
        arr = np.asarray(im)
        if arr.min() < 0 or arr.max() > 65535:
            raise ImageError(f"{path}: 32-bit integer images are not supported")
        planes, alpha = torch.from_numpy(arr.astype(np.uint16))[None], None
    elif mode in ("L", "LA", "RGB", "RGBA"):
        arr = torch.from_numpy(np.array(im, dtype=np.uint8))
        arr = arr[..., None] if arr.ndim == 2 else arr
        arr = arr.permute(2, 0, 1).contiguous()
        has_alpha = mode.endswith("A")
        planes, alpha = (arr[:-1], arr[-1:]) if has_alpha else (arr, None)
    else:
        raise ImageError(f"{path}: unsupported image mode {im.mode}")
    return Picture(planes, alpha, icc, exif.tobytes() if len(exif) else None)


def check_one_picture(path, subfile_types):
    """Refuse a file of several pictures (a multi-page TIFF, an animated PNG or WebP): only
    the first would be denoised and the others lost. ``subfile_types``: each page's TIFF
    NewSubfileType (0 for frames of other formats); reduced-resolution pages are copies of
    a picture, and are left behind."""
    pictures = sum(not t & REDUCED_PAGE for t in subfile_types)
    if pictures > 1:
        raise ImageError(f"{path}: holds {pictures} pictures (pages or frames); only single-picture files are "
                         "supported: save each page as a file of its own first")


def _subfile_types(im):
    """Each frame's NewSubfileType (0 outside TIFF), ``im`` left on its first frame. An MPO
    (a camera JPEG with previews after its picture) is one picture, as it always read."""
    if im.format == "MPO":
        return [0]
    if im.format != "TIFF":
        return [0] * getattr(im, "n_frames", 1)
    types = []
    for frame in range(im.n_frames):
        im.seek(frame)
        types.append(im.tag_v2.get(NEW_SUBFILE_TYPE, 0))
    im.seek(0)
    return types


@contextlib.contextmanager
def _pillow_limit(pixels):
    """Pillow's decompression-bomb threshold set to ``pixels`` (None: off) meanwhile."""
    saved, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, pixels
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def _picture_exif(im):
    """The EXIF block to carry: all of it from JPEG, PNG and WebP; from a TIFF, whose tag
    block Pillow returns instead, only the descriptive tags."""
    exif = im.getexif()
    if im.format != "TIFF":
        return exif
    kept = Image.Exif()
    for tag in DESCRIPTIVE_TAGS + (ORIENTATION,):
        if tag in exif:
            kept[tag] = exif[tag]
    return kept


def _convert(im, mode, icc):
    """``im`` in ``mode``, with the ICC profile that still describes it: CMYK goes through
    its profile to sRGB when it has one; otherwise a conversion that changes the colour
    space drops the profile."""
    if im.mode == "CMYK" and icc:
        try:
            srgb = ImageCms.createProfile("sRGB")
            out = ImageCms.profileToProfile(im, ImageCms.ImageCmsProfile(io.BytesIO(icc)), srgb, outputMode="RGB")
            return out, ImageCms.ImageCmsProfile(srgb).tobytes()
        except (ImageCms.PyCMSError, OSError):
            pass
    keeps_space = im.mode in ("P", "PA", "1", "YCbCr")  # same colours, new storage
    return im.convert(mode), (icc if keeps_space else None)


def _file_mode(path):
    """The permission bits a new file at ``path`` gets: the existing file's, else 0666
    less the process's umask, as for ``open(path, "w")``."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def output_format(path, pic: Optional[Picture] = None):
    """The Pillow format of ``path``'s extension, once it is known to hold ``pic`` (when
    given): ImageError, saying what would, for an unknown extension, 16-bit in JPEG or
    WebP, or alpha in JPEG. The command line asks before it filters, not only on writing."""
    fmt = FORMATS.get(os.path.splitext(str(path))[1].lower())
    if fmt is None:
        raise ImageError(f"{path}: unknown output format; use one of {', '.join(sorted(FORMATS))}")
    if pic is not None and fmt in ("JPEG", "WEBP") and pic.planes.dtype == torch.uint16:
        raise ImageError(f"{path}: {fmt} cannot hold 16-bit images; write PNG or TIFF")
    if pic is not None and fmt == "JPEG" and pic.alpha is not None:
        raise ImageError(f"{path}: JPEG cannot hold an alpha channel; write PNG, TIFF or WebP")
    return fmt


def write_image(path, pic: Picture, quality=None):
    """Write ``pic`` in the format of ``path``'s extension, with its ICC profile and EXIF,
    atomically (no partial file is ever left at ``path``)."""
    fmt = output_format(path, pic)
    planes = pic.planes if pic.alpha is None else torch.cat([pic.planes, pic.alpha])
    arr = planes.permute(1, 2, 0).contiguous().cpu().numpy()
    # Pillow infers the mode: uint16 (H, W) -> I;16, uint8 (H, W) / (H, W, 2|3|4) -> L / LA / RGB / RGBA
    im = Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr)
    options = {}
    if pic.icc:
        options["icc_profile"] = pic.icc
    if pic.exif:
        options["exif"] = pic.exif
    if quality is not None and fmt in ("JPEG", "WEBP"):
        options["quality"] = int(quality)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ImageError(f"{path}: the folder {folder} does not exist")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".imgfilters-", suffix=os.path.splitext(str(path))[1])
        # mkstemp makes the file 0600: give it what open(path, "w") would (or the mode of
        # the file it replaces)
        os.fchmod(fd, _file_mode(path))
        with os.fdopen(fd, "wb") as f:
            im.save(f, format=fmt, **options)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, (OSError, ValueError)):
            raise ImageError(f"{path}: cannot write the image ({e})") from None
        raise
