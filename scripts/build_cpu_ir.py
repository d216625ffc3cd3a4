"""Write the CPU engine's kernels as LLVM IR into the package: ``python scripts/build_cpu_ir.py``.

A cold first call of an engine op needs its kernel's machine code. numba makes it from
the Python source in two to three and a half seconds of CPU (its import and setup, typing,
lowering, then LLVM); from the IR that numba lowers the kernel into, llvmlite alone makes
the same object in about one (``native.machine_code``; the IR's globals that point into
the compiling process, which numba's lowering leaves, are dead code that its passes
delete, and it checks that they did). So the package ships that IR,
one ``imgfilters/cpu/ir/<kernel>.json.gz`` a kernel: the module of the kernel linked with
its helpers before the module passes, its calling convention (``build.abi``), and what it
applies to (the engine's sources, the target triple, the LLVM version, the ``NUMBA_``
settings: ``native.shipped_ir_applies``). Where it does not apply, numba compiles the
kernel as before.

Run it after changing anything under ``imgfilters/cpu/`` (``tests/test_cpu_engine.py``
fails while the shipped IR is stale), on x86-64 Linux with the llvmlite that a fresh
install brings. It compiles every kernel once (about 25 s). A kernel's symbol carries a
counter of numba's compiles in the process, so adding a kernel renames those after it.
"""
import gzip
import json
import os
import re
import sys
import time

import llvmlite
import llvmlite.binding as llvm
from importlib import metadata

from imgfilters import cpu
from imgfilters.cpu import build, native


def normalised(ir):
    """``ir`` with the addresses of the compiling process that numba's lowering leaves in it
    (``native.process_globals``: dead code, which ``native.machine_code`` checks its passes
    delete) renamed and set to null, so that an unchanged kernel writes the same file."""
    names = {}
    ir = re.sub(r"numba\.dynamic\.globals\.([0-9a-f]+)",
                lambda m: "numba.dynamic.globals." + names.setdefault(m.group(1), str(len(names))), ir)
    return re.sub(r"(@numba\.dynamic\.globals\.[\d.]+ = linkonce global ptr) inttoptr \(i64 \d+ to ptr\)", r"\1 null",
                  ir)


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":  # (numba's lowering orders some allocas by set iteration)
        os.execve(sys.executable, [sys.executable, *sys.argv], dict(os.environ, PYTHONHASHSEED="0"))
    os.makedirs(native.SHIPPED_IR, exist_ok=True)
    kernels = native.kernels()
    names = {f"{k.name}.json.gz" for k in kernels}
    for stale in sorted(set(os.listdir(native.SHIPPED_IR)) - names):
        os.unlink(os.path.join(native.SHIPPED_IR, stale))
        print(f"removed {stale} (no such kernel)")
    for kernel in kernels:
        t = time.perf_counter()
        entry, dispatcher = build.compile_kernel(kernel, keep_ir=True)
        record = dict(format=native.FORMAT, sources=cpu.sources_digest(), signature=kernel.signature,
                      triple=llvm.get_process_triple(), llvm=list(llvm.llvm_version_info), settings=native._settings(),
                      made_by=dict(numba=metadata.version("numba"), llvmlite=llvmlite.__version__),
                      abi={k: entry[k] for k in ("symbol", "args", "layout", "ret_size", "ok")},
                      ir=normalised(build.linked_ir(dispatcher)))
        path = native.shipped_ir_path(kernel)
        with gzip.GzipFile(path + ".tmp", "wb", mtime=0) as f:  # (no timestamp)
            f.write(json.dumps(record, indent=0).encode())
        os.replace(path + ".tmp", path)
        print(f"{kernel.name}: {os.path.getsize(path) / 1e3:.0f} kB ({time.perf_counter() - t:.1f} s)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
