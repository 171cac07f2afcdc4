// libFuzzer target: arbitrary bytes through TarReader must never crash, hang or
// read outside the buffer; every member it yields must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "worker/tar_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view archive(reinterpret_cast<const char*>(data), size);
  gm::TarReader reader(archive);
  gm::TarMember member;
  for (;;) {
    gm::Result<bool> more = reader.Next(&member);
    if (!more.ok() || !*more) break;
    const char* begin = member.data.data();
    if (begin < archive.data() || begin + member.data.size() > archive.data() + archive.size()) {
      std::abort();
    }
  }
  return 0;
}
