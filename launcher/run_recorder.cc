#include "launcher/run_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/log.h"

namespace gm {

void RunRecorder::Check(const Status& st) {
  if (st.ok()) return;
  if (failures_++ == 0) {
    LogWarning("run: cannot write the run's record (" + st.message() +
               "); the run goes on, its record in runs.db is incomplete");
  }
}

Status RunRecorder::Begin(const RunRecord& run) {
  if (store_ == nullptr) return Status::Ok();
  GM_RETURN_IF_ERROR(store_->BeginRun(run));
  begun_ = true;
  return Status::Ok();
}

void RunRecorder::WorkerStarted(int64_t worker_id, pid_t pid, const std::string& host,
                                bool elastic) {
  if (!enabled()) return;
  WorkerRecord w;
  w.worker_id = worker_id;
  w.host = host;
  w.pid = pid;
  w.elastic = elastic;
  Check(store_->AddWorker(run_id_, w));
}

void RunRecorder::WorkerEnded(int64_t worker_id, const std::string& exit) {
  if (!enabled()) return;
  Check(store_->EndWorker(run_id_, worker_id, exit));
}

void RunRecorder::WorkerPlaced(int64_t worker_id, const std::string& host,
                               const std::string& step_id) {
  if (!enabled()) return;
  Check(store_->PlaceWorker(run_id_, worker_id, host, step_id));
}

void RunRecorder::PoolGrant(const PoolGrantRecord& grant) {
  if (!enabled()) return;
  Check(store_->AddPoolGrant(run_id_, grant));
}

void RunRecorder::Event(const std::string& kind, const std::string& message) {
  if (!enabled()) return;
  EventRecord e;
  e.run_id = run_id_;
  e.kind = kind;
  e.message = message;
  Check(store_->AddEvent(e));
}

std::optional<RunRates> RunRecorder::Sample(const RunSample& now) {
  std::optional<RunRates> rates;
  if (last_ && now.t_s > last_->t_s) {
    const double dt = now.t_s - last_->t_s;
    const double samples = double(now.samples - std::min(now.samples, last_->samples));
    const double wait_s = double(now.wait_ns - std::min(now.wait_ns, last_->wait_ns)) / 1e9;
    RunRates r;
    r.t_s = now.t_s;
    r.samples_per_s = samples / dt;
    r.data_wait_fraction = std::clamp(wait_s / (dt * std::max(1, world_size_)), 0.0, 1.0);
    r.workers = now.workers;
    r.workers_ready = now.workers_ready;
    r.workers_live = now.workers_live;
    r.worker_cpus = std::max(0.0, now.worker_cpu_s - last_->worker_cpu_s) / dt;
    r.epoch = now.epoch;
    rates = r;
    if (enabled()) {
      const MetricPoint points[] = {{r.t_s, "samples_per_s", r.samples_per_s},
                                    {r.t_s, "data_wait_fraction", r.data_wait_fraction},
                                    {r.t_s, "workers", double(r.workers)},
                                    {r.t_s, "worker_cpus", r.worker_cpus},
                                    {r.t_s, "epoch", double(r.epoch)}};
      for (const MetricPoint& p : points) Check(store_->AddMetric(run_id_, p));
    }
  }
  if (enabled()) Check(store_->Heartbeat(run_id_));
  last_ = now;
  return rates;
}

void RunRecorder::StageCosts(const std::vector<std::vector<StageStats>>& reports) {
  if (!enabled()) return;
  const std::vector<StageProfile> stages = StageCostsFromReports(reports);
  if (!stages.empty()) Check(store_->SetRunStageCosts(run_id_, stages));
}

std::vector<StageProfile> StageCostsFromReports(
    const std::vector<std::vector<StageStats>>& reports) {
  struct Sum {
    std::string name;
    double count = 0, cpu_s = 0, wall_s = 0, bytes_in = 0, bytes_out = 0;
  };
  std::vector<Sum> sums;
  for (const std::vector<StageStats>& report : reports) {
    for (size_t i = 0; i < report.size(); ++i) {
      const StageStats& e = report[i];
      if (sums.size() <= i) sums.resize(i + 1);
      Sum& s = sums[i];
      if (s.name.empty()) s.name = e.name;
      s.count += static_cast<double>(e.count);
      s.cpu_s += e.cpu_s;
      s.wall_s += e.wall_s;
      s.bytes_in += static_cast<double>(e.bytes_in);
      s.bytes_out += static_cast<double>(e.bytes_out);
    }
  }
  std::vector<StageProfile> out;
  int index = 0;  // in pipeline.json's "stages": a fused stage covers one op per '+'
  for (size_t i = 0; i < sums.size(); ++i) {
    const Sum& s = sums[i];
    const int at = index;
    index += 1 + static_cast<int>(std::count(s.name.begin(), s.name.end(), '+'));
    if (s.count <= 0) continue;
    StageProfile p;
    p.index = at;
    p.name = s.name;
    p.cpu_s_per_sample = s.cpu_s / s.count;
    p.wall_s_per_sample = s.wall_s / s.count;
    p.bytes_in_per_sample = s.bytes_in / s.count;
    p.bytes_out_per_sample = s.bytes_out / s.count;
    out.push_back(p);
  }
  return out;
}

void RunRecorder::End(const std::string& status, int exit_code) {
  if (!enabled()) return;
  Check(store_->EndRun(run_id_, status, exit_code));
}

}  // namespace gm
