#include "profiler/step_analysis.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "profiler/median.h"

namespace gm {
namespace {

constexpr double kNs = 1e-9;

double Seconds(uint64_t begin, uint64_t end) {
  return end > begin ? static_cast<double>(end - begin) * kNs : 0.0;
}

struct GpuIndex {
  std::map<int, std::vector<Interval>> by_pid;  // union per process
  std::vector<Interval> all;                    // union over processes
  GpuProfile summary;
};

GpuIndex IndexGpu(const std::vector<GpuLog>& logs, const StepAnalysisOptions& o) {
  GpuIndex idx;
  std::vector<Interval> all;
  std::set<uint32_t> devices;
  std::string first_error;
  for (const GpuLog& log : logs) {
    std::vector<Interval> mine;
    for (const GpuActivity& a : log.activities) {
      mine.push_back({a.start_ns, a.end_ns});
      devices.insert(a.device);
    }
    idx.summary.records += log.activities.size();
    idx.summary.dropped_records += log.dropped_records;
    if (first_error.empty() && !log.errors.empty()) first_error = log.errors.front();
    all.insert(all.end(), mine.begin(), mine.end());
    idx.by_pid[log.pid] = UnionOf(std::move(mine));
  }
  idx.all = UnionOf(std::move(all));
  idx.summary.devices = static_cast<int>(devices.size());
  idx.summary.available = idx.summary.records > 0;
  if (!idx.summary.available) {
    if (!first_error.empty()) {
      idx.summary.reason = "CUPTI: " + first_error;
    } else if (!logs.empty()) {
      idx.summary.reason = "no GPU activity was recorded (the trainer ran no kernel or copy)";
    } else if (!o.gpu_unavailable_reason.empty()) {
      idx.summary.reason = o.gpu_unavailable_reason;
    } else {
      idx.summary.reason = "no GPU log: the trainer did not initialize CUDA";
    }
  }
  return idx;
}

// Sums over one process's measured steps.
struct ProcessTotals {
  double wait_s = 0, compute_s = 0;
  uint64_t samples = 0;
};

// Sums of the DataLoader worker figures ("D" lines) over the processes.
struct LoaderTotals {
  int workers = 0;
  uint64_t cpu_ns = 0, samples = 0, bytes = 0, bytes_samples = 0;
};

// Adds what one process's DataLoader workers did over records [first, last]:
// the CPU between the batch of `first` and that of `last` (cumulative figures),
// against the samples of the batches after `first`; the bytes of all of them.
// Only when every one of those records has a "D" line.
void AddLoader(const std::vector<StepRecord>& r, uint64_t first, uint64_t last, LoaderTotals& out) {
  if (last <= first || last >= r.size()) return;
  for (uint64_t i = first; i <= last; ++i) {
    if (!r[i].loader) return;
  }
  const uint64_t begin = r[first].loader->cpu_ns, end = r[last].loader->cpu_ns;
  if (end < begin) return;  // not cumulative: a log of another writer
  out.cpu_ns += end - begin;
  for (uint64_t i = first; i <= last; ++i) {
    out.workers = std::max<int>(out.workers, static_cast<int>(r[i].loader->workers));
    out.bytes += r[i].loader->bytes;
    out.bytes_samples += r[i].samples;
    if (i > first) out.samples += r[i].samples;
  }
}

std::optional<DataLoaderProfile> LoaderOf(const LoaderTotals& l) {
  if (l.cpu_ns == 0 || l.samples == 0) return std::nullopt;
  DataLoaderProfile d;
  d.workers = l.workers;
  d.cpu_s = static_cast<double>(l.cpu_ns) * kNs;
  d.samples = l.samples;
  d.cpu_s_per_sample = d.cpu_s / static_cast<double>(l.samples);
  d.bytes_per_sample =
      l.bytes_samples > 0 ? static_cast<double>(l.bytes) / static_cast<double>(l.bytes_samples) : 0;
  return d;
}

// The "N" lines of every process: the engine's cost per sample over all of them.
std::optional<NativeProfile> NativeOf(const std::vector<StepLog>& logs) {
  NativeRecord sum;
  for (const StepLog& log : logs) {
    for (const NativeRecord& n : log.native) {
      sum.samples += n.samples;
      sum.cpu_ns += n.cpu_ns;
      sum.bytes += n.bytes;
      sum.cut_cpu_ns += n.cut_cpu_ns;
      sum.cut_bytes += n.cut_bytes;
    }
  }
  if (sum.samples == 0 || sum.cpu_ns == 0) return std::nullopt;
  const double n = static_cast<double>(sum.samples);
  NativeProfile p;
  p.samples = sum.samples;
  p.cpu_s_per_sample = static_cast<double>(sum.cpu_ns) * kNs / n;
  p.bytes_per_sample = static_cast<double>(sum.bytes) / n;
  p.cut_cpu_s_per_sample = static_cast<double>(sum.cut_cpu_ns) * kNs / n;
  p.cut_bytes_per_sample = static_cast<double>(sum.cut_bytes) / n;
  return p;
}

// The "X" lines of every process, each once, at most kMaxNotNative.
constexpr size_t kMaxNotNative = 8;
std::vector<std::string> NotNativeOf(const std::vector<StepLog>& logs) {
  std::vector<std::string> out;
  for (const StepLog& log : logs) {
    for (const std::string& why : log.not_native) {
      if (out.size() < kMaxNotNative && std::find(out.begin(), out.end(), why) == out.end()) {
        out.push_back(why);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<Interval> UnionOf(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end <= i.begin) continue;
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

uint64_t CoveredNanos(const std::vector<Interval>& u, Interval w) {
  if (w.end <= w.begin) return 0;
  // First interval that ends after the window begins.
  auto it = std::upper_bound(u.begin(), u.end(), w.begin,
                             [](uint64_t t, const Interval& i) { return t < i.end; });
  uint64_t covered = 0;
  for (; it != u.end() && it->begin < w.end; ++it) {
    covered += std::min(it->end, w.end) - std::max(it->begin, w.begin);
  }
  return covered;
}

namespace {

// One measured step of a process: its figures, with the GPU's over its window
// when there is GPU activity (added to t.gpu).
StepProfile MeasureStep(const StepRecord& cur, const StepRecord& next, uint64_t i, int pid,
                        const std::vector<Interval>& busy_union, TrainerProfile& t) {
  StepProfile s;
  s.step = i;
  s.pid = pid;
  s.wait_s = Seconds(cur.wait_begin_ns, cur.wait_end_ns);
  s.compute_s = Seconds(cur.wait_end_ns, next.wait_begin_ns);
  s.samples = cur.samples;
  if (t.gpu.available) {
    const Interval window{cur.wait_begin_ns, next.wait_begin_ns};
    const Interval wait{cur.wait_begin_ns, cur.wait_end_ns};
    const double busy = static_cast<double>(CoveredNanos(busy_union, window)) * kNs;
    s.gpu_busy_s = busy;
    s.gpu_idle_s = std::max(0.0, s.wait_s + s.compute_s - busy);
    s.gpu_stall_s =
        std::max(0.0, s.wait_s - static_cast<double>(CoveredNanos(busy_union, wait)) * kNs);
    t.gpu.busy_s += *s.gpu_busy_s;
    t.gpu.idle_s += *s.gpu_idle_s;
    t.gpu.stall_s += *s.gpu_stall_s;
  }
  return s;
}

}  // namespace

TrainerProfile AnalyzeSteps(const std::vector<StepLog>& logs, const std::vector<GpuLog>& gpu,
                            const StepAnalysisOptions& o) {
  TrainerProfile t;
  GpuIndex g = IndexGpu(gpu, o);
  t.gpu = g.summary;
  std::vector<double> step_s, wait_s, compute_s, samples;
  double total_wait = 0, total_step = 0, overhead_s = 0;
  uint64_t overhead_records = 0;
  LoaderTotals loader;
  for (const StepLog& log : logs) {
    std::vector<StepRecord> r = log.steps;
    std::sort(r.begin(), r.end(), [](const StepRecord& a, const StepRecord& b) {
      return a.wait_begin_ns < b.wait_begin_ns;
    });
    t.steps_recorded += r.size();
    overhead_s += log.overhead_s;
    overhead_records += log.overhead_records;
    const uint64_t closed = r.size() > 1 ? r.size() - 1 : 0;  // steps with an end
    const uint64_t warm = closed > o.warmup_steps ? o.warmup_steps : closed / 2;
    t.warmup_steps += warm;
    auto pid_gpu = g.by_pid.find(log.pid);
    const std::vector<Interval>& busy_union =
        pid_gpu != g.by_pid.end() && !pid_gpu->second.empty() ? pid_gpu->second : g.all;
    ProcessTotals p;
    const uint64_t last = o.max_steps > 0 ? std::min(closed, warm + o.max_steps) : closed;
    for (uint64_t i = warm; i < last; ++i) {
      const StepProfile s = MeasureStep(r[i], r[i + 1], i, log.pid, busy_union, t);
      p.wait_s += s.wait_s;
      p.compute_s += s.compute_s;
      p.samples += s.samples;
      step_s.push_back(s.wait_s + s.compute_s);
      wait_s.push_back(s.wait_s);
      compute_s.push_back(s.compute_s);
      samples.push_back(static_cast<double>(s.samples));
      if (t.step_list.size() < o.max_step_list) t.step_list.push_back(s);
    }
    AddLoader(r, warm, last, loader);
    const double wall = p.wait_s + p.compute_s;
    if (wall > 0) t.samples_per_s += static_cast<double>(p.samples) / wall;
    if (p.compute_s > 0) t.demand_samples_per_s += static_cast<double>(p.samples) / p.compute_s;
    t.seconds = std::max(t.seconds, wall);
    total_wait += p.wait_s;
    total_step += wall;
  }
  t.steps = step_s.size();
  t.dataloader = LoaderOf(loader);
  t.native = NativeOf(logs);
  t.not_native = NotNativeOf(logs);
  t.batch_size = Median(samples);
  t.step_s_median = Median(step_s);
  t.wait_s_median = Median(wait_s);
  t.compute_s_median = Median(compute_s);
  t.wait_s_mean = wait_s.empty() ? 0 : total_wait / static_cast<double>(wait_s.size());
  t.stall_fraction = total_step > 0 ? total_wait / total_step : 0;
  if (overhead_records > 0) {
    t.instrumentation_s_per_step = overhead_s / static_cast<double>(overhead_records);
    if (t.step_s_median > 0) {
      t.instrumentation_overhead = t.instrumentation_s_per_step / t.step_s_median;
    }
  }
  const double gpu_total = t.gpu.busy_s + t.gpu.idle_s;
  if (gpu_total > 0) {
    t.gpu.busy_fraction = t.gpu.busy_s / gpu_total;
    t.gpu.stall_fraction = t.gpu.stall_s / gpu_total;
  }
  return t;
}

}  // namespace gm
