// The coordinator's unit tests' run: a range source in splits of 4 samples and
// batches of 2, as coordinator_server_test, coordinator_restart_test and
// coordinator_process_test start it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "launcher/coordinator_server.h"

namespace gm::testing {

// A run of `samples` samples of a range source (splits of 4, batches of 2),
// keyed by `secret`, journaling to `journal`.
inline CoordinatorConfig RangeRunConfig(const std::string& secret, const std::string& journal,
                                        int samples = 10) {
  CoordinatorConfig c;
  c.secret = secret;
  c.pipeline_doc = {{"version", 1},
                    {"source", {{"type", "range"}, {"count", samples}}},
                    {"stages", nlohmann::json::array()},
                    {"batch", {{"size", 2}}}};
  c.pipeline_origin = "test.json";
  c.base_dir = "/";
  c.samples_per_split = 4;
  c.journal_path = journal;
  return c;
}

}  // namespace gm::testing
