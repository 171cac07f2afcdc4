// What goldminer asks Slurm while it runs (sinfo, squeue, scontrol) and how it
// reads the answers: each question as a parser of the command's text, unit-tested
// on captured text, and an Ask* that runs the command now (the Slurm seam's
// queries; launcher/slurm_job.h holds the job and its steps).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "launcher/slurm_job.h"
#include "planner/cluster.h"

namespace gm {

// The idle CPUs of a partition, from `sinfo -h -p P -o %C` text
// ("allocated/idle/other/total", one line a node state group: summed).
// InvalidArgument naming the text when it is not that form.
Result<int> ParseSinfoIdleCpus(std::string_view text);
// The same asked of Slurm now; an error names the partition and what sinfo said.
Result<int> AskIdleCpus(const std::string& partition);

// The GPUs a running job holds, from `scontrol -d show job --oneliner JOB` text:
// JOB_GRES (the job's allocated GRES, "gpu:2" or "gpu:a100:2,..."), else the sum
// of its nodes' GRES= detail fields, else TRES's gres/gpu=N (where accounting
// tracks GPUs), else 0. NotFound when its JobState is not RUNNING; InvalidArgument
// naming the GRES entry whose count is not a number.
Result<double> ParseJobGpus(const std::string& scontrol_job, const std::string& job);
// The same asked of Slurm now (for `goldminer pool --check-gpus slurm`); NotFound
// for a job Slurm does not know.
Result<double> AskJobGpus(const std::string& job);

// The CPUs wanted by jobs that wait for CPUs on the nodes of `partition`: the
// jobs pending with reason Resources, asking no GPU, in a partition that shares a
// node with it, other than goldminer's own worker jobs, from
// `squeue -h -t PD -o "%C|%r|%b|%P|%j"` (cpus|reason|gres|partitions|name) and
// `sinfo -h -N -o "%N|%R"` (node|partition, one line a pair). InvalidArgument
// naming the line that is not that form, or when no node is in `partition`.
Result<int> ParsePendingCpus(std::string_view squeue, std::string_view sinfo_nodes,
                             const std::string& partition);
// The same asked of Slurm now.
Result<int> AskPendingCpus(const std::string& partition);

// The cluster's nodes and partitions and the GPUs in use, asked of Slurm now
// (scontrol show node/partition, sinfo GresUsed) and read by
// planner::ClusterFromScontrol (`goldminer plan --slurm`). NotFound when Slurm's
// commands are not on PATH; Unavailable naming the command and what it said when
// one fails.
Result<planner::Cluster> AskCluster();

// Why a worker of `job` that has not registered waits, asked of Slurm now: for a
// worker job of its own (`elastic_name`: its job name), squeue's Reason for the
// pending job; for a step, what holds the allocation (its running steps, from
// squeue -s). "" when Slurm cannot be asked.
std::string AskWhyWaiting(const SlurmJob& job, const std::string& elastic_name);

// How Slurm job `job_id` ended, from `scontrol show job` asked now (SlurmJobEnd);
// "" when it cannot be asked.
std::string AskJobEnd(const std::string& job_id);

// How a job ended, from its `scontrol show job --oneliner` text: "preempted" when
// Slurm chose it for preemption (PreemptTime set, or JobState PREEMPTED: a job that
// drains inside GraceTime and exits 0 is COMPLETED, with a PreemptTime),
// "cancelled" (CANCELLED), "time limit" (TIMEOUT), "node failure" (NODE_FAIL);
// "" otherwise.
std::string SlurmJobEnd(const std::string& scontrol_job);

// Why Slurm is stopping `job`, from `scontrol show job` asked now (SlurmStopCause);
// "" when it cannot be asked.
std::string AskStopCause(const SlurmJob& job);

}  // namespace gm
