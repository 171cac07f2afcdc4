#include "cmd/run_flags.h"

namespace gm::cli {

void AddRunSpecFlags(CLI::App& sub, RunSpec& spec, const RunSpecHelp& help) {
  sub.add_option("--pipeline", spec.pipeline, help.pipeline)->check(CLI::ExistingFile);
  sub.add_option("--workers", spec.workers, "Data worker processes to start")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRunWorkers));
  sub.add_option("--threads-per-worker", spec.threads_per_worker, "Stage threads per worker")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxWorkerThreads));
  sub.add_option("--epochs", spec.epochs, help.epochs)
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxRunEpochs));
  sub.add_option("--world-size", spec.world_size,
                 "Trainer ranks (one trainer process per rank, RANK/WORLD_SIZE set)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxWorldSize));
  sub.add_option("--samples-per-split", spec.samples_per_split,
                 "Samples per split of files/range sources (rounded up to whole batches): the "
                 "unit handed to a worker and re-made if it dies")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, kMaxSamplesPerSplit));
  sub.add_option("command", spec.command, "Trainer command, after --");
}

}  // namespace gm::cli
