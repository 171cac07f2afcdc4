#include "core/os/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gm {

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Status::IoError(path + ": read failed: " + std::strerror(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return Status::InvalidArgument(path +
                                   ": is a symbolic link; refusing to replace it (give the "
                                   "path of the file itself)");
  }
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a stale one (or a link planted there) goes; nothing is followed
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": cannot create: " + std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IoError(path + ": write failed: " + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  // The data reaches the disk before the name does, and the name before we
  // return: a crash leaves the old file or the new one, never a torn one.
  const bool synced = ::fsync(fd) == 0;
  if (::close(fd) != 0 || !synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::IoError(path + ": cannot write: " + std::strerror(err));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);  // best effort: some file systems refuse fsync on a directory
    ::close(dfd);
  }
  return Status::Ok();
}

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create directory: " + ec.message());
  return Status::Ok();
}

Result<TempDir> TempDir::Make(std::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/" + std::string(prefix) + "XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    return Status::IoError(templ +
                           ": cannot create a temporary directory: " + std::strerror(errno));
  }
  return TempDir(std::move(templ));
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace gm
