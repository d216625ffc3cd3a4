"""The CPU engine's kernels as machine code on disk, loaded without numba (conventions:
``imgfilters.cpu``, "First calls").

On a cache miss a kernel's object code (what numba's own cache would store) is made from
the LLVM IR the package ships (``from_shipped_ir``: numba's module passes and codegen
through llvmlite, no numba), or where that IR does not apply numba compiles it
(``build``); the object, its symbol and how its arguments flatten into numba's native
calling convention (read from numba's data model when the IR was made) go into a file
under ``cpu.cache_dir()``, with a trampoline compiled from them (``trampoline``). A warm
process loads both objects with llvmlite's MCJIT and calls the trampoline through ctypes
(which releases the GIL for the call, as ``run``'s threads need): no numba import, no
typing, no target setup. The file's name and contents are keyed on the kernel, its
signature, the host CPU and its features, the numba and llvmlite versions and the
``NUMBA_`` settings and numpy's array struct (the folder already on the engine's
sources), its payload checked by a digest: a stale or damaged file is never run, and any
failure to load falls back to making the object anew. The object's undefined symbols (libm's, such as
``powf``) are listed at compile time and each must resolve in this process before the
object loads (MCJIT aborts the process on an unresolved one).
"""
import ctypes
import functools
import gzip
import hashlib
import json
import os
import pickle
import struct
import sys
import tempfile
import threading

import numpy as np

from imgfilters import cpu

FORMAT = 1  # of the files below
MAGIC = b"imgfilters-cpu-kernel\n"
TRAMPOLINE = "imgfilters_cpu_call"  # (``trampoline``)
# the LLVM types of the kernels' flattened arguments that the trampoline passes on
SCALARS = ("ptr", "i64", "i32", "i16", "i8", "float", "double")
# the members of numba's array data model, in the order of ``build.abi``'s layout: what the
# trampoline passes (``trampoline``): no meminfo (no runtime: ``_nrt=False``) nor
# parent object, the item count, item size, data pointer, shape and strides
FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data", "shape", "strides")

# The kernels' LLVM IR shipped with the package (``scripts/build_cpu_ir.py``)
SHIPPED_IR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ir")

_LOCK = threading.Lock()  # one load or compile at a time (the kernels' own locks: one each)


def function(kernel):
    """``kernel`` (a ``core.Kernel``) compiled: a function of its arguments' tuple, loaded
    from the disk cache, else made from the shipped IR or compiled by numba, and cached."""
    key = _key(kernel.name, kernel.signature)
    path = os.path.join(cpu.cache_dir(), f"{kernel.name}-{hashlib.sha1(repr(key).encode()).hexdigest()[:16]}.kernel")
    with _LOCK:
        entry = _read(path, key)
        if entry is not None:
            try:
                return _bind(kernel.name, entry, *_load(entry))
            except Exception:  # (any failure to load: compile it anew)
                pass
        entry, dispatcher, loaded = from_shipped_ir(kernel), None, None
        if entry is not None:
            try:
                loaded = _load(entry)
            except Exception:  # (a symbol this process lacks, say: numba compiles it)
                entry = None
        if entry is None:
            from imgfilters.cpu import build  # (numba loads here)
            entry, dispatcher = build.compile_kernel(kernel)
            loaded = _load(entry)
        address, keep = loaded
        if entry["undefined"] is not None:  # (an object that may be cached: ``completed``)
            _write(path, dict(entry, key=key))
        return _bind(kernel.name, entry, address, (keep, dispatcher))


def kernels():
    """Every kernel of the engine (``core.Kernel``s at the top of its family modules)."""
    import importlib
    import pkgutil

    from imgfilters.cpu import core
    found = []
    for info in pkgutil.iter_modules([os.path.dirname(os.path.abspath(__file__))]):
        if info.name in ("build", "native", "core"):
            continue
        module = importlib.import_module(f"imgfilters.cpu.{info.name}")
        found += [v for v in vars(module).values() if isinstance(v, core.Kernel) and v not in found]
    return found


def shipped_ir_path(kernel):
    """Where the package ships ``kernel``'s LLVM IR (``scripts/build_cpu_ir.py``)."""
    return os.path.join(SHIPPED_IR, f"{kernel.name}.json.gz")


def shipped_ir_applies(record, kernel):
    """Whether the shipped IR ``record`` (``scripts/build_cpu_ir.py``) is ``kernel``'s on
    this machine: made from these sources for its signature, for this target triple and
    LLVM version (which parses it), with the same ``NUMBA_`` settings."""
    import llvmlite.binding as llvm
    return (record.get("format") == FORMAT and record.get("sources") == cpu.sources_digest()
            and record.get("signature") == kernel.signature and record.get("triple") == llvm.get_process_triple()
            and record.get("llvm") == list(llvm.llvm_version_info) and record.get("settings") == _settings())


def from_shipped_ir(kernel):
    """``kernel``'s cache entry made from the LLVM IR shipped with the package, as numba
    would make it (numba's module passes and code generation for this CPU, through
    llvmlite alone: about a second of CPU against three for numba's whole compile of the
    bilateral kernel), or None where no shipped IR applies or it fails to compile."""
    try:
        with gzip.open(shipped_ir_path(kernel), "rt", encoding="utf-8") as f:
            record = json.load(f)
        if not shipped_ir_applies(record, kernel):
            return None
        return completed(dict(record["abi"], object=machine_code(record["ir"])))
    except Exception:  # (missing, unreadable, or no longer parsed by this LLVM: numba compiles it)
        return None


def machine_code(ir):
    """The object code of the LLVM module ``ir`` (a kernel linked with its helpers, before
    the module passes) as numba's JIT makes it: its two module pass pipelines (a cheap one
    at -O0 with loop rotation, instruction combining and jump threading, then -O3 with loop
    vectorisation and no SLP, each with numba's reference-count pruning, which finds
    nothing: the kernels have no runtime) and its target machine (this CPU, its features,
    -O3, static relocation, the JIT's code model). Relies on numba's defaults: ``NUMBA_``
    settings change them, and the shipped IR then does not apply (``shipped_ir_applies``).
    ``tests/test_cpu_engine.py`` checks that this object equals numba's."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=cpu_features(), opt=3, reloc="static", codemodel="jitdefault", jit=True)
    module = llvm.parse_assembly(ir)
    for speed, loops, cheap in ((0, False, True), (3, True, False)):
        options = llvm.create_pipeline_tuning_options()
        options.speed_level, options.loop_vectorization, options.slp_vectorization = speed, loops, False
        builder = llvm.create_pass_builder(machine, options)
        passes = builder.getModulePassManager()
        if cheap:
            passes.add_loop_rotate_pass()
            passes.add_instruction_combine_pass()
            passes.add_jump_threading_pass()
        passes.add_refprune_pass(llvm.RefPruneSubpasses.ALL)
        passes.run(module, builder)
    module.verify()
    stale = process_globals(module)
    if stale:
        raise ValueError(f"the optimised module still reads {stale}")
    return machine.emit_object(module)


def process_globals(module):
    """The globals of the LLVM ``module`` that hold addresses in the process that lowered
    it: numba's lowering leaves them, and its passes delete them as dead in every kernel
    so far; one that survived would point into another process, so such an object is
    neither made from shipped IR nor cached."""
    return [g.name for g in module.global_variables if g.name.startswith("numba.dynamic.globals")]


def cpu_features():
    """The host CPU's features as numba's JIT targets them (``numba.core.codegen``'s
    ``get_host_cpu_features``): without AVX where numba turns it off by default, on CPUs
    whose AVX code LLVM slows down, baseline names that virtual machines report, and
    kernels without AVX support (``numba.core.config.ENABLE_AVX``; ``NUMBA_ENABLE_AVX``
    is a ``NUMBA_`` setting: the shipped IR does not apply then)."""
    import llvmlite.binding as llvm
    features = llvm.get_host_cpu_features()
    if llvm.get_host_cpu_name() in ("corei7-avx", "core-avx-i", "sandybridge", "ivybridge", "nocona") \
            or not _os_supports_avx():
        for name in features:
            if name.startswith("avx"):
                features[name] = False
    return features.flatten()


def _os_supports_avx():
    """Whether the kernel lets programs use AVX: on x86 Linux, /proc/cpuinfo's flags say
    (as numba reads them); elsewhere assumed."""
    import platform
    if not sys.platform.startswith("linux") or platform.machine() not in ("i386", "i586", "i686", "x86_64"):
        return True
    try:
        with open("/proc/cpuinfo") as f:
            return any(head.strip() == "flags" and "avx" in body.split()
                       for head, _, body in (line.partition(":") for line in f))
    except OSError:
        return True


def completed(entry):
    """``entry`` (its kernel's object code and calling convention: ``build.abi``) with what
    loading and calling it takes: the object's undefined symbols and the trampoline."""
    entry["undefined"] = undefined_symbols(entry["object"])
    entry["trampoline"], entry["slots"] = trampoline(entry)
    return entry


@functools.lru_cache(maxsize=1)
def _host():
    """What the machine code depends on besides the sources: the host and the compiler."""
    from importlib import metadata

    import llvmlite
    import llvmlite.binding as llvm
    numpy = tuple(getattr(NDArray, f).offset for f in ("data", "nd", "dimensions", "strides"))
    return (sys.platform, llvm.get_process_triple(), llvm.get_host_cpu_name(), cpu_features(),
            metadata.version("numba"), llvmlite.__version__, _settings(), numpy)


# NUMBA_ settings that change no compile of the engine's kernels (which take no numba threads)
NEUTRAL_SETTINGS = ("NUMBA_CACHE_DIR", "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY")


def _settings():
    """The numba settings that can change a compile, as a sorted list: the environment's
    ``NUMBA_`` variables (but NEUTRAL_SETTINGS) and a ``.numba_config.yaml`` in the working
    folder, which numba reads too."""
    found = sorted([k, v] for k, v in os.environ.items() if k.startswith("NUMBA_") and k not in NEUTRAL_SETTINGS)
    if os.path.isfile(".numba_config.yaml"):
        with open(".numba_config.yaml", "rb") as f:
            found.append([".numba_config.yaml", hashlib.sha1(f.read()).hexdigest()])
    return found


def _key(name, signature):
    return (FORMAT, name, signature, _host())


def _read(path, key):
    """The cache file's entry if it holds ``key``'s and its payload is intact, else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        head = len(MAGIC) + 32
        if data[:len(MAGIC)] != MAGIC or hashlib.sha256(data[head:]).digest() != data[len(MAGIC):head]:
            return None
        entry = pickle.loads(data[head:])
        return entry if entry.get("key") == key else None
    except Exception:  # (missing, unreadable, or from another version of this format)
        return None


def _write(path, entry):
    """Write ``entry`` to ``path`` atomically (a reader sees the old file or the whole new
    one); where the folder is not writable, nothing is cached."""
    payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def _load(entry):
    """Load the entry's object into a fresh MCJIT engine: (the kernel's address, what must
    stay alive while it runs)."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for name in entry["undefined"] or ():  # (None: numba, loaded, resolves them)
        if llvm.address_of_symbol(name) is None:
            llvm.add_symbol(name, _process_symbol(name))
    machine = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    objects = [llvm.ObjectFileRef.from_data(entry["object"]), llvm.ObjectFileRef.from_data(entry["trampoline"])]
    for obj in objects:
        engine.add_object_file(obj)
    engine.finalize_object()
    address = engine.get_function_address(TRAMPOLINE)
    if not address:
        raise LookupError(f"{TRAMPOLINE} not in its object")
    return address, (engine, machine, objects)


def _process_symbol(name):
    """The address of C symbol ``name`` in this process (libc, libm), or LookupError."""
    for lib in _libraries():
        try:
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            continue
    raise LookupError(f"{name}: no such symbol in this process")


@functools.lru_cache(maxsize=1)
def _libraries():
    libs = [ctypes.CDLL(None)]
    if sys.platform.startswith("linux"):
        try:
            libs.append(ctypes.CDLL("libm.so.6"))
        except OSError:
            pass
    return libs


class NDArray(ctypes.Structure):
    """The head of numpy's array object, after Python's object header: the fields of
    ``PyArrayObject_fields`` (numpy's ``ndarraytypes.h``) that numpy's C API macros
    ``PyArray_DATA``, ``PyArray_NDIM``, ``PyArray_DIMS`` and ``PyArray_STRIDES`` read, and
    the trampoline reads (``trampoline``); ``_check_numpy`` checks them."""
    _fields_ = [("head", ctypes.c_char * object.__basicsize__), ("data", ctypes.c_void_p), ("nd", ctypes.c_int),
                ("dimensions", ctypes.c_void_p), ("strides", ctypes.c_void_p)]


@functools.lru_cache(maxsize=1)
def _check_numpy():
    """That ``NDArray`` reads a strided array's data pointer, shape and strides."""
    a = np.zeros((3, 4, 5), np.float32)[1:, ::-2, ::2]
    head = NDArray.from_address(id(a))
    got = (head.data, head.nd, tuple((ctypes.c_ssize_t * 3).from_address(head.dimensions)),
           tuple((ctypes.c_ssize_t * 3).from_address(head.strides)))
    if got != (a.ctypes.data, a.ndim, a.shape, a.strides):
        raise RuntimeError(f"numpy's array object is not laid out as NDArray says: {got}")


def slot_codes(layout):
    """The ``struct`` codes of the trampoline's slots: an array's object (``id``), an
    integer, a float32 (and 4 bytes of padding), a float64."""
    codes = {"array": "q", "i64": "q", "i32": "i4x", "i16": "h6x", "i8": "b7x", "float": "f4x", "double": "d"}
    return "<" + "".join(codes[spec[1] if spec[0] == "scalar" else "array"] for spec in layout)


def _bind(name, entry, address, keep):
    """The kernel's trampoline at ``address`` as a function of the kernel's arguments'
    tuple: numpy arrays checked against the signature (they stay alive in the tuple while
    the kernel runs), the arguments packed into the trampoline's slots, the status
    checked. ctypes releases the GIL for the call."""
    _check_numpy()
    native = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(address)
    specs = [(np.dtype(spec[1]), spec[2], spec[3]) if spec[0] == "array" else None for spec in entry["layout"]]
    slots = struct.Struct(entry["slots"])
    ok = frozenset(entry["ok"])

    def call(args):
        if len(args) != len(specs):
            raise TypeError(f"{name}: {len(args)} arguments, {len(specs)} expected")
        values = list(args)
        for k, spec in enumerate(specs):
            if spec is not None:
                a = args[k]
                dtype, ndim, contiguous = spec
                if not (isinstance(a, np.ndarray) and (a.dtype is dtype or a.dtype == dtype) and a.ndim == ndim
                        and (not contiguous or a.flags.c_contiguous)):
                    raise TypeError(f"{name}: argument {k} is not a{' contiguous' if contiguous else 'n'} "
                                    f"{ndim}-D {dtype} array: {type(a).__name__} {getattr(a, 'dtype', '')}")
                values[k] = id(a)
        buffer = ctypes.create_string_buffer(slots.size)
        slots.pack_into(buffer, 0, *values)
        status = native(ctypes.addressof(buffer))
        if status not in ok:
            raise RuntimeError(f"{name}: the compiled kernel failed (status {status})")

    call.keep = keep  # (the engine that holds the code; numba's dispatcher after a compile)
    return call


def undefined_symbols(obj):
    """The undefined symbols of the ELF64 object ``obj`` (bytes), or None for another format."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:  # (64-bit, little-endian)
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize) for k in range(shnum)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link]
        strings = obj[strtab[4]:strtab[4] + strtab[5]]
        for at in range(offset + entsize, offset + size, entsize):  # (entry 0 is the null symbol)
            st_name, _, _, st_shndx = struct.unpack_from("<IBBH", obj, at)
            if st_shndx == 0 and st_name:  # SHN_UNDEF
                names.append(strings[st_name:strings.index(b"\0", st_name)].decode())
    return sorted(names)


def trampoline(entry):
    """(object code, slot codes): ``i32 imgfilters_cpu_call(i64 *slots)``, which calls the
    entry's kernel with the arguments read from ``slots``, one 8-byte slot per argument
    (``slot_codes``: an array's object, an integer, a float), each array flattened
    there into the members that ``layout`` lists, read from numpy's array object
    (``NDArray``), and returns the kernel's status. One ctypes call of one
    argument: flattening ~200 members into ctypes arguments cost 60 us a call."""
    import llvmlite.binding as llvm
    from llvmlite import ir
    scalar = {"ptr": ir.PointerType(), "i64": ir.IntType(64), "i32": ir.IntType(32), "i16": ir.IntType(16),
              "i8": ir.IntType(8), "float": ir.FloatType(), "double": ir.DoubleType()}
    i8, i64, ptr = ir.IntType(8), ir.IntType(64), ir.PointerType()
    module = ir.Module(name=TRAMPOLINE)
    kernel = ir.Function(module, ir.FunctionType(ir.IntType(32), [ptr, ptr] + [scalar[t] for t in entry["args"]]),
                         name=entry["symbol"])
    fn = ir.Function(module, ir.FunctionType(ir.IntType(32), [ptr]), name=TRAMPOLINE)
    b = ir.IRBuilder(fn.append_basic_block())
    ret = b.alloca(ir.ArrayType(i8, entry["ret_size"]))
    ret.align = 16
    exc = b.alloca(ptr)
    args, at = [], 0
    offset = {f: getattr(NDArray, f).offset for f in ("data", "dimensions", "strides")}

    def field(obj, name, typ):
        return b.load(b.gep(obj, [ir.Constant(i64, offset[name])], source_etype=i8), typ=typ)

    for k, spec in enumerate(entry["layout"]):
        slot = b.gep(fn.args[0], [ir.Constant(i64, k)], source_etype=i64)
        if spec[0] == "scalar":
            args.append(b.load(slot, typ=scalar[spec[1]]))
            at += 1
            continue
        _, dtype, ndim, _, fields = spec
        obj = b.load(slot, typ=ptr)
        dims, strides = field(obj, "dimensions", ptr), field(obj, "strides", ptr)
        shape = [b.load(b.gep(dims, [ir.Constant(i64, d)], source_etype=i64), typ=i64) for d in range(ndim)]
        for f in fields:
            if f in ("meminfo", "parent"):
                args.append(ir.Constant(scalar[entry["args"][at]], None))
            elif f == "nitems":
                n = shape[0]
                for d in shape[1:]:
                    n = b.mul(n, d)
                args.append(n)
            elif f == "itemsize":
                args.append(ir.Constant(i64, np.dtype(dtype).itemsize))
            elif f == "data":
                args.append(field(obj, "data", ptr))
            elif f == "shape":
                args.extend(shape)
            else:
                args.extend(b.load(b.gep(strides, [ir.Constant(i64, d)], source_etype=i64), typ=i64)
                            for d in range(ndim))
            at += ndim if f in ("shape", "strides") else 1
    b.ret(b.call(kernel, [ret, exc] + args))
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(codemodel="jitdefault")
    return machine.emit_object(parsed), slot_codes(entry["layout"])
