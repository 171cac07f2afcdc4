// Connection 6: a run and the pool (dataplane/messages.h has the shared part).
//
// 6. run -> pool (`goldminer pool`, the cluster's division of spare CPUs:
//    launcher/pool_server.h). The run authenticates with the pool key as role
//    "run". Request/response; the first report binds the connection to its run.
//      R->P POOL_REPORT {run_id, gpus, cpus_per_worker, base_workers,
//                        extra_workers, demand_samples_per_s, rates: [[workers,
//                        samples_per_s], ...], token?, slurm_job?}
//      P->R POOL_GRANT  {extra_workers, cpus}: the pool workers it may hold
//      R->P POOL_STATUS {}
//      P->R POOL_STATE  {cpus, runs: [{run_id, gpus, extra_workers, cpus,
//                        held_workers, age_s}]}
//
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "dataplane/messages.h"

namespace gm {

// R->P POOL_REPORT (connection 6): a run's figures for the pool's division
// (planner/pool_state.h, RunReport: the same fields and ranges).
struct PoolReportMsg {
  std::string run_id;                             // printable ASCII, 1..128 bytes
  double gpus = 1;                                // (0, 1e6]
  int64_t cpus_per_worker = 1;                    // 1..4096
  int64_t base_workers = 0;                       // 0..65536
  int64_t extra_workers = 0;                      // 0..65536
  double demand_samples_per_s = 1;                // (0, 1e12]
  std::vector<std::pair<int64_t, double>> rates;  // at most kMaxPoolCounts; 1..65536, [0, 1e12]
  // The run's token, from its first POOL_GRANT (kPoolTokenHexChars hex);
  // optional ("" when absent): the first report of a run, or on its own
  // connection.
  std::string token;
  // The Slurm job the run runs in (its SLURM_JOB_ID: digits, '_' for an array
  // task, at most 32 characters; "" when absent: a run outside Slurm). A pool
  // that checks GPUs (--check-gpus slurm) counts at most that job's GPUs.
  std::string slurm_job;
  nlohmann::json Encode() const;
  static Result<PoolReportMsg> Decode(const nlohmann::json& meta);
};
inline constexpr size_t kPoolTokenHexChars = 32;
inline constexpr size_t kMaxPoolCounts = 1024;

// P->R POOL_GRANT.
struct PoolGrantMsg {
  int64_t extra_workers = 0;  // 0..65536
  int64_t cpus = 0;           // 0..2^31
  std::string reason;         // optional; printable ASCII and spaces, at most kMaxPoolReasonBytes
  // The run's token (kPoolTokenHexChars hex; optional): a report of the run from
  // any other connection must carry it, so that no other peer can report for it.
  std::string token;
  nlohmann::json Encode() const;
  static Result<PoolGrantMsg> Decode(const nlohmann::json& meta);
};

// P->R POOL_STATE: the pool's budget and its division now.
struct PoolStateMsg {
  struct Run {
    std::string run_id;
    double gpus = 1;
    int64_t extra_workers = 0;  // granted
    int64_t cpus = 0;           // granted
    int64_t held_workers = 0;   // as it last reported
    double age_s = 0;           // since its last report
    // Its last report: the division's inputs (optional; its rates cut to
    // kMaxPoolStateCounts, and given for the first kMaxPoolStateInputs runs only).
    std::optional<PoolReportMsg> report;
  };
  // A change of one run's grant, newest last (optional; absent from an older pool).
  struct Change {
    double age_s = 0;  // how long ago, >= 0
    std::string run_id;
    int64_t from_cpus = 0, to_cpus = 0;  // 0..2^31
    std::string reason;                  // as PoolGrantMsg::reason
  };
  int64_t cpus = 0;
  std::vector<Run> runs;        // at most kMaxPoolRuns
  std::vector<Change> history;  // at most kMaxPoolHistory
  nlohmann::json Encode() const;
  static Result<PoolStateMsg> Decode(const nlohmann::json& meta);
};
inline constexpr size_t kMaxPoolRuns = 4096;
inline constexpr size_t kMaxPoolRunsPerHost = 256;  // first reported from one host
inline constexpr size_t kMaxPoolHistory = 64;
inline constexpr size_t kMaxPoolStateCounts = 32;
inline constexpr size_t kMaxPoolStateInputs = 256;
inline constexpr size_t kMaxPoolReasonBytes = 1024;

}  // namespace gm
