"""numba's compiles of the CPU engine's kernels, on a disk-cache miss only (``native``;
conventions: ``imgfilters.cpu``). The one module of the engine that imports numba.

A kernel and its helpers compile without the runtime (``_nrt=False``: no allocations, no
reference counts: "No runtime"), without the Python and C wrappers that numba adds for
calls from Python (the engine calls the kernel's native function through a trampoline:
the wrappers' code would reference numba's helper library, which a warm process does not
load, and the helpers' wrappers cost a sixth of a cold compile: a cold first call of the
separable kernel took 2.5 s of CPU with them, 2.1 without), releasing the GIL, numpy's
error model, FMA contraction only (``no_cpython_wrapper`` and ``no_cfunc_wrapper`` are
numba's target options, undocumented). The helpers a kernel calls (``core.Lazy``) are
made numba functions when numba first types them, compiled into LLVM IR only
(``_HelperLibrary``): numba links a helper's module into each kernel that calls it, and
its own machine code, which numba makes for every function, would never run (a tenth of
a cold compile: 0.3 s of the bilateral kernel's 3.2).
"""
import types as pytypes

import llvmlite.binding as llvm
import numba
from numba import types
from numba.core import callconv, codegen, compiler
from numba.core.registry import cpu_target
from numba.extending import intrinsic, typeof_impl

from imgfilters.cpu import core, native

OPTIONS = dict(nogil=True, fastmath=core.FASTMATH, error_model="numpy", _nrt=False, no_cpython_wrapper=True,
               no_cfunc_wrapper=True)


class _HelperLibrary(codegen.JITCodeLibrary):
    """The code library of a helper: its IR is optimised only in the kernels that link it
    (optimising it on its own first as well cost a sixth of a cold compile: bilateral 3.4
    s of CPU against 2.9), and it is never added to the JIT engine, so LLVM makes no
    machine code of it (relies on numba internals, as ``abi``: a library's module gets
    numba's function passes in ``_optimize_functions`` and its module passes in
    ``_optimize_final_module``, then goes to the engine in ``_finalize_final_module``;
    ``get_executable`` asks it for a wrapper's address and sets the function's environment
    through ``codegen.set_env``)."""

    def _optimize_functions(self, ll_module):
        pass

    def _optimize_final_module(self):
        pass

    def _finalize_final_module(self):
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True

    def get_pointer_to_function(self, name):
        self._ensure_finalized()
        return 0  # (as numba's own library returns for a function without wrappers)

    @property
    def codegen(self):
        return pytypes.SimpleNamespace(set_env=lambda name, env: None)  # (no machine code: no environment)


class _KernelLibrary(codegen.JITCodeLibrary):
    """The code library of a kernel: numba's, keeping the kernel's module as it is linked
    with its helpers' and before the module passes (``linked_ir``, what
    ``scripts/build_cpu_ir.py`` ships: ``native.from_shipped_ir`` runs those passes).
    Its object code is kept (``abi`` reads it), as numba's compiler enables for its own."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.enable_object_caching()

    def _optimize_final_module(self):
        self.linked_ir = str(self._final_module)
        self._final_module = llvm.parse_assembly(self.linked_ir)
        super()._optimize_final_module()


class _Compiler(compiler.Compiler):
    """numba's compiler, its code into a library of ``library_class``."""
    library_class = None

    def compile_extra(self, func):
        if self.state.library is None:
            self.state.library = self.library_class(self.state.targetctx.codegen(), func.__qualname__)
        return super().compile_extra(func)


class _HelperCompiler(_Compiler):
    library_class = _HelperLibrary


class _KernelCompiler(_Compiler):
    library_class = _KernelLibrary


@typeof_impl.register(core.Lazy)
def _typeof_lazy(val, c):
    """A helper as numba sees it: its dispatcher's type, or its intrinsic's (a global
    that numba's typing context knows: ``cpu_target``, an internal), made on first use."""
    if val.compiled is None:
        val.compiled = (numba.njit(pipeline_class=_HelperCompiler, **OPTIONS)(val.py_func) if val.how == "jit"
                        else intrinsic(val.py_func))
    if val.how == "jit":
        return typeof_impl(val.compiled, c)
    cpu_target.typing_context.refresh()  # (installs the intrinsic's typing template)
    return cpu_target.typing_context.resolve_value_type(val.compiled)


def compile_kernel(kernel, keep_ir=False):
    """(the cache entry of ``kernel``, numba's dispatcher): numba compiles it for
    ``kernel.signature``, ``native.completed`` adds the code that calls it; an object that
    still reads an address of this process (``native.process_globals``) is not cached.
    With ``keep_ir`` its library keeps the linked IR (``linked_ir``)."""
    dispatcher = numba.njit(kernel.signature, pipeline_class=_KernelCompiler, **OPTIONS)(kernel.py_func)
    entry = native.completed(abi(dispatcher))
    library = _compiled(dispatcher).library
    if native.process_globals(library._final_module):
        entry["undefined"] = None  # (not cached: ``native.function``)
    if not keep_ir:
        del library.linked_ir
    return entry, dispatcher


def linked_ir(dispatcher):
    """The LLVM IR of ``dispatcher``'s one compiled signature, linked with its helpers',
    before the module passes (``_KernelLibrary``)."""
    return _compiled(dispatcher).library.linked_ir


def _compiled(dispatcher):
    """numba's compile result of ``dispatcher``'s one signature."""
    (args,) = dispatcher.signatures
    return dispatcher.overloads[args]


def abi(dispatcher):
    """The one compiled signature of ``dispatcher`` as ``native`` loads it and
    ``native.trampoline`` calls it: a cache entry holding its object code and symbol, the LLVM
    types of its flattened arguments, how each argument flattens (``layout``), the size of
    its return slot and the status codes of success.

    Relies on numba internals (``tests/test_cpu_engine.py`` fails if they change): the
    compile result in ``dispatcher.overloads`` (its ``fndesc.mangled_name``, ``library``,
    ``target_context``); the library's object code as numba's own cache stores it
    (``serialize_using_object_code``); numba's native calling convention, ``status
    fn(retptr, excinfo, *flattened args)`` with the codes ``callconv.RETCODE_OK`` and
    ``RETCODE_NONE``; an array argument flattened into the members of its data model
    (``_fields``: the names ``native.FIELDS`` knows) in their order, each member into its
    own data model's argument types."""
    cres = _compiled(dispatcher)
    sig = cres.signature
    context, symbol, library = cres.target_context, cres.fndesc.mangled_name, cres.library
    _, kind, (obj, _) = library.serialize_using_object_code()
    if kind != "object":
        raise NotImplementedError(f"numba serialised {kind}, not object code")
    llvm_args = [str(a.type) for a in library.get_function(symbol).arguments]
    models = context.data_model_manager
    layout, at = [], 2  # (after retptr and excinfo)
    for ty in sig.args:
        model = models.lookup(ty)
        if isinstance(ty, types.Array):
            fields = tuple(model._fields)
            unknown = set(fields) - set(native.FIELDS)
            if unknown:
                raise NotImplementedError(f"numba's array model has members {sorted(unknown)}")
            for f in fields:
                n = len(_flatten(models.lookup(model.get_member_fe_type(f)).get_argument_type()))
                if n != (ty.ndim if f in ("shape", "strides") else 1):
                    raise NotImplementedError(f"numba's array member {f} flattens into {n} arguments")
                at += n
            layout.append(("array", str(ty.dtype), ty.ndim, ty.layout == "C", fields))
        else:
            if len(_flatten(model.get_argument_type())) != 1:
                raise NotImplementedError(f"{ty} flattens into several arguments")
            layout.append(("scalar", llvm_args[at]))
            at += 1
    if at != len(llvm_args) or any(t not in native.SCALARS for t in llvm_args):
        raise NotImplementedError(f"numba's calling convention changed: {llvm_args[:4]}..., {at} flattened")
    ret = models[sig.return_type].get_return_type()
    entry = dict(symbol=symbol, object=obj, args=llvm_args[2:], layout=layout,
                 ret_size=max(8, context.get_abi_sizeof(ret)),
                 ok=(callconv.RETCODE_OK.constant, callconv.RETCODE_NONE.constant))
    return entry


def _flatten(t):
    return [u for v in t for u in _flatten(v)] if isinstance(t, (tuple, list)) else [t]
