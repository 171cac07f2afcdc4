#include "core/json.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "core/json_fields.h"
#include "core/os/file_util.h"

namespace gm {
namespace {

std::string ShortDump(const nlohmann::json& j) {
  // Replaces invalid UTF-8 (a string built in memory may hold any bytes) rather
  // than throwing while an error message is being written.
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

std::string TypeName(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  return ShortDump(j);
}

}  // namespace

Result<nlohmann::json> ParseJson(std::string_view text, std::string_view origin) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // Turn the byte offset into line:column for people.
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    auto pos = what.find("parse error");
    if (pos != std::string::npos) what = what.substr(pos);
    return Status::InvalidArgument(std::string(origin) + ":" + std::to_string(line) + ":" +
                                   std::to_string(col) + ": not valid JSON (" + what + ")");
  } catch (const nlohmann::json::exception& e) {
    // E.g. out_of_range for a number too large for a double.
    return Status::InvalidArgument(std::string(origin) + ": not valid JSON (" + e.what() + ")");
  }
}

Result<nlohmann::json> LoadJsonFile(const std::string& path) {
  GM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseJson(text, path);
}

bool JsonNode::has(std::string_view key) const { return j_->is_object() && j_->contains(key); }

Status JsonNode::Error(std::string_view what) const {
  return Status::InvalidArgument(*origin_ + ": " + path_ + ": " + std::string(what));
}

Status JsonNode::Expected(std::string_view expected) const {
  return Error("expected " + std::string(expected) + ", got " + TypeName(*j_));
}

Result<JsonNode> JsonNode::Get(std::string_view key) const {
  if (!j_->is_object()) return Expected("an object");
  auto it = j_->find(key);
  if (it == j_->end()) return Error("missing required key \"" + std::string(key) + "\"");
  return JsonNode(&*it, origin_, path_ + "." + std::string(key));
}

Result<JsonNode> JsonNode::At(size_t index) const {
  if (!j_->is_array()) return Expected("an array");
  if (index >= j_->size()) return Error("index " + std::to_string(index) + " out of range");
  return JsonNode(&(*j_)[index], origin_, path_ + "[" + std::to_string(index) + "]");
}

Result<std::vector<JsonNode>> JsonNode::Elements() const {
  if (!j_->is_array()) return Expected("an array");
  std::vector<JsonNode> out;
  out.reserve(j_->size());
  for (size_t i = 0; i < j_->size(); ++i) {
    out.push_back(JsonNode(&(*j_)[i], origin_, path_ + "[" + std::to_string(i) + "]"));
  }
  return out;
}

Result<std::string> JsonNode::AsString() const {
  if (!j_->is_string()) return Expected("a string");
  return j_->get<std::string>();
}

Result<double> JsonNode::AsNumber() const {
  if (!j_->is_number()) return Expected("a number");
  return j_->get<double>();
}

Result<int64_t> JsonNode::AsInt() const {
  if (j_->is_number_unsigned()) {
    const uint64_t u = j_->get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
    return Expected("an integer below 2^63");
  }
  if (j_->is_number_integer()) return j_->get<int64_t>();
  if (j_->is_number_float()) {
    // Only a whole number inside int64's range converts (a cast of anything else is
    // undefined behaviour; found by fuzz_pipeline).
    const double d = j_->get<double>();
    if (d >= -0x1p63 && d < 0x1p63 && d == std::trunc(d)) return static_cast<int64_t>(d);
  }
  return Expected("an integer");
}

Result<bool> JsonNode::AsBool() const {
  if (!j_->is_boolean()) return Expected("true or false");
  return j_->get<bool>();
}

Result<std::vector<double>> JsonNode::AsNumbers(std::optional<size_t> size) const {
  std::string want =
      size ? "an array of " + std::to_string(*size) + " numbers" : "an array of numbers";
  if (!j_->is_array() || (size && j_->size() != *size)) return Expected(want);
  std::vector<double> out;
  for (const auto& e : *j_) {
    if (!e.is_number()) return Expected(want);
    out.push_back(e.get<double>());
  }
  return out;
}

Result<std::vector<std::string>> JsonNode::AsStrings() const {
  if (!j_->is_array()) return Expected("an array of strings");
  std::vector<std::string> out;
  for (const auto& e : *j_) {
    if (!e.is_string()) return Expected("an array of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<std::string> JsonNode::String(std::string_view key) const {
  GM_ASSIGN_OR_RETURN(JsonNode n, Get(key));
  return n.AsString();
}

Result<std::string> JsonNode::StringOr(std::string_view key, std::string fallback) const {
  if (!has(key)) return fallback;
  return String(key);
}

Result<double> JsonNode::NumberOr(std::string_view key, double fallback) const {
  if (!has(key)) return fallback;
  GM_ASSIGN_OR_RETURN(JsonNode n, Get(key));
  return n.AsNumber();
}

Result<int64_t> JsonNode::Int(std::string_view key) const {
  GM_ASSIGN_OR_RETURN(JsonNode n, Get(key));
  return n.AsInt();
}

Result<int64_t> JsonNode::IntOr(std::string_view key, int64_t fallback) const {
  if (!has(key)) return fallback;
  return Int(key);
}

Result<bool> JsonNode::BoolOr(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  GM_ASSIGN_OR_RETURN(JsonNode n, Get(key));
  return n.AsBool();
}

Status JsonNode::CheckKeys(std::initializer_list<std::string_view> allowed) const {
  if (!j_->is_object()) return Expected("an object");
  for (const auto& [key, value] : j_->items()) {
    bool known = false;
    for (auto a : allowed) known = known || a == key;
    if (!known) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return Error("unknown key \"" + key + "\" (known keys: " + list + ")");
    }
  }
  return Status::Ok();
}

}  // namespace gm

namespace gm {

Status CheckSchemaAndVersion(const JsonNode& root, std::string_view schema, int version,
                             std::string_view what, std::string_view redo) {
  GM_ASSIGN_OR_RETURN(JsonNode schema_node, root.Get("schema"));
  GM_ASSIGN_OR_RETURN(std::string name, schema_node.AsString());
  if (name != schema) {
    return schema_node.Expected("\"" + std::string(schema) + "\" (is this " + std::string(what) +
                                "?)");
  }
  GM_ASSIGN_OR_RETURN(JsonNode version_node, root.Get("version"));
  GM_ASSIGN_OR_RETURN(int64_t v, version_node.AsInt());
  if (v != version) {
    return version_node.Error("this is " + std::string(schema) + " version " + std::to_string(v) +
                              "; this goldminer reads version " + std::to_string(version) + " (" +
                              std::string(redo) + ", or use the goldminer that wrote it)");
  }
  return Status::Ok();
}

}  // namespace gm
