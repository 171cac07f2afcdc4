// What `goldminer simulate` replays: a cluster's nodes and a trace of tasks, read
// from CSV text (the command reads the files; this module is pure). Formats, each
// told apart by its header (goldminer-simulate(1), INPUTS):
//
//   - Alibaba's cluster-trace-gpu-v2023 pod list: name, cpu_milli, memory_mib,
//     num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
//     deletion_time, scheduled_time (seconds). A pod never scheduled (an empty
//     scheduled_time) is skipped and counted; one that was is submitted at
//     creation_time and ran deletion_time - scheduled_time. Its GPUs: num_gpu x
//     gpu_milli / 1000 (a pod sharing a GPU holds a fraction of one).
//   - a generic trace: submit_s, duration_s, gpus (may be fractional), cpus, and
//     optionally memory_mib, class (a curve family, see simulator/sim.h) and
//     samples (the samples a task reads, in place of its duration_s: its family's
//     samples/s per GPU at full speed gives its work).
//   - a Slurm cluster's own history: the jobcomp/filetxt file (JobCompType=
//     jobcomp/filetxt: "JobId=... SubmitTime=... StartTime=... EndTime=...
//     ProcCnt=... NodeCnt=... Tres=cpu=..,mem=..,gres/gpu=.. ..." a line), or
//     `sacct --parsable2 --allocations --format=JobID,Submit,Start,End,AllocCPUS,
//     AllocTRES,NNodes` output. A job that never started is skipped and counted;
//     one on N nodes is N tasks, one a node, each with its share; one that ran
//     less than a second lasts 1 s.
//   - Alibaba's v2023 node list: sn, cpu_milli, memory_mib, gpu, model; or a
//     generic one: name, cpus, memory_mib, gpus.
//
// A CSV here is plain: comma-separated, a header line, no quoting, optional
// trailing '\r'. Every error names the origin and the line ("pods.csv:12: ...").
// Thread-compatible plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gm::sim {

struct SimNode {
  std::string name;
  int cpus = 0;
  uint64_t memory_mib = 0;
  int gpus = 0;
};

struct SimTask {
  std::string name;
  double submit_s = 0;
  double duration_s = 0;    // as the trace ran it, > 0 (0 when samples is given)
  double samples = 0;       // generic trace: samples it reads (> 0: its work, from its class)
  int cpus = 1;             // asked, >= 1 (a trace's 0 reads as 1)
  uint64_t memory_mib = 0;  // asked
  int gpu_milli = 0;        // thousandths of GPUs asked: 0 for a CPU-only task
  std::string job_class;    // a family name, or "" (the family mix assigns one)
  size_t line = 0;          // where the trace has it
};

struct Trace {
  std::string origin;
  std::vector<SimTask> tasks;  // in the trace's order
  size_t never_scheduled = 0;  // v2023 pods skipped: never scheduled
};

// Reads a pod list (v2023) or a generic trace. InvalidArgument naming the origin
// and line: a missing column, a value that is not a number, a negative time, a
// task that ends before it starts or lasts 0 s, an empty trace.
Result<Trace> ParseTrace(std::string_view text, const std::string& origin);

// A Slurm history (jobcomp/filetxt or sacct --parsable2), by ParseTrace when
// IsSlurmHistory(text): InvalidArgument naming the origin and line for a line of
// neither form, a time that is not one, a job that ends before it starts.
Result<Trace> ParseSlurmHistory(std::string_view text, const std::string& origin);
bool IsSlurmHistory(std::string_view text);

// Reads a node list (v2023 or generic). InvalidArgument naming the origin and
// line; an empty list, or one without a GPU, is an error.
Result<std::vector<SimNode>> ParseNodes(std::string_view text, const std::string& origin);

}  // namespace gm::sim
