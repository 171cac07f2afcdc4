// The fields the data plane's messages share (dataplane/messages*.h): each read
// from a peer's JSON with its type and range checked, the error naming the
// message and field. Internal to the messages' files (messages*.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace gm {

// A JSON integer (never 1.0 or "1"); the caller says what was expected.
Result<int64_t> JsonInteger(const JsonNode& n);
// A field read as an integer in [lo, hi]: a JSON integer (never 1.0 or "1"); the
// error names the message and field.
Result<int64_t> Int(const JsonNode& m, std::string_view key, int64_t lo, int64_t hi);
// A field read as a count in [0, max].
Result<uint64_t> Count(const JsonNode& m, std::string_view key, uint64_t max);
// The string at `key`, `chars` lower-case hex characters; "" when absent and
// `optional`.
Result<std::string> HexField(const JsonNode& m, std::string_view key, size_t chars, bool optional);
// Printable ASCII without spaces.
bool Printable(std::string_view s);
// An optional name field ("" when absent): printable ASCII, at most 256 bytes.
Result<std::string> OptionalName(const JsonNode& m, std::string_view key);
// A "HOST:PORT" a peer sent: printable, at most kMaxAddressBytes.
Result<std::string> Address(const JsonNode& n);
// The "workers" field: at most kMaxWorkers addresses (none when absent).
Result<std::vector<std::string>> Addresses(const JsonNode& m);
// Seconds at `key` in (0, max] (or [0, max] with zero_ok); `fallback` when absent.
Result<double> Seconds(const JsonNode& m, std::string_view key, double fallback, double max,
                       bool zero_ok);

// Corrupt (a peer's message is bad input), naming the message: JsonNode's
// errors are InvalidArgument with "MESSAGE: $.field: ...".
template <typename T>
Result<T> AsCorrupt(Result<T> r) {
  if (r.ok()) return r;
  return Status::Corrupt(r.status().message());
}

}  // namespace gm
