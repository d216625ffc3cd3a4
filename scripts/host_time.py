"""Host time of a call, on a machine without a GPU: the GPU path's Python, launches stubbed.

    python scripts/host_time.py [--calls N] [--repeats N]

A GPU call's host time is what the kernel of a small image waits for. Here every call
takes the path it takes on a GPU (argument checks, plans, tiles, the launcher and its
compiled-kernel cache) on CPU tensors, and only Triton's two device steps are stubbed:
the compile (``JITFunction.run`` returns a stand-in for the compiled kernel, whose
launcher does what Triton's ``CompiledKernel.__getitem__`` runner does but call the
driver) and the driver's stream and device queries; the kernels' modules see no
interpreter, and the H200's SM count (132).
Prints the median and the lowest of ``--repeats`` loops of ``--calls`` calls each, in us
a call.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.pop("TRITON_INTERPRET", None)  # the compiled kernels' path (set before triton is imported)
os.environ["IMGFILTERS_AUTOTUNE"] = "0"  # a family's default tile: nothing to time without a GPU

import torch  # noqa: E402
import triton  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

SMS = 132


class _Compiled:
    """Stands for a ``CompiledKernel``: its ``[grid](*args, stream=)`` returns a runner
    that does what Triton's does before the driver's launch."""

    function, packed_metadata = 0, ()

    def run(self, *args):
        pass

    def launch_metadata(self, grid, stream, *args):
        return None

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            self.run(grid[0], grid[1], grid[2], stream, self.function, self.packed_metadata,
                     self.launch_metadata(grid, stream, *args), None, None, *args)
        return runner


class _Driver:
    def get_current_device(self):
        return -1  # a CPU tensor's get_device()

    def get_current_stream(self, device=None):
        return 0


def stub():
    """Route the GPU path onto CPU tensors, with the device steps stubbed."""
    JITFunction.run = lambda self, *args, grid, warmup, **kwargs: _Compiled()
    triton.runtime.driver.set_active(_Driver())
    torch.cuda.current_device = lambda: -1
    from imgfilters import _image
    import imgfilters.ops  # noqa: F401 (every family, so that each module's sm_count is patched)
    _image.uses_kernels = lambda img: img.dtype != torch.float64
    _image.uses_cpu_engine = lambda img: False
    for name, module in list(sys.modules.items()):
        if name.startswith("imgfilters.kernels"):
            if hasattr(module, "sm_count"):
                module.sm_count = lambda device: SMS
            if hasattr(module, "interpreting"):  # (a CPU tensor on the kernels' path is the interpreter's)
                module.interpreting = lambda: False


def calls():
    import imgfilters
    g = torch.Generator().manual_seed(0)
    u8 = (torch.rand(1, 3, 64, 64, generator=g) * 255).round().to(torch.uint8)
    f32 = torch.rand(1, 3, 64, 64, generator=g)
    return {
        "bilateral 5x5 float32": lambda: imgfilters.bilateral(f32, 0.1, 1.5, radius=2),
        "bilateral 5x5 uint8": lambda: imgfilters.bilateral(u8, 0.1, 1.5, radius=2),
        "gaussian_blur 5x5 uint8": lambda: imgfilters.gaussian_blur(u8, 5, 1.0),
        "gaussian_blur 15x15 float32": lambda: imgfilters.gaussian_blur(f32, 15, 3.0),
        "upsample x2 bicubic uint8": lambda: imgfilters.upsample(u8, 2.0, mode="bicubic"),
        "upsample x2 bilinear uint8": lambda: imgfilters.upsample(u8, 2.0, mode="bilinear"),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    stub()
    for name, call in calls().items():
        call()  # plans, compiled-kernel cache
        loops = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            loops.append((time.perf_counter() - start) / args.calls * 1e6)
        print(f"{name:30s} {statistics.median(loops):6.1f} us (lowest {min(loops):5.1f})")


if __name__ == "__main__":
    main()
