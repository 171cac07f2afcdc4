// Text ops: tokenize (bytes, whitespace, wordpiece) and pad.
//
//   {"op": "tokenize", "kind": "bytes", "offset": 0}
//       UTF-8 bytes of Sample::data -> int32 ids (byte value + offset).
//   {"op": "tokenize", "kind": "whitespace", "vocab": "vocab.txt",
//    "lowercase": true, "unk": "[UNK]"}
//       BERT's basic tokenizer (split on whitespace, punctuation and CJK
//       characters become tokens of their own, control characters dropped), then
//       each token -> its vocab id, or the unk id.
//   {"op": "tokenize", "kind": "wordpiece", same keys, "max_chars_per_word": 100}
//       basic tokenizer, then BERT WordPiece: greedy longest match first, with
//       "##" marking pieces that continue a word; a word with no full cover (or
//       longer than max_chars_per_word characters) becomes the unk id.
//   Output: Sample::tensor int32 [n], layout none. The vocab file holds one token
//   per line; a token's id is its 0-based line number (the first of duplicates
//   wins). A relative vocab path resolves against OpEnv::base_dir.
//   "lowercase" folds ASCII and Latin-1 letters and strips Latin-1 accents
//   ("Café" -> "cafe"), as BERT's uncased models expect; other scripts are kept
//   as they are. Invalid UTF-8 bytes are dropped.
//
//   {"op": "pad", "length": 128, "pad_id": 0}
//       pads a 1-D tensor (any dtype) with pad_id, or truncates it, to exactly
//       [length].
//
// Everything here is immutable after construction: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace gm {

// Token -> id. Immutable after loading.
class Vocab {
 public:
  // Reads one token per line ("\r\n" endings accepted). NotFound names the path.
  static Result<Vocab> Load(const std::string& path);
  // Token i gets id i.
  static Vocab FromTokens(const std::vector<std::string>& tokens);

  std::optional<int32_t> Find(std::string_view token) const;
  size_t size() const { return ids_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
};

// BERT's basic tokenizer: the tokens of `text` (UTF-8), see the header comment.
std::vector<std::string> BasicTokenize(std::string_view text, bool lowercase);

// Appends the WordPiece ids of one basic token to `out` (one `unk_id` when the
// word cannot be covered or has more than `max_chars` characters).
void AppendWordPieceIds(std::string_view word, const Vocab& vocab, int32_t unk_id, size_t max_chars,
                        std::vector<int32_t>& out);

}  // namespace gm
