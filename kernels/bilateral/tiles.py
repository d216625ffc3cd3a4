"""The bilateral family's tile tables and the device facts its plans use (``plan.py``),
measured on the H200 (sm_90) with Triton 3.6: scripts/sweep_bilateral.py and
PERFORMANCE.md hold the sweeps behind each number."""

# Forward tiles, one column per thread. SLIDE keeps 2R + 1 output rows of C + 1 sums
# and CG guide values live, so it serves windows and channel counts whose slots fit
# SLIDE_VECTORS; K is the strip's length. Otherwise each of K output rows keeps C + 1
# sums and CG guide values, and K shrinks as channels grow (ROW_VECTORS). The sets are
# the best of a sweep on the H200 (scripts/sweep_bilateral.py, PERFORMANCE.md), kept to
# two or three so that a new variant's first call, which compiles each, stays near 3 s.
SLIDE_TILES = [dict(SLIDE=True, K=128, BW=128, num_warps=4), dict(SLIDE=True, K=32, BW=128, num_warps=4),
               dict(SLIDE=True, K=128, BW=256, num_warps=8)]
# Where a column loop step takes several offsets (``column_group``), each tile compiles in
# about 2 s: only the tile that was fastest there in every measured case (15 x 15 on 4K:
# uint8 expanded 1.14 ms against 1.26 and 1.35, the direct form 1.23 against 1.35 and
# 1.48), so that a new variant's first call stays well under 5 s (6.3 s with the three
# SLIDE_TILES tuned, 4.4 s with two); its strips' length K is chosen at launch
# (``_filling_waves``).
GROUPED_TILES = SLIDE_TILES[:1]
# A disk's run-time column loop in bands (``plan.disk_bands``): one tile, its strips'
# length chosen at launch (``_filling_waves``), capped at BANDED_REGISTERS so that three
# programs fit an SM (radius 7, sm_90a: 203 registers uncapped, two programs; 158 capped,
# no spills; 128 spills).
BANDED_REGISTERS = 168
BANDED_TILES = [dict(SLIDE=True, K=128, BW=128, num_warps=4, maxnreg=BANDED_REGISTERS)]
ROW_TILES = [dict(SLIDE=False, K=8, BW=128, num_warps=4), dict(SLIDE=False, K=8, BW=256, num_warps=8)]
SLIDE_VECTORS = 128
ROW_VECTORS = 96
# SLIDE unrolls its column offsets up to this many taps (9 x 9): compile-time taps (-20 %
# instructions at 9 x 9, -38 % for a disk), but a body 2R + 1 times longer to compile
# (about 2 s at radius 4 on the H200's host). Two tiles, tuned up to radius
# UNROLLED_TUNED_RADIUS but SIZED_TILE_RADIUS (4K 5 x 5, PREFETCH: 128 x 256 0.150 ms, 72 x 128 0.159); beyond
# it one (``_single_tile``), so that a new variant's first call stays under 5 s: the first
# (with the columns read INSIDE, ``reads_inside``), its strips' length chosen at launch
# (``_filling_waves``), and with a guide the second, since the
# guide's vectors take the wide tile to 172 registers, one program an SM (joint 9 x 9:
# 0.619 and 0.491).
UNROLLED_TAPS = 81
# Up to this radius SLIDE loads each input row one step ahead (``PREFETCH``: a 5 x 5
# window's warps spent 38 % of their cycles waiting on loads); beyond it the loads'
# registers would cost programs an SM (199 at radius 4), and the compile time doubles.
PREFETCH_RADIUS = 2
# Column offsets a step of the run-time column loop (wider windows), where they divide 2R + 1:
# three offsets' taps a step give a warp three times the independent work, which the two or
# three warps a scheduler that these registers allow need (five: slower, and 1.7x the compile).
COLUMN_GROUP = 3
UNROLLED_TILES = [dict(SLIDE=True, K=128, BW=256, num_warps=8), dict(SLIDE=True, K=72, BW=128, num_warps=4)]
UNROLLED_TUNED_RADIUS = 3
# SIZED_TILE_RADIUS (3, the default window of sigma_space 1.5) compiles one of the two
# (both took its cold first call, 720p float32, to 5.8-6.0 s of CPU on the H200's host,
# over the 5 s bound): the first on planes of WIDE_TILE_SIZE_CLASS (4K) and more, where it won by 0.5-6 %
# (H100, ms: float32 0.2518 against 0.2533, uint8 0.2703 / 0.2863, disk l1 uint8 0.2016 /
# 0.2039, joint with a grey guide 0.2093 / 0.2227, a colour one 0.2855 / 0.2937), the second
# below (720p float32 0.0835 against 0.1521, 16 x 1080p 0.9356 / 1.0257).
SIZED_TILE_RADIUS, WIDE_TILE_SIZE_CLASS = 3, 23


# Warps an SM holds of the kernels whose tile ``_single_tile`` picks before they are
# compiled (Triton 3.6, sm_90a): the unrolled radius-4 one 16 (127 registers a thread), 12
# with a guide (168: three programs of 4 warps), the grouped column loop's 12 (164 to 168
# at radius 7), the disk's bands 12 (BANDED_REGISTERS).
UNROLLED_WARPS_AN_SM, GUIDED_WARPS_AN_SM, GROUPED_WARPS_AN_SM = 16, 12, 12
BANDED_WARPS_AN_SM = 12
# Strip lengths ``_filling_waves`` chooses from: multiples of STRIP_QUANTUM (each compiles
# once) up to STRIP_ROWS_MAX. (The wave count is not all: 16 x 1080p at 9 x 9 in one wave
# of 540-row strips took 1.593 ms, in five waves of 99 rows 1.515, where waves x rows
# differ by 2 %.)
STRIP_QUANTUM, STRIP_ROWS_MAX = 8, 256


# An edge program takes at most this many blocks of lanes (BW edge pixels each, a run-time
# loop over the window each): about a quarter of a strip's time at 9 x 9.
EDGE_BLOCKS = 16


# The joint upsampling's tile: K output rows x BW columns of CV channels, each row keeping
# CV + 2 sums and CG guide values live: K shrinks as channels grow (ROW_VECTORS). The best
# of a sweep on the H200 (x4 to 4K, radius 2, PERFORMANCE.md): 6 x 256 (two columns a
# thread) 0.388 ms; 8 x 128 0.415, 12 rows and more or 4 rows 0.43-0.56. (Tuned against
# 8 x 128 until the two compiles took a cold first call over its 5 s: 5.2 s of CPU on the
# H200's host.)
UPSAMPLE_TILE = dict(K=6, BW=256, num_warps=4)
UPSAMPLE_CHANNELS = 4  # value channels a program: more are split over programs


# Backward tiles, fixed: the backward runs once per training step, and tuning would compile
# every candidate on the first call. A position keeps 3C + 1 vectors (2CG more with a
# guide): SLIDE where 2R + 1 of them fit SLIDE_VECTORS, else rows of as many as ROW_VECTORS
# holds.
BACKWARD_SLIDE_TILE = dict(SLIDE=True, K=64, BW=128, num_warps=4)
BACKWARD_ROW_TILE = dict(SLIDE=False, K=8, BW=128, num_warps=4)
