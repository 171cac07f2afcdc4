// `goldminer run`: a training run with its data workers. The local backend runs
// the coordinator here, starts N `goldminer worker --coordinator` processes and
// the trainer command (one process per rank), restarts workers that crash, and
// exits with the trainer's exit status.
#include <signal.h>

#include <atomic>

#include "cmd/cli.h"
#include "core/log.h"
#include "launcher/local_run.h"

namespace gm::cli {
namespace {

std::atomic<int> g_signal{0};  // the last SIGTERM/SIGINT received by `run`
extern "C" void OnRunSignal(int sig) { g_signal.store(sig); }

struct RunFlags {
  std::string backend = "local";
  std::string pipeline;
  int workers = 2;
  int threads_per_worker = 1;
  int epochs = 0;  // as many as the trainer asks for
  int world_size = 1;
  std::string bind = "127.0.0.1";
  int port = 0;
  double liveness_timeout_s = 10;
  int max_restarts = 3;
  size_t samples_per_split = 256;
  std::vector<std::string> command;
};

Result<int> RunLocalBackend(const RunFlags& f) {
  if (f.command.empty()) {
    return Status::InvalidArgument("run needs a trainer command after --, e.g. "
                                   "goldminer run --pipeline p.json -- python3 train.py");
  }
  LocalRunConfig c;
  c.pipeline = f.pipeline;
  c.workers = f.workers;
  c.threads_per_worker = f.threads_per_worker;
  c.epochs = f.epochs;
  c.world_size = f.world_size;
  c.bind = f.bind;
  c.port = f.port;
  c.liveness_timeout_s = f.liveness_timeout_s;
  c.max_restarts = f.max_restarts;
  c.samples_per_split = f.samples_per_split;
  c.command = f.command;
  c.signal = &g_signal;
  struct sigaction sa {};
  sa.sa_handler = OnRunSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  GM_ASSIGN_OR_RETURN(LocalRunResult r, RunLocal(c));
  const CoordinatorSummary& s = r.summary;
  LogInfo("run " + r.run_id + ": " + std::to_string(s.epochs_done) + " epoch(s) delivered, " +
          std::to_string(s.state.acks) + " batches acknowledged, " +
          std::to_string(s.workers_registered) + " worker registrations, " +
          std::to_string(s.state.reassignments) + " splits reassigned, " +
          std::to_string(s.state.duplicate_acks) + " duplicate acks");
  return r.exit_code;
}

}  // namespace

Verb RunVerb() {
  return Verb{
      "run", "Run data workers beside the trainer command (local backend)",
      [](CLI::App& sub) {
        auto f = std::make_shared<RunFlags>();
        sub.add_option("--backend", f->backend, "Where workers run: local (this machine)")
            ->check(CLI::IsMember({"local", "slurm"}));
        sub.add_option("--pipeline", f->pipeline, "pipeline.json the workers run")
            ->required()
            ->check(CLI::ExistingFile);
        sub.add_option("--workers", f->workers, "Data worker processes to start")
            ->check(CLI::Range(1, 1024));
        sub.add_option("--threads-per-worker", f->threads_per_worker, "Stage threads per worker")
            ->check(CLI::Range(1, 1024));
        sub.add_option("--epochs", f->epochs,
                       "Epochs the run serves at most (0: as many as the trainer asks for, "
                       "e.g. Loader(epochs=N))")
            ->capture_default_str()
            ->check(CLI::Range(0, 100000));
        sub.add_option("--world-size", f->world_size,
                       "Trainer ranks (one trainer process per rank, RANK/WORLD_SIZE set)")
            ->check(CLI::Range(1, 1024));
        sub.add_option("--bind", f->bind,
                       "Address the coordinator and the workers' data ports listen on: "
                       "127.0.0.1 (this machine only), a node's address, or 0.0.0.0 (every "
                       "interface; peers connect by this machine's host name)")
            ->capture_default_str();
        sub.add_option("--port", f->port, "Coordinator TCP port (0: any free port)")
            ->check(CLI::Range(0, 65535));
        sub.add_option("--liveness-timeout", f->liveness_timeout_s,
                       "Seconds of silence after which a worker is declared lost")
            ->check(CLI::Range(0.1, 3600.0));
        sub.add_option("--max-restarts", f->max_restarts,
                       "Crashed workers replaced at most this many times")
            ->check(CLI::Range(0, 1000000));
        sub.add_option("--samples-per-split", f->samples_per_split,
                       "Samples per split of files/range sources (rounded up to whole "
                       "batches): the unit handed to a worker and re-made if it dies")
            ->check(CLI::Range(1, 100000000));
        sub.add_option("command", f->command, "Trainer command, after --");
        return std::function<Result<int>()>([f]() -> Result<int> {
          if (f->backend == "slurm") {
            return Status::Unimplemented("run: the Slurm backend is not built yet; use "
                                         "--backend local");
          }
          return RunLocalBackend(*f);
        });
      }};
}

}  // namespace gm::cli
