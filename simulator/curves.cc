// The --curves document's reader (simulator/sim.h, ParseCurves).
#include "core/json.h"
#include "core/json_fields.h"
#include "simulator/sim.h"

namespace gm::sim {

// One family of a --curves document (found by Fields' Convert).
Status Convert(const JsonNode& n, Family& out) {
  Fields f(n);
  f.Required("name", out.name);
  f.Required("cpus_per_gpu", out.cpus_per_gpu);
  f.Optional("samples_per_s_per_gpu", out.samples_per_s_per_gpu);
  f.Optional("bytes_per_sample", out.bytes_per_sample);
  f.Required("share", out.share);
  f.Check(!out.name.empty(), "name", "a family name");
  f.Check(out.cpus_per_gpu > 0, "cpus_per_gpu", "a positive number of CPUs per GPU");
  f.Check(out.samples_per_s_per_gpu > 0, "samples_per_s_per_gpu", "a positive rate");
  f.Check(out.bytes_per_sample >= 0, "bytes_per_sample", "a number of bytes, 0 or more");
  f.Check(out.share >= 0, "share", "a share, 0 or more");
  return f.status();
}

Result<std::vector<Family>> ParseCurves(const nlohmann::json& doc, const std::string& origin) {
  const JsonNode root(doc, origin);
  GM_ASSIGN_OR_RETURN(JsonNode families, root.Get("families"));
  std::vector<Family> out;
  GM_RETURN_IF_ERROR(Convert(families, out));
  if (out.empty()) return families.Expected("at least one family");
  return out;
}

}  // namespace gm::sim
