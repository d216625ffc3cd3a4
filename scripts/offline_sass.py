"""Compile a kernel for the H200 (sm_90a) on a machine without a GPU, and report what the
GPU machine's compiler makes of it: compile time, registers, spills and the SASS
instruction mix. Device time is scarce; this answers "does it compile, how many
registers, how many instructions a tap" for free, with the Triton installed beside torch
(the kernels' modules import torch; for the GPU machine's Triton 3.6, its wheel for this
Python unpacked into a folder put first on ``PYTHONPATH``, beside the installed torch).
``tests/test_offline_compile.py`` runs it with the CPU suite's Triton, where the
interpreter compiles nothing.

    python scripts/offline_sass.py "R=4" "R=7,dtype='uint8',K=128,BW=256,nw=8" [--sass out.txt]
    python scripts/offline_sass.py "nibbles:K=15" "columns:K=5,dtype='float32'" "opening:S=2" "runs:S=8"
    python scripts/offline_sass.py "noise:POISSON=True" "levels:"
    python scripts/offline_sass.py "models:G=3,VJP=True" "box:P=12,APPLY_G=3,VJP=True"
    python scripts/offline_sass.py --call "imgfilters.gaussian_blur(image((1, 3, 2160, 3840), 'uint8'), 15, 3.0)"

Each case is keyword arguments of one of ``CASES`` (``family:arguments``; the family
``bilateral`` when none is named): the forward bilateral and non-local means kernels on
4K, the median's nibbles and sorted columns, the one-launch opening, a mask's row runs,
the gradient magnitude and the noise kernels on 1x3x1024x1536
(the cold-call tests' image; these kernels compile the same for any size), the guided
filter's models and sliding box on 4K; or, with
``--call``, every kernel a call launches on the H200's path (``call_cases``). Triton's
launcher is fed stand-ins for the driver and for tensors (only their dtype and a 16-byte
aligned address matter to the compiler), and ptxas/cuobjdump come with Triton's wheel.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp())

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import get_ptxas  # noqa: E402
from triton.runtime import driver  # noqa: E402


class _Dtype:
    """What Triton reads of a torch dtype: its name."""
    __module__ = "torch"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


_DTYPES = {}


class Tensor:
    """A stand-in for a tensor argument: a dtype and a 16-byte aligned address."""

    def __init__(self, dtype):
        self.dtype = _DTYPES.setdefault(dtype, _Dtype(dtype))

    @staticmethod
    def data_ptr():
        return 0

    @staticmethod
    def ptr_range():
        return 0


class _Driver:
    """The active driver, as far as compiling goes: one H200."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self):
        return None


driver.set_active(_Driver())


def compile_sm90(kernel, args, meta, num_warps):
    """(seconds, ptxas report, SASS text) of ``kernel`` compiled for sm_90a (``meta`` may
    hold the launch option ``maxnreg``, which the PTX carries to ptxas)."""
    t = time.time()
    compiled = kernel.warmup(*args, grid=(1,), num_warps=num_warps, num_stages=1, **meta)
    seconds = time.time() - t
    tools = os.path.dirname(get_ptxas(90).path)
    with tempfile.TemporaryDirectory() as d:
        ptx, obj = os.path.join(d, "k.ptx"), os.path.join(d, "k.o")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        report = subprocess.run([get_ptxas(90).path, "-v", "--gpu-name=sm_90a", ptx, "-o", obj],
                                capture_output=True, text=True).stderr
        sass = subprocess.run([os.path.join(tools, "cuobjdump"), "--dump-sass", obj],
                              capture_output=True, text=True).stdout
    return seconds, report, sass


def instruction_mix(sass):
    """Opcode counts of a SASS listing, most frequent first."""
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line)
        if m:
            ops[m.group(1)] += 1
    return ops


def bilateral_case(dtype="float32", C=3, R=4, DISK=False, L1=False, JOINT=False, CG=3, SLIDE=True, K=128,
                   BW=128, nw=4, EXPANDED=False, INSIDE=False, BANDS=None, maxnreg=None):
    """The forward bilateral kernel's arguments for a 4K image of C channels (``BANDS``:
    the plan's for a disk, unless given; ``maxnreg``: the tile's register cap)."""
    from kernels import bilateral
    H, W = 2160, 3840
    x, f = Tensor(dtype), Tensor("float32")
    strides = (C * H * W, H * W, W, 1)
    args = (x, x, x, f, f, H, W, strides, strides, strides, 0.0, (), (), (), ())
    meta = dict(C=C, CG=CG if JOINT else C, R=R, DISK=DISK, L1=L1, JOINT=JOINT, BORDER=0, NEAR=True, OFF64=False,
                ADJOINT=False, UNROLL_DX=bilateral.unrolls_columns(R), DX_GROUP=bilateral.column_group(R),
                PREFETCH=bilateral.prefetches(R), EXPANDED=EXPANDED, INSIDE=INSIDE, SIZE_CLASS=23, EDGES=0,
                BANDS=bilateral.window_bands(R, DISK) if BANDS is None else BANDS,
                SLIDE=SLIDE, K=K, BW=BW, **({} if maxnreg is None else dict(maxnreg=maxnreg)))
    return bilateral.bilateral_kernel, args, meta, nw


def _image_args(dtype, H=1024, W=1536, C=3):
    """A stand-in image and its (C, H, W, batch, channel and row strides) arguments."""
    return Tensor(dtype), (C, H, W, C * H * W, H * W, W)


def nibbles_case(K=15, BW=128, SEG=64, nw=4):
    """The median's ``nibbles_kernel`` (uint8)."""
    from kernels.median import nibbles
    x, (C, H, W, *strides) = _image_args("uint8")
    args = (x, x, C, H, W, *strides, *strides, 0.0, (), ())
    meta = dict(K=K, SXW=1, SYW=1, BORDER=0, OFF64=False, NEAR=True, SIZE_CLASS=20, BW=BW, SEG=SEG)
    return nibbles.nibbles_kernel, args, meta, nw


def columns_case(K=5, dtype="uint8", BW=128, S=4, SEG=32, nw=4):
    """The median's ``columns_kernel`` (sorted columns, 3 x 3 and 5 x 5)."""
    from kernels.median import columns, common
    x, (C, H, W, *strides) = _image_args(dtype)
    args = (x, x, C, H, W, *strides, *strides, 0.0, (), (), (), ())
    meta = dict(K=K, SXW=1, SYW=1, BORDER=0, OFF64=False, KEY=common.RAW if dtype == "uint8" else common.FLOAT,
                NEAR=True, SIZE_CLASS=20, BW=BW, S=S, SEG=SEG)
    return columns.columns_kernel, args, meta, nw


def opening_case(K=5, BW=128, S=4, SEG=16, nw=4, maxnreg=None):
    """Morphology's ``pair_kernel``: the opening of a float32 image by a K x K rectangle
    (``maxnreg``: the registers' cap, default ``morphology.tiles.PAIR_REGISTERS``)."""
    import math
    from kernels.morphology import common, marching, tiles
    x, (C, H, W, *strides) = _image_args("float32")
    args = (x, x, x, C, H, W, -(K // 2), -(K // 2), *strides, *strides, *strides, -math.inf, (), (), (), ())
    meta = dict(HEIGHT=K, KW=K, SXW=1, SYW=1, SZW=1, OFF64=False, DILATE=False, SOURCE=common.IMAGE.value,
                SUB=0, Z_INPUT=False, BW=BW, S=S, SEG=SEG, maxnreg=maxnreg or tiles.PAIR_REGISTERS)
    return marching.pair_kernel, args, meta, nw


def runs_case(LENGTHS=(1, 9, 11, 13, 15), BW=128, S=8, SEG=16, nw=4):
    """Morphology's ``runs_kernel``: a mask's row runs (default the 15 x 15 ellipse's) on
    stored uint8 into its stacked buffer."""
    from kernels.morphology import common, marching
    x, (C, H, W, *strides) = _image_args("uint8")
    WO = W + LENGTHS[-1] - 1
    args = (x, x, C, H, W, WO, -(LENGTHS[-1] // 2), *strides, C * H * WO, C * H * WO, H * WO, WO, 0.0, (), ())
    meta = dict(LENGTHS=LENGTHS, SXW=1, SYW=1, BORDER=0, NEAR=True, OFF64=False, DILATE=True,
                SOURCE=common.RAW.value, BW=BW, S=S, SEG=SEG)
    return marching.runs_kernel, args, meta, nw


def gradient_case(R=1, dtype="float32", DIRECTION=False, nw=4):
    """``gradient.gradient_kernel`` (Sobel 3 x 3 when R = 1) on the lanes of ``gradient.TILE``."""
    from kernels import gradient
    x, (C, H, W, *strides) = _image_args(dtype)
    f = Tensor("float32")
    args = (x, f, f, f, C, H, W, *strides, *strides, C * H * W, 0.0)
    bw, s, seg = gradient.TILE
    meta = dict(R=R, SXW=1, SYW=1, BORDER=0, NEAR=True, OFF64=False, DIRECTION=DIRECTION, BW=bw, S=s, SEG=seg)
    return gradient.gradient_kernel, args, meta, nw


def noise_case(POISSON=True, dtype="float32", nw=4):
    """``add_noise.noise_kernel``: Gaussian or Poisson noise added to a float32 image."""
    from kernels import add_noise
    x, (C, H, W, *strides) = _image_args(dtype)
    f, g, s = Tensor("float32"), Tensor("bool"), Tensor("int64")
    args = (x, x, f, g, s, Tensor("int32"), 1.0, C, H, W, *strides, *strides, 1, 1)
    meta = dict(POISSON=POISSON, CLIP=True, SXW=1, SYW=1, OFF64=False,
                BLOCK=add_noise.POISSON_BLOCK if POISSON else add_noise.BLOCK)
    return add_noise.noise_kernel, args, meta, nw


def levels_case(dtype="float32", nw=4):
    """``add_noise.levels_kernel``: the 8-bit levels an image and its luma hold."""
    from kernels import add_noise
    x, (C, H, W, *strides) = _image_args(dtype)
    args = (x, Tensor("int32"), C, H, W, *strides)
    return add_noise.levels_kernel, args, dict(SXW=1, OFF64=False, BLOCK=add_noise.LEVELS_BLOCK), nw


def nlm_case(C=3, P=7, R=10, dtype="float32", TH=8, S=1, LANES=32, nw=1):
    """``nlm.nlm_kernel`` on a 4K image of C channels (patch P, search radius R; the tile
    ``nlm.TILE``'s by default)."""
    from kernels import nlm
    H, W = 2160, 3840
    x, f = Tensor(dtype), Tensor("float32")
    strides = (C * H * W, H * W, W, 1)
    args = (x, x, f, f, H, W, *strides, *strides, 0.0, (), (), (), ())
    meta = dict(C=C, P=P, R=R, BORDER=0, OFF64=False, RAW=dtype == "uint8", TH=TH, S=S, LANES=LANES)
    return nlm.nlm_kernel, args, meta, nw


def models_case(G=3, C=3, R=8, dtype="float32", VJP=False, BLOCK=128, nw=2):
    """``guided.models_kernel`` on a 4K image of C channels and a guide of G, radius R
    (under VJP with eps's gradient)."""
    from kernels import guided
    H, W = 2160, 3840
    x, f = Tensor(dtype), Tensor("float32")
    args = (x, x, f, f, f, f, H, W, 0, H, 1, (C * H * W, H * W, W, 1), (G * H * W, H * W, W, 1))
    meta = dict(R=R, G=G, C=C, BORDER=0, NEAR=True, VJP=VJP, EPS_GRAD=VJP, OFF64=False, BLOCK=BLOCK, SEG=64)
    return guided.models_kernel, args, meta, nw


def box_case(P=12, APPLY_G=3, VJP=False, R=8, BORDER=0, BLOCK=128, nw=2):
    """``sliding.box_kernel`` over P float32 planes of 4K (the guided filter's output for a
    guide of APPLY_G channels, or under VJP its gradients; else the means)."""
    from kernels import sliding
    H, W = 2160, 3840
    f = Tensor("float32")
    strides = (3 * H * W, H * W, W, 1)
    args = (f, f, f, f, f, H, W, 0, H, 0, W, (P * H * W, H * W, W), (P * H * W, H * W, W, 1), strides, strides)
    meta = dict(R=R, P=P, APPLY_G=APPLY_G, VJP=VJP, BORDER=BORDER, NEAR=True, OFF64=False, BLOCK=BLOCK, SEG=64)
    return sliding.box_kernel, args, meta, nw


CASES = {"bilateral": bilateral_case, "nlm": nlm_case, "nibbles": nibbles_case, "columns": columns_case,
         "opening": opening_case, "runs": runs_case, "noise": noise_case, "levels": levels_case,
         "gradient": gradient_case, "models": models_case, "box": box_case}


def call_cases(expression):
    """The kernels that ``expression``, a call of ``imgfilters`` on images made by
    ``image(shape, dtype="float32")``, launches on the H200's path, as (name, kernel, args,
    meta, num_warps): ``host_time``'s stubs take the GPU path (plans for 132 SMs, no
    autotuning) on CPU tensors, and each kernel's first launch is recorded instead of
    compiled; its tensors become stand-ins."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from triton.runtime.jit import JITFunction

    import host_time
    compile_run = JITFunction.run
    host_time.stub()
    launches = []

    def record(self, *args, grid, warmup, **kwargs):
        launches.append((self, args, kwargs))
        return host_time._Compiled()

    def stand_in(a):
        if isinstance(a, torch.Tensor):
            return Tensor(str(a.dtype).rpartition(".")[2])
        return tuple(map(stand_in, a)) if type(a) is tuple else a

    JITFunction.run = record
    try:
        import imgfilters
        eval(expression, {"imgfilters": imgfilters, "torch": torch,
                          "image": lambda shape, dtype="float32": torch.zeros(shape, dtype=getattr(torch, dtype))})
    finally:
        JITFunction.run = compile_run
        driver.set_active(_Driver())
    cases = []
    for kernel, args, kwargs in launches:
        num_warps = kwargs.pop("num_warps", 4)
        kwargs.pop("num_stages", None)
        cases.append((kernel.fn.__name__, kernel, stand_in(args), kwargs, num_warps))
    return cases


def main():
    argv = sys.argv[1:]
    options = {o: argv[argv.index(o) + 1] for o in ("--sass", "--call") if o in argv}
    cases = [a for a in argv if not a.startswith("--") and a not in options.values()]
    sass_out = options.get("--sass")
    print(f"# triton {triton.__version__}, sm_90a")
    compiles = []
    for case in cases:
        family, _, arguments = case.rpartition(":")
        compiles.append((case, *CASES[family or "bilateral"](**eval(f"dict({arguments})"))))
    if "--call" in options:
        compiles += call_cases(options["--call"])
    for i, (case, kernel, args, meta, num_warps) in enumerate(compiles):
        seconds, report, sass = compile_sm90(kernel, args, meta, num_warps)
        regs = re.findall(r"Used (\d+) registers", report)
        spills = re.findall(r"(\d+) bytes spill stores", report)
        mix = instruction_mix(sass)
        print(f"{case:40s} {seconds:5.1f} s  registers {regs}  spill stores {spills} B  "
              f"{sum(mix.values())} SASS: {mix.most_common(8)}", flush=True)
        if sass_out:  # (several kernels: one file each, numbered)
            with open(sass_out if len(compiles) == 1 else f"{sass_out}.{i}", "w") as f:
                f.write(sass)


if __name__ == "__main__":
    main()
