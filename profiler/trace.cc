#include "profiler/trace.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace gm {
namespace {

constexpr int kPipelinePid = 0;  // the profile's own pipeline runs (not a real pid)
constexpr int kWaitTid = 1;
constexpr int kComputeTid = 2;
constexpr int kGpuTidBase = 1000;

using json = nlohmann::json;

struct Builder {
  double origin_ns = 0;
  json events = json::array();

  double Us(double ns) const { return (ns - origin_ns) / 1000.0; }

  void Complete(const std::string& name, int pid, int tid, double begin_ns, double end_ns,
                json args) {
    json e = {{"name", name},       {"ph", "X"},
              {"pid", pid},         {"tid", tid},
              {"ts", Us(begin_ns)}, {"dur", std::max(0.0, (end_ns - begin_ns) / 1000.0)}};
    if (!args.empty()) e["args"] = std::move(args);
    events.push_back(std::move(e));
  }

  void Name(const char* what, int pid, int tid, const std::string& name) {
    json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    events.push_back(std::move(e));
  }
};

double EarliestNs(const TraceInput& in) {
  double t = std::numeric_limits<double>::max();
  for (const StageSpan& s : in.spans) t = std::min(t, s.begin_s * 1e9);
  for (const StepLog& l : in.steps) {
    for (const StepRecord& r : l.steps) t = std::min(t, static_cast<double>(r.wait_begin_ns));
  }
  for (const GpuLog& l : in.gpu) {
    for (const GpuActivity& a : l.activities) t = std::min(t, static_cast<double>(a.start_ns));
  }
  return t == std::numeric_limits<double>::max() ? 0 : t;
}

void AddPipeline(const TraceInput& in, Builder& b) {
  if (in.spans.empty()) return;
  b.Name("process_name", kPipelinePid, -1, "pipeline (profile run, 1 stage thread)");
  std::map<int, bool> threads;
  for (const StageSpan& s : in.spans) {
    const size_t i = static_cast<size_t>(s.stage);
    const std::string name =
        i < in.stage_names.size() ? in.stage_names[i] : "stage " + std::to_string(i);
    b.Complete(name, kPipelinePid, s.thread + 1, s.begin_s * 1e9, s.end_s * 1e9,
               {{"sample", s.sample}, {"stage", s.stage}});
    threads[s.thread] = true;
  }
  for (const auto& [t, unused] : threads) {
    b.Name("thread_name", kPipelinePid, t + 1, "stage thread " + std::to_string(t));
  }
}

void AddSteps(const StepLog& log, Builder& b) {
  b.Name("process_name", log.pid, -1,
         "trainer " + std::to_string(log.pid) + " (" + log.source + ")");
  b.Name("thread_name", log.pid, kWaitTid, "data wait");
  b.Name("thread_name", log.pid, kComputeTid, "compute");
  std::vector<StepRecord> r = log.steps;
  std::sort(r.begin(), r.end(), [](const StepRecord& a, const StepRecord& c) {
    return a.wait_begin_ns < c.wait_begin_ns;
  });
  for (size_t i = 0; i < r.size(); ++i) {
    b.Complete("data wait", log.pid, kWaitTid, static_cast<double>(r[i].wait_begin_ns),
               static_cast<double>(r[i].wait_end_ns), {{"step", i}, {"samples", r[i].samples}});
    if (i + 1 < r.size()) {
      b.Complete("step " + std::to_string(i), log.pid, kComputeTid,
                 static_cast<double>(r[i].wait_end_ns), static_cast<double>(r[i + 1].wait_begin_ns),
                 {{"samples", r[i].samples}});
    }
  }
}

void AddGpu(const GpuLog& log, bool process_named, Builder& b) {
  std::map<std::pair<uint32_t, uint32_t>, int> tids;  // (device, stream) -> tid
  for (const GpuActivity& a : log.activities) {
    auto key = std::make_pair(a.device, a.stream);
    auto it = tids.find(key);
    if (it == tids.end()) {
      const int tid = kGpuTidBase + static_cast<int>(tids.size());
      it = tids.emplace(key, tid).first;
      b.Name("thread_name", log.pid, tid,
             "GPU " + std::to_string(a.device) + " stream " + std::to_string(a.stream));
    }
    std::string name = a.name;
    json args = json::object();
    if (a.kind == GpuActivityKind::kMemcpy) {
      name = "memcpy " + a.name;
      args["bytes"] = a.bytes;
    } else if (a.kind == GpuActivityKind::kMemset) {
      name = "memset";
      args["bytes"] = a.bytes;
    }
    b.Complete(name, log.pid, it->second, static_cast<double>(a.start_ns),
               static_cast<double>(a.end_ns), std::move(args));
  }
  if (!tids.empty() && !process_named) {
    b.Name("process_name", log.pid, -1, "trainer " + std::to_string(log.pid));
  }
}

}  // namespace

nlohmann::json ChromeTrace(const TraceInput& in) {
  Builder b;
  b.origin_ns = EarliestNs(in);
  AddPipeline(in, b);
  std::set<int> named;
  for (const StepLog& l : in.steps) {
    AddSteps(l, b);
    named.insert(l.pid);
  }
  for (const GpuLog& l : in.gpu) AddGpu(l, named.count(l.pid) > 0, b);
  return json{{"traceEvents", std::move(b.events)},
              {"displayTimeUnit", "ms"},
              {"otherData", {{"producer", "goldminer profile"}}}};
}

}  // namespace gm
