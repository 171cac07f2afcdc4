#include "worker/text_ops.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "core/os/file_util.h"
#include "worker/op.h"

namespace gm {
namespace {

// ---- UTF-8 and character classes (the subset of Unicode BERT's tokenizer uses) ----

constexpr char32_t kReplacement = 0xFFFD;

// Decodes the code point at text[pos], advancing pos; invalid sequences yield
// kReplacement and advance one byte.
char32_t NextCodePoint(std::string_view text, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  uint8_t b0 = byte(pos);
  size_t len = b0 < 0x80           ? 1
               : (b0 >> 5) == 0x6  ? 2
               : (b0 >> 4) == 0xE  ? 3
               : (b0 >> 3) == 0x1E ? 4
                                   : 0;
  if (len == 0 || pos + len > text.size()) {
    ++pos;
    return kReplacement;
  }
  char32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) {
      ++pos;
      return kReplacement;
    }
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  pos += len;
  bool bad = cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF);
  return bad ? kReplacement : cp;
}

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

struct Range {
  char32_t lo, hi;
};

template <size_t N>
bool InRanges(char32_t cp, const Range (&ranges)[N]) {
  for (const Range& r : ranges) {
    if (cp >= r.lo && cp <= r.hi) return true;
  }
  return false;
}

bool IsWhitespace(char32_t cp) {
  static constexpr Range kSpaces[] = {{' ', ' '},       {'\t', '\n'},     {'\r', '\r'},
                                      {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                                      {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
  return InRanges(cp, kSpaces);
}

// Dropped like BERT's _clean_text: NUL, U+FFFD, control and format characters.
bool IsDropped(char32_t cp) {
  static constexpr Range kDropped[] = {{0x00, 0x08},     {0x0B, 0x0C},     {0x0E, 0x1F},
                                       {0x7F, 0x9F},     {0xAD, 0xAD},     {0x200B, 0x200F},
                                       {0x2060, 0x2064}, {0xFEFF, 0xFEFF}, {0xFFFD, 0xFFFD}};
  return InRanges(cp, kDropped);
}

// ASCII symbols count as punctuation (as in BERT), plus the common Unicode
// punctuation blocks.
bool IsPunctuation(char32_t cp) {
  static constexpr Range kPunct[] = {
      {33, 47},         {58, 64},         {91, 96},         {123, 126},       {0xA1, 0xA1},
      {0xA7, 0xA7},     {0xAB, 0xAB},     {0xB6, 0xB7},     {0xBB, 0xBB},     {0xBF, 0xBF},
      {0x2010, 0x2027}, {0x2030, 0x205E}, {0x3001, 0x3003}, {0x3008, 0x3011}, {0x3014, 0x301F},
      {0xFF01, 0xFF0F}, {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65}};
  return InRanges(cp, kPunct);
}

bool IsCjk(char32_t cp) {
  static constexpr Range kCjk[] = {{0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF},
                                   {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F}, {0x2B820, 0x2CEAF},
                                   {0xF900, 0xFAFF},   {0x2F800, 0x2FA1F}};
  return InRanges(cp, kCjk);
}

// Lowercase with Latin-1 accents stripped, as NFD + dropping marks would do.
char32_t Fold(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0xC0 || cp > 0xFF) return cp;
  static constexpr char kBase[] =
      "aaaaaa\0ceeeeiiii\0nooooo\0\0uuuuy\0\0aaaaaa\0ceeeeiiii\0nooooo\0\0uuuuy\0y";
  char base = kBase[cp - 0xC0];
  if (base != '\0') return static_cast<char32_t>(base);
  // No decomposition (Æ Ð × Ø Þ ß and their lowercase): just lowercase letters.
  return (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) ? cp + 32 : cp;
}

// ---- ops ----

enum class TokenizerKind { kBytes, kWhitespace, kWordPiece };

class TokenizeOp : public Op {
 public:
  TokenizeOp(TokenizerKind kind, int64_t offset, std::shared_ptr<const Vocab> vocab, bool lowercase,
             int32_t unk_id, size_t max_chars)
      : kind_(kind),
        offset_(offset),
        vocab_(std::move(vocab)),
        lowercase_(lowercase),
        unk_id_(unk_id),
        max_chars_(max_chars) {}

  std::string name() const override { return "tokenize"; }

  Status Apply(Sample& sample, const RunContext&) const override {
    std::vector<int32_t> ids;
    if (kind_ == TokenizerKind::kBytes) {
      ids.reserve(sample.data.size());
      for (char c : sample.data)
        ids.push_back(static_cast<int32_t>(static_cast<uint8_t>(c) + offset_));
    } else {
      for (const std::string& token : BasicTokenize(sample.data, lowercase_)) {
        if (kind_ == TokenizerKind::kWordPiece) {
          AppendWordPieceIds(token, *vocab_, unk_id_, max_chars_, ids);
        } else {
          ids.push_back(vocab_->Find(token).value_or(unk_id_));
        }
      }
    }
    sample.tensor.Reset(DType::kInt32, {static_cast<int64_t>(ids.size())});
    if (!ids.empty())
      std::memcpy(sample.tensor.bytes.data(), ids.data(), ids.size() * sizeof(int32_t));
    sample.layout = Layout::kNone;
    sample.normalized = false;
    return Status::Ok();
  }

 private:
  TokenizerKind kind_;
  int64_t offset_;
  std::shared_ptr<const Vocab> vocab_;
  bool lowercase_;
  int32_t unk_id_;
  size_t max_chars_;
};

template <typename T>
void Fill(uint8_t* dst, size_t count, double value) {
  T v = static_cast<T>(value);
  for (size_t i = 0; i < count; ++i) std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
}

class PadOp : public Op {
 public:
  PadOp(int64_t length, double pad_id) : length_(length), pad_id_(pad_id) {}
  std::string name() const override { return "pad"; }

  Status Apply(Sample& sample, const RunContext&) const override {
    Tensor& t = sample.tensor;
    if (t.shape.size() != 1) {
      return Status::InvalidArgument("pad: expected a 1-D tensor (run tokenize first), got shape " +
                                     ShapeString(t.shape));
    }
    size_t es = DTypeSize(t.dtype);
    size_t keep = std::min(static_cast<size_t>(t.shape[0]), static_cast<size_t>(length_));
    t.bytes.resize(static_cast<size_t>(length_) * es);
    t.shape[0] = length_;
    uint8_t* rest = t.bytes.data() + keep * es;
    size_t count = static_cast<size_t>(length_) - keep;
    switch (t.dtype) {
      case DType::kUInt8:
        Fill<uint8_t>(rest, count, pad_id_);
        break;
      case DType::kInt32:
        Fill<int32_t>(rest, count, pad_id_);
        break;
      case DType::kInt64:
        Fill<int64_t>(rest, count, pad_id_);
        break;
      case DType::kFloat32:
        Fill<float>(rest, count, pad_id_);
        break;
    }
    return Status::Ok();
  }

 private:
  int64_t length_;
  double pad_id_;
};

Result<std::unique_ptr<Op>> MakeVocabTokenizer(const JsonNode& stage, const OpEnv& env,
                                               TokenizerKind kind) {
  if (kind == TokenizerKind::kWordPiece) {
    GM_RETURN_IF_ERROR(
        stage.CheckKeys({"op", "kind", "vocab", "lowercase", "unk", "max_chars_per_word"}));
  } else {
    GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "kind", "vocab", "lowercase", "unk"}));
  }
  GM_ASSIGN_OR_RETURN(JsonNode vocab_node, stage.Get("vocab"));
  GM_ASSIGN_OR_RETURN(std::string vocab_path, vocab_node.AsString());
  std::filesystem::path p(vocab_path);
  if (p.is_relative() && !env.base_dir.empty()) p = std::filesystem::path(env.base_dir) / p;
  auto vocab = Vocab::Load(p.string());
  if (!vocab.ok()) return vocab_node.Error("cannot load vocab: " + vocab.status().message());
  GM_ASSIGN_OR_RETURN(bool lowercase, stage.BoolOr("lowercase", true));
  GM_ASSIGN_OR_RETURN(std::string unk, stage.StringOr("unk", "[UNK]"));
  std::optional<int32_t> unk_id = vocab->Find(unk);
  if (!unk_id) return stage.Error("unk token \"" + unk + "\" is not in " + p.string());
  GM_ASSIGN_OR_RETURN(int64_t max_chars, stage.IntOr("max_chars_per_word", 100));
  if (max_chars < 1) return (*stage.Get("max_chars_per_word")).Expected("a positive integer");
  auto shared = std::make_shared<const Vocab>(std::move(vocab).value());
  return std::unique_ptr<Op>(std::make_unique<TokenizeOp>(kind, 0, std::move(shared), lowercase,
                                                          *unk_id, static_cast<size_t>(max_chars)));
}

Result<std::unique_ptr<Op>> MakeTokenize(const JsonNode& stage, const OpEnv& env) {
  GM_ASSIGN_OR_RETURN(std::string kind, stage.StringOr("kind", "bytes"));
  if (kind == "whitespace") return MakeVocabTokenizer(stage, env, TokenizerKind::kWhitespace);
  if (kind == "wordpiece") return MakeVocabTokenizer(stage, env, TokenizerKind::kWordPiece);
  if (kind != "bytes") {
    return (*stage.Get("kind")).Expected("\"bytes\", \"whitespace\" or \"wordpiece\"");
  }
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "kind", "offset"}));
  GM_ASSIGN_OR_RETURN(int64_t offset, stage.IntOr("offset", 0));
  if (offset < 0 || offset > std::numeric_limits<int32_t>::max() - 255) {
    return (*stage.Get("offset")).Expected("an integer from 0 to 2147483392");
  }
  return std::unique_ptr<Op>(
      std::make_unique<TokenizeOp>(TokenizerKind::kBytes, offset, nullptr, false, 0, 0));
}

Result<std::unique_ptr<Op>> MakePad(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "length", "pad_id"}));
  GM_ASSIGN_OR_RETURN(int64_t length, stage.Int("length"));
  if (length < 1 || length > (int64_t{1} << 30)) {
    return (*stage.Get("length")).Expected("an integer from 1 to 1073741824");
  }
  GM_ASSIGN_OR_RETURN(double pad_id, stage.NumberOr("pad_id", 0));
  return std::unique_ptr<Op>(std::make_unique<PadOp>(length, pad_id));
}

}  // namespace

Result<Vocab> Vocab::Load(const std::string& path) {
  GM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::vector<std::string> tokens;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    tokens.emplace_back(line);
    start = end + 1;
  }
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(path + ": too many tokens");
  }
  return FromTokens(tokens);
}

Vocab Vocab::FromTokens(const std::vector<std::string>& tokens) {
  Vocab v;
  v.ids_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) v.ids_.emplace(tokens[i], static_cast<int32_t>(i));
  return v;
}

std::optional<int32_t> Vocab::Find(std::string_view token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> BasicTokenize(std::string_view text, bool lowercase) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = NextCodePoint(text, pos);
    if (IsDropped(cp)) continue;
    if (IsWhitespace(cp)) {
      flush();
      continue;
    }
    if (lowercase) cp = Fold(cp);
    if (IsPunctuation(cp) || IsCjk(cp)) {
      flush();
      AppendUtf8(cp, current);
      flush();
      continue;
    }
    AppendUtf8(cp, current);
  }
  flush();
  return tokens;
}

void AppendWordPieceIds(std::string_view word, const Vocab& vocab, int32_t unk_id, size_t max_chars,
                        std::vector<int32_t>& out) {
  // Byte offsets of character boundaries (the word is valid UTF-8 by now).
  std::vector<size_t> bounds{0};
  for (size_t pos = 0; pos < word.size();) {
    NextCodePoint(word, pos);
    bounds.push_back(pos);
  }
  size_t chars = bounds.size() - 1;
  if (chars > max_chars) {
    out.push_back(unk_id);
    return;
  }
  size_t first_piece = out.size();
  std::string piece;
  for (size_t start = 0; start < chars;) {
    std::optional<int32_t> id;
    size_t end = chars;
    for (; end > start; --end) {
      piece.assign(start > 0 ? "##" : "");
      piece.append(word.substr(bounds[start], bounds[end] - bounds[start]));
      id = vocab.Find(piece);
      if (id) break;
    }
    if (!id) {
      out.resize(first_piece);
      out.push_back(unk_id);
      return;
    }
    out.push_back(*id);
    start = end;
  }
}

void RegisterTextOps(OpRegistry& registry) {
  registry.Add("tokenize", MakeTokenize);
  registry.Add("pad", MakePad);
}

}  // namespace gm
