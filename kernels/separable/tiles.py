"""The separable family's tile tables and measured constants, measured on the H200
(sm_90) with Triton 3.6: PERFORMANCE.md holds the sweeps behind each number. (The strip's
tile is a function of the radii, ``strip.strip_config``, from the same sweep;
``INTERPRETER_RING_MAX`` is the interpreter's bound, ``strip_fits``.)"""
import triton.language as tl

# separable_kernel's horizontal tap loop is unrolled up to this many taps and runs as a loop
# beyond (the taps' sum, a scalar once per tile, is always a loop). Unrolled, 5 and 15 taps
# ran 1.3x and 1.09x faster on the H200; but LLVM took 14-18 s to compile one variant of
# 31 taps and 80-100 s of 127, and the unrolled loads spill registers.
UNROLL_TAPS = tl.constexpr(15)

# Candidate tiles, and how many programs of each fit on one SM: the register count bounds
# residency, and a persistent grid larger than what is resident runs as extra waves.
# Registers as ptxas reports them for sm_90 with the JIT's specialisation (aligned
# pointers), the worse of float32 and uint8, 15 taps: 255, 80 and 105 (31 taps, when they
# were still unrolled: 255, 128, 163). The unrolled tap loop hoists its loads, so 8 pixels
# a thread is what keeps a tile near 100 registers; 16 (the 970f89a set, measured in
# PERFORMANCE.md) reached 166-255.
TILES = [dict(BH=64, BW=32, num_warps=8), dict(BH=32, BW=64, num_warps=8), dict(BH=16, BW=128, num_warps=4)]
RESIDENT_PER_SM = {(64, 32): 3, (32, 64): 2, (16, 128): 2}
# TILES[0] (the default) has the lowest registers at every tap count measured; 1.25x halo rows at 15 taps

RING_MAX = 31  # vertical radius up to which the pending output rows fit in registers
INTERPRETER_RING_MAX = 15

# Radii (the larger of the two) that run as banded products on the tensor cores: wide
# filters, whose horizontal taps the strip would read as shifted L1 loads (PERFORMANCE.md).
PRODUCT_RADII = range(20, 33)
PRODUCT_TILE = dict(B=64, SEG=256, num_warps=4)  # radii up to B // 2 (H200 sweep: PERFORMANCE.md)
