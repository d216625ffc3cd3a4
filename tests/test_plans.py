"""The launch plans, asked for the GPU's sizes without a GPU: each family's plan function
is a pure function of plain values (sizes, dtypes, radius, options, the SM count), so CI
checks the plans an H200 would run (132 SMs) on 4K and batched 1080p images, every
branch of the choice, and that the programs they launch cover every output."""
import itertools

import numpy as np
import pytest
import torch

from imgfilters.kernels import bilateral as kb
from imgfilters.kernels import resample as kr
from imgfilters.kernels import separable as ks
from imgfilters.kernels.core.tiling import cdiv, programs
from imgfilters.ops.resample import phase_tables

H200_SMS = 132
SHAPES = [(1, 3, 2160, 3840), (16, 3, 1080, 1920), (1, 1, 46400, 46400), (2, 3, 37, 50), (2, 8, 300, 500)]


def bilateral_plan(shape, radius, *, dtype=torch.float32, disk=False, joint=False, adjoint=False, sms=H200_SMS,
                   off64=False, peak_fits=False):
    B, C, H, W = shape
    return kb.forward_plan(B, C, C, H, W, dtype, radius, disk, False, joint, 0, True, adjoint, off64, peak_fits,
                           False, sms)


def strips(tile, B, H, W):
    return B * cdiv(H, tile.kwargs["K"]) * cdiv(W, tile.kwargs["BW"])


def assert_covers(n, planes, H, W, BH, BW):
    """The first ``n`` programs of a grid, numbered as ``tile_origin`` numbers them (plane,
    then tile row, then tile column), store every output of ``planes`` H x W planes, and
    none starts outside them (pixel by pixel: for small images)."""
    covered = np.zeros((planes, H, W), bool)
    per_row, per_plane = cdiv(W, BW), cdiv(W, BW) * cdiv(H, BH)
    for pid in range(n):
        plane, t = divmod(pid, per_plane)
        r, c = t // per_row * BH, t % per_row * BW
        assert plane < planes and r < H and c < W
        covered[plane, r:r + BH, c:c + BW] = True
    assert covered.all()


@pytest.mark.parametrize("shape,radius,joint,disk",
                         list(itertools.product(SHAPES, range(1, 8), (False, True), (False, True))))
def test_bilateral_forward_plans_cover_the_image(shape, radius, joint, disk):
    B, C, H, W = shape
    plan = bilateral_plan(shape, radius, joint=joint, disk=disk)
    meta = plan.meta
    assert (meta["R"], meta["JOINT"], meta["DISK"]) == (radius, joint, disk)
    if plan.tile is None:  # tuned on the first launch: every candidate's grid covers the image
        # (row tiles; the unrolled offsets' tuned radii; the one-offset column loop)
        assert (not kb.plan._slides(meta) or (meta["UNROLL_DX"] and radius <= kb.tiles.UNROLLED_TUNED_RADIUS)
                or (not meta["UNROLL_DX"] and meta["DX_GROUP"] == 1))
        assert not meta["INSIDE"] and meta["EDGES"] == 0
        tiles = kb.forward_tiles(meta)
        for tile in tiles:
            assert plan.grid(tile.kwargs) == (strips(tile, B, H, W),)
    else:
        tiles = [plan.tile]
        assert plan.grid == (strips(plan.tile, B, H, W) + meta["EDGES"],)
        assert plan.tile.kwargs["K"] % kb.tiles.STRIP_QUANTUM == 0 and plan.tile.kwargs["K"] <= kb.tiles.STRIP_ROWS_MAX
    if H * W <= 150_000:  # (the edge programs come after the strips)
        for tile in tiles:
            assert_covers(strips(tile, B, H, W), B, H, W, tile.kwargs["K"], tile.kwargs["BW"])
    if meta["INSIDE"]:  # edge columns stored by programs of their own, none over EDGE_BLOCKS blocks
        assert plan.tile.kwargs["SLIDE"] and not joint and radius > kb.tiles.UNROLLED_TUNED_RADIUS
        assert meta["EDGES"] * plan.tile.kwargs["BW"] * kb.tiles.EDGE_BLOCKS >= B * H * 2 * radius
    else:
        assert meta["EDGES"] == 0
    assert bilateral_plan(shape, radius, joint=joint, disk=disk) is plan  # memoised by its arguments


def test_bilateral_radius_3_takes_one_tile_by_the_image_size():
    """SIZED_TILE_RADIUS: a single candidate, the wide tile on 4K planes, the other below."""
    big = bilateral_plan((1, 3, 2160, 3840), kb.tiles.SIZED_TILE_RADIUS).meta
    small = bilateral_plan((1, 3, 720, 1280), kb.tiles.SIZED_TILE_RADIUS).meta
    assert [t.kwargs for t in kb.forward_tiles(big)] == [
        {k: v for k, v in kb.tiles.UNROLLED_TILES[0].items() if k != "num_warps"}]
    assert [t.kwargs for t in kb.forward_tiles(small)] == [
        {k: v for k, v in kb.tiles.UNROLLED_TILES[1].items() if k != "num_warps"}]


def test_bilateral_strips_fill_the_waves_of_the_device():
    """Beyond the tuned radii the strip length comes from the SM count: fewer SMs, fewer
    programs at once, and the strips it picks cost no more waves x rows than any other."""
    plans = {sms: bilateral_plan((1, 3, 2160, 3840), 4, sms=sms) for sms in (H200_SMS, 66)}
    for sms, plan in plans.items():
        tile = plan.tile
        resident = kb.plan._resident(tile, plan.meta, sms)
        lanes = cdiv(3840, tile.kwargs["BW"])
        costs = {k: cdiv(lanes * cdiv(2160, k), resident) * (k + 2 * 4 + 1) for k in range(8, 257, 8)}
        assert costs[tile.kwargs["K"]] == min(costs.values())
    assert plans[H200_SMS].meta["INSIDE"] and plans[H200_SMS].meta["EDGES"] > 0


@pytest.mark.parametrize("radius", range(1, kb.MAX_RADIUS + 1))
def test_bilateral_disk_bands_hold_each_tap_of_the_disk_once(radius):
    """``disk_bands``: dx = 0 alone, then bands of |dx| whose columns span the same rows,
    each band's offsets the next band's ``after``; the offsets and rows they walk are the
    disk's, each once."""
    bands = kb.disk_bands(radius)
    assert bands[0][:3] == (0, 0, radius) and bands[-1][1] == radius
    taps = []
    for i, (lo, hi, h, after) in enumerate(bands):
        assert lo <= hi and after == (-bands[i + 1][1] if i + 1 < len(bands) else 0)
        offsets = [0] if lo == 0 else list(range(-hi, -lo + 1)) + list(range(lo, hi + 1))
        taps += [(dx, dy) for dx in offsets for dy in range(-h, h + 1)]
        assert i == 0 or bands[i - 1][1] + 1 == lo and bands[i - 1][2] > h
    disk = [(dx, dy) for dx in range(-radius, radius + 1) for dy in range(-radius, radius + 1)
            if dx * dx + dy * dy <= radius * radius]
    assert sorted(taps) == sorted(disk)


def test_bilateral_disks_take_the_bands_where_the_column_loop_runs():
    """A disk whose column offsets run in a loop walks them in bands, in their own tile
    (capped registers); unrolled offsets and squares do not."""
    for radius in range(1, 8):
        disk, square = (bilateral_plan((1, 3, 2160, 3840), radius, disk=d) for d in (True, False))
        assert square.meta["BANDS"] == ()
        if disk.meta["UNROLL_DX"]:
            assert disk.meta["BANDS"] == ()
        else:
            assert disk.meta["BANDS"] == kb.disk_bands(radius)
            assert disk.tile.maxnreg == kb.tiles.BANDED_REGISTERS and disk.tile.kwargs["SLIDE"]


def test_bilateral_adjoint_and_interpreter_plans():
    """The backward's forward pass never tunes (it rewrites its buffer in place); the
    interpreter (0 SMs) takes one strip of every column of an image."""
    for radius in range(1, 8):
        assert bilateral_plan((1, 3, 2160, 3840), radius, adjoint=True).tile is not None
    plan = bilateral_plan((2, 3, 37, 50), 2, sms=0)
    assert plan.tile.kwargs["BW"] >= 50 and plan.tile.kwargs["K"] == 37
    assert plan.grid == (2,)


def test_bilateral_plan_options_reach_the_constexprs():
    plan = bilateral_plan((1, 1, 46400, 46400), 2, dtype=torch.uint8, off64=True, peak_fits=True)
    assert plan.meta["OFF64"] and not bilateral_plan((1, 3, 2160, 3840), 2).meta["OFF64"]
    # EXPANDED: a uint8 guide whose exponent terms fit, at radii whose columns are grouped
    grouped = [r for r in range(1, 8) if kb.column_group(r) > 1]
    assert grouped and all(bilateral_plan((1, 3, 2160, 3840), r, dtype=torch.uint8, peak_fits=True).meta["EXPANDED"]
                           for r in grouped if kb.plan._slides(bilateral_plan((1, 3, 2160, 3840), r).meta, extra=1))
    assert not any(bilateral_plan((1, 3, 2160, 3840), r, peak_fits=True).meta["EXPANDED"] for r in range(1, 8))


@pytest.mark.parametrize("mode,f,d", [("bicubic", 2, 1), ("bilinear", 2, 1), ("lanczos", 2, 1), ("bicubic", 1, 2),
                                      ("bicubic", 4, 1), ("bicubic", 1, 4)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
@pytest.mark.parametrize("shape", [(1, 3, 1080, 1920), (16, 3, 1080, 1920)])
def test_resampling_phase_plans_cover_the_output(mode, f, d, dtype, shape):
    B, C, H, W = shape
    phases = phase_tables(mode, d > 1 or mode == "lanczos", f, d)
    HO, WO = H * f // d, W * f // d
    itemsize = torch.tensor([], dtype=dtype).element_size()
    strip = kr.tiles.STRIPS[phases.D]
    plan = kr.phases_plan(phases, phases, B * C, HO, WO, itemsize, strip, False, False)
    bw, seg, warps, load_bytes, pre = strip
    s = plan.tile.kwargs["S"]
    lanes = WO // phases.F
    assert lanes % s == 0 and s * itemsize <= max(load_bytes, itemsize)
    assert s == 1 or phases.D == 1
    assert plan.tile.num_warps == warps and (plan.tile.kwargs["BW"], plan.tile.kwargs["SEG"]) == (bw, seg)
    assert plan.grid == (programs(B * C, HO // phases.F, lanes, seg, s * bw),)
    assert plan.meta["FY"] == plan.meta["FX"] == phases.F and plan.meta["DX"] == phases.D
    assert kr.phases_plan(phases, phases, B * C, HO, WO, itemsize, strip, False, False) is plan


@pytest.mark.parametrize("f", sorted(kr.ADJOINT_FACTORS))
def test_resampling_adjoint_plans_cover_the_gradient(f):
    phases = phase_tables("bicubic", False, f, 1)
    threads, seg, warps, s = kr.tiles.ADJOINT_STRIP
    plan = kr.adjoint_plan(phases, phases, 3, 1080, 1920, 4, kr.tiles.ADJOINT_STRIP, False)
    assert plan.grid == (programs(3, 1080, 1920, seg, s * threads),)
    assert plan.meta["VEC"] == 4 and plan.meta["FX"] == f


@pytest.mark.parametrize("rx,ry", [(1, 1), (2, 2), (7, 7), (9, 9), (15, 15), (19, 19), (2, 12), (16, 3)])
@pytest.mark.parametrize("ox", [0, 3])
def test_strip_plans_cover_the_output(rx, ry, ox):
    HO, WO, planes = 2160, 3840, 3
    plan = ks.strip_plan(planes, HO, WO, rx, ry, ox, 1, 1, 0, -1, False, False)
    cfg = ks.strip_config(rx, ry)
    S, T, SEG = (plan.tile.kwargs[k] for k in ("S", "T", "SEG"))
    assert (S, T, SEG) == (cfg["S"], cfg["T"], cfg["SEG"])
    assert plan.grid == (programs(planes, HO, WO, SEG, T * S),)
    assert plan.oxa % S == 0 and plan.oxa + plan.meta["OXR"] == ox
    if cfg["HREG"]:  # the blocks of S columns a lane's horizontal taps reach
        assert plan.meta["KB0"] * S <= plan.meta["OXR"] - rx
        assert (plan.meta["KB0"] + plan.meta["NB"]) * S > plan.meta["OXR"] + S - 1 + rx
    else:
        assert plan.meta["NB"] == 0
    interpreted = ks.strip_plan(planes, 37, 50, rx, ry, ox, 1, 1, 0, -1, False, True)
    assert interpreted.grid == (planes,)  # one strip and one segment a plane
