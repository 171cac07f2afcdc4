"""Shipping a DataLoader's worker arguments to its virtual workers
(goldminer.offload): ship() pickles them with cloudpickle, once per iterator,
and says which attribute cannot travel, when one cannot (CannotTravel).

Code is shipped by value for the script's own modules (__main__ and modules
under the script's directory) and by reference for installed packages, which
the worker's Python must be able to import. cloudpickle is imported by ship(),
not with this module: a program without it runs its DataLoaders on stock
workers, saying why (goldminer._patch).
"""

import io
import os
import sys
import types

MAX_BLOB_BYTES = 1 << 30  # a dataset bigger than this is not shipped (it would be per worker)
_MAX_WALK_DEPTH = 8  # how deep the search for what cannot travel looks


# What ship() is given of a DataLoader, by name (worker_args).
ARG_NAMES = ("dataset kind", "dataset", "auto_collation", "collate_fn", "drop_last",
             "worker_init_fn", "num_workers", "persistent_workers")


def worker_args(loader, num_workers):
    """What torch hands each worker process, less its id and seeds (ARG_NAMES)."""
    return (loader._dataset_kind, loader.dataset, loader._auto_collation, loader.collate_fn,
            loader.drop_last, loader.worker_init_fn, num_workers, loader.persistent_workers)


class CannotTravel(Exception):
    """Why a DataLoader's worker arguments cannot be shipped: `path` names the
    attribute (e.g. "dataset.env"), `why` the error, `fix` what usually helps."""

    def __init__(self, path, why, fix):
        super().__init__(f"{path} cannot travel to the data workers ({why}); {fix}")
        self.path, self.why, self.fix = path, why, fix


_FIX_OPEN = "open it lazily, in __getitem__ or worker_init_fn"
_FIX_CUDA = "keep the dataset's tensors on the CPU and move batches to the GPU in the loop"
_FIX_SIZE = ("load the data lazily (from files, in __getitem__) rather than holding it in "
             "the dataset object")


def _children(obj):
    """(name, value) of what `obj` holds, for the search: attributes, items."""
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v) for k, v in list(obj.items())[:1000]]
    if isinstance(obj, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(obj[:1000])]
    out = []
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        out += [(f".{k}", v) for k, v in d.items()]
    for k in getattr(type(obj), "__slots__", ()):
        if isinstance(k, str) and hasattr(obj, k):
            out.append((f".{k}", getattr(obj, k)))
    return out


def _find_cuda(obj, path, depth, seen):
    torch = sys.modules.get("torch")
    if torch is None or depth > _MAX_WALK_DEPTH or id(obj) in seen:
        return None
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return path if obj.is_cuda else None
    if isinstance(obj, (str, bytes, int, float, type(None))):
        return None
    for name, value in _children(obj):
        found = _find_cuda(value, path + name, depth + 1, seen)
        if found:
            return found
    return None


def _culprit(dumps, obj, path, depth=0):
    """The deepest attribute path under `obj` that does not pickle, and its error."""
    try:
        dumps(obj)
        return None
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    if depth < _MAX_WALK_DEPTH:
        for name, value in _children(obj):
            try:
                dumps(value)
            except Exception:
                found = _culprit(dumps, value, path + name, depth + 1)
                if found:
                    return found
    return path, error


def _register_script_modules():
    """cloudpickle by value for __main__ and the modules under the script's folder."""
    import cloudpickle  # optional: without it DataLoaders run stock (goldminer._patch says why)
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if not script:
        return
    root = os.path.dirname(os.path.abspath(script)) + os.sep
    for name, module in list(sys.modules.items()):
        f = getattr(module, "__file__", None)
        if not f or name == "__main__" or name.startswith("goldminer"):
            continue
        if os.path.abspath(f).startswith(root) and "site-packages" not in f \
                and "dist-packages" not in f:
            try:
                cloudpickle.register_pickle_by_value(module)
            except (ValueError, TypeError):
                pass


def ship(parts, names):
    """(blob, digest, modules) of the tuple `parts`: blob (pickle, [out-of-band
    buffers], the buffers views of the arrays' own memory, not copies), its
    _vwire.blob_digest, and the modules it names. Raises CannotTravel naming the
    attribute (by `names`, one per part, e.g. "dataset") that cannot go."""
    import cloudpickle  # optional: without it DataLoaders run stock (goldminer._patch says why)
    from goldminer import _vwire  # imports cloudpickle: as above
    _register_script_modules()
    for part, name in zip(parts, names):
        cuda = _find_cuda(part, name, 0, set())
        if cuda:
            raise CannotTravel(cuda, "a CUDA tensor", _FIX_CUDA)
    try:
        blob, modules = _dumps_noting_modules(tuple(parts))
    except Exception:
        for part, name in zip(parts, names):
            found = _culprit(lambda o: cloudpickle.dumps(o, protocol=5), part, name)
            if found:
                raise CannotTravel(found[0], found[1], _FIX_OPEN) from None
        raise
    size = _vwire.blob_size(blob)
    if size > MAX_BLOB_BYTES:
        raise CannotTravel(names[0], f"{size} bytes pickled, more than {MAX_BLOB_BYTES}",
                           _FIX_SIZE)
    return blob, _vwire.blob_digest(blob), modules


def _code_with_its_file(pickler, code):
    """cloudpickle's reduction of a code object, keeping its file name: cloudpickle
    3 writes "<dynamic-code>" there, and a worker's traceback would then name no
    file and show no line, where stock's names the script's."""
    reduce = pickler.dispatch_table.get(types.CodeType)
    if reduce is None:
        return NotImplemented
    reduced = reduce(code)
    if not (isinstance(reduced, tuple) and len(reduced) >= 2 and isinstance(reduced[1], tuple)):
        return reduced
    args = tuple(code.co_filename if a == "<dynamic-code>" else a for a in reduced[1])
    return (reduced[0], args) + tuple(reduced[2:])


def _dumps_noting_modules(obj):
    """cloudpickle (protocol 5) of `obj` as (pickle, [out-of-band buffers]), and
    the modules of the classes and functions it names by reference (the host
    imports them once, not each worker)."""
    import cloudpickle  # optional: without it DataLoaders run stock (goldminer._patch says why)

    modules = set()
    buffers = []

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, o):
            if isinstance(o, types.CodeType):
                return _code_with_its_file(self, o)
            if isinstance(o, type) or callable(o):
                m = getattr(o, "__module__", None)
                if isinstance(m, str) and m != "__main__":
                    modules.add(m)
            return super().reducer_override(o)

    out = io.BytesIO()
    Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return (out.getvalue(), [b.raw() for b in buffers]), sorted(modules)
