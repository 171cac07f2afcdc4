// What `run` learns about the Slurm job it runs in: the CPUs of its allocation
// (to refuse a plan that cannot fit before any step waits forever for CPUs) and why
// the job is being stopped (to record a requeue or a time limit as "preempted",
// not as a user's cancel). Pure: it parses the environment's and scontrol's text;
// cmd/verb_run.cc runs the commands.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gm {

// SLURM_JOB_CPUS_PER_NODE ("8(x2),4": two nodes of 8 CPUs, one of 4): the CPUs of
// each node, in order. InvalidArgument naming the text when it is not that form.
Result<std::vector<int>> ParseCpusPerNode(std::string_view text);

// Checks that workers of the given CPU counts fit, each on one node, in the CPUs of
// an allocation component (`what` names it in the message, e.g. "component 1 of
// job 12 (SLURM_JOB_CPUS_PER_NODE_HET_GROUP_1=8)"). InvalidArgument saying how
// many CPUs the workers need and how many there are.
Status CheckWorkersFit(const std::vector<int>& worker_cpus, const std::vector<int>& node_cpus,
                       const std::string& what);

// Why Slurm is stopping the job, from `scontrol show job -o JOBID` read when SIGTERM
// arrived and the restart count this attempt started with ($SLURM_RESTART_COUNT, 0
// when unset): "requeued" when Restarts went above it (scontrol requeue, preemption
// with requeue), "time limit" when the run time reached the time limit, "preempted"
// or "deadline" from the job state; "" otherwise (scancel, or not known).
std::string SlurmStopCause(const std::string& scontrol_job, int restart_count);

}  // namespace gm
