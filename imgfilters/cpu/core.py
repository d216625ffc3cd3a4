"""Compiled helpers shared by the CPU engine's kernels (conventions: ``imgfilters.cpu``).

Every function here works on rows: 1-D float32 buffers indexed from 0 by plain ``range``
loops, the form that LLVM vectorises (a slice ``buf[k:]`` stands for an offset, so no
index can be negative and numba's wraparound check folds away). The kernels of each
family are compiled for explicit signatures built from the argument types below
(``kernel``); these helpers compile along with them.

Floating point: FMA contraction only (``FASTMATH``). No ``nnan``/``ninf`` (NaN and inf
must propagate as IEEE arithmetic says: ``tests/test_nonfinite.py``), no reassociation
(the order of a sum is the kernel's, and rounding steps stay exact).

Nothing here imports numba: the helpers and kernels are recorded as plain functions
(``jit``, ``intrinsic``, ``kernel``) and their argument types as numba's type strings, so a
process whose kernels are in the disk cache loads their machine code (``native``) without
it; numba compiles them (``build``) on a cache miss only.
"""
import threading

import numpy as np

FASTMATH = {"contract"}
f32 = np.float32


class Lazy:
    """A function that numba compiles when a kernel that calls it compiles (``build``):
    ``how`` is "jit" (a helper, inlined into its callers) or "intrinsic" (numba's
    ``@intrinsic``: LLVM IR of its own). ``py_func`` is the plain function."""

    def __init__(self, py_func, how):
        self.py_func, self.how = py_func, how
        self.compiled = None  # numba's dispatcher, once ``build`` made it
        self.__name__, self.__qualname__, self.__doc__ = py_func.__name__, py_func.__qualname__, py_func.__doc__
        self.__module__ = py_func.__module__

    def __repr__(self):
        return f"<{self.how} {self.__module__}.{self.__qualname__}>"


def jit(fn):
    """A helper compiled with the kernel that calls it."""
    return Lazy(fn, "jit")


def intrinsic(fn):
    """numba's ``@intrinsic`` ``fn(typingctx, *args)``, made when a kernel compiles (its body
    may import numba: it runs in the compiler only)."""
    return Lazy(fn, "intrinsic")


class Kernel:
    """A kernel ``fn(lo, hi, *args)`` compiled for one signature (``cpu.run`` calls it): on
    its first call its machine code is loaded from the disk cache, or made (from the
    shipped IR, or by numba) and cached (``native.function``), once whatever the threads
    that call it."""

    def __init__(self, py_func, arg_types):
        self.py_func = py_func
        self.signature = f"void(int64, int64, {', '.join(arg_types)})"
        self.name = f"{py_func.__module__}.{py_func.__qualname__}"
        self.__doc__ = py_func.__doc__
        self.function = None  # the compiled kernel, a ctypes-backed callable (``native``)
        self._lock = threading.Lock()

    def __call__(self, *args):
        function = self.function
        if function is None:
            with self._lock:
                if self.function is None:
                    from imgfilters.cpu import native
                    self.function = native.function(self)
            function = self.function
        function(args)


def kernel(*arg_types):
    """A kernel ``fn(lo, hi, *args)`` for the argument types ``arg_types`` (numba's type
    strings, as below)."""
    return lambda fn: Kernel(fn, arg_types)


@intrinsic
def lesser(typingctx, a, b):
    """``a if a < b else b`` for two numbers of one type, as one LLVM ``select``: no branch
    in numba's IR (a conditional expression is two more blocks there, and numba's SSA
    passes slow down with blocks times variables: a network of 100 of them took seconds)."""
    return _select(a, b, "<")


@intrinsic
def greater(typingctx, a, b):
    """``b if a < b else a`` as ``lesser``."""
    return _select(a, b, ">=")


def _select(a, b, op):
    from numba import types
    if a != b or not isinstance(a, (types.Integer, types.Float)):
        return None

    def codegen(context, builder, signature, args):
        x, y = args
        if isinstance(a, types.Float):
            # ordered: false with a NaN, as Python's ``<``; ``>=`` is its negation then
            less = builder.fcmp_ordered("<", x, y)
        elif a.signed:
            less = builder.icmp_signed("<", x, y)
        else:
            less = builder.icmp_unsigned("<", x, y)
        return builder.select(less, x, y) if op == "<" else builder.select(less, y, x)
    return a(a, b), codegen


def array(dtype, ndim, layout="C"):
    """numba's type string of an ``ndim``-D array of ``dtype``, ``layout`` "C" (contiguous)
    or "A" (any strides)."""
    dims = [":"] * ndim
    if layout == "C":
        dims[-1] = "::1"
    return f"{dtype}[{', '.join(dims)}]"


# argument types
INT = "int64"
FLOAT = "float32"
ROW = array("float32", 1)  # taps, weights
INDEX = array("int32", 1)  # border maps, tap indices
SLOTS = array("int64", 1)  # tap offsets, ring slots
TABLE = array("float32", 2)
CHAIN = array("float32", 3)  # (C, steps, 4): cpu.chain
IMAGE = (array("uint8", 4, "A"), array("uint16", 4, "A"), array("float32", 4, "A"),
         INT)  # cpu.image_args: u8, u16, f32 planes and the kind


@jit
def shape(xu8, xu16, xf32, kind):
    """(B, C, H, W) of an image argument."""
    if kind == 0:
        return xu8.shape
    if kind == 1:
        return xu16.shape
    return xf32.shape


@jit
def load_row(xu8, xu16, xf32, kind, b, c, i, dst, scale):
    """dst[j] = X[b, c, i, j] * scale for the row's W pixels."""
    if kind == 0:
        src = xu8[b, c, i]
        for j in range(src.shape[0]):
            dst[j] = f32(src[j]) * scale
    elif kind == 1:
        src16 = xu16[b, c, i]
        for j in range(src16.shape[0]):
            dst[j] = f32(src16[j]) * scale
    else:
        srcf = xf32[b, c, i]
        for j in range(srcf.shape[0]):
            dst[j] = srcf[j] * scale


@jit
def store_row(yu8, yu16, yf32, kind, b, c, i, src):
    """Y[b, c, i, :] = src (unit scale): integers rounded half to even and saturated."""
    if kind == 0:
        dst = yu8[b, c, i]
        for j in range(dst.shape[0]):
            v = min(max(src[j] * f32(255.0), f32(0.0)), f32(255.0))
            dst[j] = np.uint8(np.rint(v))
    elif kind == 1:
        dst16 = yu16[b, c, i]
        for j in range(dst16.shape[0]):
            v = min(max(src[j] * f32(65535.0), f32(0.0)), f32(65535.0))
            dst16[j] = np.uint16(np.rint(v))
    else:
        dstf = yf32[b, c, i]
        for j in range(dstf.shape[0]):
            dstf[j] = src[j]


@jit
def reads_input(chain):
    """Whether any channel's epilogue ``chain`` (C, steps, 4) reads the input pixel."""
    for s in range(chain.shape[1]):
        if chain[0, s, 0] == 7:
            return True
    return False


@jit
def apply_chain(buf, xin, n, steps):
    """Run the pointwise ``steps`` ((steps, 4) float32: code and parameters, ``cpu.chain``)
    over ``buf[:n]`` in place; ``xin`` is the input row at the same positions (read by
    unsharp masking only). One loop per step whose body switches on the step's code: a
    loop per code vectorised the affine steps but took 2.5 times as long to compile, and
    is inlined wherever a kernel applies a chain."""
    for s in range(steps.shape[0]):
        code = int(steps[s, 0])
        p0, p1 = steps[s, 1], steps[s, 2]
        for j in range(n):
            x = buf[j]
            if code == 0:  # scale
                x = x * p0
            elif code == 1:  # normalize: x * (1 / std) + (-mean / std)
                x = x * p0 + p1
            elif code == 2:  # clamp
                x = min(max(x, p0), p1)
            elif code == 3:  # quantize: round(clamp(x * n, 0, n)) / n
                x = np.rint(min(max(x * p0, f32(0.0)), p0)) / p0
            elif code == 4:  # gamma: max(x, 0) ** g (NaN stays NaN)
                x = x ** p0 if x > 0 else (x if x != x else f32(0.0))
            elif code == 5:  # sRGB decoding (NaN stays NaN)
                x = max(x, f32(0.0)) if x == x else x
                x = x / f32(12.92) if x <= f32(0.04045) else ((x + f32(0.055)) / f32(1.055)) ** f32(2.4)
            elif code == 6:  # sRGB encoding
                x = max(x, f32(0.0)) if x == x else x
                x = x * f32(12.92) if x <= f32(0.0031308) else f32(1.055) * x ** f32(1 / 2.4) - f32(0.055)
            elif code == 7:  # unsharp masking: buf is the blur
                detail = xin[j] - x
                x = xin[j] + p0 * detail if abs(detail) >= p1 else xin[j]
            buf[j] = x


@jit
def fill(dst, value, n):
    for j in range(n):
        dst[j] = value


@jit
def fill_edges(pad, left, n, edges, value):
    """A row buffer ``pad`` holding a row's ``n`` pixels at ``pad[left:left + n]``: fill its
    ``left`` positions before and ``len(edges) - left`` after from the row, ``edges``
    being the border's ``cpu.edge_map`` (-1: ``value``)."""
    for k in range(edges.shape[0]):
        m = edges[k]
        at = k if k < left else n + k
        pad[at] = pad[left + m] if m >= 0 else value


@jit
def axpy(dst, src, t, n):
    for j in range(n):
        dst[j] += t * src[j]


@jit
def _combine4(dst, a, b, c, d, wa, wb, wc, wd, add, n):
    if add:
        for j in range(n):
            dst[j] += wa * a[j] + wb * b[j] + wc * c[j] + wd * d[j]
    else:
        for j in range(n):
            dst[j] = wa * a[j] + wb * b[j] + wc * c[j] + wd * d[j]


@jit
def combine(dst, ring, slots, weights, count, zeros, n):
    """dst = sum_k weights[k] * ring[slots[k]] over ``count`` rows (at least one), four
    rows a pass (one store of ``dst`` per four rows read); a last pass of fewer rows reads
    ``zeros`` (a row of n zeros, never inf: no NaN from its weight of 0) for the rest.
    One loop body for every count: passes of two and one rows too took twice as long to
    compile, and every kernel inlines its calls."""
    for k in range(0, count, 4):
        a = ring[slots[k]]
        b = ring[slots[k + 1]] if k + 1 < count else zeros
        c = ring[slots[k + 2]] if k + 2 < count else zeros
        d = ring[slots[k + 3]] if k + 3 < count else zeros
        wb = weights[k + 1] if k + 1 < count else f32(0.0)
        wc = weights[k + 2] if k + 2 < count else f32(0.0)
        wd = weights[k + 3] if k + 3 < count else f32(0.0)
        _combine4(dst, a, b, c, d, weights[k], wb, wc, wd, k > 0, n)


@jit
def combine_shifted(dst, src, base, offsets, weights, count, zeros, n, add=False):
    """dst[j] = sum_k weights[k] * src[base + offsets[k] + j] over ``count`` taps (at least
    one), or dst += that with ``add``: a 1-D correlation with scattered taps, four taps a
    pass as ``combine``."""
    for k in range(0, count, 4):
        a = src[base + offsets[k]:]
        b = src[base + offsets[k + 1]:] if k + 1 < count else zeros
        c = src[base + offsets[k + 2]:] if k + 2 < count else zeros
        d = src[base + offsets[k + 3]:] if k + 3 < count else zeros
        wb = weights[k + 1] if k + 1 < count else f32(0.0)
        wc = weights[k + 2] if k + 2 < count else f32(0.0)
        wd = weights[k + 3] if k + 3 < count else f32(0.0)
        _combine4(dst, a, b, c, d, weights[k], wb, wc, wd, add or k > 0, n)
