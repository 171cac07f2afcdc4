// The "files" source: a directory tree filtered by a glob, sorted by path.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "core/os/file_util.h"
#include "worker/brace_expand.h"
#include "worker/sources_internal.h"

namespace gm {
namespace {

namespace fs = std::filesystem;

std::string LowerExtension(std::string_view rel_path) {
  size_t slash = rel_path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? rel_path : rel_path.substr(slash + 1);
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return "";
  std::string ext(name.substr(dot + 1));
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// The name of the file's parent directory; "" for a file directly under the root.
std::string ParentName(const std::string& rel_path) {
  return fs::path(rel_path).parent_path().filename().string();
}

class FilesSource : public Source {
 public:
  FilesSource(std::string root, std::vector<std::string> files, std::vector<int64_t> labels,
              size_t per_split)
      : root_(std::move(root)),
        files_(std::move(files)),
        labels_(std::move(labels)),
        per_split_(per_split) {
    for (size_t begin = 0; begin < files_.size(); begin += per_split) {
      size_t end = std::min(files_.size(), begin + per_split);
      splits_.push_back({splits_.size(),
                         "files[" + std::to_string(begin) + ".." + std::to_string(end - 1) + "]",
                         end - begin});
    }
  }

  const std::vector<Split>& splits() const override { return splits_; }
  uint64_t size_hint() const override { return files_.size(); }

  Status ReadSplit(size_t split_id, const EmitFn& emit) const override {
    return ReadIndexedSplit(*this, "files", split_id, per_split_, emit);
  }

  bool indexable() const override { return true; }

  Status ReadSample(uint64_t index, const EmitFn& emit) const override {
    if (index >= files_.size()) {
      return Status::InvalidArgument("files source: no sample " + std::to_string(index));
    }
    Sample sample;
    sample.index = index;
    sample.key = files_[index];
    sample.label = labels_[index];
    sample.ext = LowerExtension(files_[index]);
    Result<std::string> bytes = ReadFile(root_ + "/" + files_[index]);
    Status status = bytes.status();
    if (bytes.ok()) sample.data = std::move(bytes).value();
    if (!emit(std::move(sample), status)) return Status::Cancelled("reading stopped");
    return Status::Ok();
  }

 private:
  std::string root_;
  std::vector<std::string> files_;  // relative to root_, sorted
  std::vector<int64_t> labels_;     // one per file
  size_t per_split_;
  std::vector<Split> splits_;
};

// Relative paths of the regular files under `root` matching any of `patterns`.
// Symbolic links to folders are followed (datasets are often assembled from
// links, and torchvision's ImageFolder follows them too), except into a folder
// already on the way down from `root`, which would loop. Two links to one folder
// list its files under both names, as ImageFolder does.
Result<std::vector<std::string>> ListMatches(const std::string& root,
                                             const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  std::error_code ec;
  std::vector<fs::path> way_down = {fs::canonical(root, ec)};  // real folders by depth
  ec.clear();
  fs::recursive_directory_iterator it(root,
                                      fs::directory_options::skip_permission_denied |
                                          fs::directory_options::follow_directory_symlink,
                                      ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      std::error_code canon_ec;
      fs::path real = fs::canonical(it->path(), canon_ec);
      way_down.resize(static_cast<size_t>(it.depth()) + 1);
      if (canon_ec || std::find(way_down.begin(), way_down.end(), real) != way_down.end()) {
        it.disable_recursion_pending();
      } else {
        way_down.push_back(std::move(real));
      }
      continue;
    }
    if (!it->is_regular_file(type_ec)) continue;
    std::string rel = it->path().lexically_relative(root).generic_string();
    for (const auto& p : patterns) {
      if (GlobMatch(p, rel)) {
        out.push_back(std::move(rel));
        break;
      }
    }
  }
  if (ec) return Status::FromErrno(ec.value(), root + ": cannot list directory");
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> ParentDirLabels(const std::vector<std::string>& files) {
  std::map<std::string, int64_t> classes;
  for (const auto& f : files) classes.emplace(ParentName(f), 0);
  int64_t next = 0;
  for (auto& [name, id] : classes) id = next++;
  std::vector<int64_t> labels;
  labels.reserve(files.size());
  for (const auto& f : files) labels.push_back(classes[ParentName(f)]);
  return labels;
}

}  // namespace

Result<std::unique_ptr<Source>> MakeFilesSource(const JsonNode& source, const SourceEnv& env) {
  GM_RETURN_IF_ERROR(source.CheckKeys({"type", "root", "pattern", "label"}));
  GM_ASSIGN_OR_RETURN(std::string root_text, source.String("root"));
  GM_ASSIGN_OR_RETURN(std::string pattern, source.StringOr("pattern", "**/*"));
  GM_ASSIGN_OR_RETURN(std::string label, source.StringOr("label", "none"));
  GM_ASSIGN_OR_RETURN(JsonNode root_node, source.Get("root"));
  if (label != "none" && label != "parent_dir") {
    GM_ASSIGN_OR_RETURN(JsonNode label_node, source.Get("label"));
    return label_node.Expected("\"parent_dir\" or \"none\"");
  }
  std::string root = ResolvePath(env.base_dir, root_text);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return root_node.Error("directory " + root + " does not exist (or is not a directory)");
  }
  auto patterns = ExpandBraces(pattern);
  if (!patterns.ok()) return source.Error("pattern " + patterns.status().message());
  GM_ASSIGN_OR_RETURN(std::vector<std::string> files, ListMatches(root, *patterns));
  if (files.empty()) {
    return source.Error("no file under " + root + " matches the pattern \"" + pattern + "\"");
  }
  std::vector<int64_t> labels =
      label == "parent_dir" ? ParentDirLabels(files) : std::vector<int64_t>(files.size(), -1);
  size_t per_split = std::max<size_t>(1, env.samples_per_split);
  return std::unique_ptr<Source>(std::make_unique<FilesSource>(std::move(root), std::move(files),
                                                               std::move(labels), per_split));
}

}  // namespace gm
