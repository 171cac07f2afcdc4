// Status and Result<T>: goldminer's one error type.
//
// Expected failures are values. A Status carries a code and a message that says
// what failed, on which input and, where there is one, how to fix it. Only main()
// turns a Status into text on stderr and an exit code. Thread-compatible: a Status
// is a plain value.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gm {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // bad flag, bad pipeline.json, bad value
  kNotFound,         // missing file, 404
  kIoError,          // read/write/network failure
  kCorrupt,          // bad JPEG, broken tar, malformed frame
  kUnavailable,      // unreachable host, service not running
  kUnimplemented,    // a verb or feature not built yet
  kCancelled,        // stopped by request
  kInternal,         // a bug in goldminer
  // Out of descriptors, memory or processes (EMFILE, ENFILE, ENOMEM, ENOBUFS,
  // EAGAIN from fork): the machine's state, not the input's. Never counted as a
  // bad sample; the work is done again (worker/worker_service.h).
  kResourceExhausted,
  // Work given up because what it was for is gone (a trainer session that was
  // replaced); the coordinator has it done again.
  kAborted,
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status IoError(std::string m) { return {Code::kIoError, std::move(m)}; }
  static Status Corrupt(std::string m) { return {Code::kCorrupt, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }
  static Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {Code::kResourceExhausted, std::move(m)};
  }
  // The status of a failed system call with `err` (errno): ResourceExhausted
  // for the errors above, NotFound for ENOENT, IoError otherwise. `what` goes
  // before the error's text ("PATH: No such file or directory").
  static Status FromErrno(int err, const std::string& what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "context: message" (no-op when OK).
  Status WithContext(std::string_view context) const;

  // "message" for display; empty for OK.
  std::string ToString() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gm

#define GM_CONCAT_INNER(a, b) a##b
#define GM_CONCAT(a, b) GM_CONCAT_INNER(a, b)

#define GM_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::gm::Status gm_status_ = (expr);        \
    if (!gm_status_.ok()) return gm_status_; \
  } while (0)

#define GM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define GM_ASSIGN_OR_RETURN(lhs, expr) \
  GM_ASSIGN_OR_RETURN_IMPL(GM_CONCAT(gm_result_, __LINE__), lhs, expr)
