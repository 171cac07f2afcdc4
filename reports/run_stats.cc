#include "reports/run_stats.h"

#include <algorithm>
#include <cstdio>

namespace gm::reports {
namespace {

double PerSample(double total, uint64_t count) { return count ? total / count : 0.0; }

}  // namespace

nlohmann::json RunStatsJson(const RunStats& s, const std::string& digest) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : s.stages) {
    stages.push_back(
        {{"name", st.name},
         {"count", st.count},
         {"cpu_s_per_sample", PerSample(st.cpu_s, st.count)},
         {"wall_s_per_sample", PerSample(st.wall_s, st.count)},
         {"bytes_in_per_sample", PerSample(static_cast<double>(st.bytes_in), st.count)},
         {"bytes_out_per_sample", PerSample(static_cast<double>(st.bytes_out), st.count)}});
  }
  nlohmann::json j = {{"samples", s.samples},
                      {"skipped", s.skipped},
                      {"batches", s.batches},
                      {"seconds", s.seconds},
                      {"samples_per_s", s.seconds > 0 ? s.samples / s.seconds : 0.0},
                      {"threads", s.threads},
                      {"epochs", s.epochs},
                      {"cpu_s", s.cpu_s},
                      {"stages", stages}};
  if (!digest.empty()) j["digest"] = digest;
  return j;
}

std::string RunStatsTable(const RunStats& s, const std::string& digest) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line,
                "%llu samples in %llu batches, %.2f s, %.1f samples/s, %d threads, "
                "%llu skipped, %.2f CPU s\n",
                static_cast<unsigned long long>(s.samples),
                static_cast<unsigned long long>(s.batches), s.seconds,
                s.seconds > 0 ? s.samples / s.seconds : 0.0, s.threads,
                static_cast<unsigned long long>(s.skipped), s.cpu_s);
  out += line;
  size_t width = 5;
  for (const auto& st : s.stages) width = std::max(width, st.name.size());
  std::snprintf(line, sizeof line, "%-*s %12s %12s %12s %12s\n", static_cast<int>(width), "stage",
                "cpu ms/smp", "wall ms/smp", "KB in/smp", "KB out/smp");
  out += line;
  for (const auto& st : s.stages) {
    std::snprintf(line, sizeof line, "%-*s %12.3f %12.3f %12.1f %12.1f\n", static_cast<int>(width),
                  st.name.c_str(), 1e3 * PerSample(st.cpu_s, st.count),
                  1e3 * PerSample(st.wall_s, st.count),
                  PerSample(static_cast<double>(st.bytes_in), st.count) / 1024.0,
                  PerSample(static_cast<double>(st.bytes_out), st.count) / 1024.0);
    out += line;
  }
  if (!digest.empty()) out += "digest " + digest + "\n";
  return out;
}

}  // namespace gm::reports
