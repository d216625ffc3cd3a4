"""Morphology's GPU tiles (4 warps each), chosen from the sm_90a SASS and the H100's times
(PERFORMANCE.md, "Morphology"): the direct taps' (rows, columns); the van Herk scans'
(elements a tile, the fewest positions along the scanned axis: at least twice the
window); the column march's (output rows, columns: one column a thread); the lanes'
(lanes, outputs a lane, rows a program) for float32 and for stored integers
(``lanes_raw``), the same for a mask's row runs (``runs``) and the one-launch opening
(``pair``). In the interpreter every kernel takes one tile per plane instead."""

TILES = dict(taps=(32, 64), row_scan=(1024, 128), column_scan=(2048, 64), march=(16, 128), lanes=(128, 4, 32),
             lanes_raw=(128, 8, 16), pair=(128, 4, 16), runs=(128, 4, 32))
# pair_kernel's registers a thread: four programs of 128 threads an SM (the compiler's 138
# fit three: the opening 5x5 float32 on 4K RGB took 0.144 ms, capped 0.126, on an H100)
PAIR_REGISTERS = 128
