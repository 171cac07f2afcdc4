#include "profiler/pipeline_profile.h"

#include <sys/resource.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <string_view>

#include "core/digest.h"
#include "core/os/cpus.h"
#include "core/os/file_util.h"
#include "profiler/delivery.h"
#include "profiler/median.h"
#include "worker/pipeline.h"

namespace gm {
namespace {

// Drops what the engine delivers. It lends the batches' memory as a worker's data
// port does, so the samples are written in place there too and the figures are
// a worker's.
class DiscardSink : public BatchSink {
 public:
  Status Consume(const Batch&) override { return Status::Ok(); }
  std::optional<Batch::External> Reserve(size_t bytes) override { return HeapMemory(bytes); }
};

PipelineRun ToRun(const RunStats& s) {
  PipelineRun r;
  r.threads = s.threads;
  r.samples = s.samples;
  r.seconds = s.seconds;
  r.cpu_s = s.cpu_s;
  r.samples_per_s = s.seconds > 0 ? static_cast<double>(s.samples) / s.seconds : 0;
  r.samples_per_cpu_s = s.cpu_s > 0 ? static_cast<double>(s.samples) / s.cpu_s : 0;
  return r;
}

// The run of `runs` whose rate is the median one.
PipelineRun MedianRun(std::vector<PipelineRun> runs) {
  std::sort(runs.begin(), runs.end(), [](const PipelineRun& a, const PipelineRun& b) {
    return a.samples_per_s < b.samples_per_s;
  });
  return runs[runs.size() / 2];
}

// pipeline.json stages one op stands for: a fused op is named "a+b" (worker/op.h).
int Parts(const std::string& op_name) {
  return 1 + static_cast<int>(std::count(op_name.begin(), op_name.end(), '+'));
}

std::vector<StageProfile> StageProfiles(const Pipeline& p, const std::vector<StageStats>& stats) {
  std::vector<StageProfile> out;
  int json_index = 0;
  double total_cpu = 0;
  for (const StageStats& s : stats) total_cpu += s.cpu_s;
  for (size_t i = 0; i < stats.size(); ++i) {
    const StageStats& s = stats[i];
    const double n = s.count ? static_cast<double>(s.count) : 1.0;
    StageProfile sp;
    sp.index = json_index;
    sp.name = s.name;
    json_index += Parts(s.name);
    sp.stateless = p.stages()[i]->stateless();
    sp.cpu_s_per_sample = s.cpu_s / n;
    sp.wall_s_per_sample = s.wall_s / n;
    sp.bytes_in_per_sample = static_cast<double>(s.bytes_in) / n;
    sp.bytes_out_per_sample = static_cast<double>(s.bytes_out) / n;
    sp.peak_bytes_out = s.peak_bytes_out;
    sp.cpu_share = total_cpu > 0 ? s.cpu_s / total_cpu : 0;
    out.push_back(sp);
  }
  return out;
}

// Whether there are stages after `after_stage` and each could run "on": "device"
// (every op of a fused stage in kDeviceOps).
bool DeviceTail(const std::vector<StageProfile>& stages, int after_stage) {
  bool any = false;
  for (const StageProfile& s : stages) {
    if (s.index <= after_stage) continue;
    any = true;
    for (size_t at = 0; at <= s.name.size();) {
      const size_t plus = std::min(s.name.find('+', at), s.name.size());
      const std::string_view op(s.name.data() + at, plus - at);
      if (std::find(std::begin(kDeviceOps), std::end(kDeviceOps), op) == std::end(kDeviceOps)) {
        return false;
      }
      at = plus + 1;
    }
  }
  return any;
}

uint64_t PeakRssBytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

}  // namespace

int UsableCores() {
  Result<std::vector<int>> allowed = AllowedCpus();
  return allowed.ok() ? std::max(1, static_cast<int>(allowed->size())) : 1;
}

std::vector<CutPoint> CutPoints(const std::vector<StageProfile>& stages,
                                double source_bytes_per_sample) {
  double total = 0;
  for (const StageProfile& s : stages) total += s.cpu_s_per_sample;
  std::vector<CutPoint> cuts;
  double remote = 0;
  std::string blocker;
  for (int i = -1; i < static_cast<int>(stages.size()); ++i) {
    CutPoint c;
    c.after_stage = -1;
    if (i >= 0) {
      const StageProfile& s = stages[static_cast<size_t>(i)];
      c.after_stage = s.index + Parts(s.name) - 1;  // a fused op is cut after its last part
      remote += s.cpu_s_per_sample;
      if (!s.stateless && blocker.empty()) {
        blocker = "stage " + std::to_string(s.index) + " (" + s.name +
                  ") keeps state across samples and cannot be re-made on another worker";
      }
    }
    c.bytes_per_sample =
        i < 0 ? source_bytes_per_sample : stages[static_cast<size_t>(i)].bytes_out_per_sample;
    c.remote_cpu_s_per_sample = remote;
    c.local_cpu_s_per_sample = std::max(0.0, total - remote);
    c.allowed = blocker.empty();
    c.reason = blocker;
    cuts.push_back(c);
  }
  return cuts;
}

namespace {

// The 1-thread rounds, each timed (per-stage clocks on) then untimed: the totals of
// the timed ones, each round's figures, and the timing's own overhead per round.
struct OneThreadRounds {
  RunStats total;
  std::vector<PipelineRun> timed, untimed;
  std::vector<double> overheads;
};

Status TimeOneThread(Pipeline& p, const PipelineProfileOptions& o, EngineOptions eo,
                     DiscardSink& sink, const std::function<void(const std::string&)>& say,
                     OneThreadRounds& out) {
  for (int round = 0; round < std::max(1, o.rounds); ++round) {
    say("pipeline: 1 thread on 1 CPU, round " + std::to_string(round + 1) + "/" +
        std::to_string(std::max(1, o.rounds)) + " (timed, then untimed)");
    eo.time_stages = true;
    eo.spans = round == 0 ? o.spans : nullptr;
    GM_ASSIGN_OR_RETURN(RunStats t, RunPipeline(p, eo, sink));
    eo.time_stages = false;
    eo.spans = nullptr;
    GM_ASSIGN_OR_RETURN(RunStats u, RunPipeline(p, eo, sink));
    out.timed.push_back(ToRun(t));
    out.untimed.push_back(ToRun(u));
    if (out.timed.back().samples_per_s > 0 && out.untimed.back().samples_per_s > 0) {
      out.overheads.push_back(1.0 -
                              out.timed.back().samples_per_s / out.untimed.back().samples_per_s);
    }
    MergeStageStats(out.total.stages, t.stages);
    out.total.samples += t.samples;
    out.total.cpu_s += t.cpu_s;
    out.total.reader_cpu_s += t.reader_cpu_s;
    out.total.batcher_cpu_s += t.batcher_cpu_s;
    out.total.stage_threads_cpu_s += t.stage_threads_cpu_s;
  }
  return Status::Ok();
}

// The calling thread's last allowed CPU (`goldminer run` keeps the first ones for
// the trainer); empty when the kernel does not say.
std::vector<int> LastAllowedCpu() {
  Result<std::vector<int>> allowed = AllowedCpus();
  if (!allowed.ok() || allowed->empty()) return {};
  return {allowed->back()};
}

// The warm-up, the 1-thread rounds and the delivery cost, with the calling thread
// (and what it starts) confined to its last CPU; `confined` false when the kernel
// said no (the figures are then an unconfined thread's, and runs[].cpus says so).
Status TimeOnOneCpu(Pipeline& p, const PipelineProfileOptions& o, EngineOptions eo,
                    DiscardSink& sink, const std::function<void(const std::string&)>& say,
                    OneThreadRounds& out, DeliveryCost& delivery, bool& confined) {
  const Result<std::unique_ptr<ScopedCpus>> pin =
      ScopedCpus::Pin(LastAllowedCpu(), "pipeline: the 1-thread run");
  confined = pin.ok();
  if (o.warmup > 0) {
    say("pipeline: warm-up, " + std::to_string(o.warmup) + " samples");
    eo.limit = static_cast<int64_t>(o.warmup);
    GM_RETURN_IF_ERROR(RunPipeline(p, eo, sink).status());
  }
  eo.limit = static_cast<int64_t>(o.samples);
  GM_RETURN_IF_ERROR(TimeOneThread(p, o, eo, sink, say, out));
  const std::vector<StageStats>& stages = out.total.stages;
  const double n = out.total.samples ? static_cast<double>(out.total.samples) : 1.0;
  const double sample_bytes = stages.empty() ? 0 : static_cast<double>(stages.back().bytes_out) / n;
  say("pipeline: delivery, frames and batches over loopback TCP");
  GM_ASSIGN_OR_RETURN(
      delivery,
      MeasureDelivery(static_cast<size_t>(sample_bytes * static_cast<double>(p.batch_size()))));
  return Status::Ok();
}

}  // namespace

Result<PipelineProfile> ProfilePipeline(const PipelineProfileOptions& o) {
  if (o.samples < 1) return Status::InvalidArgument("--samples must be at least 1");
  const int cores = o.cores > 0 ? o.cores : UsableCores();
  PipelineOptions po;
  po.threads = cores;
  po.with_device_stages = true;  // every stage is measured, the device tail on the CPU
  po.keep_device_cut = true;     // and the cut before a tail that could be on the device
  GM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(o.path));
  Sha256 sha;
  sha.Update(bytes);
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };

  // With 1 stage thread on one CPU, as a 1-CPU worker of `goldminer run` is: the
  // source's reader, the batcher and an exec stage's children (started from the
  // stage thread) share that CPU. Its own Pipeline, so that the all-core run
  // below does not inherit children confined to one CPU.
  DiscardSink sink;
  EngineOptions eo;
  eo.threads = 1;
  OneThreadRounds rounds;
  DeliveryCost delivery;
  int64_t batch_size = 0;
  bool on_one_cpu = false;
  {
    GM_ASSIGN_OR_RETURN(Pipeline p, Pipeline::Load(o.path, po));
    batch_size = p.batch_size();
    if (const std::string notice = p.OrderNotice(); !notice.empty()) say(notice);
    GM_RETURN_IF_ERROR(TimeOnOneCpu(p, o, eo, sink, say, rounds, delivery, on_one_cpu));
  }
  const RunStats& timed_total = rounds.total;
  const std::vector<PipelineRun>& timed = rounds.timed;
  const std::vector<double>& overheads = rounds.overheads;

  GM_ASSIGN_OR_RETURN(Pipeline p, Pipeline::Load(o.path, po));
  say("pipeline: " + std::to_string(cores) + " threads");
  eo.threads = cores;
  eo.time_stages = true;
  if (o.warmup > 0) {
    eo.limit = static_cast<int64_t>(o.warmup);
    GM_RETURN_IF_ERROR(RunPipeline(p, eo, sink).status());
  }
  eo.limit = static_cast<int64_t>(o.samples);
  GM_ASSIGN_OR_RETURN(RunStats all, RunPipeline(p, eo, sink));

  PipelineProfile prof;
  prof.path = o.path;
  prof.sha256 = sha.FinishHex();
  prof.batch_size = static_cast<int>(batch_size);
  prof.warmup_samples = o.warmup;
  prof.samples = MedianRun(timed).samples;
  prof.runs = {MedianRun(timed), ToRun(all)};
  prof.runs.front().cpus = on_one_cpu ? 1 : 0;
  prof.runs.back().cpus = UsableCores();
  prof.delivery = delivery;
  const double n = timed_total.samples ? static_cast<double>(timed_total.samples) : 1.0;
  prof.cpu_s_per_sample = timed_total.cpu_s / n;
  prof.reader_cpu_s_per_sample = timed_total.reader_cpu_s / n;
  prof.batcher_cpu_s_per_sample = timed_total.batcher_cpu_s / n;
  prof.stages = StageProfiles(p, timed_total.stages);
  for (const StageProfile& s : prof.stages) prof.stage_cpu_s_per_sample += s.cpu_s_per_sample;
  // Stage threads' CPU outside Apply (exec children's CPU is in the stages only).
  double in_stages = 0;
  for (const StageStats& s : timed_total.stages) in_stages += s.cpu_s - s.extra_cpu_s;
  prof.queue_cpu_s_per_sample = std::max(0.0, timed_total.stage_threads_cpu_s - in_stages) / n;
  prof.samples_per_s_per_core = prof.runs.back().samples_per_cpu_s;
  prof.peak_rss_bytes = PeakRssBytes();
  prof.instrumentation_overhead = Median(overheads);
  const double source_bytes = prof.stages.empty() ? 0 : prof.stages.front().bytes_in_per_sample;
  prof.cuts = CutPoints(prof.stages, source_bytes);
  for (CutPoint& c : prof.cuts) {
    c.pipeline_cut = p.device_from() >= 0 && c.after_stage == p.device_from() - 1;
    c.device_tail = DeviceTail(prof.stages, c.after_stage);
  }
  return prof;
}

}  // namespace gm
