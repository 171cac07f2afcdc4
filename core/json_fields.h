// Reading JSON objects into plain structs, one line per field, with errors that
// name the file and the JSON path (see core/json.h). Used by the readers of
// profile.json, plan.json and cluster.json.
//
// A reader of a struct type T provides `Status Convert(const JsonNode&, T&)` in
// namespace gm (found by argument-dependent lookup through JsonNode), typically
//   Status Convert(const JsonNode& n, StageProfile& out) {
//     Fields f(n);
//     f.Required("index", out.index);
//     f.Optional("stateless", out.stateless);
//     return f.status();
//   }
// Unknown members are ignored (a newer minor version may add some); a missing
// optional member keeps the struct's default. Thread-compatible.
#pragma once

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace gm {

inline Status Convert(const JsonNode& n, double& out) {
  GM_ASSIGN_OR_RETURN(out, n.AsNumber());
  return Status::Ok();
}

inline Status Convert(const JsonNode& n, int& out) {
  GM_ASSIGN_OR_RETURN(int64_t v, n.AsInt());
  if (v < INT_MIN || v > INT_MAX) return n.Expected("an integer of at most 31 bits");
  out = static_cast<int>(v);
  return Status::Ok();
}

inline Status Convert(const JsonNode& n, int64_t& out) {
  GM_ASSIGN_OR_RETURN(out, n.AsInt());
  return Status::Ok();
}

inline Status Convert(const JsonNode& n, uint64_t& out) {
  GM_ASSIGN_OR_RETURN(int64_t v, n.AsInt());
  if (v < 0) return n.Expected("an integer >= 0");
  out = static_cast<uint64_t>(v);
  return Status::Ok();
}

inline Status Convert(const JsonNode& n, bool& out) {
  GM_ASSIGN_OR_RETURN(out, n.AsBool());
  return Status::Ok();
}

inline Status Convert(const JsonNode& n, std::string& out) {
  GM_ASSIGN_OR_RETURN(out, n.AsString());
  return Status::Ok();
}

template <typename T>
Status Convert(const JsonNode& n, std::optional<T>& out) {
  T value{};
  GM_RETURN_IF_ERROR(Convert(n, value));
  out = std::move(value);
  return Status::Ok();
}

template <typename T>
Status Convert(const JsonNode& n, std::vector<T>& out) {
  GM_ASSIGN_OR_RETURN(std::vector<JsonNode> elements, n.Elements());
  out.clear();
  out.reserve(elements.size());
  for (const JsonNode& element : elements) {
    T value{};
    GM_RETURN_IF_ERROR(Convert(element, value));
    out.push_back(std::move(value));
  }
  return Status::Ok();
}

// Reads the members of one JSON object into a struct and keeps the first error.
class Fields {
 public:
  explicit Fields(const JsonNode& node) : node_(node) {
    if (!node.is_object()) status_ = node.Expected("an object");
  }
  template <typename T>
  void Required(std::string_view key, T& out) {
    Read(key, out, /*required=*/true);
  }
  template <typename T>
  void Optional(std::string_view key, T& out) {
    Read(key, out, /*required=*/false);
  }
  // Adds an error about member `key` (e.g. a range check after reading it).
  void Check(bool ok, std::string_view key, std::string_view expected) {
    if (!status_.ok() || ok) return;
    Result<JsonNode> child = node_.Get(key);
    status_ = child.ok() ? child->Expected(expected) : child.status();
  }
  const Status& status() const { return status_; }

 private:
  template <typename T>
  void Read(std::string_view key, T& out, bool required) {
    if (!status_.ok()) return;
    Result<JsonNode> child = node_.Get(key);
    if (!child.ok()) {
      if (required) status_ = child.status();
      return;
    }
    status_ = Convert(*child, out);
  }

  JsonNode node_;
  Status status_;
};

// A JSON array of ToJson(item) for each item (ToJson found by argument-dependent lookup).
template <typename T>
nlohmann::json ArrayOf(const std::vector<T>& items) {
  nlohmann::json a = nlohmann::json::array();
  for (const T& item : items) a.push_back(ToJson(item));
  return a;
}

// Checks {"schema": <schema>, "version": <version>} first, so a document of another
// kind or version gets that message rather than one about a field it lacks.
// `what` names the document for the hint, e.g. "a profile.json written by `goldminer
// profile`"; `redo` says what to do about another version.
Status CheckSchemaAndVersion(const JsonNode& root, std::string_view schema, int version,
                             std::string_view what, std::string_view redo);

}  // namespace gm
