#include "planner/pool.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace gm::planner {
namespace {

Status CheckJob(const PoolJob& j) {
  if (!(j.weight > 0) || !std::isfinite(j.weight)) {
    return Status::InvalidArgument("pool job " + j.id + ": its weight (GPUs) must be positive");
  }
  if (j.held < 0 || j.baseline < 0) {
    return Status::InvalidArgument("pool job " + j.id + ": a negative holding or baseline");
  }
  double last = INFINITY;
  for (const PoolSegment& s : j.curve) {
    if (s.cpus < 0 || !(s.slope >= 0) || !std::isfinite(s.slope)) {
      return Status::InvalidArgument("pool job " + j.id +
                                     ": a curve segment with negative CPUs or slope");
    }
    if (s.slope > last) {
      return Status::InvalidArgument("pool job " + j.id +
                                     ": its curve's slopes rise (the speed must be concave)");
    }
    last = s.slope;
  }
  return Status::Ok();
}

// A piece of a curve not yet given: `cpus` CPUs of `job` at weighted slope
// `gain`, within the job's baseline or beyond it.
struct Piece {
  size_t job = 0;
  int cpus = 0;
  double gain = 0;
  bool beyond = false;
};

// The pieces of every curve beyond `floor[j]` CPUs: those within a baseline
// first, then the rest, each steepest first (ties: the job given first, then its
// own order).
std::vector<Piece> PiecesBeyond(const std::vector<PoolJob>& jobs, const std::vector<int>& floor) {
  std::vector<Piece> pieces;
  for (size_t j = 0; j < jobs.size(); ++j) {
    int at = 0;  // CPUs of the curve before this piece
    for (const PoolSegment& s : jobs[j].curve) {
      // The segment's CPUs past the floor, cut where the baseline ends.
      const int from = std::max(at, floor[j]), to = at + s.cpus;
      const int cut = std::clamp(jobs[j].baseline, from, std::max(from, to));
      const double gain = jobs[j].weight * s.slope;
      if (s.slope > 0 && cut > from) pieces.push_back({j, cut - from, gain, false});
      if (s.slope > 0 && to > cut) pieces.push_back({j, to - cut, gain, true});
      at = to;
    }
  }
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return a.beyond != b.beyond ? !a.beyond : a.gain > b.gain;
  });
  return pieces;
}

}  // namespace

double PoolValue(const PoolJob& job, int cpus) {
  double speed = 0;
  for (const PoolSegment& s : job.curve) {
    if (cpus <= 0) break;
    const int n = std::min(cpus, s.cpus);
    speed += n * s.slope;
    cpus -= n;
  }
  return job.weight * speed;
}

Result<PoolDivision> DividePool(const std::vector<PoolJob>& jobs, int spare_cpus, double now_s,
                                const PoolOptions& o) {
  if (spare_cpus < 0) return Status::InvalidArgument("pool: negative spare CPUs");
  if (!(o.min_gain >= 0) || !(o.min_lifetime_s >= 0)) {
    return Status::InvalidArgument("pool: min_gain and min_lifetime_s must be >= 0");
  }
  for (const PoolJob& j : jobs) GM_RETURN_IF_ERROR(CheckJob(j));
  // Workers that started a moment ago stay, when they fit; those beyond their
  // job's baseline only when every job's baseline fits beside them.
  std::vector<int> floor(jobs.size(), 0);
  int floors = 0, unmet = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (now_s - jobs[j].held_since_s < o.min_lifetime_s) floor[j] = jobs[j].held;
    floors += floor[j];
    int curve = 0;
    for (const PoolSegment& s : jobs[j].curve) curve += s.slope > 0 ? s.cpus : 0;
    unmet += std::max(0, std::min(jobs[j].baseline, curve) - floor[j]);
  }
  if (floors + unmet > spare_cpus) {
    floors = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
      floor[j] = std::min(floor[j], jobs[j].baseline);
      floors += floor[j];
    }
  }
  if (floors > spare_cpus) {  // not all fit: a job is being admitted (the caller preempts)
    std::fill(floor.begin(), floor.end(), 0);
    floors = 0;
  }
  std::vector<int> best = floor;
  int left = spare_cpus - floors;
  for (const Piece& p : PiecesBeyond(jobs, floor)) {
    if (left == 0) break;
    const int n = std::min(left, p.cpus);
    best[p.job] += n;
    left -= n;
  }
  // The best division's value and the holdings' value, job by job: the holdings
  // stay when they fit, are worth within min_gain of the best, and no job would
  // gain more than min_gain of its own speed (by the whole's value alone, one job
  // among many could wait for CPUs for days).
  PoolDivision d;
  std::vector<int> held(jobs.size());
  int holding = 0;
  double kept = 0;
  bool one_would_gain = false;
  for (size_t j = 0; j < jobs.size(); ++j) {
    holding += held[j] = jobs[j].held;
    const double b = PoolValue(jobs[j], best[j]), h = PoolValue(jobs[j], held[j]);
    d.value += b;
    kept += h;
    one_would_gain |= b - h > o.min_gain * jobs[j].weight;
  }
  if (holding <= spare_cpus && !one_would_gain && kept >= d.value * (1 - o.min_gain)) {
    d.cpus = held;
    d.value = kept;
    return d;
  }
  d.cpus = best;
  d.changed = best != held;
  return d;
}

}  // namespace gm::planner
