// Reading JSON documents with errors that name the file, the JSON path and what
// was expected, e.g.
//   pipeline.json: $.stages[2].size: expected an array of 2 positive integers, got "224"
//
// JsonNode is a cheap view (pointer + path) into a document owned by the caller;
// it must not outlive the nlohmann::json it points to. Thread-compatible.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gm {

// Parses `text`; a syntax error names `origin`, the line and the column.
Result<nlohmann::json> ParseJson(std::string_view text, std::string_view origin);

// Reads and parses the file at `path`.
Result<nlohmann::json> LoadJsonFile(const std::string& path);

class JsonNode {
 public:
  JsonNode(const nlohmann::json& j, std::string origin, std::string path = "$")
      : j_(&j),
        origin_(std::make_shared<const std::string>(std::move(origin))),
        path_(std::move(path)) {}

  const nlohmann::json& json() const { return *j_; }
  const std::string& path() const { return path_; }
  const std::string& origin() const { return *origin_; }

  bool is_object() const { return j_->is_object(); }
  bool is_array() const { return j_->is_array(); }
  bool has(std::string_view key) const;

  // An error about this node: "origin: path: what".
  Status Error(std::string_view what) const;
  // "expected <expected>, got <short rendering of the value>".
  Status Expected(std::string_view expected) const;

  // Children. Missing keys or out-of-range indices are errors naming the path.
  Result<JsonNode> Get(std::string_view key) const;
  Result<JsonNode> At(size_t index) const;
  Result<std::vector<JsonNode>> Elements() const;  // must be an array

  // Typed reads of this node.
  Result<std::string> AsString() const;
  Result<double> AsNumber() const;
  Result<int64_t> AsInt() const;
  Result<bool> AsBool() const;
  Result<std::vector<double>> AsNumbers(std::optional<size_t> size = std::nullopt) const;
  Result<std::vector<std::string>> AsStrings() const;

  // Typed reads of a member; the `Or` forms return `fallback` when the key is absent.
  Result<std::string> String(std::string_view key) const;
  Result<std::string> StringOr(std::string_view key, std::string fallback) const;
  Result<double> NumberOr(std::string_view key, double fallback) const;
  Result<int64_t> Int(std::string_view key) const;
  Result<int64_t> IntOr(std::string_view key, int64_t fallback) const;
  Result<bool> BoolOr(std::string_view key, bool fallback) const;

  // Fails on the first key that is not in `allowed` (catches typos such as "sead").
  Status CheckKeys(std::initializer_list<std::string_view> allowed) const;

 private:
  JsonNode(const nlohmann::json* j, std::shared_ptr<const std::string> origin, std::string path)
      : j_(j), origin_(std::move(origin)), path_(std::move(path)) {}
  const nlohmann::json* j_;
  std::shared_ptr<const std::string> origin_;
  std::string path_;
};

}  // namespace gm
