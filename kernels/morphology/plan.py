"""How a morphology pass runs, from plain values: which shape of work a mask takes
(``plan``) and which rectangles, openings and row runs fit one launch."""
import functools

MAX_SIDE = 63  # a mask's sides
MAX_RECT = 1023  # an all-True mask after OpenCV's enlargement for iterations
DIRECT_TAPS = 25  # masks of at most this many positions: one launch reading the image
MARCH_HEIGHT = 31  # column windows up to this: ``march_kernel``; taller: the scans
MARCH_WIDTH = 31  # row windows up to this: ``lanes_kernel``; wider: the scans
# Rectangles up to LANES_HEIGHT x LANES_WIDTH: one launch of ``lanes_kernel`` (each output
# takes the min of HEIGHT rows' minima: tall windows want the column march's van Herk)
LANES_HEIGHT = 7
LANES_WIDTH = 15
# Openings and closings of float pixels by rectangles up to PAIR_SIDE a side with the
# default border: one launch of ``pair_kernel`` (stored integers, whose passes are
# compute-bound, run faster as two ``lanes_kernel`` passes: PERFORMANCE.md)
PAIR_SIDE = 5


@functools.lru_cache(maxsize=256)
def plan(rows, kw, ay, ax):
    """How a pass by the mask whose rows are the bit sets ``rows`` (bit v: column v) and
    ``kw`` columns, anchored at (ay, ax), runs: ("direct", taps), ("rect",) or ("runs",
    lengths, taps), taps as (du, dv, d) triples (du, dv relative to the anchor for direct
    taps; for runs dv is the run's first column, d the index of its length)."""
    kh = len(rows)
    cells = [(u, v) for u in range(kh) for v in range(kw) if rows[u] >> v & 1]
    if len(cells) == kh * kw:
        return ("rect",)
    if len(cells) <= DIRECT_TAPS:
        return ("direct", tuple((u - ay, v - ax, 0) for u, v in cells))
    runs = []
    for u in range(kh):
        v = 0
        while v < kw:
            if rows[u] >> v & 1:
                a = v
                while v < kw and rows[u] >> v & 1:
                    v += 1
                runs.append((u, a, v - a))
            else:
                v += 1
    lengths = tuple(sorted({w for _, _, w in runs}))
    return ("runs", lengths, tuple((u - ay, a, lengths.index(w)) for u, a, w in runs))



def pairs(kh, kw, raw):
    """Whether the opening or closing by a kh x kw rectangle (default border) is one
    launch of ``pair_kernel``; ``raw``: the pixels load as stored integers (an integer
    image without a prologue)."""
    return not raw and kh <= PAIR_SIDE and kw <= PAIR_SIDE


def lanes(kh, kw):
    """Whether a kh x kw rectangle is one launch of ``lanes_kernel``."""
    return kh <= LANES_HEIGHT and kw <= LANES_WIDTH


def row_launches(lengths):
    """The launches of a mask's runs' row pass (``lengths`` ascending): one
    ``runs_kernel`` for all of them up to ``MARCH_WIDTH``, else one a length."""
    return 1 if lengths[-1] <= MARCH_WIDTH else len(lengths)


def one_march(kh, kw):
    """Whether a kh x kw rectangle is one launch (``lanes_kernel``, or ``march_kernel``
    for one column), no buffer."""
    return kw == 1 or lanes(kh, kw)
