#include "core/status.h"

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

}  // namespace gm
