"""The 2-D filter's GPU tiles: the autotune candidates by vertical radius, from the H200
sweeps in PERFORMANCE.md ("filter2d and the degradations")."""

MAX_RADIUS = 31  # 63 x 63 taps: the pending rows, (2*RY + P) * S a lane, stay in registers


def _tiles(S, P, T, SEG, PRE=(1, 0)):
    """The tile with (1) and without (0) the prefetch of the next tap, as PRE lists them
    (the autotuner picks)."""
    return tuple(dict(T=T, S=S, P=P, SEG=SEG, PRE=pre, num_warps=max(1, T // 32)) for pre in PRE)


# Autotune candidates by vertical radius, from the H200 sweeps in PERFORMANCE.md (a cold
# first call compiles each). The pending rows take (2*ry + P) * S registers a lane; a tap
# load serves P * S FMAs. Wide kernels take one: 16 rows a step with the prefetch won the
# second sweep at 21 x 21 by 7 % and takes 2.5 s to compile, twice the P = 8 tiles.
CANDIDATES = ((3, _tiles(S=1, P=2, T=32, SEG=64)),
              (7, _tiles(S=1, P=8, T=32, SEG=64)),
              (MAX_RADIUS, _tiles(S=1, P=16, T=64, SEG=128, PRE=(1,))))
ALL_TILES = [t for _, tiles in CANDIDATES for t in tiles]


def candidates(ry):
    """The autotune candidates for vertical radius ``ry``; the first is the default."""
    return next(tiles for limit, tiles in CANDIDATES if ry <= limit)
