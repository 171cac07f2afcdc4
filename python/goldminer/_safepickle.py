"""What a trainer loads from its virtual workers: data, not code.

A pickle runs code where it is loaded: every global it names is looked up and
may be called. A worker's STATE, RESULT and FAILED frames (goldminer._vwire) are
therefore loaded by Unpickler, whose find_class answers only for

  - the builtin data types (dict, list, tuple, set, frozenset, bytes, bytearray,
    str, int, float, complex, bool, slice, range, object), collections' types
    (OrderedDict, defaultdict, deque, Counter), datetime's, Decimal, Fraction,
    UUID, SimpleNamespace, and copyreg._reconstructor;
  - numpy's arrays, scalars and dtypes, and torch's tensors, parameters,
    storages (loaded with torch.load(weights_only=True)), Size, device, dtypes,
    layouts and memory formats; the DataLoader's worker messages (ExceptionWrapper,
    the resume and end-of-replica markers);
  - exception classes of any module the trainer has imported (a worker error is
    an ExceptionWrapper naming its type, as stock);
  - classes of the program's own code, already imported by the trainer:
    __main__ and any module whose file is not in Python's standard library or an
    installed package folder (site-packages, dist-packages): the script, the
    modules beside it, an editable install of the project. A batch type defined
    there comes back as the trainer's own class;
  - the modules and classes named in $GOLDMINER_WORKER_TYPES (comma-separated:
    `pkg.mod` allows the classes of that module and its submodules,
    `pkg.mod.Class` that class), already imported by the trainer.

Functions and classes of installed packages and of the standard library are
not loaded (subprocess.Popen, os.system, ctypes.CDLL, and the like would run a
program): anything else is Refused, naming the global. GOLDMINER_TRUST_WORKERS=1
loads every pickle with pickle.loads (the workers are then trusted with the
trainer's process, as stock trusts its forked workers).

A worker writes the program's classes by name (goldminer._vwire: a class it got
by value in the JOB is sent as trainer_class(module, qualname)), never by value;
a class defined inside a function has no such name and is refused.
"""

import io
import os
import pickle
import sys
import sysconfig

TRUST_VARIABLE = "GOLDMINER_TRUST_WORKERS"
TYPES_VARIABLE = "GOLDMINER_WORKER_TYPES"


class Refused(pickle.UnpicklingError):
    """A pickle names a global that a trainer does not load from a worker."""


def trusted():
    """Whether $GOLDMINER_TRUST_WORKERS asks to load workers' pickles unchecked."""
    return os.environ.get(TRUST_VARIABLE, "") not in ("", "0")


_DATA = {
    "builtins": {"dict", "list", "tuple", "set", "frozenset", "bytes", "bytearray", "str",
                 "int", "float", "complex", "bool", "slice", "range", "object"},
    "collections": {"OrderedDict", "defaultdict", "deque", "Counter"},
    "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "fractions": {"Fraction"},
    "uuid": {"UUID", "SafeUUID"},
    "types": {"SimpleNamespace"},
    "copyreg": {"_reconstructor"},
    "goldminer._vwire": {"_rebuild_tensor"},
}
for _core in ("numpy.core", "numpy._core"):
    _DATA.update({
        f"{_core}.multiarray": {"_reconstruct", "scalar"},
        f"{_core}.numeric": {"_frombuffer"},
    })
_DATA.update({
    "numpy": {"ndarray", "dtype"},
    "torch._utils": {"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3",
                     "_rebuild_parameter", "_rebuild_parameter_with_state",
                     "_rebuild_qtensor", "_rebuild_sparse_tensor", "_rebuild_nested_tensor",
                     "_rebuild_meta_tensor_no_storage", "_rebuild_device_tensor_from_numpy",
                     "ExceptionWrapper"},
    "torch._tensor": {"_rebuild_from_type_v2"},
    "torch": {"Tensor", "Size", "device", "FloatStorage", "DoubleStorage", "HalfStorage",
              "BFloat16Storage", "LongStorage", "IntStorage", "ShortStorage", "CharStorage",
              "ByteStorage", "BoolStorage", "ComplexFloatStorage", "ComplexDoubleStorage"},
    "torch.storage": {"TypedStorage", "UntypedStorage"},
    "torch.nn.parameter": {"Parameter"},
    "torch.utils.data._utils.worker": {"_ResumeIteration", "_IterableDatasetStopIteration"},
})


def _load_storage_from_bytes(b):
    """torch.storage._load_from_bytes, as weights only: a storage's bytes, no code."""
    import io
    import torch
    return torch.load(io.BytesIO(b), weights_only=True)


def _library_roots():
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path) + os.sep)
    for path in sys.path:
        if path.rstrip(os.sep).endswith(("site-packages", "dist-packages")):
            roots.add(os.path.realpath(path) + os.sep)
    return tuple(roots)


_ROOTS = None
_OWN = {}


def _own_code(module_name):
    """Whether the already-imported module is the program's own code."""
    if module_name == "__main__":
        return True
    if module_name in _OWN:
        return _OWN[module_name]
    global _ROOTS
    if _ROOTS is None:
        _ROOTS = _library_roots()
    path = getattr(sys.modules.get(module_name), "__file__", None)
    own = bool(path) and not module_name.startswith("goldminer") and not any(
        os.path.realpath(path).startswith(r) for r in _ROOTS) and not any(
        part in path for part in ("site-packages", "dist-packages"))
    _OWN[module_name] = own
    return own


def _named(module_name, qualname):
    """Whether $GOLDMINER_WORKER_TYPES names this class or its module."""
    full = f"{module_name}.{qualname}"
    for entry in os.environ.get(TYPES_VARIABLE, "").split(","):
        entry = entry.strip()
        if entry and (full == entry or module_name == entry or
                      module_name.startswith(entry + ".")):
            return True
    return False


def attribute(obj, qualname):
    """obj.a.b for qualname "a.b"; AttributeError when a part is missing."""
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class Unpickler(pickle.Unpickler):
    """pickle.Unpickler answering find_class only for the data types above."""

    def find_class(self, module, name):
        if module == "torch.storage" and name == "_load_from_bytes":
            return _load_storage_from_bytes
        if module == "goldminer._vwire" and name == "trainer_class":
            return self.trainer_class
        if name in _DATA.get(module, ()):
            return super().find_class(module, name)
        return self.trainer_class(module, name)

    def trainer_class(self, module, qualname):
        """A class (not a function) the trainer has imported and may load: an
        exception type, a class of the program's own code or of
        $GOLDMINER_WORKER_TYPES; torch's dtypes, layouts and memory formats."""
        what = f"{module}.{qualname}"
        if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
            raise Refused(f"{what} (defined inside a function: move it to the top level "
                          f"of its module)" if isinstance(qualname, str) and "<locals>"
                          in qualname else what)
        if module not in sys.modules:
            raise Refused(f"{what} (its module is not imported by the trainer)")
        try:
            obj = attribute(sys.modules[module], qualname)
        except AttributeError:
            raise Refused(f"{what} (no class of that name at the top level of its module in "
                          f"the trainer: one defined inside a function has none; move it to "
                          f"the top level)") from None
        torch = sys.modules.get("torch")
        if module == "torch" and torch is not None and isinstance(
                obj, (torch.dtype, torch.layout, torch.memory_format)):
            return obj
        if isinstance(obj, type) and (issubclass(obj, BaseException) or _own_code(module) or
                                      _named(module, qualname)):
            return obj
        raise Refused(what)


def loads(data, buffers):
    """The object of a worker's pickle: Unpickler, or pickle.loads when trusted()."""
    if trusted():
        return pickle.loads(data, buffers=buffers)
    return Unpickler(io.BytesIO(data), buffers=buffers).load()


def refusal(what):
    """The line a trainer says for a refused global `what`."""
    return (f"a virtual DataLoader worker sent {what}, which goldminer does not load from a "
            f"worker (a pickle can run code where it is loaded): a batch may hold tensors, "
            f"arrays, builtin and collections types and classes of the program's own code; "
            f"name a package's module or class in ${TYPES_VARIABLE} to load its classes too, "
            f"or set {TRUST_VARIABLE}=1 to load anything")
