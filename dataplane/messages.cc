// The messages' shared fields (dataplane/message_fields.h) and ERROR; each
// connection's messages are in their own file: messages_control.cc (connections
// 1 to 3: workers and clients with the coordinator, a client's CREDIT at a data
// port), messages_offload.cc (4 and 5), messages_pool.cc (6).
#include "dataplane/messages.h"

#include <algorithm>
#include <string_view>

#include "core/json.h"
#include "dataplane/message_fields.h"
#include "dataplane/protocol.h"

namespace gm {

// A JSON integer (never 1.0 or "1"); the caller says what was expected.
Result<int64_t> JsonInteger(const JsonNode& n) {
  return n.json().is_number_integer() ? n.AsInt() : Result<int64_t>(Status::Corrupt(""));
}

// A field read as an integer in [lo, hi]: a JSON integer (never 1.0 or "1"); the
// error names the message and field.
Result<int64_t> Int(const JsonNode& m, std::string_view key, int64_t lo, int64_t hi) {
  GM_ASSIGN_OR_RETURN(JsonNode n, m.Get(key));
  Result<int64_t> v = JsonInteger(n);
  if (!v.ok() || *v < lo || *v > hi) {
    return n.Expected("an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v;
}

Result<uint64_t> Count(const JsonNode& m, std::string_view key, uint64_t max) {
  GM_ASSIGN_OR_RETURN(int64_t v, Int(m, key, 0, static_cast<int64_t>(max)));
  return static_cast<uint64_t>(v);
}

// The string at `key`, `chars` lower-case hex characters; "" when absent and
// `optional`.
Result<std::string> HexField(const JsonNode& m, std::string_view key, size_t chars, bool optional) {
  if (optional && !m.has(key)) return std::string();
  GM_ASSIGN_OR_RETURN(JsonNode n, m.Get(key));
  Result<std::string> s = n.AsString();
  const bool hex = s.ok() && s->size() == chars && std::all_of(s->begin(), s->end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  if (!hex) return n.Expected(std::to_string(chars) + " lower-case hex characters");
  return s;
}

bool Printable(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// An optional name field ("" when absent): printable ASCII, at most 256 bytes.
Result<std::string> OptionalName(const JsonNode& m, std::string_view key) {
  GM_ASSIGN_OR_RETURN(std::string v, m.StringOr(key, ""));
  if (v.size() > 256 || (!v.empty() && !Printable(v))) {
    return (*m.Get(key)).Expected("printable ASCII, at most 256 bytes");
  }
  return v;
}

// A "HOST:PORT" a peer sent: printable, at most kMaxAddressBytes.
Result<std::string> Address(const JsonNode& n) {
  GM_ASSIGN_OR_RETURN(std::string a, n.AsString());
  if (a.empty() || a.size() > kMaxAddressBytes || !Printable(a)) {
    return n.Expected("HOST:PORT in printable ASCII, at most 256 bytes");
  }
  return a;
}

Result<double> Seconds(const JsonNode& m, std::string_view key, double fallback, double max,
                       bool zero_ok) {
  if (!m.has(key)) return fallback;
  GM_ASSIGN_OR_RETURN(JsonNode n, m.Get(key));
  Result<double> v = n.AsNumber();
  if (!v.ok() || !(zero_ok ? *v >= 0 : *v > 0) || !(*v <= max)) {
    return n.Expected(std::string(zero_ok ? "a number of seconds from 0"
                                          : "a positive number of "
                                            "seconds") +
                      " to " + std::to_string(static_cast<int64_t>(max)));
  }
  return v;
}

Result<std::vector<std::string>> Addresses(const JsonNode& m) {
  std::vector<std::string> out;
  if (!m.has("workers")) return out;
  GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("workers"));
  GM_ASSIGN_OR_RETURN(std::vector<JsonNode> items, list.Elements());
  if (items.size() > kMaxWorkers) {
    return list.Expected("at most " + std::to_string(kMaxWorkers) + " addresses");
  }
  for (const JsonNode& item : items) {
    GM_ASSIGN_OR_RETURN(std::string a, Address(item));
    out.push_back(std::move(a));
  }
  return out;
}

nlohmann::json ErrorMsg::Encode() const { return {{"message", message}}; }

void SendError(Socket& socket, const std::string& message, Deadline deadline) {
  (void)SendFrame(socket, MsgType::kError, ErrorMsg{message}.Encode(), deadline);
}

ErrorMsg ErrorMsg::Decode(const nlohmann::json& meta) {
  auto it = meta.find("message");
  return {it != meta.end() && it->is_string() ? it->get<std::string>() : "(no message)"};
}

}  // namespace gm
