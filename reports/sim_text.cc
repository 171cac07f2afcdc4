#include "reports/sim_text.h"

#include <cstdio>
#include <string>

namespace gm::reports {
namespace {

double Num(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

// `a` with `decimals` decimals, and `suffix`.
std::string Fixed(double a, int decimals, const char* suffix = "") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f%s", decimals, a, suffix);
  return buf;
}

// Seconds as "812 s", "3.4 h" or "2.1 d".
std::string Duration(double s) {
  if (s < 3600) return Fixed(s, 0, " s");
  if (s < 86400 * 2) return Fixed(s / 3600, 1, " h");
  return Fixed(s / 86400, 1, " d");
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

}  // namespace

std::string SimText(const nlohmann::json& sim) {
  const nlohmann::json& in = sim.value("inputs", nlohmann::json::object());
  std::string out = "simulation of " + in.value("trace", std::string()) + " on " +
                    Fixed(Num(in, "node_count"), 0) + " node(s), " + Fixed(Num(in, "gpus"), 0) +
                    " GPUs, " + Fixed(Num(in, "cpus"), 0) + " CPUs: " + Fixed(Num(in, "tasks"), 0) +
                    " task(s) replayed (" + Fixed(Num(in, "never_scheduled"), 0) +
                    " never scheduled, " + Fixed(Num(in, "dropped"), 0) + " fit no node drawn)\n";
  const char* heads[] = {"policy",   "JCT mean",  "p50",      "p95", "p99",      "queue",
                         "makespan", "GPU alloc", "GPU eff.", "CPU", "workers+", "preempted"};
  const size_t widths[] = {8, 9, 8, 8, 8, 8, 9, 9, 8, 6, 9, 9};
  for (size_t i = 0; i < 12; ++i) out += Pad(heads[i], widths[i]) + (i == 11 ? "\n" : " ");
  for (const nlohmann::json& p : sim.value("policies", nlohmann::json::array())) {
    const std::string cells[] = {p.value("policy", std::string()),
                                 Duration(Num(p, "jct_mean_s")),
                                 Duration(Num(p, "jct_p50_s")),
                                 Duration(Num(p, "jct_p95_s")),
                                 Duration(Num(p, "jct_p99_s")),
                                 Duration(Num(p, "queue_mean_s")),
                                 Duration(Num(p, "makespan_s")),
                                 Fixed(100 * Num(p, "gpu_util_allocated"), 1, "%"),
                                 Fixed(100 * Num(p, "gpu_util_effective"), 1, "%"),
                                 Fixed(100 * Num(p, "cpu_util"), 1, "%"),
                                 Fixed(Num(p, "worker_cpus_started"), 0),
                                 Fixed(Num(p, "worker_cpus_preempted"), 0)};
    for (size_t i = 0; i < 12; ++i) out += Pad(cells[i], widths[i]) + (i == 11 ? "\n" : " ");
  }
  std::string window;
  for (const nlohmann::json& p : sim.value("policies", nlohmann::json::array())) {
    if (!(Num(p, "window_s") > 0)) continue;
    if (window.empty()) {
      window = "GPU allocated / effective over the submission window (first to last arrival, " +
               Duration(Num(p, "window_s")) + "):";
    }
    window += " " + p.value("policy", std::string()) + " " +
              Fixed(100 * Num(p, "gpu_util_allocated_window"), 1, "%") + " / " +
              Fixed(100 * Num(p, "gpu_util_effective_window"), 1, "%");
  }
  if (!window.empty()) out += window + "\n";
  const nlohmann::json& ratios = sim.value("ratios", nlohmann::json::object());
  for (const char* other : {"job", "cluster"}) {
    const std::string jct = std::string("jct_static_over_") + other;
    const std::string gpu = std::string("gpu_util_effective_") + other + "_over_static";
    const std::string busy = std::string("gpu_util_effective_window_") + other + "_over_static";
    if (!ratios.contains(jct)) continue;
    out += std::string(other) + " against static: average JCT " +
           Fixed(Num(ratios, jct.c_str()), 2, "x") + " better, effective GPU utilization " +
           Fixed(Num(ratios, gpu.c_str()), 2, "x") +
           (ratios.contains(busy)
                ? " (" + Fixed(Num(ratios, busy.c_str()), 2, "x") + " over the submission window)"
                : std::string()) +
           "\n";
  }
  return out;
}

}  // namespace gm::reports
