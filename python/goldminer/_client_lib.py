"""libgoldminer_client.so (include/goldminer/client.h) through ctypes: the one
binding of the client library, for goldminer.Loader (goldminer.loader) and for the
DataLoader offload's session and channels (goldminer._channels).

library() loads it at the first call, found at $GOLDMINER_CLIENT_LIB, else beside
the installed package, else in a build tree of the source checkout
(find_library, which also finds goldminer's other libraries), and declares its
functions; check() turns a gm_status into a ClientError.
"""

import ctypes
import functools
import glob
import os

_LIB_NAME = "libgoldminer_client.so"
UNAVAILABLE = 5  # gm_status GM_UNAVAILABLE: a peer unreachable or gone


class ClientError(RuntimeError):
    """A failure reported by the client library; `code` is its gm_status."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Stats(ctypes.Structure):
    _fields_ = [("data_wait_s", ctypes.c_double), ("batches", ctypes.c_uint64),
                ("samples", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("duplicates_dropped", ctypes.c_uint64), ("workers_connected", ctypes.c_uint64),
                ("connections_lost", ctypes.c_uint64)]


class ResumeState(ctypes.Structure):
    _fields_ = [("epoch", ctypes.c_uint64), ("position", ctypes.c_uint64),
                ("split_index", ctypes.c_uint64), ("split_batch", ctypes.c_uint64),
                ("seed", ctypes.c_int64), ("world_size", ctypes.c_int32),
                ("rank", ctypes.c_int32), ("order", ctypes.c_char * 65)]


def library_path():
    """Where libgoldminer_client.so is: the first existing candidate.

    Raises FileNotFoundError naming every place searched and how to build it.
    """
    return find_library(_LIB_NAME, "client", "GOLDMINER_CLIENT_LIB", "goldminer_client")


def find_library(name, build_dir, env_var, target):
    """Where one of goldminer's shared libraries is: $env_var, else beside the
    installed package (<prefix>/<libdir>/`name`), else the newest of a source
    checkout's build*/`build_dir`/`name`. FileNotFoundError names every place
    searched and how to build it."""
    env = os.environ.get(env_var)
    if env:
        return env
    package = os.path.dirname(os.path.abspath(__file__))
    # Installed: <prefix>/<libdir>/goldminer/python/goldminer -> <prefix>/<libdir>.
    candidates = [os.path.normpath(os.path.join(package, "..", "..", "..", name))]
    # Source checkout: <src>/python/goldminer -> <src>/build*/<build_dir>.
    source = os.path.normpath(os.path.join(package, "..", ".."))
    built = glob.glob(os.path.join(source, "build*", build_dir, name))
    candidates += sorted(built, key=os.path.getmtime, reverse=True)
    for path in candidates:
        if os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"{name} not found (searched ${env_var}, " +
        ", ".join(candidates[:1] + [os.path.join(source, "build*", build_dir)]) +
        f"): build it with `cmake --build BUILD --target {target}` "
        f"or set {env_var} to its path")


@functools.lru_cache(maxsize=None)
def library():
    """libgoldminer_client.so, loaded and declared at the first call that
    succeeds; the same library after it."""
    return _declare(ctypes.CDLL(library_path()))


def _declare(lib):
    c = ctypes
    p, u64, i64p = c.c_void_p, c.c_uint64, c.POINTER(c.c_int64)
    signatures = {
        "gm_abi_version": (c.c_int, []),
        "gm_last_error": (c.c_char_p, []),
        "gm_client_open": (c.c_int, [c.c_char_p, c.c_int, c.c_int, c.POINTER(p)]),
        "gm_client_next": (c.c_int, [p, c.POINTER(p)]),
        "gm_client_start_epoch": (c.c_int, [p, u64]),
        "gm_client_stats_get": (c.c_int, [p, c.POINTER(Stats)]),
        "gm_client_state": (c.c_int, [p, c.POINTER(u64), c.POINTER(u64)]),
        "gm_client_resume": (c.c_int, [p, u64, u64]),
        "gm_client_resume_state_get": (c.c_int, [p, c.POINTER(ResumeState)]),
        "gm_client_resume_from": (c.c_int, [p, c.POINTER(ResumeState)]),
        "gm_client_device_stages": (c.c_char_p, [p]),
        "gm_client_same_host_stats": (c.c_int, [p, c.POINTER(u64), c.POINTER(u64)]),
        "gm_client_close": (None, [p]),
        "gm_batch_data": (p, [p]),
        "gm_batch_data_bytes": (c.c_size_t, [p]),
        "gm_batch_dtype": (c.c_int, [p]),
        "gm_batch_layout": (c.c_int, [p]),
        "gm_batch_ndim": (c.c_int, [p]),
        "gm_batch_shape": (i64p, [p]),
        "gm_batch_size": (c.c_size_t, [p]),
        "gm_batch_labels": (p, [p]),
        "gm_batch_key": (c.c_char_p, [p, c.c_size_t]),
        "gm_batch_epoch": (u64, [p]),
        "gm_batch_free": (None, [p]),
        # The DataLoader offload (goldminer._channels).
        "gm_offload_open": (c.c_int, [c.c_char_p, c.c_int, c.POINTER(p)]),
        "gm_offload_workers": (c.c_int, [p, c.POINTER(c.c_char_p)]),
        "gm_offload_place": (c.c_int, [p, c.POINTER(c.c_char_p)]),
        "gm_offload_note": (c.c_int, [p, c.c_int, c.c_char_p, c.c_int, c.c_uint64, c.c_char_p,
                                     c.c_char_p]),
        "gm_offload_close": (None, [p]),
        "gm_vchannel_open": (c.c_int, [p, c.c_char_p, c.c_char_p, c.c_char_p, c.POINTER(p)]),
        "gm_vchannel_same_host": (c.c_int, [p]),
        "gm_vchannel_take_fd": (c.c_int, [p]),
        "gm_vchannel_pid": (c.c_int64, [p]),
        "gm_vchannel_host": (c.c_char_p, [p]),
        "gm_vchannel_send": (c.c_int, [p, p, c.c_size_t]),
        "gm_vchannel_recv": (c.c_int, [p, c.POINTER(p), c.POINTER(c.c_size_t),
                                       c.POINTER(c.c_int), c.POINTER(c.c_int)]),
        "gm_vchannel_shutdown": (None, [p]),
        "gm_vchannel_close": (None, [p]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    if lib.gm_abi_version() != 1:
        raise ClientError(-1, "libgoldminer_client.so has ABI version %d, this package "
                              "speaks 1" % lib.gm_abi_version())
    return lib


def check(lib, code):
    """Raises ClientError with the library's message when `code` is not 0 (GM_OK)."""
    if code != 0:
        raise ClientError(code, lib.gm_last_error().decode("utf-8", "replace"))
