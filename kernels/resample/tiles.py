"""The resampling family's GPU tiles and strips, measured on the H200 (sm_90) with
Triton 3.6: PERFORMANCE.md holds the sweeps behind each number. The kernels' own limits
(``MAX_REACH``, ``ADJOINT_FACTORS``, ...) stay beside the kernels: they say what a kernel
can do, not how it is tiled."""

# GPU tiles of ``resample_kernel``: output rows, output columns, source rows per chunk,
# warps; SMALL_TILE where TILE leaves most of the GPU idle (a 224 x 224 output: 48 programs
# a plane's 3 channels); and output rows, columns, warps of ``direct_kernel`` (measured on
# the H200, PERFORMANCE.md).
TILE, SMALL_TILE, SMALL_OUTPUT_PROGRAMS = (64, 64, 16, 4), (16, 16, 16, 2), 512
DIRECT_TILE = (2, 256, 4)
# The two-pass path (``resample_rows_kernel`` then ``resample_columns_kernel``, through a
# float32 intermediate of H x WO a plane): None takes it where ``two_pass`` says (downscales
# by TWO_PASS_SHRINK or more on both axes: 4K -> 224 x 224 uint8 0.164 -> 0.093 ms, 4K ->
# 1000 x 1777 float32 0.42 -> 0.154 on the H200); True wherever the intermediate fits
# (tests, probes), False never. Its GPU tiles: source rows, output columns, warps of the
# row pass; output rows, columns, taps a step, warps of the column pass.
TWO_PASS = None
ROWS_TILE, COLUMNS_TILE, TWO_PASS_SHRINK = (32, 32, 4), (2, 256, 4, 2), 2.0
# GPU strips by the source rows a step reads (DY): threads per strip, steps per program,
# warps, source bytes a thread loads a row (its lanes: ``_lanes_per_thread``), and whether
# each step loads the next one's rows before its sums (PRE). Swept on the H200 (eager ms,
# PERFORMANCE.md): x2 uint8 0.031 at 64 x 16 x 2 with four lanes a thread (one: 0.036-0.040);
# x2 float32 0.045-0.046 at 64 x 16 x 2 or 128 x 32 x 4; PRE took 4K -> 1080p antialiased
# from 0.061 to 0.055 (128 x 16 x 4) and imresize x1/4 from 0.083-0.095 to 0.060 (64 x 16 x 2).
STRIPS = {1: (64, 16, 2, 4, False), 2: (128, 16, 4, 4, True), 3: (64, 16, 2, 4, False), 4: (64, 16, 2, 4, True)}
# The adjoint's GPU strip: threads, source rows per program, warps, source columns a thread
# (S: a float32 x2 thread loads its own 2 S gradient columns a row as S / 2 16-byte vectors,
# and 2 more on each side). S = 4 takes 71 registers (S = 8: 141) and 50 instructions a
# source pixel (S = 2: 64). H200, x2 bicubic of 1080p RGB: 52 us (2380 GB/s; S = 2 61-64,
# S = 8 65, S = 1 111; 32 source rows a program 67); one column a thread before: 76-84.
ADJOINT_STRIP = (64, 16, 2, 4)
