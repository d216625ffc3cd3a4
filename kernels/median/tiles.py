"""The median family's GPU tiles: the autotune candidates of ``median_kernel`` by window
side (the first the default), and the one tile of the columns and of the nibbles (a cold
call compiles once)."""
from .common import MAX_SIZE, NETWORK_SIZE


def _tile(BH, BW, num_warps):
    return dict(BH=BH, BW=BW, num_warps=num_warps)


# Candidate tiles (the first is the default): the keys of a kept window take K*K
# registers per output a lane holds, so small windows take small tiles per lane.
CANDIDATES = ((3, (_tile(16, 64, 4), _tile(8, 128, 4), _tile(4, 128, 4), _tile(32, 64, 8))),
              (5, (_tile(4, 128, 4), _tile(8, 64, 4), _tile(16, 64, 8), _tile(4, 64, 2))),
              (NETWORK_SIZE, (_tile(4, 64, 4), _tile(8, 32, 4), _tile(4, 32, 2))),
              (MAX_SIZE, (_tile(8, 64, 4), _tile(16, 64, 8))))
ALL_TILES = [t for _, tiles in CANDIDATES for t in tiles]
# ``columns_kernel``'s: BW lanes of S outputs marching down SEG rows. More outputs a lane
# share more columns, but cost registers and compile time: 5 x 5 at S = 8 took 5 s to
# compile for sm_90a (1.7 at S = 4). One tile a size, so that a cold call compiles once
# (timing two made a float32 5 x 5 first call 5.3 s of CPU): on the H100 (4K RGB uint8)
# 3 x 3 at S = 8 0.056 ms against 0.064 at S = 4 and 0.072 at S = 2, 5 x 5 at S = 4 0.236
# against 0.255 at S = 2.
COLUMN_CANDIDATES = {3: (dict(BW=128, S=8, SEG=16, num_warps=4),), 5: (dict(BW=128, S=4, SEG=32, num_warps=4),)}
COLUMN_TILES = [t for tiles in COLUMN_CANDIDATES.values() for t in tiles]
# ``nibbles_kernel``'s: BW lanes of one output column marching down SEG rows; each program
# first loads the 2R rows above its first output row. One candidate, so that a cold call
# compiles once: on the H100 (4K RGB uint8) 64 lanes in 2 warps ran exactly as fast (15 x
# 15 2.747 ms, 9 x 9 1.329) and SEG = 32 3-6 % slower.
NIBBLE_TILES = (dict(BW=128, SEG=64, num_warps=4),)
# uint8 windows by nibbles (the counts of K*K <= 225 values fit a byte), the default for
# them: 7 x 7 0.905 ms against the network's 1.160 (H100)
NIBBLE_SIZES = range(7, 16)

