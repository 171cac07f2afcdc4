// One policy's replay (simulator/replay.h): the event loop, first-fit placement,
// the job policy's all-or-nothing workers, the cluster policy's pool (divided by
// planner/pool.h at every arrival and end), and the figures.
#include "simulator/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <set>
#include <utility>

namespace gm::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What a task needs to start under a policy: on its node (GPUs, memory, `own`
// CPUs) and, under `job`, `remote` CPUs anywhere.
struct Need {
  int gpu_milli = 0, own = 0, remote = 0;
  uint64_t mem = 0;
  bool Covers(const Need& o) const {  // at least o in every dimension
    return gpu_milli >= o.gpu_milli && own >= o.own && remote >= o.remote && mem >= o.mem;
  }
};

struct Node {
  int cpus = 0, gpu_milli = 0;
  uint64_t mem = 0;
  int hard = 0, soft = 0, gpu_used = 0;  // soft: data workers' CPUs (cluster)
  uint64_t mem_used = 0;
  int Free() const { return cpus - hard - soft; }
};

struct Task {
  const SimTask* src = nullptr;
  const Family* family = nullptr;  // null: CPU only
  double submit = 0, work = 0, progress = 0, speed = 0;
  double start = -1, finish = -1;
  Need need;
  int node = -1;
  std::vector<std::pair<int, int>> remote;  // (node, CPUs): job's workers
  std::vector<std::pair<int, int>> soft;    // (node, CPUs): cluster's workers
  int soft_cpus = 0;
  double soft_since = -kInf;
  // Worker CPUs granted that do not feed it yet (--worker-delay): (when they
  // will, how many), the newest last.
  std::vector<std::pair<double, int>> pending;
  uint64_t version = 0;
  double Gpus() const { return src->gpu_milli / 1000.0; }
  // Under cluster, the worker CPUs it would have held as submitted (the CPUs it
  // asked for, less its trainer's): the pool gives them first, and they are the
  // run's own allocation, which no task being admitted takes back.
  int Baseline() const { return std::max(0, src->cpus - need.own); }
  int Pending() const {
    int n = 0;
    for (const auto& [at, cpus] : pending) n += cpus;
    return n;
  }
  // Takes up to `cpus` from what does not feed it yet, the newest first (they are
  // the ones given back first).
  void DropPending(int cpus) {
    while (cpus > 0 && !pending.empty()) {
      const int n = std::min(cpus, pending.back().second);
      pending.back().second -= n;
      cpus -= n;
      if (pending.back().second == 0) pending.pop_back();
    }
  }
};

struct Completion {
  double t;
  size_t task;
  uint64_t version;
  bool operator>(const Completion& o) const {
    return t != o.t ? t > o.t : task > o.task;  // ties: the earlier task first
  }
};

struct Sample {
  double t;
  size_t queued;
  double allocated, effective;  // GPUs
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}
double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// One policy's replay.
class Replay {
 public:
  Replay(std::string policy, std::vector<Task> tasks, const std::vector<SimNode>& nodes,
         const SimOptions& o, const SimInvariants* checks)
      : policy_(std::move(policy)), o_(o), checks_(checks), tasks_(std::move(tasks)) {
    for (const SimNode& n : nodes) {
      Node x;
      x.cpus = n.cpus;
      x.gpu_milli = n.gpus * 1000;
      x.mem = n.memory_mib;
      nodes_.push_back(x);
      free_.insert(static_cast<int>(nodes_.size()) - 1);
      total_cpus_ += n.cpus;
    }
    for (Task& t : tasks_) t.need = NeedOf(t);
  }

  Result<PolicyResult> Run();

 private:
  Need NeedOf(const Task& t) const;
  // A trainer's CPUs: trainer_cpus_per_gpu a GPU, at least 1, at most what the task
  // asked; none when that is 0 (the trace's CPUs are its data workers' only).
  int Trainer(const Task& t) const {
    if (!(o_.trainer_cpus_per_gpu > 0)) return 0;
    const int want = static_cast<int>(std::ceil(o_.trainer_cpus_per_gpu * t.Gpus() - 1e-9));
    return std::clamp(want, 1, t.src->cpus);
  }
  double Feeding(const Task& t) const;
  double SpeedOf(const Task& t) const;
  int NicCapCpus(const Task& t) const;
  bool Fits(const Node& n, const Need& need, bool preempting) const;
  int NodeFor(const Need& need) const;
  bool Place(Task& t, size_t index);
  void Take(std::vector<std::pair<int, int>>& at, int node, int cpus, bool soft);
  int Acquire(std::vector<std::pair<int, int>>& at, int own, int cpus, bool soft);
  void Release(std::vector<std::pair<int, int>>& at, int cpus, bool soft);
  void Preempt(int node);
  void Finish(Task& t);
  void Schedule();
  Status Divide();
  void Advance(double t);
  double NextReady() const;
  void Ready();
  void Respeed();
  Status Check() const;
  PolicyResult Figures() const;
  void Touch(int node) {
    if (nodes_[node].Free() > 0) {
      free_.insert(node);
    } else {
      free_.erase(node);
    }
  }

  const std::string policy_;
  const SimOptions& o_;
  const SimInvariants* checks_;
  std::vector<Task> tasks_;
  std::vector<Node> nodes_;
  std::set<int> free_;  // nodes with a free CPU, for first fit
  std::vector<size_t> waiting_, running_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> ends_;
  // Per node, the worker CPUs within their tasks' baselines (Schedule's).
  std::vector<int> baseline_at_;
  int total_cpus_ = 0;
  double now_ = 0, cpu_seconds_ = 0;
  uint64_t started_ = 0, preempted_ = 0, events_ = 0;
  std::vector<Sample> samples_;
};

Need Replay::NeedOf(const Task& t) const {
  Need n;
  n.gpu_milli = t.src->gpu_milli;
  n.mem = t.src->memory_mib;
  if (!t.family || policy_ == "static") {
    n.own = t.src->cpus;
  } else {
    n.own = Trainer(t);
    if (policy_ == "job") {
      const int planned = static_cast<int>(std::ceil(t.family->cpus_per_gpu * t.Gpus() - 1e-9));
      // At most what its node's NIC carries and what the cluster has besides.
      n.remote = std::max(0, std::min({planned, n.own + NicCapCpus(t), total_cpus_}) - n.own);
    }
  }
  return n;
}

// Worker CPUs off a task's node its node's NIC can carry at full speed.
int NicCap(const Family& f, double nic_gbps) {
  const double per_cpu = f.samples_per_s_per_gpu / f.cpus_per_gpu * f.bytes_per_sample;
  if (!(per_cpu > 0)) return std::numeric_limits<int>::max() / 4;
  return static_cast<int>(std::min(1e9, nic_gbps * 1e9 / 8 / per_cpu));
}
int Replay::NicCapCpus(const Task& t) const { return NicCap(*t.family, o_.nic_gbps); }

double Replay::Feeding(const Task& t) const {
  if (policy_ == "static") return t.src->cpus;
  double local = t.need.own, remote = 0;
  for (const auto& [node, cpus] : t.remote) (node == t.node ? local : remote) += cpus;
  double soft_local = 0, soft_remote = 0;
  for (const auto& [node, cpus] : t.soft) (node == t.node ? soft_local : soft_remote) += cpus;
  // Those not feeding it yet: off its node first (the pool gives its own node's first).
  const double pending = t.Pending();
  const double off = std::min(pending, soft_remote);
  local += soft_local - (pending - off);
  remote += soft_remote - off;
  return local + std::min(remote, static_cast<double>(NicCapCpus(t)));
}

double Replay::SpeedOf(const Task& t) const {
  if (!t.family) return 1;
  if (now_ < t.start + o_.task_start_s) return 0;  // its processes are starting
  return std::min(1.0, Feeding(t) / (t.family->cpus_per_gpu * t.Gpus()));
}

bool Replay::Fits(const Node& n, const Need& need, bool preempting) const {
  // Under cluster a task may take CPUs back from workers beyond their tasks'
  // baselines: then those do not count.
  const size_t at = static_cast<size_t>(&n - nodes_.data());
  const int free = n.cpus - n.hard - (preempting ? baseline_at_[at] : n.soft);
  return n.gpu_milli - n.gpu_used >= need.gpu_milli && n.mem - n.mem_used >= need.mem &&
         free >= need.own;
}

void Replay::Take(std::vector<std::pair<int, int>>& at, int node, int cpus, bool soft) {
  (soft ? nodes_[node].soft : nodes_[node].hard) += cpus;
  auto it = std::find_if(at.begin(), at.end(), [node](const auto& p) { return p.first == node; });
  if (it == at.end()) {
    at.emplace_back(node, cpus);
  } else {
    it->second += cpus;
  }
  Touch(node);
}

// Up to `cpus` free CPUs, on node `own` first, then first fit; returns how many.
int Replay::Acquire(std::vector<std::pair<int, int>>& at, int own, int cpus, bool soft) {
  int got = 0;
  if (own >= 0 && nodes_[own].Free() > 0) {
    const int n = std::min(cpus, nodes_[own].Free());
    Take(at, own, n, soft);
    got += n;
  }
  for (auto it = free_.begin(); got < cpus && it != free_.end();) {
    const int node = *it++;  // Take may erase it from free_
    const int n = std::min(cpus - got, nodes_[node].Free());
    if (n > 0) {
      Take(at, node, n, soft);
      got += n;
    }
  }
  return got;
}

// Gives back `cpus` of what `at` holds, the last node taken first.
void Replay::Release(std::vector<std::pair<int, int>>& at, int cpus, bool soft) {
  while (cpus > 0 && !at.empty()) {
    auto& [node, held] = at.back();
    const int n = std::min(cpus, held);
    (soft ? nodes_[node].soft : nodes_[node].hard) -= n;
    held -= n;
    cpus -= n;
    Touch(node);
    if (held == 0) at.pop_back();
  }
}

// First fit. Under cluster, as Slurm's preemption does, a node where the task
// takes no worker's CPU first, and only then one where it takes some back.
int Replay::NodeFor(const Need& need) const {
  for (bool preempting : {false, true}) {
    if (preempting && policy_ != "cluster") break;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (Fits(nodes_[i], need, preempting)) return static_cast<int>(i);
    }
  }
  return -1;
}

bool Replay::Place(Task& t, size_t index) {
  const int node = NodeFor(t.need);
  if (node < 0) return false;
  if (t.need.remote > 0) {
    int total_free = 0;
    for (const Node& n : nodes_) total_free += n.Free();
    if (total_free - t.need.own < t.need.remote) return false;
  }
  Node& n = nodes_[node];
  t.node = node;
  n.gpu_used += t.need.gpu_milli;
  n.mem_used += t.need.mem;
  n.hard += t.need.own;
  Touch(node);
  if (n.Free() < 0) Preempt(node);
  if (t.need.remote > 0) Acquire(t.remote, node, t.need.remote, false);
  t.start = now_;
  running_.push_back(index);
  return true;
}

// A task admitted on `node` takes back the workers' CPUs it needs there, of
// those beyond their tasks' baselines (a task's first CPUs taken are its
// baseline's).
void Replay::Preempt(int node) {
  int over = -nodes_[node].Free();
  for (size_t i : running_) {
    if (over <= 0) break;
    Task& t = tasks_[i];
    int baseline = t.Baseline();
    for (auto it = t.soft.begin(); it != t.soft.end() && over > 0; ++it) {
      const int kept = std::min(baseline, it->second);
      baseline -= kept;
      if (it->first != node || it->second == kept) continue;
      const int n = std::min(over, it->second - kept);
      it->second -= n;
      t.soft_cpus -= n;
      t.DropPending(n);
      nodes_[node].soft -= n;
      over -= n;
      preempted_ += static_cast<uint64_t>(n);
    }
    std::erase_if(t.soft, [](const auto& p) { return p.second == 0; });
  }
  Touch(node);
}

void Replay::Finish(Task& t) {
  t.finish = now_;
  t.progress = t.work;
  Node& n = nodes_[t.node];
  n.gpu_used -= t.need.gpu_milli;
  n.mem_used -= t.need.mem;
  n.hard -= t.need.own;
  Touch(t.node);
  Release(t.remote, 1 << 30, false);
  Release(t.soft, 1 << 30, true);
  t.soft_cpus = 0;
  t.pending.clear();
  std::erase(running_, static_cast<size_t>(&t - tasks_.data()));
}

void Replay::Schedule() {
  baseline_at_.assign(nodes_.size(), 0);
  for (size_t i : running_) {
    const Task& t = tasks_[i];
    int baseline = t.Baseline();
    for (const auto& [node, cpus] : t.soft) {
      const int n = std::min(baseline, cpus);
      baseline_at_[static_cast<size_t>(node)] += n;
      baseline -= n;
    }
  }
  std::vector<Need> failed;  // shapes that found no node in this pass
  std::vector<size_t> still;
  for (size_t i : waiting_) {
    Task& t = tasks_[i];
    const bool hopeless =
        std::any_of(failed.begin(), failed.end(), [&](const Need& f) { return t.need.Covers(f); });
    if (hopeless || !Place(t, i)) {
      if (!hopeless) failed.push_back(t.need);
      still.push_back(i);
    }
  }
  waiting_ = std::move(still);
}

Status Replay::Divide() {
  std::vector<planner::PoolJob> jobs;
  std::vector<size_t> who;
  for (size_t i : running_) {
    const Task& t = tasks_[i];
    if (!t.family) continue;
    planner::PoolJob j;
    j.weight = t.Gpus();
    const double kappa_g = t.family->cpus_per_gpu * t.Gpus();
    const double want = std::max(0.0, kappa_g - t.need.own);
    const int whole = std::min(static_cast<int>(want), NicCapCpus(t));
    j.curve.push_back({whole, 1 / kappa_g});
    if (want > whole && whole < NicCapCpus(t)) j.curve.push_back({1, (want - whole) / kappa_g});
    // What it asked for itself comes first: sharing never leaves it slower than as
    // submitted while the pool has the CPUs.
    j.baseline = t.Baseline();
    j.held = t.soft_cpus;
    j.held_since_s = t.soft_since;
    jobs.push_back(std::move(j));
    who.push_back(i);
  }
  int spare = 0;
  for (const Node& n : nodes_) spare += n.cpus - n.hard;
  GM_ASSIGN_OR_RETURN(planner::PoolDivision d, planner::DividePool(jobs, spare, now_, o_.pool));
  if (!d.changed) return Status::Ok();
  for (size_t k = 0; k < who.size(); ++k) {  // what shrinks first, then what grows
    Task& t = tasks_[who[k]];
    if (d.cpus[k] >= t.soft_cpus) continue;
    Release(t.soft, t.soft_cpus - d.cpus[k], true);
    t.DropPending(t.soft_cpus - d.cpus[k]);
    t.soft_cpus = d.cpus[k];
  }
  for (size_t k = 0; k < who.size(); ++k) {
    Task& t = tasks_[who[k]];
    if (d.cpus[k] <= t.soft_cpus) continue;
    const int got = Acquire(t.soft, t.node, d.cpus[k] - t.soft_cpus, true);
    // Its baseline feeds it at once (its own workers start with it); what is
    // granted beyond, --worker-delay later (a worker job starts, registers, and
    // the run's autoscaler decides to use it).
    const int at_once = std::clamp(jobs[k].baseline - t.soft_cpus, 0, got);
    if (o_.worker_delay_s > 0 && got > at_once) {
      t.pending.emplace_back(now_ + o_.worker_delay_s, got - at_once);
    }
    t.soft_cpus += got;
    t.soft_since = now_;
    started_ += static_cast<uint64_t>(got);
  }
  return Status::Ok();
}

void Replay::Advance(double t) {
  const double dt = t - now_;
  if (dt > 0) {
    int cpus = 0;
    for (const Node& n : nodes_) cpus += n.hard + n.soft;
    cpu_seconds_ += cpus * dt;
    for (size_t i : running_) tasks_[i].progress += tasks_[i].speed * dt;
  }
  now_ = t;
}

// The next time a running task's speed changes by itself: its start-up ends, or
// worker CPUs granted to it begin to feed it.
double Replay::NextReady() const {
  if (!(o_.task_start_s > 0) && !(o_.worker_delay_s > 0)) return kInf;  // nothing waits
  double next = kInf;
  for (size_t i : running_) {
    const Task& t = tasks_[i];
    if (t.family && t.start + o_.task_start_s > now_)
      next = std::min(next, t.start + o_.task_start_s);
    for (const auto& [at, cpus] : t.pending) next = std::min(next, at);
  }
  return next;
}

// Worker CPUs whose delay is over now feed their task.
void Replay::Ready() {
  for (size_t i : running_) {
    std::erase_if(tasks_[i].pending, [this](const auto& p) { return p.first <= now_; });
  }
}

// New speeds after a change; a task whose speed changed gets a new end.
void Replay::Respeed() {
  for (size_t i : running_) {
    Task& t = tasks_[i];
    const double s = SpeedOf(t);
    if (s == t.speed && t.version > 0) continue;
    t.speed = s;
    ++t.version;
    const double left = std::max(0.0, t.work - t.progress);
    ends_.push({now_ + left / s, i, t.version});
  }
  double allocated = 0, effective = 0;
  for (size_t i : running_) {
    allocated += tasks_[i].Gpus();
    effective += tasks_[i].Gpus() * tasks_[i].speed;
  }
  samples_.push_back({now_, waiting_.size(), allocated, effective});
}

Status Replay::Check() const {
  if (!checks_ || !checks_->on_event) return Status::Ok();
  std::vector<int> cpus, gpus;
  std::vector<uint64_t> mem;
  for (const Node& n : nodes_) {
    cpus.push_back(n.hard + n.soft);
    gpus.push_back(n.gpu_used);
    mem.push_back(n.mem_used);
  }
  return checks_->on_event(now_, cpus, gpus, mem);
}

Result<PolicyResult> Replay::Run() {
  std::vector<size_t> order(tasks_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tasks_[a].submit < tasks_[b].submit; });
  now_ = order.empty() ? 0 : tasks_[order.front()].submit;
  size_t next = 0;
  for (;;) {
    while (!ends_.empty() && ends_.top().version != tasks_[ends_.top().task].version) ends_.pop();
    const double arrival = next < order.size() ? tasks_[order[next]].submit : kInf;
    const double end = ends_.empty() ? kInf : ends_.top().t;
    const double ready = NextReady();
    if (arrival == kInf && end == kInf && ready == kInf) break;
    Advance(std::min({arrival, end, ready}));
    if (ready < end && ready < arrival) {  // speeds change, nothing else
      ++events_;
      Ready();
      Respeed();
      GM_RETURN_IF_ERROR(Check());
      continue;
    }
    if (end <= arrival) {
      const size_t i = ends_.top().task;
      ends_.pop();
      Task& t = tasks_[i];
      if (std::abs(t.progress - t.work) > 1e-6 * std::max(1.0, t.work)) {
        return Status::Internal("task " + t.src->name + " ends with " + std::to_string(t.progress) +
                                " of its " + std::to_string(t.work) + " work");
      }
      ++t.version;
      Finish(t);
    } else {
      waiting_.push_back(order[next++]);
    }
    ++events_;
    Schedule();
    if (policy_ == "cluster") GM_RETURN_IF_ERROR(Divide());
    Respeed();
    GM_RETURN_IF_ERROR(Check());
  }
  if (!waiting_.empty()) {
    return Status::Internal("policy " + policy_ + ": " + std::to_string(waiting_.size()) +
                            " task(s) never started");
  }
  return Figures();
}

PolicyResult Replay::Figures() const {
  PolicyResult r;
  r.policy = policy_;
  r.events = events_;
  r.worker_cpus_started = started_;
  r.worker_cpus_preempted = preempted_;
  std::vector<double> jct, queue;
  double first = kInf, last = 0, last_submit = 0, held = 0, effective = 0;
  for (const Task& t : tasks_) {
    first = std::min(first, t.submit);
    last = std::max(last, t.finish);
    last_submit = std::max(last_submit, t.submit);
    if (!t.family) {
      ++r.cpu_tasks;
      continue;
    }
    ++r.gpu_tasks;
    r.tasks.push_back({t.src->line, t.family->name, t.submit, t.start, t.finish});
    jct.push_back(t.finish - t.submit);
    queue.push_back(t.start - t.submit);
    held += t.Gpus() * (t.finish - t.start);
    effective += t.Gpus() * t.work;
  }
  int gpus = 0, cpus = 0;
  for (const Node& n : nodes_) gpus += n.gpu_milli / 1000, cpus += n.cpus;
  r.makespan_s = tasks_.empty() ? 0 : last - first;
  r.jct_mean_s = Mean(jct);
  r.jct_p50_s = Percentile(jct, 0.50);
  r.jct_p95_s = Percentile(jct, 0.95);
  r.jct_p99_s = Percentile(jct, 0.99);
  r.queue_mean_s = Mean(queue);
  r.queue_p50_s = Percentile(queue, 0.50);
  r.queue_p95_s = Percentile(queue, 0.95);
  if (r.makespan_s > 0) {
    r.gpu_util_allocated = held / (gpus * r.makespan_s);
    r.gpu_util_effective = effective / (gpus * r.makespan_s);
    r.cpu_util = cpu_seconds_ / (cpus * r.makespan_s);
  }
  // Over the submission window: each sample's state holds until the next one.
  r.window_s = tasks_.empty() ? 0 : last_submit - first;
  if (r.window_s > 0 && gpus > 0) {
    double allocated_s = 0, effective_s = 0;
    for (size_t k = 0; k < samples_.size(); ++k) {
      const double from = std::max(samples_[k].t, first);
      const double to = std::min(k + 1 < samples_.size() ? samples_[k + 1].t : kInf, last_submit);
      if (to <= from) continue;
      allocated_s += samples_[k].allocated * (to - from);
      effective_s += samples_[k].effective * (to - from);
    }
    r.gpu_util_allocated_window = allocated_s / (gpus * r.window_s);
    r.gpu_util_effective_window = effective_s / (gpus * r.window_s);
  }
  // The series: the state after the last event at or before each point.
  const size_t points = std::max<size_t>(2, o_.series_points);
  size_t k = 0;
  for (size_t p = 0; p < points && !samples_.empty(); ++p) {
    const double t = first + r.makespan_s * static_cast<double>(p) / (points - 1);
    while (k + 1 < samples_.size() && samples_[k + 1].t <= t) ++k;
    const Sample& s = samples_[k];
    r.series.push_back({t - first, s.queued, s.allocated / gpus, s.effective / gpus});
  }
  return r;
}

}  // namespace

Result<PolicyResult> ReplayPolicy(const std::string& policy, const std::vector<ReplayTask>& tasks,
                                  const std::vector<SimNode>& nodes, const SimOptions& o,
                                  const SimInvariants* checks) {
  std::vector<Task> replayed;
  replayed.reserve(tasks.size());
  for (const ReplayTask& r : tasks) {
    Task t;
    t.src = r.src;
    t.family = r.family;
    t.submit = r.submit;
    t.work = r.work;
    replayed.push_back(std::move(t));
  }
  Replay replay(policy, std::move(replayed), nodes, o, checks);
  return replay.Run();
}

}  // namespace gm::sim
