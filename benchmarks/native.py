"""Small C helpers of the benchmarks, built through cffi into a temporary directory."""
import importlib.util
import tempfile


def load(name, cdef, source, extra_compile_args=(), libraries=()):
    """The cffi module (its .lib and .ffi) of C `source` declaring `cdef`."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(name, source, extra_compile_args=list(extra_compile_args), libraries=list(libraries))
    with tempfile.TemporaryDirectory(prefix="aotc-bench-") as tmp:
        path = ffi.compile(tmpdir=tmp, verbose=False)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)   # (loaded: the file may go)
    return module
