// RunSpec: the shape of a training run, in one value. `goldminer plan` writes it
// (plan.json's "run" section holds its planned fields), `goldminer run` and
// `goldminer profile` make it from their flags (cmd/run_flags.h, one place adds
// them) or from a plan, and the launchers start what it says. Its limits are
// here, once: the flags, plan.json and the protocol check against them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gm {

inline constexpr int kMaxRunWorkers = 1024;     // data workers of one run
inline constexpr int kMaxWorkerThreads = 1024;  // stage threads of one worker
inline constexpr int kMaxWorldSize = 1024;      // trainer ranks
inline constexpr int kMaxRunEpochs = 1000000;   // epochs a run serves (0: as asked)
inline constexpr size_t kMaxSamplesPerSplit = 100000000;

// What a plan says of one worker it placed (a replacement keeps its slot's).
struct WorkerSlot {
  int threads = 1;            // its stage threads (= its CPUs)
  bool remote = true;         // planned off the trainer's node
  uint64_t memory_bytes = 0;  // its memory (0: unknown)
  bool operator==(const WorkerSlot&) const = default;
};

inline constexpr int kMaxDataLoaderWorkers = 1024;  // run --dataloader-workers

struct RunSpec {
  std::string pipeline;           // pipeline.json the workers run
  int workers = 2;                // data workers to start
  int threads_per_worker = 1;     // stage threads of a worker without a slot of its own
  std::vector<WorkerSlot> slots;  // a plan's workers, in order (none: no plan)
  int epochs = 0;                 // epochs the workers serve; 0: as the trainer asks
  int world_size = 1;             // trainer ranks, one process each (but see below)
  // The command starts the ranks itself (srun: its tasks, each with SLURM_PROCID):
  // one trainer process, and RANK, LOCAL_RANK and WORLD_SIZE are not set for it.
  bool command_starts_ranks = false;
  size_t samples_per_split = 256;    // split size of files/jsonl/range sources
  std::vector<std::string> command;  // the trainer's argv
  // Virtual workers for each of the trainer's offloaded DataLoaders (run
  // --dataloader-workers); 0: each keeps its own num_workers. Set by a plan of an
  // unchanged program whose workers need more CPUs than its num_workers.
  int dataloader_workers = 0;
  // The --offload mode a plan of an unchanged program was priced for: "native"
  // (its DataLoaders on the native engine, `profile --offload native`), else "".
  std::string offload;
  // The memory of a worker whose slot does not say (0: not known): `run --worker-mem`,
  // or under Slurm a share of the allocation's memory (launcher/slurm_job.h).
  uint64_t worker_memory_bytes = 0;

  // Stage threads of the worker in `slot` (a replacement keeps its slot's size;
  // slots beyond the plan's get threads_per_worker).
  int ThreadsOf(int slot) const;
  // Whether the worker in `slot` belongs off the trainer's node (true beyond the
  // plan's workers: an added worker goes where there is room).
  bool RemoteOf(int slot) const;
  // The memory of the worker in `slot`: its slot's when known, else
  // worker_memory_bytes (0: not known).
  uint64_t MemoryOf(int slot) const;
  // InvalidArgument naming the field and its range for a value out of range.
  Status Validate() const;

  bool operator==(const RunSpec&) const = default;
};

}  // namespace gm
