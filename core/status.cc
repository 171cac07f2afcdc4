#include "core/status.h"

#include <cerrno>
#include <cstring>

namespace gm {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kNotFound:
      return "not found";
    case Code::kIoError:
      return "I/O error";
    case Code::kCorrupt:
      return "corrupt input";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kUnimplemented:
      return "not implemented";
    case Code::kCancelled:
      return "cancelled";
    case Code::kResourceExhausted:
      return "out of a resource";
    case Code::kAborted:
      return "aborted";
    case Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return {code_, std::move(m)};
}

Status Status::FromErrno(int err, const std::string& what) {
  std::string m = what + ": " + std::strerror(err);
  switch (err) {
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
    case EAGAIN:
      return ResourceExhausted(std::move(m));
    case ENOENT:
      return NotFound(std::move(m));
    default:
      return IoError(std::move(m));
  }
}

}  // namespace gm
