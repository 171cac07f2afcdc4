// Where goldminer finds the files it ships beside its binary.
//
// Reads the environment and the file system on each call; safe to call from any
// thread (it only reads).
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"

namespace gm {

// The running executable's absolute path (/proc/self/exe); empty if unreadable.
std::string ExecutablePath();

// The directory that contains the `goldminer` Python package (so that
// `python3 -m goldminer.stage` works with it on PYTHONPATH), first match of:
//   1. $GOLDMINER_PYTHONPATH when set and non-empty;
//   2. <directory of the running executable>/../<libdir>/goldminer/python, the
//      installed layout, when it exists;
//   3. <source tree>/python, fixed at compile time (development builds).
std::string PythonPackageDir();

// PythonPackageDir()'s goldminer/_profile_hook: the import hook (sitecustomize)
// that a PyTorch program gets first on its PYTHONPATH under `profile` and `run`.
std::string ProfileHookDir();

// "PYTHONPATH=" + `front` + ":" + this process's $PYTHONPATH (when set), for a
// child's environment (core/os/spawn.h).
std::string PythonPathPrepending(const std::string& front);

// The client shared library (libgoldminer_client.so, include/goldminer/client.h),
// first match of:
//   1. $GOLDMINER_CLIENT_LIB when set and non-empty;
//   2. <directory of the running executable>/../<libdir>/libgoldminer_client.so,
//      the installed layout, when it exists;
//   3. <build tree>/client/libgoldminer_client.so, fixed at compile time.
// The Python package (goldminer.loader) searches the same way from its own place.
std::string ClientLibraryPath();

// The CUPTI injection library (libgoldminer_cupti.so, profiler/cupti/), first match of:
//   1. $GOLDMINER_CUPTI_LIB when set and non-empty;
//   2. <directory of the running executable>/../<libdir>/libgoldminer_cupti.so;
//   3. <build tree>/profiler/cupti/libgoldminer_cupti.so when it exists.
// Empty when none exists (the library is built only where CUPTI was found).
std::string CuptiLibraryPath();

// OK when `path` exists and neither it nor any folder above it (up to /, as given
// and with links resolved) can be changed by a user other than root and us:
// each is owned by root or this process's user and not
// writable by others, nor by a group other than root's and ours (a folder with
// the sticky bit, like /tmp, may be).
// Else InvalidArgument naming `what` (e.g. "the Python package goldminer puts on
// the trainer's PYTHONPATH (GOLDMINER_PYTHONPATH)"), the path and the fix: code
// found there runs in the trainer. A folder's files and folders are checked
// too (the first kMaxTrustedEntries; links are followed).
inline constexpr size_t kMaxTrustedEntries = 10000;
Status CheckTrustedPath(const std::string& path, const std::string& what);

}  // namespace gm
