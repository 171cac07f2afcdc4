// The one seam between goldminer and Slurm at run time. `run` reads the job it runs
// in once from the environment (SlurmJob::FromEnvironment: its id, heterogeneous
// components and their CPUs per node, the restart count), checks that its workers
// fit the allocation before any step waits forever for CPUs, starts each worker as
// a job step of the right component (MakeSlurmStepLauncher: it builds the srun argv
// from a request's typed facts and gives the worker its step's name), and asks why
// the job is being stopped (to record a requeue or a time limit as "preempted", not
// as a user's cancel). No other module reads a SLURM_* variable or builds srun
// arguments (the client still reads a rank from SLURM_PROCID, as torch launchers do).
//
// The parsers are pure; AskStopCause runs scontrol. Values are thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/run_spec.h"
#include "core/status.h"
#include "launcher/process_launcher.h"

namespace gm {

// One component of the allocation: the whole job, or a heterogeneous job's group.
struct SlurmComponent {
  int group = 0;          // the het group (0 without a heterogeneous job)
  std::string job_id;     // its own job id, as squeue and scancel name its steps
  std::string cpus_var;   // the variable its CPUs came from, for messages
  std::string cpus_text;  // its value ("8(x2),4"); empty: Slurm did not say
  // Its memory, as Slurm gave it (SLURM_MEM_PER_NODE or SLURM_MEM_PER_CPU, with
  // _HET_GROUP_n in a heterogeneous job), in MB; 0 when Slurm did not say (a
  // cluster whose memory is not a consumable resource, or a job with --mem=0).
  uint64_t mem_per_node_mb = 0;
  uint64_t mem_per_cpu_mb = 0;
  std::string mem_var;  // "SLURM_MEM_PER_NODE=3000", for messages; empty: not said

  // The memory of one of its nodes that has `cpus` CPUs, in MB (0: not said).
  uint64_t NodeMemoryMb(int cpus) const;
};

// The memory a worker step asks for when neither `run --worker-mem` nor its plan
// says, in MB (0: ask none, Slurm does not count this job's memory). In the
// component's terms: with SLURM_MEM_PER_CPU, that much per worker CPU (Slurm's own
// share); with SLURM_MEM_PER_NODE, the node's memory per CPU times the worker's
// CPUs, and on the trainer's node (`trainer_node`) never more than its part of
// half the node's memory, shared by the `node_worker_cpus` CPUs the workers use
// on a node (the trainer keeps the other half); at least kMinWorkerMemoryMb.
inline constexpr uint64_t kMinWorkerMemoryMb = 256;
uint64_t DefaultWorkerMemoryMb(const SlurmComponent& c, int node_cpus, int threads,
                               bool trainer_node, int node_worker_cpus);

struct SlurmJob {
  std::string job_id;                      // SLURM_JOB_ID
  std::vector<SlurmComponent> components;  // one per het group; one without them
  int restart_count = 0;                   // SLURM_RESTART_COUNT (0 when unset)

  // Reads the job from an environment (`getenv`: the process's, or a test's map).
  // nullopt outside a job (SLURM_JOB_ID unset or empty).
  static std::optional<SlurmJob> FromEnvironment(
      const std::function<const char*(const char*)>& getenv);
  // The same from this process's environment.
  static std::optional<SlurmJob> FromEnvironment();

  bool heterogeneous() const { return components.size() >= 2; }
  // The het group a worker's step goes to: 1 for a worker the plan put off the
  // trainer's node in a heterogeneous job, else 0.
  int GroupOf(bool off_trainer_node) const;
  // Checks that the workers of slots 0..workers-1 (sized and placed by `spec`) fit
  // in the CPUs and the memory of their components, node by node. Ok when Slurm's
  // environment does not say (nothing to check against). InvalidArgument naming
  // the variables and the numbers: asked, held, left.
  Status CheckWorkersFit(const RunSpec& spec, int workers) const;
  // Gives every worker of `spec` whose memory no plan says a share of its
  // component's memory (DefaultWorkerMemoryMb, sized for `workers` workers): sets
  // spec.worker_memory_bytes, or, in a heterogeneous job, each slot's. Returns the
  // line that says what each worker asks and why ("" when Slurm does not count
  // memory here and the workers ask none).
  std::string ShareWorkerMemory(RunSpec& spec, int workers) const;
  // The memory per CPU of the trainer's component in MB: SLURM_MEM_PER_CPU, or its
  // first node's memory over its CPUs; 0 when not said.
  uint64_t MemoryPerCpuMb() const;
};

// "3000M", "2G", "512K", "1T" or a plain number of MB (Slurm's own --mem units,
// powers of 1024), in MB, rounded up. InvalidArgument naming `flag` for anything
// else, or 0.
Result<uint64_t> ParseMemoryMb(std::string_view text, const std::string& flag);

// The srun argv that makes a worker its own job step of `job`: one task of
// request.threads CPUs on one node (--exact: only those CPUs, so steps can be added
// and cancelled one by one), in the component GroupOf gives, no GPU (--gres=none: a
// step is otherwise given every GRES of the job, and the next step, or an srun
// trainer, waits for the GPU) and its memory (--mem: a step that asks none is given
// all of the job's memory when memory is consumable, and the next waits again);
// the worker's own argv follows, with `--step-name JOB.STEP` added inside the step
// (the component's job id, as squeue -s and scancel name it).
std::vector<std::string> SrunArgv(const SlurmJob& job, const LaunchRequest& request);

// An elastic worker job's memory per CPU when neither --worker-mem, the run's job
// (SlurmJob::MemoryPerCpuMb) nor a plan says.
inline constexpr uint64_t kElasticMemoryPerCpuMb = 1024;

// Workers beyond the allocation (`goldminer run --elastic-partition`): each a job
// of its own, submitted with srun to `partition` (a scavenger partition Slurm may
// preempt), of `cpus` CPUs on one node, named JobName(). srun waits while the job
// is pending and passes SIGTERM on to the worker (a drain), as for a step.
struct ElasticWorkers {
  std::string partition;
  int cpus = 1;
  uint64_t memory_mb = 0;  // --mem of each job (0: the request's, else per CPU)
  std::string run_id;      // names the jobs: whose workers they are
  // "goldminer-worker.RUN_ID": squeue --name and scancel --name find them.
  std::string JobName() const;
};

// The srun argv that makes an elastic worker a job of its own (no GPU, its
// memory: elastic.memory_mb, else the request's, else kElasticMemoryPerCpuMb per
// CPU): the SLURM_*
// variables of the run's job removed from its environment (SLURM_CONF kept) with
// env -u, so srun asks for a new allocation instead of a step of this one
// (`inherited`: the names set here now); --dependency=after:JOB ties it to the
// run's job; the worker's argv follows, with `--step-name JOB.STEP`. The worker's
// key travels in its environment (GOLDMINER_SECRET: RunLoopOptions::keys_by_value),
// never on a command line.
std::vector<std::string> ElasticSrunArgv(const SlurmJob& job, const ElasticWorkers& elastic,
                                         const std::vector<std::string>& inherited,
                                         const LaunchRequest& request);

// Workers as job steps of `job` (SrunArgv), and with `elastic` those marked so as
// jobs of their own (ElasticSrunArgv; KillAll also cancels any of them left, by
// name). Before it submits the first worker job, it asks Slurm whether the job
// would be accepted (`srun --test-only` with the same request): a refusal
// (memory, partition, limits, QOS) is FailedPrecondition with Slurm's words, and
// nothing is submitted. Trainers start as children here, in the batch step, with
// the allocation's GPUs. Its name() is "slurm".
std::unique_ptr<ProcessLauncher> MakeSlurmStepLauncher(
    SlurmJob job, std::optional<ElasticWorkers> elastic = std::nullopt);

// A trainer command that is srun (its program's base name): its tasks are the
// trainer's ranks, each with SLURM_PROCID and SLURM_NTASKS. Returns how many tasks
// it starts as its options before the program say: -n/--ntasks N, else
// -N/--nodes N (the lower bound of a range) x --ntasks-per-node K (default 1),
// else 1; std::nullopt when the command is not srun. An option's value is read
// from "-nN", "-n N", "--ntasks=N" and "--ntasks N"; the program is the first
// argument that is neither an option nor the value of an option srun reads one
// for (its short value options; long ones without '=' among those srun documents).
// InvalidArgument naming the option for a count that is not a positive integer.
Result<std::optional<int>> SrunTaskCount(const std::vector<std::string>& argv);

// SLURM_JOB_CPUS_PER_NODE ("8(x2),4": two nodes of 8 CPUs, one of 4): the CPUs of
// each node, in order. InvalidArgument naming the text when it is not that form.
Result<std::vector<int>> ParseCpusPerNode(std::string_view text);

// Checks that workers of the given CPU counts fit, each on one node, in the CPUs of
// an allocation component (`what` names it in the message, e.g. "component 1 of
// job 12 (SLURM_JOB_CPUS_PER_NODE_HET_GROUP_1=8)"), and, when `node_mem_mb` has a
// figure per node (and `worker_mem_mb` one per worker), in its memory too.
// InvalidArgument saying what the workers ask and what there is.
Status CheckWorkersFit(const std::vector<int>& worker_cpus, const std::vector<int>& node_cpus,
                       const std::string& what, const std::vector<uint64_t>& worker_mem_mb = {},
                       const std::vector<uint64_t>& node_mem_mb = {});

// Why Slurm is stopping the job, from `scontrol show job -o JOBID` read when SIGTERM
// arrived and the restart count this attempt started with ($SLURM_RESTART_COUNT, 0
// when unset): "requeued" when Restarts went above it (scontrol requeue, preemption
// with requeue), "time limit" when the run time reached the time limit, "preempted"
// or "deadline" from the job state; "" otherwise (scancel, or not known).
std::string SlurmStopCause(const std::string& scontrol_job, int restart_count);

}  // namespace gm
