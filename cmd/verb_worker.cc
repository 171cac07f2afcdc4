#include "cmd/cli.h"
namespace gm::cli {
Verb WorkerVerb() {
  return Verb{"worker", "Run one data worker", [](CLI::App&) {
                return std::function<Result<int>()>(
                    []() -> Result<int> { return Status::Unimplemented("worker: in progress"); });
              }};
}
}  // namespace gm::cli
