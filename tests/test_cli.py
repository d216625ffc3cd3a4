"""The command line, run as a subprocess on real files made from the sample photos (the
usage errors in-process: seventeen interpreter start-ups took minutes on the GPU machine)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image, ImageCms

from helpers import SAMPLES
from imgfilters import cli

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "denoise.py"
# the CLI on CPU runs the float64 reference, not the Triton interpreter the tests use
ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


def run(*args, script=(sys.executable, str(SCRIPT))):
    return subprocess.run([*script, *map(str, args)], capture_output=True, text=True, env=ENV, timeout=300)


def run_in_process(capsys, *args):
    """``imgfilters.cli.main`` called directly, as a CompletedProcess. On the CPU the CLI
    runs the float64 reference, so the interpreter setting of the tests does not reach it."""
    code = cli.main(list(map(str, args)))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def psnr(a, b, peak=255.0):
    return 10 * np.log10(peak ** 2 / np.mean((np.asarray(a, float) - np.asarray(b, float)) ** 2))


def noisy(arr, sigma, seed=0, peak=255):
    rng = np.random.default_rng(seed)
    out = np.clip(arr.astype(float) + sigma * rng.standard_normal(arr.shape), 0, peak).round()
    return out.astype(arr.dtype)


def clean(name):
    return np.asarray(Image.open(SAMPLES / f"{name}.png"))


def one_error_line(result):
    lines = result.stderr.strip().splitlines()
    return result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr


def test_denoises_with_automatic_parameters_and_keeps_size_and_mode(tmp_path):
    ref = clean("coffee")
    Image.fromarray(noisy(ref, 20)).save(tmp_path / "in.png")
    r = run(tmp_path / "in.png", tmp_path / "out.png", "--print-params")
    assert r.returncode == 0, r.stderr
    assert "sigma=" in r.stdout and "patch_size=" in r.stdout
    out = Image.open(tmp_path / "out.png")
    assert out.mode == "RGB" and out.size == (ref.shape[1], ref.shape[0])
    assert psnr(out, ref) > psnr(Image.open(tmp_path / "in.png"), ref) + 4


def test_alpha_is_carried_through_unfiltered(tmp_path):
    ref = clean("chelsea")
    alpha = np.tile(np.linspace(0, 255, ref.shape[1]).astype(np.uint8), (ref.shape[0], 1))
    rgba = np.dstack([noisy(ref, 15), alpha])
    Image.fromarray(rgba).save(tmp_path / "in.png")
    r = run(tmp_path / "in.png", tmp_path / "out.webp", "--search-radius", "3", "--quality", "100")
    assert r.returncode == 0, r.stderr
    out = Image.open(tmp_path / "out.webp")
    assert out.mode == "RGBA"
    assert np.array_equal(np.asarray(out)[..., 3], alpha)


def test_grey_alpha_and_palette_images(tmp_path):
    grey = noisy(clean("camera"), 15)
    la = np.dstack([grey, np.full_like(grey, 200)])
    Image.fromarray(la).save(tmp_path / "la.png")
    Image.fromarray(noisy(clean("astronaut"), 10)).convert("P").save(tmp_path / "pal.png")
    for name, mode in (("la", "LA"), ("pal", "RGB")):
        r = run(tmp_path / f"{name}.png", tmp_path / f"{name}-out.tif", "--search-radius", "2")
        assert r.returncode == 0, r.stderr
        assert Image.open(tmp_path / f"{name}-out.tif").mode == mode
    assert np.all(np.asarray(Image.open(tmp_path / "la-out.tif"))[..., 1] == 200)


def test_cmyk_tiff_in_and_the_tiff_layout_tags_stay_behind(tmp_path):
    Image.fromarray(noisy(clean("coffee"), 10)).convert("CMYK").save(tmp_path / "in.tif")
    r = run(tmp_path / "in.tif", tmp_path / "out.tif", "--search-radius", "1")
    assert r.returncode == 0, r.stderr
    out = Image.open(tmp_path / "out.tif")
    out.load()
    assert out.mode == "RGB" and out.size == Image.open(tmp_path / "in.tif").size


def test_16_bit_stays_16_bit(tmp_path):
    ref = clean("camera").astype(np.uint16) * 257
    Image.fromarray(noisy(ref, 12 * 257, peak=65535)).save(tmp_path / "in.png")
    assert Image.open(tmp_path / "in.png").mode.startswith("I")
    r = run(tmp_path / "in.png", tmp_path / "out.png", "--search-radius", "4")
    assert r.returncode == 0, r.stderr
    out = np.asarray(Image.open(tmp_path / "out.png"))
    assert out.dtype == np.uint16 or out.max() > 255
    assert psnr(out, ref, 65535) > psnr(np.asarray(Image.open(tmp_path / "in.png")), ref, 65535) + 3


def test_icc_and_exif_are_kept_and_orientation_applied(tmp_path):
    ref = noisy(clean("coffee"), 10)
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    exif = Image.Exif()
    exif[0x010F] = "imgfilters test camera"  # Make
    exif[0x0112] = 6                         # Orientation: rotate 90 degrees to display
    Image.fromarray(ref).save(tmp_path / "in.jpg", icc_profile=icc, exif=exif.tobytes(), quality=95)
    r = run(tmp_path / "in.jpg", tmp_path / "out.jpg", "--search-radius", "2", "--quality", "90")
    assert r.returncode == 0, r.stderr
    out = Image.open(tmp_path / "out.jpg")
    assert out.info.get("icc_profile") == icc
    assert out.getexif().get(0x010F) == "imgfilters test camera"
    assert out.getexif().get(0x0112, 1) == 1
    assert out.size == (ref.shape[0], ref.shape[1])  # upright: width and height swapped


def test_tiled_output_equals_untiled(tmp_path):
    # a 96 x 136 crop: tiles of 64 and of 40 still cut it both ways, the last ones partial
    # (the CPU path's cost grows with the pixels)
    Image.fromarray(noisy(clean("astronaut")[:96, :136], 20)).save(tmp_path / "in.png")
    for args in ((), ("--tile", "64")):
        r = run(tmp_path / "in.png", tmp_path / f"out{len(args)}.png", "--search-radius", "3", *args)
        assert r.returncode == 0, r.stderr
    bil = [run(tmp_path / "in.png", tmp_path / f"bil{len(a)}.png", "--method", "bilateral", "--radius", "3", *a)
           for a in ((), ("--tile", "40"))]
    assert all(r.returncode == 0 for r in bil)
    # the CPU path is exact per pixel; the GPU kernels' running sums start at each block's
    # edge, so there a tile may change float32 rounding, and a level, here and there
    tolerance = 1 if torch.cuda.is_available() else 0
    for stem in ("out", "bil"):
        whole, tiled = (np.asarray(Image.open(tmp_path / f"{stem}{n}.png")).astype(int) for n in (0, 2))
        assert np.abs(whole - tiled).max() <= tolerance


def test_folder_mode_mirrors_continues_past_a_corrupt_file_and_exits_1(tmp_path):
    src, dst = tmp_path / "in", tmp_path / "out"
    (src / "sub").mkdir(parents=True)
    for name in ("camera", "chelsea"):
        Image.fromarray(noisy(clean(name), 10)).save(src / f"{name}.png")
    Image.fromarray(noisy(clean("chelsea"), 10)).save(src / "sub" / "chelsea2.png")
    data = (src / "camera.png").read_bytes()
    (src / "sub" / "broken.png").write_bytes(data[: len(data) // 2])
    (src / "notes.txt").write_text("not an image")
    r = run(src, dst, "--search-radius", "2")
    assert r.returncode == 1
    assert "3 of 4 images" in r.stderr and "broken.png" in r.stderr
    for rel in ("camera.png", "chelsea.png", "sub/chelsea2.png"):
        assert Image.open(dst / rel).size == Image.open(src / rel).size
    assert not (dst / "sub" / "broken.png").exists()
    assert not any(p.name.startswith(".imgfilters-") for p in dst.rglob("*"))  # no temporary files left


def test_folder_mode_retries_a_failed_batch_without_filtering_twice(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    Image.fromarray(noisy(clean("camera"), 10)).save(src / "a.png")
    Image.fromarray(noisy(clean("camera"), 10)[:5, :5]).save(src / "b.png")  # too small to estimate noise
    r = run(src, tmp_path / "out", "--search-radius", "1")
    assert r.returncode == 1 and "b.png" in r.stderr
    assert run(src / "a.png", tmp_path / "alone.png", "--search-radius", "1").returncode == 0
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out" / "a.png")),
                          np.asarray(Image.open(tmp_path / "alone.png")))


def test_outputs_get_the_umask_mode_and_overwrites_keep_theirs(tmp_path):
    from imgfilters import io
    pic = io.read_image(SAMPLES / "camera.png")
    old = os.umask(0o027)
    try:
        io.write_image(tmp_path / "new.png", pic)
        assert (tmp_path / "new.png").stat().st_mode & 0o777 == 0o640  # as open(path, "w") would
        (tmp_path / "old.png").write_bytes(b"")
        os.chmod(tmp_path / "old.png", 0o604)
        io.write_image(tmp_path / "old.png", pic)
        assert (tmp_path / "old.png").stat().st_mode & 0o777 == 0o604
    finally:
        os.umask(old)


def test_refuses_to_overwrite_unless_asked_and_never_the_input(tmp_path):
    Image.fromarray(noisy(clean("camera"), 10)).save(tmp_path / "in.png")
    (tmp_path / "out.png").write_bytes(b"keep me")
    r = run(tmp_path / "in.png", tmp_path / "out.png", "--search-radius", "1")
    assert one_error_line(r) and "--overwrite" in r.stderr
    assert (tmp_path / "out.png").read_bytes() == b"keep me"
    assert run(tmp_path / "in.png", tmp_path / "out.png", "--search-radius", "1", "--overwrite").returncode == 0
    before = (tmp_path / "in.png").read_bytes()
    r = run(tmp_path / "in.png", tmp_path / "in.png", "--overwrite")
    assert one_error_line(r) and (tmp_path / "in.png").read_bytes() == before


def test_never_writes_over_into_or_around_the_input(tmp_path, capsys, monkeypatch):
    """An output that is the input, contains it or lies inside it is refused on every path
    (file, folder, streamed), however spelled: replacing project.zarr would delete the
    scan.zarr inside it; shoot/sub/ into shoot/ would write over shoot/a.png."""
    zarr = pytest.importorskip("zarr")
    for name in ("_denoise_pictures", "_filter"):
        monkeypatch.setattr(cli, name, lambda *args, **kw: pytest.fail("an image was computed"))
    zarr.create_array(str(tmp_path / "project.zarr" / "scan.zarr"), shape=(16, 16), dtype="uint8")[:] = 7
    (tmp_path / "project.zarr" / "notes.txt").write_text("keep me")
    _tiny_pngs(tmp_path / "shoot", "a.png", "sub/a.png")
    (tmp_path / "link").symlink_to(tmp_path / "shoot")
    files = lambda: {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    before = files()
    monkeypatch.chdir(tmp_path)
    for src, dst in (("project.zarr/scan.zarr", "project.zarr"),           # streamed: contains the input
                     ("project.zarr/scan.zarr", "project.zarr/scan.zarr/out.zarr"),  # and inside it
                     ("shoot/a.png", "link/a.png"), ("shoot/a.png", "shoot"),  # a file: itself, by a link
                     ("shoot", "link"), ("shoot/sub", "shoot"), ("shoot", "."),  # a folder: itself, around it
                     ("shoot", "link/denoised")):                          # and inside it
        r = run_in_process(capsys, src, dst, "--overwrite", "--method", "bilateral")
        assert one_error_line(r) and "refusing to write there" in r.stderr, (src, dst, r.stderr)
    assert files() == before


@pytest.mark.filterwarnings("error")  # a warning would be a second line on a terminal
def test_every_usage_error_gives_code_2_and_one_line(tmp_path, capsys):
    Image.fromarray(noisy(clean("camera"), 10)).save(tmp_path / "ok.png")
    Image.fromarray(np.dstack([clean("coffee"), clean("coffee")[..., :1]])).save(tmp_path / "rgba.png")
    data = (tmp_path / "ok.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 3])
    (tmp_path / "text.png").write_text("hello")
    Image.fromarray(np.zeros((8, 8), np.float32)).save(tmp_path / "float.tif")
    Image.fromarray(noisy(clean("camera"), 10)[:5, :5]).save(tmp_path / "tiny.png")
    rgb16 = tmp_path / "rgb16.png"
    cv2.imwrite(str(rgb16), (clean("coffee").astype(np.uint16) * 257)[..., ::-1].copy())
    cases = [
        (tmp_path / "missing.png", tmp_path / "o1.png"),
        (tmp_path / "ok.png", tmp_path / "o2.png", "--no-such-option"),
        (tmp_path / "cut.png", tmp_path / "o3.png"),
        (tmp_path / "text.png", tmp_path / "o4.png"),
        (tmp_path / "float.tif", tmp_path / "o5.png"),
        (tmp_path / "ok.png", tmp_path / "o6.bmp"),
        (tmp_path / "rgba.png", tmp_path / "o7.jpg", "--search-radius", "1"),
        (tmp_path / "ok.png", tmp_path / "o8.png", "--patch-size", "4"),
        (tmp_path / "ok.png", tmp_path / "o9.png", "--sigma", "nan"),
        (tmp_path / "ok.png", tmp_path / "o10.png", "--method", "wiener"),
        (tmp_path / "ok.png", tmp_path / "o11.png", "--quality", "0"),
        (tmp_path / "ok.png", tmp_path / "nosuch" / "o12.png"),
        (tmp_path / "tiny.png", tmp_path / "o13.png"),
        (rgb16, tmp_path / "o14.png"),
        (tmp_path / "ok.png", tmp_path / "o15.png", "--method", "bilateral", "--sigma-space", "20"),
        (tmp_path / "ok.png", tmp_path / "o16.png", "--search-radius", "36"),  # the library's limits: 35
        (tmp_path / "ok.png", tmp_path / "o17.png", "--method", "bilateral", "--radius", "33"),  # and 32
        # the other method's options would be ignored; a zero noise level would copy the input
        (tmp_path / "ok.png", tmp_path / "o18.png", "--method", "bilateral", "--patch-size", "5"),
        (tmp_path / "ok.png", tmp_path / "o19.png", "--sigma-color", "0.1"),
        (tmp_path / "ok.png", tmp_path / "o20.png", "--sigma", "0"),
    ]
    for case in cases:
        r = run_in_process(capsys, *case)
        assert one_error_line(r), (case, r.returncode, r.stderr)
    assert not any(tmp_path.glob("o[0-9]*"))
    r = run(tmp_path / "cut.png", tmp_path / "o3.png", "--debug")
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_console_script_is_installed():
    exe = shutil.which("imgfilters-denoise")
    assert exe is not None
    r = run("--help", script=(exe,))
    assert r.returncode == 0 and "--search-radius" in r.stdout


@pytest.mark.parametrize("module", ["imgfilters", "imgfilters.cli"])
def test_python_dash_m_denoises_and_returns_the_exit_code(tmp_path, module):
    """``python -m imgfilters.cli`` exited 0 and did nothing: a script took it for success."""
    script = (sys.executable, "-m", module)
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16), dtype=np.uint8)).save(tmp_path / "in.png")
    r = run(tmp_path / "in.png", tmp_path / "out.png", "--method", "bilateral", "--radius", "1", script=script)
    assert r.returncode == 0, r.stderr
    assert not np.array_equal(np.asarray(Image.open(tmp_path / "out.png")), np.asarray(Image.open(tmp_path / "in.png")))
    r = run(tmp_path / "in.png", tmp_path / "out2.png", "--quality", "0", script=script)
    assert one_error_line(r) and "--quality" in r.stderr


def test_version_and_help_state_every_default(capsys):
    from importlib.metadata import version
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"{cli.PROG} {version('imgfilters')}"
    for action in cli.build_parser()._actions:
        if action.option_strings and action.dest not in ("help", "version"):
            assert action.help, action.dest
            assert "default" in action.help or action.const is not None, action.dest  # store_true flags: off


def _unwritable(tmp_path):
    """A folder this process cannot write into: read-only permissions or, for root (whom
    permissions do not stop), /sys."""
    if os.geteuid() == 0:
        return Path("/sys")
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


def _tiny_pngs(folder, *names):
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.arange(256, dtype=np.uint8).reshape(16, 16)).save(folder / name)


def test_read_only_output_stops_before_the_first_image(tmp_path, capsys, monkeypatch):
    _tiny_pngs(tmp_path / "shoot", "a.png", "sub/b.png")
    monkeypatch.setattr(cli, "_denoise_pictures", lambda *args: pytest.fail("an image was computed"))
    for src, dst in ((tmp_path / "shoot", _unwritable(tmp_path)),
                     (tmp_path / "shoot" / "a.png", _unwritable(tmp_path) / "out.png")):
        r = run_in_process(capsys, src, dst)
        assert one_error_line(r) and "cannot write" in r.stderr, r.stderr


def test_an_output_format_that_cannot_hold_the_image_stops_before_filtering(tmp_path, capsys, monkeypatch):
    """16-bit into JPEG or WebP, alpha into JPEG: one line saying what would work, before
    the filter runs (it failed only on writing, after minutes of filtering on a CPU)."""
    monkeypatch.setattr(cli, "_denoise_pictures", lambda *args: pytest.fail("an image was computed"))
    grey = np.arange(256, dtype=np.uint8).reshape(16, 16)
    Image.fromarray(grey.astype(np.uint16) * 257).save(tmp_path / "deep.png")
    Image.fromarray(np.dstack([grey, grey])).save(tmp_path / "la.png")
    for src, dst, would in (("deep.png", "o.jpg", "PNG or TIFF"), ("deep.png", "o.webp", "PNG or TIFF"),
                            ("la.png", "o.jpg", "PNG, TIFF or WebP")):
        r = run_in_process(capsys, tmp_path / src, tmp_path / dst)
        assert one_error_line(r) and dst in r.stderr and would in r.stderr, r.stderr
    assert not list(tmp_path.glob("o.*"))


def test_files_of_several_pictures_are_refused_and_thumbnails_left_behind(tmp_path, capsys, monkeypatch):
    """Of a multi-page TIFF or an animated PNG only the first picture was denoised, the
    rest silently lost: such files are refused, read by Pillow or streamed. A reduced-
    resolution page (a thumbnail, a pyramid level) is a copy, no picture of its own."""
    tifffile = pytest.importorskip("tifffile")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the CLI's CPU path: the float64 reference
    page = np.arange(256, dtype=np.uint8).reshape(16, 16)
    tifffile.imwrite(tmp_path / "pages.tif", page)
    tifffile.imwrite(tmp_path / "pages.tif", page[:8], append=True)
    tifffile.imwrite(tmp_path / "thumb.tif", page)
    tifffile.imwrite(tmp_path / "thumb.tif", page[::4, ::4], append=True, subfiletype=1)
    Image.fromarray(page).save(tmp_path / "anim.png", save_all=True, append_images=[Image.fromarray(255 - page)])
    args = ("--method", "bilateral", "--radius", "1", "-q")
    in_memory = cli.STREAM_PIXELS
    for streamed in (False, True):
        monkeypatch.setattr(cli, "STREAM_PIXELS", 100 if streamed else in_memory)  # 16 x 16 streams at 100
        for name in ("pages.tif",) if streamed else ("pages.tif", "anim.png"):
            r = run_in_process(capsys, tmp_path / name, tmp_path / f"out{streamed}.tif", *args)
            assert one_error_line(r) and "2 pictures" in r.stderr and name in r.stderr, r.stderr
            assert not (tmp_path / f"out{streamed}.tif").exists()
        r = run_in_process(capsys, tmp_path / "thumb.tif", tmp_path / f"thumb{streamed}.tif", *args)
        assert r.returncode == 0, r.stderr
        with tifffile.TiffFile(tmp_path / f"thumb{streamed}.tif") as tif:
            assert [p.shape for p in tif.pages] == [page.shape]


def test_every_failure_line_names_its_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the CLI's CPU path: the float64 reference
    _tiny_pngs(tmp_path / "shoot", "a.png", "sub/b.png", "sub/c.png")
    (tmp_path / "shoot" / "broken.png").write_bytes(b"not a png")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sub").write_text("a file where the sub-folder would go")
    r = run_in_process(capsys, tmp_path / "shoot", tmp_path / "out", "--method", "bilateral", "--radius", "1",
                       "--quiet")
    assert r.returncode == 1
    failed = [Path(line.strip().split(": ")[0]).name for line in r.stderr.splitlines()]
    assert sorted(failed) == ["b.png", "broken.png", "c.png"], r.stderr
    assert (tmp_path / "out" / "a.png").is_file()


def test_long_cpu_runs_show_progress_unless_quiet(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the CLI's CPU path: the float64 reference
    arr = np.random.default_rng(0).integers(0, 256, (40, 48), dtype=np.uint8)
    Image.fromarray(arr).save(tmp_path / "in.png")
    args = ("--method", "bilateral", "--radius", "2", "--device", "cpu")
    r = run_in_process(capsys, tmp_path / "in.png", tmp_path / "whole.png", *args)
    assert r.returncode == 0 and r.stderr == ""  # a short run: no bar
    # what a long run does, on a small image: tiles, and the bar from the start
    monkeypatch.setattr(cli, "PROGRESS_VALUES", 100)
    monkeypatch.setattr(cli, "PROGRESS_TILE", 16)
    monkeypatch.setattr(cli, "PROGRESS_DELAY", 0)
    r = run_in_process(capsys, tmp_path / "in.png", tmp_path / "tiled.png", *args)
    assert r.returncode == 0 and "/9 " in r.stderr and "tile/s" in r.stderr  # 9 tiles
    tiled, whole = (np.asarray(Image.open(tmp_path / f"{n}.png")) for n in ("tiled", "whole"))
    assert np.array_equal(tiled, whole)
    r = run_in_process(capsys, tmp_path / "in.png", tmp_path / "quiet.png", *args, "--quiet")
    assert r.returncode == 0 and r.stderr == ""


def test_pixel_limit_replaces_pillows_warning(tmp_path, capsys, monkeypatch, recwarn):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    _tiny_pngs(tmp_path, "in.png")  # 256 pixels
    r = run_in_process(capsys, tmp_path / "in.png", tmp_path / "out.png", "--max-megapixels", "0.0002")
    assert one_error_line(r) and "--max-megapixels" in r.stderr
    # numbers that show the image is larger (it said "0.0 megapixels, more than the limit of 0.0002")
    assert "16 x 16 is 256 pixels (0.000256 megapixels), more than the limit of 0.0002 megapixels" in r.stderr
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # Pillow's own check: it would warn, or refuse above 200
    for limit in ("0.001", "0"):
        r = run_in_process(capsys, tmp_path / "in.png", tmp_path / f"out{limit}.png", "--max-megapixels", limit,
                           "--method", "bilateral", "--radius", "1")
        assert r.returncode == 0, r.stderr
    assert not [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)]
    assert Image.MAX_IMAGE_PIXELS == 100


def test_large_tiff_and_zarr_stream_tile_by_tile(tmp_path, monkeypatch, capsys):
    """A TIFF above STREAM_PIXELS and a .zarr array go through imgfilters.tiled from disk
    to disk (zarr array, BigTIFF memmap), with the results of the in-memory path."""
    tifffile, zarr = pytest.importorskip("tifffile"), pytest.importorskip("zarr")
    # the CLI's CPU path, the float64 reference, so that the tiles' results equal the whole
    # image's bit for bit (on a GPU, float32 sums may round a pixel the other way)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(cli, "STREAM_PIXELS", 1000)
    img = noisy(clean("astronaut")[:70, :90], 20)
    Image.fromarray(img).save(tmp_path / "in.png")
    tifffile.imwrite(tmp_path / "in.tif", img, tile=(32, 32))
    zarr.create_array(str(tmp_path / "in.zarr"), shape=img.shape, chunks=(32, 32, 3), dtype=img.dtype)[:] = img
    for method, src, dst in (("bilateral", "in.tif", "out.zarr"), ("nlm", "in.zarr", "out.tif")):
        options = ("--radius", "2") if method == "bilateral" else ("--search-radius", "2")
        for a, b, tile in (("in.png", f"{method}.png", ()), (src, dst, ("--tile", "24"))):
            r = run_in_process(capsys, tmp_path / a, tmp_path / b, "--method", method, *options, "-q", *tile,
                               "--device", "cpu")
            assert r.returncode == 0, r.stderr
        whole = np.asarray(Image.open(tmp_path / f"{method}.png"))
        streamed = zarr.open_array(str(tmp_path / dst), mode="r")[:] if dst.endswith("zarr") else \
            tifffile.imread(tmp_path / dst)
        np.testing.assert_array_equal(streamed, whole)
    r = run_in_process(capsys, tmp_path / "in.zarr", tmp_path / "out.png")
    assert one_error_line(r) and "written as .tif" in r.stderr


def test_streamed_output_is_made_under_a_name_of_its_own(tmp_path, capsys, monkeypatch):
    """The streamed output is made in a new temporary folder beside its place: the fixed
    name it had (.imgfilters-out.zarr for out.zarr) was overwritten even when it was the
    input. A missing output folder is a usage error, as on the other paths."""
    zarr = pytest.importorskip("zarr")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the CLI's CPU path: the float64 reference
    img = np.arange(256, dtype=np.uint8).reshape(16, 16)
    src = tmp_path / ".imgfilters-out.zarr"
    zarr.create_array(str(src), shape=img.shape, dtype=img.dtype)[:] = img
    r = run_in_process(capsys, src, tmp_path / "out.zarr", "--method", "bilateral", "--radius", "1", "-q")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(zarr.open_array(str(src), mode="r")[:], img)
    assert zarr.open_array(str(tmp_path / "out.zarr"), mode="r").shape == img.shape
    assert sorted(p.name for p in tmp_path.iterdir()) == [".imgfilters-out.zarr", "out.zarr"]  # no temporary left
    r = run_in_process(capsys, src, tmp_path / "nosuch" / "out.tif")
    assert one_error_line(r) and "does not exist" in r.stderr, r.stderr
