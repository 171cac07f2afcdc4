// Verbs that are not built yet. Each says so and exits 2; none prints made-up output.
#include "cmd/cli.h"

namespace gm::cli {
namespace {

Verb Pending(std::string name, std::string summary, std::string issue) {
  return Verb{name, summary + " (not built yet)", [name, issue](CLI::App& sub) {
                sub.allow_extras();
                return std::function<Result<int>()>([name, issue]() -> Result<int> {
                  return Status::Unimplemented("`goldminer " + name +
                                               "` is not built yet (" + issue +
                                               "); nothing was done");
                });
              }};
}

}  // namespace

Verb ReportVerb() {
  return Pending("report", "Turn runs.db into an HTML, text or JSON report",
                 "planned: report verb");
}

}  // namespace gm::cli
