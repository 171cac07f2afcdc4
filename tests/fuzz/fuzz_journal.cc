// Fuzzes the coordinator's journal replay (launcher/coordinator_journal.h): any
// bytes must replay into a state or fail with a Status, never crash, hang or
// throw. The first byte chooses the world size (1 to 4). A journal that replays
// must replay again into the same state (the replay is deterministic), and a
// journal cut short before its last line must not replay.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "launcher/coordinator_journal.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_journal: %s: %s\n", what, detail.c_str());
  std::abort();
}

std::string Summary(const gm::CoordinatorState& s) {
  const gm::CoordinatorStats st = s.Stats();
  return std::to_string(st.epoch) + "/" + std::to_string(st.pending_splits) + "/" +
         std::to_string(st.incomplete_splits) + "/" + std::to_string(st.acks) + "/" +
         std::to_string(st.workers.size()) + "/" + std::to_string(st.reassignments);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  gm::CoordinatorOptions options;
  options.world_size = 1 + data[0] % 4;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto first = gm::JournaledCoordinator::Replay(options, text, "fuzz", 0, nullptr);
  if (!first.ok()) return 0;
  auto again = gm::JournaledCoordinator::Replay(options, text, "fuzz", 0, nullptr);
  if (!again.ok()) Fail("a journal replayed once and not twice", again.status().message());
  if (Summary(first->state()) != Summary(again->state())) {
    Fail("two replays differ", Summary(first->state()) + " vs " + Summary(again->state()));
  }
  if (!text.empty() && text.back() == '\n' && text.size() > 1 &&
      gm::JournaledCoordinator::Replay(options, text.substr(0, text.size() - 1), "fuzz", 0, nullptr)
          .ok()) {
    Fail("a journal without its last newline replayed", std::string(text.substr(0, 200)));
  }
  return 0;
}
