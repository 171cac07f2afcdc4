// The "tar" source: WebDataset-style tar shards, local or over HTTP(S).
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include "worker/brace_expand.h"
#include "worker/http.h"
#include "worker/sources_internal.h"
#include "worker/tar_reader.h"

namespace gm {
namespace {

constexpr std::array<std::string_view, 8> kImageExts = {"jpg", "jpeg", "png",  "webp",
                                                        "bmp", "gif",  "tiff", "tif"};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Members of one sample: consecutive members sharing a basename.
struct Group {
  std::string basename;  // directory kept, e.g. "train/0001"
  std::vector<std::pair<std::string, std::string_view>> members;  // (extension, bytes)
};

// Splits "dir/0001.seg.png" into basename "dir/0001" and extension "seg.png".
void SplitMemberName(const std::string& name, std::string* basename, std::string* ext) {
  size_t slash = name.rfind('/');
  size_t start = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = name.find('.', start);
  *basename = name.substr(0, dot);
  *ext = dot == std::string::npos ? "" : name.substr(dot + 1);
}

bool IsMacMetadata(const std::string& name) {
  size_t slash = name.rfind('/');
  return name.compare(slash == std::string::npos ? 0 : slash + 1, 2, "._") == 0;
}

// The member that becomes Sample::data: the first image by preference, else the first.
size_t PickDataMember(const Group& group) {
  for (std::string_view want : kImageExts) {
    for (size_t i = 0; i < group.members.size(); ++i) {
      if (Lower(group.members[i].first) == want) return i;
    }
  }
  return 0;
}

// A "cls" member holds a decimal class id, perhaps with surrounding whitespace.
Status ParseLabel(std::string_view text, const std::string& key, int64_t* label) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *label);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    *label = -1;
    return Status::Corrupt(key + ": the cls member is not a decimal integer");
  }
  return Status::Ok();
}

class TarSource : public Source {
 public:
  TarSource(const std::vector<std::string>& shards, const SourceEnv& env) : env_(env) {
    for (const auto& shard : shards) splits_.push_back({splits_.size(), shard, 0});
  }

  const std::vector<Split>& splits() const override { return splits_; }
  uint64_t size_hint() const override { return 0; }

  Status ReadSplit(size_t split_id, const EmitFn& emit) const override {
    if (split_id >= splits_.size()) {
      return Status::InvalidArgument("tar source: no split " + std::to_string(split_id));
    }
    GM_ASSIGN_OR_RETURN(std::string bytes, FetchWhole(splits_[split_id].name, env_));
    return ReadShard(split_id, bytes, emit);
  }

 private:
  Status ReadShard(size_t shard, std::string_view bytes, const EmitFn& emit) const {
    const std::string& name = splits_[shard].name;
    TarReader reader(bytes);
    Group group;
    uint64_t position = 0;
    TarMember member;
    for (;;) {
      Result<bool> more = reader.Next(&member);
      if (!more.ok()) return Status::Corrupt(name + ": broken tar at " + more.status().message());
      std::string basename, ext;
      if (*more) {
        if (IsMacMetadata(member.name)) continue;
        SplitMemberName(member.name, &basename, &ext);
        if (!group.members.empty() && basename == group.basename) {
          group.members.emplace_back(std::move(ext), member.data);
          continue;
        }
      }
      if (!group.members.empty() && !Emit(shard, position++, group, emit)) {
        return Status::Cancelled(name + ": reading stopped");
      }
      if (!*more) return Status::Ok();
      group.basename = std::move(basename);
      group.members.assign(1, {std::move(ext), member.data});
    }
  }

  bool Emit(size_t shard, uint64_t position, const Group& group, const EmitFn& emit) const {
    Sample sample;
    sample.index = (static_cast<uint64_t>(shard) << 32) | position;
    // Keys travel to the trainer and into logs: a URL's credentials and query
    // (often a signed token, which also changes between runs) stay out of them.
    sample.key = RedactUrl(splits_[shard].name) + "#" + group.basename;
    size_t data_at = PickDataMember(group);
    Status status;
    for (size_t i = 0; i < group.members.size(); ++i) {
      const auto& [ext, data] = group.members[i];
      if (Lower(ext) == "cls") status = ParseLabel(data, sample.key, &sample.label);
      if (i == data_at) {
        sample.data = std::string(data);
        sample.ext = Lower(ext);
      } else {
        sample.fields[ext] = std::string(data);
      }
    }
    return emit(std::move(sample), status);
  }

  SourceEnv env_;
  std::vector<Split> splits_;
};

}  // namespace

Result<std::unique_ptr<Source>> MakeTarSource(const JsonNode& source, const SourceEnv& env) {
  GM_RETURN_IF_ERROR(source.CheckKeys({"type", "urls"}));
  GM_ASSIGN_OR_RETURN(JsonNode urls_node, source.Get("urls"));
  GM_ASSIGN_OR_RETURN(std::vector<JsonNode> urls, urls_node.Elements());
  std::vector<std::string> shards;
  for (const auto& url : urls) {
    GM_ASSIGN_OR_RETURN(std::string text, url.AsString());
    auto expanded = ExpandBraces(text);
    if (!expanded.ok()) return url.Error(expanded.status().message());
    shards.insert(shards.end(), expanded->begin(), expanded->end());
  }
  if (shards.empty()) return urls_node.Expected("a non-empty array of shard paths or URLs");
  if (shards.size() > (uint64_t{1} << 32)) return urls_node.Error("more than 2^32 shards");
  return std::unique_ptr<Source>(std::make_unique<TarSource>(shards, env));
}

}  // namespace gm
