#include "core/paths.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace gm {
namespace {

std::string InstalledPythonDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  std::filesystem::path prefix = exe.parent_path().parent_path();
  for (const char* libdir : {GOLDMINER_INSTALL_LIBDIR, "lib"}) {
    std::filesystem::path dir = prefix / libdir / "goldminer" / "python";
    if (std::filesystem::is_directory(dir / "goldminer", ec)) return dir.string();
  }
  return "";
}

std::string InstalledClientLibrary() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  std::filesystem::path prefix = exe.parent_path().parent_path();
  for (const char* libdir : {GOLDMINER_INSTALL_LIBDIR, "lib"}) {
    std::filesystem::path lib = prefix / libdir / "libgoldminer_client.so";
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
  std::string installed = InstalledClientLibrary();
  if (!installed.empty()) return installed;
  return std::string(GOLDMINER_BINARY_DIR) + "/client/libgoldminer_client.so";
}

}  // namespace gm
