// Fuzzes the profile.json reader: any bytes must yield a Profile or a Status, never a
// crash, a hang or an exception; and a Profile that was read must survive a round
// trip (ProfileToJson, text, ParseJson, ProfileFromJson) unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/profile.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_profile: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = gm::ParseJson(text, "fuzz.json");
  if (!doc.ok()) return 0;
  auto profile = gm::ProfileFromJson(*doc, "fuzz.json");
  if (!profile.ok()) return 0;

  // Strings came from valid JSON, so they are valid UTF-8 and dump() does not throw.
  const nlohmann::json written = gm::ProfileToJson(*profile);
  const std::string again_text = written.dump(2);
  auto again_doc = gm::ParseJson(again_text, "again.json");
  if (!again_doc.ok()) Fail("written profile does not parse", again_doc.status().message());
  auto again = gm::ProfileFromJson(*again_doc, "again.json");
  if (!again.ok()) Fail("written profile does not read", again.status().message());
  if (!(*again == *profile)) Fail("round trip changed the profile", again_text);
  if (gm::ProfileToJson(*again) != written) Fail("second write differs", again_text);
  return 0;
}
