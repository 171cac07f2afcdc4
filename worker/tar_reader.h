// TarReader: walks the regular-file members of a tar archive held in memory.
//
// Understands ustar/POSIX headers (the ustar "prefix" joins the name), GNU long
// names (a "././@LongLink" 'L' entry names the next member), pax extended headers
// (their "path" record names the next member; other records are ignored), and GNU
// base-256 sizes. Every header's checksum is verified. Directories, links, devices
// and FIFOs are skipped. The archive ends at two zero blocks, or at the end of the
// buffer on a header boundary (a zero-byte buffer is an empty archive).
//
// The reader does not copy the archive: a member's `data` points into the buffer,
// which must outlive the reader and the members. Thread-compatible: one reader per
// thread; several readers may share one buffer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gm {

struct TarMember {
  std::string name;       // full path inside the archive, e.g. "train/n01/0001.jpg"
  std::string_view data;  // the member's bytes (into the reader's buffer)
  uint64_t offset = 0;    // byte offset of the member's header in the archive
};

class TarReader {
 public:
  explicit TarReader(std::string_view archive) : archive_(archive) {}

  // Moves to the next regular file. Returns true and fills `member`; false at the
  // end of the archive. Corrupt when a header is broken (bad checksum, bad size
  // field) or the archive is truncated; the message reads "byte N: reason" with N
  // the offset of the damage, and every later call returns the same error.
  Result<bool> Next(TarMember* member);

  // Byte offset of the next header to be read.
  uint64_t offset() const { return offset_; }

 private:
  Status Fail(uint64_t at, std::string_view reason);

  std::string_view archive_;
  uint64_t offset_ = 0;
  Status error_;
  bool done_ = false;
};

}  // namespace gm
