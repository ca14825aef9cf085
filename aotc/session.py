"""Session: runs a compiled model from its output folder.

This file needs only numpy and cffi (no C compiler): aotc copies it into every output
folder as the importable module <name>.py, so a compiled model runs where aotc is not
installed. Keep it free of other aotc imports.
"""
import json
import math
import os
import shutil
import tempfile
import threading
from collections import namedtuple

import cffi
import numpy as np

try:
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy, for bfloat16 models)
except ImportError:
    pass

try:
    from .errors import AotcError, InvalidInput
except ImportError:          # running as a copied module, without aotc
    try:
        from aotc.errors import AotcError, InvalidInput
    except ImportError:
        class AotcError(Exception):
            kind = "AotcError"

        class InvalidInput(AotcError):
            kind = "InvalidInput"

TensorSpec = namedtuple("TensorSpec", "name dtype shape")
# A run's workspace (the array and the C pointer to its first 64-byte aligned byte) and
# its arrays of input and output pointers, kept for the next run.
_RunBuffers = namedtuple("_RunBuffers", "workspace pointer inputs outputs")
_ALIGN = 64
_POOLED_WORKSPACES = 8
_SMALL_OUTPUT_BYTES = 4096   # outputs up to this size are not aligned to _ALIGN
_ERRORS = {1: "the workspace is not 64-byte aligned", 2: "a pointer is NULL",
           3: "an index input is out of range"}


def default_threads():
    env = os.environ.get("AOTC_NUM_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise InvalidInput(f"AOTC_NUM_THREADS={env!r} is not a whole number") from None
    return os.cpu_count() or 1


_LIBRARIES = {}              # (path, device, inode) -> (ffi, lib): each file opened once per process
_LIBRARIES_LOCK = threading.Lock()


def _open_library(out_dir, manifest):
    """The model's shared library, through cffi's ABI mode: its three functions declared
    here, nothing compiled."""
    if "library" not in manifest:
        raise AotcError(f"{out_dir} was compiled by an earlier aotc (its manifest names no shared "
                        "library): compile the model again")
    path = os.path.join(out_dir, manifest["library"])
    name = manifest["name"]
    with _LIBRARIES_LOCK:
        try:
            file = os.stat(path)
            key = (path, file.st_dev, file.st_ino)   # a compile replaces the file: a new inode
            if key not in _LIBRARIES:
                ffi = cffi.FFI()
                ffi.cdef(f"""
                    int {name}_run_array(void *workspace, const void *const *inputs, void *const *outputs);
                    void {name}_set_threads(int threads);
                    size_t {name}_workspace_bytes(void);
                """)
                _LIBRARIES[key] = ffi, _dlopen_anew(ffi, path)
        except OSError as e:
            raise AotcError(f"{path} is not a loadable library: {e}") from None
        return _LIBRARIES[key]


def _dlopen_anew(ffi, path):
    """dlopen(path), even where this process opened another library by that path
    before (a model compiled again into the same folder): the loader would return the
    old one, whose code then runs on the new model's buffers. Such a path is opened
    through a link (or copy) of the file under a name of its own."""
    if all(opened != path for opened, _, _ in _LIBRARIES):
        return ffi.dlopen(path)
    folder = tempfile.mkdtemp(prefix="aotc-library-")
    try:
        alias = os.path.join(folder, os.path.basename(path))
        try:
            os.link(path, alias)
        except OSError:   # (another file system)
            shutil.copyfile(path, alias)
        return ffi.dlopen(alias)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Session:
    """A compiled model, ready to run. Thread-safe: concurrent runs each take their own
    workspace from a small pool."""

    def __init__(self, out_dir, threads=None):
        self.out_dir = os.path.abspath(out_dir)
        with open(os.path.join(self.out_dir, "manifest.json")) as f:
            self._manifest = json.load(f)
        m = self._manifest
        self.name = m["name"]
        self.inputs = [TensorSpec(t["name"], np.dtype(t["dtype"]), tuple(t["shape"])) for t in m["inputs"]]
        self.outputs = [TensorSpec(t["name"], np.dtype(t["dtype"]), tuple(t["shape"])) for t in m["outputs"]]
        self._input_names = {t.name for t in self.inputs}
        self._output_bytes = [math.prod(t.shape) * t.dtype.itemsize for t in self.outputs]
        # outputs whose shape depends on the data: their spec shape is an upper bound
        self._dims_offsets = [t.get("dims_offset") for t in m["outputs"]]
        self._data_dependent = any(offset is not None for offset in self._dims_offsets)
        self.report = dict(m["report"])
        self._ffi, self._lib = _open_library(self.out_dir, m)
        self._run = getattr(self._lib, f"{self.name}_run_array")
        self._workspace_bytes = int(m["workspace_bytes"])
        self._idle = []   # _RunBuffers for the next runs (list append and pop are atomic)
        self.threads = default_threads() if threads is None else max(1, int(threads))
        getattr(self._lib, f"{self.name}_set_threads")(self.threads)

    def __repr__(self):
        return f"<aotc.Session {self.name}: {len(self.inputs)} inputs, {len(self.outputs)} outputs>"

    def run(self, feed):
        """run(x) -> the first output; run({name: x, ...}) -> {output name: array}."""
        single = not isinstance(feed, dict)
        if single:
            if len(self.inputs) != 1:
                raise InvalidInput(f"the model has {len(self.inputs)} inputs "
                                   f"({', '.join(t.name for t in self.inputs)}); pass a dict")
            feed = {self.inputs[0].name: feed}
        arrays = self._check_inputs(feed)
        ffi = self._ffi
        buffers = self._take_buffers()
        try:
            for i, a in enumerate(arrays):
                buffers.inputs[i] = ffi.from_buffer(a)   # (arrays keeps the data alive)
            results = []
            for i, (spec, nbytes) in enumerate(zip(self.outputs, self._output_bytes)):
                array, buffers.outputs[i] = _new_output(ffi, spec, nbytes)
                results.append(array)
            code = self._run(buffers.pointer, buffers.inputs, buffers.outputs)
            if code == 0 and self._data_dependent:
                results = self._trimmed(results, buffers.workspace)
        finally:
            self._give_back(buffers)
        if code != 0:
            raise AotcError(f"{self.name}_run failed with code {code}: {_ERRORS.get(code, 'unknown error')}")
        if single:
            return results[0]
        return {t.name: r for t, r in zip(self.outputs, results)}

    def _trimmed(self, results, workspace):
        """Outputs of data-dependent shape cut to the shape the run recorded in the
        workspace (the data sits densely at the start of the upper-bound buffer)."""
        base = _aligned_address(workspace) - workspace.ctypes.data
        for i, offset in enumerate(self._dims_offsets):
            if offset is None:
                continue
            rank = len(self.outputs[i].shape)
            shape = tuple(int(d) for d in np.frombuffer(workspace, np.int64, rank, base + offset))
            count = int(np.prod(shape, dtype=np.int64))
            results[i] = results[i].reshape(-1)[:count].copy().reshape(shape)
        return results

    def _check_inputs(self, feed):
        unknown = [k for k in feed if k not in self._input_names]
        if unknown:
            raise InvalidInput(f"unknown input {unknown[0]!r}; the model's inputs are "
                               f"{', '.join(repr(t.name) for t in self.inputs)}")
        arrays = []
        for t in self.inputs:
            if t.name not in feed:
                raise InvalidInput(f"input {t.name!r} is missing")
            a = feed[t.name]
            if not isinstance(a, np.ndarray):
                a = np.asarray(a)
            if a.dtype != t.dtype:
                raise InvalidInput(f"input {t.name!r} has element type {a.dtype}, the model takes {t.dtype}")
            if tuple(a.shape) != t.shape:
                raise InvalidInput(f"input {t.name!r} has shape {list(a.shape)}, the model takes {list(t.shape)}")
            arrays.append(np.ascontiguousarray(a))
        return arrays

    def _take_buffers(self):
        """A run's workspace and pointer arrays: pooled ones, or new."""
        try:
            return self._idle.pop()
        except IndexError:
            pass
        ffi = self._ffi
        workspace = np.empty(self._workspace_bytes + _ALIGN, np.uint8)
        return _RunBuffers(workspace, ffi.cast("void *", _aligned_address(workspace)),
                           ffi.new("void *[]", max(1, len(self.inputs))),
                           ffi.new("void *[]", max(1, len(self.outputs))))

    def _give_back(self, buffers):
        """Return what _take_buffers gave to the pool (a run's pointers need not be
        cleared: the next run overwrites them all)."""
        if len(self._idle) < _POOLED_WORKSPACES:
            self._idle.append(buffers)

    def close(self):
        """Drop pooled workspaces; runs in progress finish with their own."""
        self._idle.clear()


def _aligned_address(buffer):
    address = buffer.ctypes.data
    return address + (-address) % _ALIGN


def _new_output(ffi, spec, nbytes):
    """An uninitialized array for output `spec` (nbytes long) and a C pointer to it.
    Its data starts on a 64-byte boundary unless it is small: the kernels store whole
    vectors, and into numpy's 16-byte aligned arrays many straddle two cache lines (a
    large MatMul's output took 1.5-5% longer so), but aligning costs a run about 1 us
    (a 1 x 1024 x 784 product takes 36). Addresses are read through cffi: numpy's
    ctypes and np.prod took 5 of the 8.7 us that a one-node model's run cost."""
    if 0 < nbytes <= _SMALL_OUTPUT_BYTES:
        array = np.empty(spec.shape, spec.dtype)
        return array, ffi.from_buffer(array)
    raw = np.empty(nbytes + _ALIGN, np.uint8)
    pointer = ffi.from_buffer(raw)
    start = -int(ffi.cast("uintptr_t", pointer)) % _ALIGN
    return np.ndarray(spec.shape, spec.dtype, raw, start), pointer + start
