// `goldminer worker`: one data worker. With --local it runs a pipeline on this
// machine without a trainer and reports throughput and per-stage costs.
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "cmd/cli.h"
#include "cmd/run_stats_render.h"
#include "core/clock.h"
#include "worker/engine.h"
#include "worker/pipeline.h"
#include "worker/sinks.h"

namespace gm::cli {
namespace {

struct WorkerFlags {
  bool local = false;
  std::string pipeline;
  int threads = 0;
  int epochs = 1;
  int64_t limit = -1;
  bool json = false;
  bool digest = false;
  bool progress = true;
  std::string out;
  std::string coordinator;
};

// Redraws one status line on stderr while the engine runs, when stderr is a terminal.
class ProgressLine {
 public:
  ProgressLine(const EngineProgress& progress, uint64_t total_hint)
      : progress_(progress), total_(total_hint), t0_(MonotonicSeconds()) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressLine() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::fputs("\r\033[K", stderr);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return done_; })) {
      const double dt = std::max(1e-9, MonotonicSeconds() - t0_);
      const uint64_t n = progress_.samples.load();
      std::string total = total_ ? "/" + std::to_string(total_) : "";
      std::fprintf(stderr, "\r\033[Kepoch %llu  %llu%s samples  %.1f samples/s  skipped %llu",
                   static_cast<unsigned long long>(progress_.epoch.load()),
                   static_cast<unsigned long long>(n), total.c_str(), n / dt,
                   static_cast<unsigned long long>(progress_.skipped.load()));
      std::fflush(stderr);
    }
  }

  const EngineProgress& progress_;
  const uint64_t total_;
  const double t0_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

Result<int> RunLocal(const WorkerFlags& f) {
  const int threads = f.threads > 0
                          ? f.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  PipelineOptions popts;
  popts.threads = threads;
  GM_ASSIGN_OR_RETURN(Pipeline pipeline, Pipeline::Load(f.pipeline, popts));

  EngineOptions eopts;
  eopts.threads = threads;
  eopts.epochs = f.epochs;
  eopts.limit = f.limit;

  FanOutSink sinks;
  DigestSink digest;
  if (f.digest) sinks.Add(&digest);
  std::unique_ptr<NpyDirSink> npy;
  if (!f.out.empty()) {
    GM_ASSIGN_OR_RETURN(npy, NpyDirSink::Open(f.out));
    sinks.Add(npy.get());
  }

  EngineProgress progress;
  Result<RunStats> stats = Status::Internal("not run");
  {
    std::optional<ProgressLine> line;
    uint64_t hint = pipeline.source().size_hint();
    if (f.limit >= 0) hint = std::min<uint64_t>(hint ? hint : f.limit, f.limit);
    if (f.progress && isatty(STDERR_FILENO)) line.emplace(progress, hint * f.epochs);
    stats = RunPipeline(pipeline, eopts, sinks, &progress);
  }
  if (!stats.ok()) return stats.status().WithContext(f.pipeline);
  std::string digest_hex = f.digest ? digest.FinishHex() : "";
  if (f.json) {
    std::cout << RunStatsJson(*stats, digest_hex).dump() << std::endl;
  } else {
    std::cout << RunStatsTable(*stats, digest_hex);
  }
  return kExitOk;
}

}  // namespace

Verb WorkerVerb() {
  return Verb{
      "worker", "Run one data worker (--local: run a pipeline here and report its speed)",
      [](CLI::App& sub) {
        auto f = std::make_shared<WorkerFlags>();
        sub.add_flag("--local", f->local,
                     "Run the pipeline on this machine without a trainer and print "
                     "samples/s and a per-stage table");
        sub.add_option("--pipeline", f->pipeline, "pipeline.json to run (see goldminer-pipeline(5))")
            ->check(CLI::ExistingFile);
        sub.add_option("--threads", f->threads, "Stage threads (default: all cores)")
            ->check(CLI::Range(1, 4096));
        sub.add_option("--epochs", f->epochs, "Epochs to run")->check(CLI::Range(1, 1000000));
        sub.add_option("--limit", f->limit, "Read at most N samples per epoch")
            ->check(CLI::NonNegativeNumber);
        sub.add_flag("--json", f->json, "Print one JSON object with the figures (last line)");
        sub.add_flag("--digest", f->digest,
                     "Add a SHA-256 over the batches' bytes in delivery order");
        sub.add_option("--out", f->out, "Write batches as .npy files (and keys.tsv) into DIR");
        sub.add_flag("!--no-progress", f->progress, "Do not draw a progress line on stderr");
        sub.add_option("--coordinator", f->coordinator,
                       "HOST:PORT of a run's coordinator (served by `goldminer run`)");
        return std::function<Result<int>()>([f]() -> Result<int> {
          if (!f->local) {
            return Status::Unimplemented(
                "worker: only --local is built so far; serving a trainer through "
                "--coordinator comes with `goldminer run`");
          }
          if (f->pipeline.empty()) {
            return Status::InvalidArgument("worker --local needs --pipeline FILE");
          }
          return RunLocal(*f);
        });
      }};
}

}  // namespace gm::cli
