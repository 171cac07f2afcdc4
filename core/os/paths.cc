#include "core/os/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <system_error>

namespace gm {

std::string ExecutablePath() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.string();
}

namespace {

std::string InstalledPythonDir() {
  const std::string exe = ExecutablePath();
  if (exe.empty()) return "";
  std::error_code ec;
  std::filesystem::path prefix = std::filesystem::path(exe).parent_path().parent_path();
  for (const char* libdir : {GOLDMINER_INSTALL_LIBDIR, "lib"}) {
    std::filesystem::path dir = prefix / libdir / "goldminer" / "python";
    if (std::filesystem::is_directory(dir / "goldminer", ec)) return dir.string();
  }
  return "";
}

// <prefix>/<libdir>/<name> beside the running executable's bin/, when it exists.
std::string InstalledLibrary(const char* name) {
  const std::string exe = ExecutablePath();
  if (exe.empty()) return "";
  std::error_code ec;
  std::filesystem::path prefix = std::filesystem::path(exe).parent_path().parent_path();
  for (const char* libdir : {GOLDMINER_INSTALL_LIBDIR, "lib"}) {
    std::filesystem::path lib = prefix / libdir / name;
    if (std::filesystem::exists(lib, ec)) return lib.string();
  }
  return "";
}

}  // namespace

std::string PythonPackageDir() {
  const char* env = std::getenv("GOLDMINER_PYTHONPATH");
  if (env != nullptr && *env != '\0') return env;
  std::string installed = InstalledPythonDir();
  if (!installed.empty()) return installed;
  return std::string(GOLDMINER_SOURCE_DIR) + "/python";
}

std::string ProfileHookDir() { return PythonPackageDir() + "/goldminer/_profile_hook"; }

std::string PythonPathPrepending(const std::string& front) {
  const char* old = std::getenv("PYTHONPATH");
  return "PYTHONPATH=" + front + (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
}

std::string ClientLibraryPath() {
  const char* env = std::getenv("GOLDMINER_CLIENT_LIB");
  if (env != nullptr && *env != '\0') return env;
  std::string installed = InstalledLibrary("libgoldminer_client.so");
  if (!installed.empty()) return installed;
  return std::string(GOLDMINER_BINARY_DIR) + "/client/libgoldminer_client.so";
}

std::string CuptiLibraryPath() {
  const char* env = std::getenv("GOLDMINER_CUPTI_LIB");
  if (env != nullptr && *env != '\0') return env;
  std::string installed = InstalledLibrary("libgoldminer_cupti.so");
  if (!installed.empty()) return installed;
  std::string built = std::string(GOLDMINER_BINARY_DIR) + "/profiler/cupti/libgoldminer_cupti.so";
  std::error_code ec;
  return std::filesystem::exists(built, ec) ? built : "";
}

Status CheckTrustedPath(const std::string& path, const std::string& what) {
  const auto check = [&what](const std::string& p, const struct stat& st) {
    const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
    // Group write counts only for a group other than root's and ours (a umask of
    // 002 with a group of one's own is common).
    const bool group_write =
        (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && st.st_gid != ::getegid();
    const bool others_write = ((st.st_mode & S_IWOTH) != 0 || group_write) && !sticky_dir;
    const bool foreign = st.st_uid != 0 && st.st_uid != ::geteuid();
    if (!others_write && !foreign) return Status::Ok();
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument(
        what + ": " + p +
        (foreign ? " belongs to uid " + std::to_string(st.st_uid)
                 : std::string(" is writable by group or others")) +
        " (mode " + mode + "): another user could put code there that the trainer runs; " +
        "make it owned by you or root and not writable by others (chmod go-w), or use "
        "another copy");
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::InvalidArgument(what + ": " + path + " does not exist");
  }
  GM_RETURN_IF_ERROR(check(path, st));
  const bool folder = S_ISDIR(st.st_mode);
  // Every folder above it, up to /, as given and as resolved (links followed):
  // whoever may rename an entry in any of them may put another file in its place.
  std::error_code ec;
  std::set<std::string> above;
  for (const std::filesystem::path& p :
       {std::filesystem::absolute(path, ec), std::filesystem::canonical(path, ec)}) {
    for (std::filesystem::path up = p.parent_path(); !up.empty(); up = up.parent_path()) {
      if (!above.insert(up.string()).second) break;  // the rest is checked already
      if (up == up.root_path()) break;
    }
  }
  for (const std::string& dir : above) {
    if (::stat(dir.c_str(), &st) == 0) GM_RETURN_IF_ERROR(check(dir, st));
  }
  if (!folder) return Status::Ok();
  // A folder (a package): each file and folder in it, as far as kMaxTrustedEntries.
  size_t seen = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(
           path, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator() && seen < kMaxTrustedEntries;
       it.increment(ec), ++seen) {
    const std::string entry = it->path().string();
    if (::stat(entry.c_str(), &st) != 0) continue;  // a dangling link runs nothing
    GM_RETURN_IF_ERROR(check(entry, st));
  }
  return Status::Ok();
}

}  // namespace gm
