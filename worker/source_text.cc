// The "jsonl" source (one JSON object per line) and the "range" source (bare
// indices for user map-style datasets).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>

#include "worker/brace_expand.h"
#include "worker/http.h"
#include "worker/sources_internal.h"

namespace gm {
namespace {

bool IsBlank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](unsigned char c) { return std::isspace(c) != 0; });
}

// Non-blank lines of a local file, counted while streaming it; nullopt when it
// cannot be read (ReadSplit reports why).
std::optional<uint64_t> CountLines(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  uint64_t lines = 0;
  bool content = false;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        lines += content ? 1 : 0;
        content = false;
      } else if (!std::isspace(static_cast<unsigned char>(buf[i]))) {
        content = true;
      }
    }
  }
  std::fclose(f);
  return lines + (content ? 1 : 0);
}

class JsonlSource : public Source {
 public:
  JsonlSource(std::vector<Split> splits, std::string field, std::string label_field,
              const SourceEnv& env)
      : splits_(std::move(splits)),
        field_(std::move(field)),
        label_field_(std::move(label_field)),
        env_(env) {
    for (const auto& s : splits_) size_hint_ += s.count;
    bool all_counted = std::all_of(splits_.begin(), splits_.end(),
                                   [](const Split& s) { return !IsHttpUrl(s.name); });
    if (!all_counted) size_hint_ = 0;
  }

  const std::vector<Split>& splits() const override { return splits_; }
  uint64_t size_hint() const override { return size_hint_; }

  Status ReadSplit(size_t split_id, const EmitFn& emit) const override {
    if (split_id >= splits_.size()) {
      return Status::InvalidArgument("jsonl source: no split " + std::to_string(split_id));
    }
    GM_ASSIGN_OR_RETURN(std::string text, FetchWhole(splits_[split_id].name, env_));
    std::string_view rest = text;
    for (uint64_t line = 1; !rest.empty(); ++line) {
      size_t nl = rest.find('\n');
      std::string_view row = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      if (IsBlank(row)) continue;
      Sample sample;
      sample.index = (static_cast<uint64_t>(split_id) << 32) | (line - 1);
      sample.key = RedactUrl(splits_[split_id].name) + ":" + std::to_string(line);
      sample.ext = "txt";
      Status status = ParseRow(row, &sample);
      if (!emit(std::move(sample), status)) {
        return Status::Cancelled(splits_[split_id].name + ": reading stopped");
      }
    }
    return Status::Ok();
  }

 private:
  Status ParseRow(std::string_view row, Sample* sample) const {
    nlohmann::json j = nlohmann::json::parse(row, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Status::Corrupt(sample->key + ": not valid JSON");
    if (!j.is_object()) return Status::Corrupt(sample->key + ": expected a JSON object");
    auto it = j.find(field_);
    if (it == j.end() || !it->is_string()) {
      return Status::Corrupt(sample->key + ": field \"" + field_ + "\" is missing or not a string");
    }
    sample->data = it->get<std::string>();
    if (label_field_.empty()) return Status::Ok();
    auto label = j.find(label_field_);
    if (label == j.end() || !label->is_number_integer()) {
      return Status::Corrupt(sample->key + ": label field \"" + label_field_ +
                             "\" is missing or not an integer");
    }
    sample->label = label->get<int64_t>();
    return Status::Ok();
  }

  std::vector<Split> splits_;
  std::string field_;
  std::string label_field_;
  SourceEnv env_;
  uint64_t size_hint_ = 0;
};

class RangeSource : public Source {
 public:
  RangeSource(uint64_t count, uint64_t per_split) : count_(count), per_split_(per_split) {
    for (uint64_t begin = 0; begin < count; begin += per_split) {
      uint64_t end = std::min(count, begin + per_split);
      splits_.push_back({splits_.size(),
                         "range[" + std::to_string(begin) + ".." + std::to_string(end - 1) + "]",
                         end - begin});
    }
  }

  const std::vector<Split>& splits() const override { return splits_; }
  uint64_t size_hint() const override { return count_; }

  Status ReadSplit(size_t split_id, const EmitFn& emit) const override {
    return ReadIndexedSplit(*this, "range", split_id, per_split_, emit);
  }

  bool indexable() const override { return true; }

  Status ReadSample(uint64_t index, const EmitFn& emit) const override {
    if (index >= count_) {
      return Status::InvalidArgument("range source: no sample " + std::to_string(index));
    }
    Sample sample;
    sample.index = index;
    sample.key = "range:" + std::to_string(index);
    if (!emit(std::move(sample), Status::Ok())) return Status::Cancelled("reading stopped");
    return Status::Ok();
  }

 private:
  uint64_t count_;
  uint64_t per_split_;
  std::vector<Split> splits_;
};

}  // namespace

Result<std::unique_ptr<Source>> MakeJsonlSource(const JsonNode& source, const SourceEnv& env) {
  GM_RETURN_IF_ERROR(source.CheckKeys({"type", "paths", "field", "label_field"}));
  GM_ASSIGN_OR_RETURN(JsonNode paths_node, source.Get("paths"));
  GM_ASSIGN_OR_RETURN(std::vector<JsonNode> paths, paths_node.Elements());
  GM_ASSIGN_OR_RETURN(std::string field, source.StringOr("field", "text"));
  GM_ASSIGN_OR_RETURN(std::string label_field, source.StringOr("label_field", ""));
  std::vector<Split> splits;
  for (const auto& path : paths) {
    GM_ASSIGN_OR_RETURN(std::string text, path.AsString());
    auto expanded = ExpandBraces(text);
    if (!expanded.ok()) return path.Error(expanded.status().message());
    for (auto& name : *expanded) {
      uint64_t count = 0;
      if (!IsHttpUrl(name)) {
        auto lines = CountLines(ResolvePath(env.base_dir, name));
        if (!lines) return path.Error("cannot read " + ResolvePath(env.base_dir, name));
        count = *lines;
      }
      splits.push_back({splits.size(), std::move(name), count});
    }
  }
  if (splits.empty()) return paths_node.Expected("a non-empty array of paths");
  return std::unique_ptr<Source>(std::make_unique<JsonlSource>(std::move(splits), std::move(field),
                                                               std::move(label_field), env));
}

// A range source lists its splits up front: this many at most (a count far past
// it would hold the process building them).
constexpr uint64_t kMaxRangeSplits = uint64_t{1} << 20;

Result<std::unique_ptr<Source>> MakeRangeSource(const JsonNode& source, const SourceEnv& env) {
  GM_RETURN_IF_ERROR(source.CheckKeys({"type", "count"}));
  GM_ASSIGN_OR_RETURN(int64_t count, source.Int("count"));
  const uint64_t per_split = std::max<uint64_t>(1, env.samples_per_split);
  const uint64_t most = kMaxRangeSplits * per_split;
  if (count <= 0 || static_cast<uint64_t>(count) > most) {
    GM_ASSIGN_OR_RETURN(JsonNode count_node, source.Get("count"));
    return count_node.Expected(count <= 0 ? "a positive integer"
                                          : "at most " + std::to_string(most) + " (" +
                                                std::to_string(kMaxRangeSplits) + " splits of " +
                                                std::to_string(per_split) +
                                                " samples; raise --samples-per-split for more)");
  }
  return std::unique_ptr<Source>(
      std::make_unique<RangeSource>(static_cast<uint64_t>(count), per_split));
}

}  // namespace gm
