"""The bilateral family's launch plans: pure functions of plain values (sizes, dtypes,
radius, options, the SM count) that choose the forward's variant, tile, strips and grid
from the tables in ``tiles.py``. ``forward_plan`` returns a frozen ``launch.Plan``,
memoised on its argument list; tests/test_plans.py asks it for the GPU's sizes without a
GPU."""
import functools
import math

import torch
import triton

from . import tiles
from ..core import borders
from ..core.launch import Meta, Plan, Tuning, tile_config
from ..core.tiling import cdiv, pow2_at_least, size_class


def unrolls_columns(radius):
    """Whether SLIDE, when it takes this radius, unrolls its column offsets (``UNROLL_DX``)."""
    return (2 * radius + 1) ** 2 <= tiles.UNROLLED_TAPS


def column_group(radius):
    """Column offsets a step of SLIDE's run-time column loop takes (``DX_GROUP``): three
    where they divide the 2R + 1 offsets (15 x 15 uint8: 1.30 -> 1.14 ms with EXPANDED,
    PERFORMANCE.md), else one (a remainder would compile a second copy of the step), and
    one where the offsets are unrolled (no such loop)."""
    if unrolls_columns(radius) or (2 * radius + 1) % tiles.COLUMN_GROUP:
        return 1
    return tiles.COLUMN_GROUP


def prefetches(radius):
    """Whether SLIDE, when it takes this radius, loads its input rows one step ahead."""
    return unrolls_columns(radius) and radius <= tiles.PREFETCH_RADIUS


def disk_bands(radius):
    """SLIDE's column offsets of a disk window whose column loop runs at run time
    (``BANDS``): (lo, hi, h, after) for each band of offsets |dx| = lo .. hi whose column
    of the disk spans the same rows dy = -h .. h, h = floor(sqrt(R^2 - dx^2)), the first
    band dx = 0 alone; ``after``, the first offset of the next band (its row is loaded
    during this band's last taps), 0 after the last. A band's taps go to its 2h + 1 slots
    alone, so that none tests whether it lies in the disk (PERFORMANCE.md)."""
    heights = [math.isqrt(radius * radius - m * m) for m in range(radius + 1)]
    bands = [[0, 0, heights[0]]]
    for m in range(1, radius + 1):
        if len(bands) > 1 and heights[m] == bands[-1][2]:
            bands[-1][1] = m
        else:
            bands.append([m, m, heights[m]])
    return tuple((lo, hi, h, -bands[i + 1][1] if i + 1 < len(bands) else 0) for i, (lo, hi, h) in enumerate(bands))


def window_bands(radius, disk):
    """The forward's ``BANDS`` for a window: a disk's bands where SLIDE runs its column
    offsets in a loop (``disk_bands``), none for a square or unrolled offsets."""
    return disk_bands(radius) if disk and not unrolls_columns(radius) else ()


def _slides(meta, extra=0):
    """Whether the forward's tiles for a launch's ``meta`` are SLIDE's: where the 2R + 1
    slots (of ``extra`` more vectors each) fit."""
    return (2 * meta["R"] + 1) * (meta["C"] + 1 + meta["CG"] + extra) <= tiles.SLIDE_VECTORS


# EXPANDED's bound on the exponent's terms |g|^2 and |c|^2, CG * -COLOR for a uint8 guide
# (unit values in [0, 1]): there float32 rounds the exponent by at most about 2^-8, half of
# it the 2R updates of a slot's spatial term (the weights within 0.3 %, a uint8 output
# within 0.1 of a level: PERFORMANCE.md). Smaller sigma_color takes the direct form. Other
# dtypes' tolerances (float32 1e-5, uint16 one level in 65535) and value ranges (floats,
# prologues, a constant border's value) are beyond what the expansion keeps.
EXPANDED_TERMS = 4096.0


def expands(guide_dtype, meta, prologue, peak_within, value_in_unit):
    """Whether the forward with ``meta`` computes its distances EXPANDED: l2, SLIDE with a
    column loop of several offsets a step (``column_group``) and slots that fit with
    EXPANDED's extra vector, a uint8 guide read as stored (no ``prologue`` when the image
    is its own guide), a constant border's value in [0, 1] (``value_in_unit``), and CG
    times the largest -COLOR of the batch within EXPANDED_TERMS (``peak_within``, from
    ``peak_fits``); never for
    the backward's ADJOINT pass.
    (Where the offsets are unrolled, a loaded row serves too few taps to repay its |g|^2;
    with one offset a step the saved instructions did not show, and at radius 8 the
    slots' extra registers cost a program an SM: PERFORMANCE.md.)"""
    return (peak_within and guide_dtype == torch.uint8 and not meta["L1"] and not meta["ADJOINT"]
            and column_group(meta["R"]) > 1 and (meta["JOINT"] or not prologue) and _slides(meta, extra=1)
            and (meta["BORDER"] != borders.CONSTANT.value or value_in_unit))


def peak_fits(guide_channels, color_peak):
    """``expands``'s bound on the exponent's terms: ``color_peak``, the largest -COLOR of
    the batch, known and within it for ``guide_channels`` channels."""
    return color_peak is not None and guide_channels * color_peak <= EXPANDED_TERMS


def forward_tiles(meta):
    """The forward's candidate tiles for a launch's ``meta``: SLIDE when the 2R + 1 slots
    fit (radius 3: one, by the image's size)."""
    if _slides(meta):
        if meta["BANDS"]:
            return [tile_config(**t) for t in tiles.BANDED_TILES]
        if not meta["UNROLL_DX"]:
            return [tile_config(**t) for t in (tiles.SLIDE_TILES if meta["DX_GROUP"] == 1 else tiles.GROUPED_TILES)]
        # (beyond tiles.UNROLLED_TUNED_RADIUS ``launch`` picks one by ``_single_tile`` instead of timing them)
        unrolled = tiles.UNROLLED_TILES
        if meta["R"] == tiles.SIZED_TILE_RADIUS:
            chosen = unrolled[:1] if meta["SIZE_CLASS"] >= tiles.WIDE_TILE_SIZE_CLASS else unrolled[1:]
        elif meta["JOINT"] and meta["R"] > tiles.UNROLLED_TUNED_RADIUS:
            chosen = unrolled[1:]
        else:
            chosen = unrolled
        return [tile_config(**t) for t in chosen]
    return _rows_within(tiles.ROW_TILES, meta["C"] + 1 + meta["CG"])


def _single_tile(meta):
    """The tile of a launch that tunes none (a new variant's first call
    would compile each tile it times), its strips' length still to be chosen
    (``_filling_waves``): a disk's banded tile, the grouped column loop's one, or, for the unrolled radius
    beyond tiles.UNROLLED_TUNED_RADIUS, the first of ``forward_tiles``. (With the columns read
    INSIDE and the edge columns still stored by the strips, H200, 9 x 9 float32: 4K 0.386
    ms in 128 x 256 against 0.495 in 128 x 128 with 4 warps, 16 x 1080p 1.50 against 1.79:
    the 4-warp kernel stalls in dispatch, 0.81 cycles an instruction against 0.19.) None
    for every other launch."""
    if not _slides(meta):
        return None
    if meta["BANDS"]:
        return tile_config(**tiles.BANDED_TILES[0])
    if not meta["UNROLL_DX"]:
        return tile_config(**tiles.GROUPED_TILES[0]) if meta["DX_GROUP"] > 1 else None
    if meta["R"] <= tiles.UNROLLED_TUNED_RADIUS:
        return None
    return forward_tiles(meta)[0]


def _resident(tile, meta, sms):
    """The programs of ``tile`` that ``sms`` SMs hold at once, by the warps above."""
    if meta["UNROLL_DX"]:
        warps_an_sm = tiles.GUIDED_WARPS_AN_SM if meta["JOINT"] else tiles.UNROLLED_WARPS_AN_SM
    elif meta["BANDS"]:
        warps_an_sm = tiles.BANDED_WARPS_AN_SM
    else:
        warps_an_sm = tiles.GROUPED_WARPS_AN_SM
    return max(1, warps_an_sm // tile.num_warps) * sms


def _filling_waves(tile, meta, B, H, W, sms):
    """``tile`` with the strip length ``_strip_rows`` picks for B images of H x W on
    ``sms`` SMs that hold the warps above."""
    k = _strip_rows(H, meta["R"], B * cdiv(W, tile.kwargs["BW"]), _resident(tile, meta, sms))[1]
    return tile_config(**dict(tile.kwargs, K=k), num_warps=tile.num_warps, maxnreg=tile.maxnreg)


def reads_inside(meta):
    """Whether the forward's SLIDE tiles read their columns INSIDE for a launch's ``meta``:
    each thread's columns clamped R from the image's edges, so that a row's loads share one
    address a channel (without it, two integer additions a load), and the R columns at
    each edge stored by programs of their own (``_edge_programs``). Where the offsets
    are unrolled, at radius 4 (H200, 9 x 9 float32 in the 128 x 256 tile: 4K 0.398 ->
    0.3785 ms, 16 x 1080p 1.58 -> 1.495), without a guide, on images more than twice the
    window's radius wide and tall. In the 4-warp tile, at radii 1 to 3 and with a guide it
    was slower (PERFORMANCE.md)."""
    return (meta["UNROLL_DX"] and meta["NEAR"] and meta["R"] > tiles.UNROLLED_TUNED_RADIUS and not meta["JOINT"]
            and _slides(meta))


def _edge_programs(tile, B, H, W, R, resident):
    """The programs, after the strips of ``tile``, that store the R columns at each edge
    under INSIDE: the slots the strips leave idle in their last wave of ``resident``
    programs (0: unknown), and at least enough that none takes over tiles.EDGE_BLOCKS blocks."""
    strips = B * cdiv(H, tile.kwargs["K"]) * cdiv(W, tile.kwargs["BW"])
    idle = -strips % resident if resident else 0
    return max(idle, cdiv(B * H * 2 * R, tile.kwargs["BW"] * tiles.EDGE_BLOCKS))


@functools.lru_cache(maxsize=4096)
def _strip_rows(H, R, lanes, resident):
    """(cost, K): the strip length, a multiple of tiles.STRIP_QUANTUM up to tiles.STRIP_ROWS_MAX, for
    ``lanes`` columns of SLIDE programs (over the batch) on a device that holds
    ``resident`` programs at once. The programs run in waves of ``resident``, each about
    as long as the K + 2R + 1 input rows its strip loads: the cost, waves x (K + 2R + 1),
    is least where the strips fill whole waves with short strips. (H200, 4K, 15 x 15
    uint8, three programs an SM: strips of 128 rows run 1.3 waves, 1.145 ms; of 168 one,
    1.040. PERFORMANCE.md.)"""
    top = min(cdiv(H, tiles.STRIP_QUANTUM) * tiles.STRIP_QUANTUM, tiles.STRIP_ROWS_MAX)
    candidates = range(tiles.STRIP_QUANTUM, top + 1, tiles.STRIP_QUANTUM)
    return min((cdiv(lanes * cdiv(H, k), resident) * (k + 2 * R + 1), k) for k in candidates)


def _rows_within(candidates, vectors_per_row):
    """The tiles ``candidates`` with K capped so that K rows of ``vectors_per_row`` fit
    ROW_VECTORS (duplicates dropped)."""
    k_max = max(1, tiles.ROW_VECTORS // vectors_per_row)
    kept = {}
    for t in candidates:
        kept.setdefault((min(t["K"], k_max), t["BW"], t["num_warps"]), dict(t, K=min(t["K"], k_max)))
    return [tile_config(**t) for t in kept.values()]


def upsample_tile(meta):
    """The joint upsampling's tile for a launch's ``meta``."""
    return _rows_within([tiles.UPSAMPLE_TILE], meta["CV"] + 2 + meta["CG"])[0]


forward_tuning = Tuning(forward_tiles, key=["C", "CG", "R", "DISK", "L1", "JOINT", "BORDER", "NEAR", "PRO", "EPI",
                                            "EXPANDED", "SIZE_CLASS"])


@functools.lru_cache(maxsize=4096)
def forward_plan(B, C, CG, H, W, guide_dtype, radius, disk, l1, joint, border, value_in_unit, adjoint, off64,
                 peak_within, prologue, sms, tile=None):
    """The forward launch for B images of C channels and H x W pixels, guided by CG
    channels of ``guide_dtype`` (the image itself unless ``joint``), on a device of ``sms``
    SMs (0: Triton's interpreter, where each image takes one strip of every column: its
    cost is per operation). ``value_in_unit``: the border is not constant or its value is
    in [0, 1]; ``peak_within`` and ``prologue`` as ``expands`` takes them. ``tile``, a
    ``triton.Config`` of SLIDE, K, BW and num_warps, bypasses the tile choice."""
    meta = dict(C=C, CG=CG, R=radius, DISK=disk, L1=l1, JOINT=joint, BORDER=border, NEAR=2 * radius < min(H, W),
                OFF64=off64, ADJOINT=adjoint, UNROLL_DX=unrolls_columns(radius), DX_GROUP=column_group(radius),
                PREFETCH=prefetches(radius), SIZE_CLASS=size_class(H, W))
    meta["BANDS"] = window_bands(radius, disk)
    meta["EXPANDED"] = expands(guide_dtype, meta, prologue, peak_within, value_in_unit)
    if tile is None and not sms:
        slide = forward_tiles(meta)[0].kwargs["SLIDE"]
        tile = triton.Config(dict(SLIDE=slide, K=H if slide else min(H, 16), BW=pow2_at_least(W, 16, 128)))
    elif tile is None:
        tile = _single_tile(meta)
        if tile is not None:
            tile = _filling_waves(tile, meta, B, H, W, sms)
        if tile is None and adjoint:  # it rewrites y in place, so it cannot be timed over and over: the default
            tile = forward_tiles(meta)[0]
    meta["INSIDE"] = tile is not None and tile.kwargs["SLIDE"] and reads_inside(meta)
    edges = _edge_programs(tile, B, H, W, radius, sms and _resident(tile, meta, sms)) if meta["INSIDE"] else 0
    meta["EDGES"] = edges
    grid = lambda m: (B * cdiv(H, m["K"]) * cdiv(W, m["BW"]) + edges,)
    return Plan(Meta(meta), tile, grid if tile is None else grid(tile.kwargs))


def backward_tile(C, CG, radius, joint):
    """The backward's tile for these channels and radius."""
    position = 3 * C + 1 + (2 * CG if joint else 0)
    if (2 * radius + 1) * position <= tiles.SLIDE_VECTORS:
        return dict(tiles.BACKWARD_SLIDE_TILE)
    return dict(tiles.BACKWARD_ROW_TILE, K=max(1, min(tiles.BACKWARD_ROW_TILE["K"], tiles.ROW_VECTORS // position)))
