#include "worker/tar_reader.h"

#include <algorithm>
#include <charconv>
#include <optional>

namespace gm {
namespace {

constexpr uint64_t kBlock = 512;

struct Header {
  std::string name;
  uint64_t size = 0;
  char type = '0';
};

// A NUL-terminated (or full-width) text field.
std::string_view Field(std::string_view h, size_t at, size_t len) {
  std::string_view f = h.substr(at, len);
  size_t nul = f.find('\0');
  return nul == std::string_view::npos ? f : f.substr(0, nul);
}

// Octal digits, optionally surrounded by spaces/NULs, or GNU base-256 (top bit of
// the first byte set). nullopt for anything else.
std::optional<uint64_t> ParseNumber(std::string_view f) {
  if (!f.empty() && (static_cast<unsigned char>(f[0]) & 0x80) != 0) {
    if (static_cast<unsigned char>(f[0]) & 0x40) return std::nullopt;  // negative
    uint64_t v = static_cast<unsigned char>(f[0]) & 0x3f;
    for (size_t i = 1; i < f.size(); ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | static_cast<unsigned char>(f[i]);
    }
    return v;
  }
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  uint64_t v = 0;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + static_cast<uint64_t>(f[i] - '0');
  }
  for (; i < f.size(); ++i) {
    if (f[i] != ' ' && f[i] != '\0') return std::nullopt;
  }
  return v;
}

bool IsZeroBlock(std::string_view h) {
  return std::all_of(h.begin(), h.end(), [](char c) { return c == '\0'; });
}

// The stored checksum must equal the sum of the header bytes with the checksum
// field read as spaces (unsigned, or signed as some old writers did).
bool ChecksumOk(std::string_view h) {
  auto stored = ParseNumber(h.substr(148, 8));
  if (!stored) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    char c = (i >= 148 && i < 156) ? ' ' : h[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  return *stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum;
}

// Parses one 512-byte header; returns the reason when it is broken.
std::optional<std::string> ParseHeader(std::string_view h, Header* out) {
  if (!ChecksumOk(h)) return "header checksum mismatch";
  auto size = ParseNumber(h.substr(124, 12));
  if (!size) return "bad size field";
  out->size = *size;
  out->type = h[156];
  out->name = std::string(Field(h, 0, 100));
  bool posix_ustar = h.substr(257, 6) == std::string_view("ustar\0", 6);
  std::string_view prefix = Field(h, 345, 155);
  if (posix_ustar && !prefix.empty()) out->name = std::string(prefix) + "/" + out->name;
  return std::nullopt;
}

// The "path" record of a pax extended header ("<len> path=<value>\n" records), or
// "" when there is none; nullopt when the records are malformed.
std::optional<std::string> PaxPath(std::string_view records) {
  std::string path;
  while (!records.empty()) {
    size_t space = records.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    uint64_t len = 0;
    auto [end, ec] = std::from_chars(records.data(), records.data() + space, len);
    if (ec != std::errc() || end != records.data() + space || len <= space + 1 ||
        len > records.size()) {
      return std::nullopt;
    }
    std::string_view rec = records.substr(space + 1, len - space - 1);
    if (rec.empty() || rec.back() != '\n') return std::nullopt;
    rec.remove_suffix(1);
    if (rec.substr(0, 5) == "path=") path = std::string(rec.substr(5));
    records.remove_prefix(len);
  }
  return path;
}

bool IsRegularFile(char type) { return type == '0' || type == '\0' || type == '7'; }

}  // namespace

Status TarReader::Fail(uint64_t at, std::string_view reason) {
  error_ = Status::Corrupt("byte " + std::to_string(at) + ": " + std::string(reason));
  return error_;
}

Result<bool> TarReader::Next(TarMember* member) {
  if (!error_.ok()) return error_;
  std::optional<std::string> next_name;  // from a GNU long name or a pax header
  while (!done_) {
    if (offset_ == archive_.size()) break;
    if (archive_.size() - offset_ < kBlock) return Fail(offset_, "truncated header");
    std::string_view h = archive_.substr(offset_, kBlock);
    if (IsZeroBlock(h)) break;
    Header header;
    if (auto reason = ParseHeader(h, &header)) return Fail(offset_, *reason);
    uint64_t header_at = offset_;
    uint64_t data_at = offset_ + kBlock;
    if (header.size > archive_.size() - data_at) {
      return Fail(header_at, "member \"" + header.name + "\" truncated: needs " +
                                 std::to_string(header.size) + " bytes, " +
                                 std::to_string(archive_.size() - data_at) + " left");
    }
    std::string_view data = archive_.substr(data_at, header.size);
    uint64_t padded = (header.size + kBlock - 1) / kBlock * kBlock;
    offset_ = std::min<uint64_t>(data_at + padded, archive_.size());
    if (header.type == 'L') {
      next_name = std::string(Field(data, 0, data.size()));
    } else if (header.type == 'x') {
      auto path = PaxPath(data);
      if (!path) return Fail(header_at, "malformed pax header");
      if (!path->empty()) next_name = std::move(*path);
    } else if (IsRegularFile(header.type)) {
      member->name = next_name ? std::move(*next_name) : std::move(header.name);
      member->data = data;
      member->offset = header_at;
      return true;
    } else if (header.type != 'K' && header.type != 'g') {
      next_name.reset();  // a directory, link, device, ... consumes the pending name
    }
  }
  done_ = true;
  return false;
}

}  // namespace gm
