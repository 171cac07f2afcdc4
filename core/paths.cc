#include "core/paths.h"

#include <cstdlib>
#include <filesystem>
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

}  // namespace gm
