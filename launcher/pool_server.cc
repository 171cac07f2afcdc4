#include "launcher/pool_server.h"

#include <algorithm>
#include <cstdio>

#include "core/host.h"
#include "core/log.h"
#include "dataplane/auth.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

// Frames a run sends: a report of kMaxPoolCounts rates fits in 64 KiB.
constexpr FrameLimits kPoolLimits{64u << 10, 0, kFrameFinishS};

planner::RunReport ToRunReport(const PoolReportMsg& m) {
  planner::RunReport r;
  r.run_id = m.run_id;
  r.gpus = m.gpus;
  r.cpus_per_worker = static_cast<int>(m.cpus_per_worker);
  r.base_workers = static_cast<int>(m.base_workers);
  r.extra_workers = static_cast<int>(m.extra_workers);
  r.demand_samples_per_s = m.demand_samples_per_s;
  for (const auto& [workers, rate] : m.rates) r.rates.emplace_back(static_cast<int>(workers), rate);
  return r;
}

std::string GpuText(double gpus) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", gpus);
  return buf;
}

}  // namespace

PoolServer::PoolServer(const PoolServerOptions& options) : o_(options), state_(options.pool) {}

PoolServer::~PoolServer() { Stop(); }

double PoolServer::Now() const { return (o_.clock ? *o_.clock : SystemClock()).Now(); }

Result<std::unique_ptr<PoolServer>> PoolServer::Start(const PoolServerOptions& options) {
  if (options.secret.empty()) return Status::InvalidArgument("pool: no pool key");
  if (options.pool.cpus < 0) return Status::InvalidArgument("pool: --cpus must be 0 or more");
  if (!(options.pool.report_timeout_s > 0)) {
    return Status::InvalidArgument("pool: the report timeout must be positive");
  }
  GM_ASSIGN_OR_RETURN(Listener listener, Listener::ListenTcp(options.host, options.port));
  std::unique_ptr<PoolServer> server(new PoolServer(options));
  server->port_ = listener.port();
  if (options.idle_cpus) {  // the budget from the start, for --status before any report
    GM_ASSIGN_OR_RETURN(int idle, options.idle_cpus());
    MutexLock lock(server->mu_);
    server->state_.set_cpus(idle);
    server->budget_at_s_ = server->Now();
  }
  ConnectionServer::Options c;
  c.name = "pool";
  c.hello_role = "pool";
  GM_ASSIGN_OR_RETURN(
      server->connections_,
      ConnectionServer::Start(std::move(c),
                              [s = server.get()](const ConnectionServer::Connection& connection) {
                                s->Serve(connection);
                              }));
  GM_RETURN_IF_ERROR(server->connections_->Listen(std::move(listener)));
  return server;
}

void PoolServer::Stop() {
  if (connections_) connections_->Stop();
}

void PoolServer::Serve(const ConnectionServer::Connection& connection) {
  Socket& socket = *connection.socket();
  std::string role;
  auto key_for = [this](std::string_view claimed) -> Result<std::string> {
    if (claimed == kPoolRunRole) return RoleKey(o_.secret, claimed);
    return Status::InvalidArgument("no such role");
  };
  Status st = ServerHandshake(socket, key_for, "pool", Deadline::After(kHandshakeTimeoutS), &role,
                              &connection.hello_nonce());
  if (!st.ok()) {
    LogDebug("pool: connection from " + socket.peer() + " refused: " + st.message());
    return;
  }
  connection.Authenticated();
  st = ServeRun(socket);
  if (!st.ok() && st.code() != Code::kUnavailable) {
    SendError(socket, st.message(), Deadline::After(1));
    LogWarning("pool: connection from " + socket.peer() + " dropped: " + st.message());
  }
}

Status PoolServer::ServeRun(Socket& socket) {
  std::string bound;  // the run this connection reports for, once it has
  for (;;) {
    GM_ASSIGN_OR_RETURN(
        Frame frame, RecvFrame(socket, kPoolLimits, Deadline::After(2 * o_.pool.report_timeout_s)));
    if (frame.type == MsgType::kBye) return Status::Ok();
    if (frame.type == MsgType::kPoolStatus) {
      GM_RETURN_IF_ERROR(SendFrame(socket, MsgType::kPoolState, State().Encode(),
                                   Deadline::After(kHandshakeTimeoutS)));
      continue;
    }
    if (frame.type != MsgType::kPoolReport) {
      return Status::InvalidArgument("pool: " + std::string(MsgTypeName(frame.type)) +
                                     " where POOL_REPORT or POOL_STATUS was expected");
    }
    GM_ASSIGN_OR_RETURN(PoolReportMsg report, PoolReportMsg::Decode(frame.meta));
    GM_ASSIGN_OR_RETURN(PoolGrantMsg grant, OnReport(&bound, HostOfPeer(socket.peer()), report));
    GM_RETURN_IF_ERROR(SendFrame(socket, MsgType::kPoolGrant, grant.Encode(),
                                 Deadline::After(kHandshakeTimeoutS)));
  }
}

namespace {

// Equal strings, compared in time that depends on their lengths only.
bool SameToken(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Status PoolServer::Admit(const std::string& bound, const std::string& host,
                         const PoolReportMsg& report) {
  if (auto owned = tokens_.find(report.run_id);
      owned != tokens_.end() && bound != report.run_id && !SameToken(owned->second, report.token)) {
    return Status::InvalidArgument(
        "pool: run \"" + report.run_id +
        "\" reports on another connection, which has its token: a run's reports come on the "
        "connection that first reported it, or carry the token the pool gave it there");
  }
  if (!bound.empty() || seen_.count(report.run_id) != 0) return Status::Ok();
  if (seen_.size() >= std::min(o_.max_runs, kMaxPoolRuns)) {
    return Status::ResourceExhausted("pool: " + std::to_string(seen_.size()) +
                                     " runs report already (the most it serves)");
  }
  const size_t from_host = static_cast<size_t>(std::count_if(
      seen_.begin(), seen_.end(), [&](const auto& s) { return s.second.host == host; }));
  if (from_host >= o_.max_runs_per_host) {
    return Status::ResourceExhausted(
        "pool: " + std::to_string(from_host) + " runs report from " + host +
        " already (the most one host may: goldminer pool --max-runs-per-host)");
  }
  return Status::Ok();
}

Result<double> PoolServer::CountedGpus(const PoolReportMsg& report, double now) {
  if (!o_.job_gpus) return report.gpus;
  if (report.slurm_job.empty()) return std::min(report.gpus, 1.0);
  auto known = job_gpus_.find(report.slurm_job);
  if (known == job_gpus_.end() || now - known->second.at_s >= o_.job_every_s) {
    Result<double> asked = o_.job_gpus(report.slurm_job);
    if (!asked.ok() && asked.status().code() == Code::kNotFound) {
      job_gpus_.erase(report.slurm_job);
      return Status::InvalidArgument("pool: run \"" + report.run_id + "\" names Slurm job " +
                                     report.slurm_job + ": " + asked.status().message());
    }
    if (!asked.ok()) {
      if (!jobs_failing_) {
        jobs_failing_ = true;
        LogWarning("pool: cannot ask Slurm for the GPUs of job " + report.slurm_job + " (" +
                   asked.status().message() + "); runs count as at most 1 GPU until it answers");
      }
      return std::min(report.gpus, known == job_gpus_.end() ? 1.0 : known->second.gpus);
    }
    jobs_failing_ = false;
    if (job_gpus_.size() >= kMaxPoolRuns) job_gpus_.clear();  // a bound on what peers make us keep
    known = job_gpus_.insert_or_assign(report.slurm_job, JobGpus{*asked, now}).first;
  }
  // A job without GPUs weighs as little as a report may (gpus > 0).
  return std::min(report.gpus, std::max(known->second.gpus, 1e-3));
}

Result<PoolGrantMsg> PoolServer::OnReport(std::string* bound, const std::string& host,
                                          const PoolReportMsg& given) {
  const double now = Now();
  PoolReportMsg report = given;
  report.token.clear();  // kept apart, and never shown in POOL_STATE
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(Admit(*bound, host, given));
  GM_ASSIGN_OR_RETURN(report.gpus, CountedGpus(given, now));
  const auto before = seen_.find(report.run_id);
  const bool said_before = before != seen_.end() && before->second.cut_said;
  if (report.gpus < given.gpus && !said_before) {
    LogWarning("pool: run " + report.run_id + " reports " + GpuText(given.gpus) +
               " GPUs; it is counted as " + GpuText(report.gpus) +
               (given.slurm_job.empty() ? ", as it names no Slurm job"
                                        : ", what its Slurm job " + given.slurm_job + " holds"));
  }
  GM_RETURN_IF_ERROR(state_.Report(*bound, ToRunReport(report), now));
  if (!tokens_.contains(report.run_id)) {
    GM_ASSIGN_OR_RETURN(tokens_[report.run_id], RandomHex(kPoolTokenHexChars / 2));
  }
  if (bound->empty()) {
    *bound = report.run_id;
    LogInfo("pool: run " + report.run_id + " reports (" + GpuText(report.gpus) + " GPUs, " +
            std::to_string(report.extra_workers) + " pool worker(s) held)");
  }
  const std::string first_host = before == seen_.end() ? host : before->second.host;
  seen_[report.run_id] = {
      static_cast<int>(report.extra_workers), report.gpus, now, report, first_host,
      said_before || report.gpus < given.gpus};
  if (o_.idle_cpus && now - budget_at_s_ >= o_.budget_every_s) RefreshBudget(now);
  std::vector<std::string> forgotten;
  GM_ASSIGN_OR_RETURN(std::vector<planner::PoolGrant> grants, state_.Divide(now, &forgotten));
  for (const std::string& id : forgotten) {
    LogInfo("pool: run " + id + " stopped reporting: its CPUs go to the others");
    seen_.erase(id);
    grants_.erase(id);
    tokens_.erase(id);
  }
  PoolGrantMsg mine;
  for (planner::PoolGrant& g : grants) {
    auto old = grants_.find(g.run_id);
    if (old == grants_.end() || old->second.extra_workers != g.extra_workers) {
      LogInfo("pool: run " + g.run_id + " may hold " + std::to_string(g.extra_workers) +
              " pool worker(s) (" + std::to_string(g.cpus) + " CPUs): " + g.reason);
      history_.push_back(
          {now, g.run_id, old == grants_.end() ? 0 : old->second.cpus, g.cpus, g.reason});
      if (history_.size() > kMaxPoolHistory) history_.pop_front();
    }
    if (g.run_id == report.run_id) mine = PoolGrantMsg{g.extra_workers, g.cpus, g.reason, ""};
    grants_[g.run_id] = std::move(g);
  }
  mine.token = tokens_[report.run_id];
  return mine;
}

// The budget from Slurm now (PoolServerOptions::idle_cpus, pending_cpus); an error
// keeps the last one, said once.
void PoolServer::RefreshBudget(double now) {
  budget_at_s_ = now;
  Result<int> idle = o_.idle_cpus();
  Result<int> pending = o_.pending_cpus ? o_.pending_cpus() : Result<int>(0);
  if (!idle.ok() || !pending.ok()) {
    if (!budget_failing_) {
      budget_failing_ = true;
      LogWarning("pool: cannot read the idle CPUs (" +
                 (idle.ok() ? pending.status() : idle.status()).message() + "); the budget stays " +
                 std::to_string(state_.cpus()) + " CPUs");
    }
    return;
  }
  budget_failing_ = false;
  const int held = state_.HeldCpus();
  std::string why;
  int budget = *idle + held;
  if (*pending > 0) {
    budget = std::max(0, held - *pending);
    why = "jobs waiting for CPUs want " + std::to_string(*pending) + ": the pool gives them back";
  }
  if (budget != state_.cpus()) {
    LogInfo("pool: the budget is " + std::to_string(budget) + " CPUs (" + std::to_string(*idle) +
            " idle, " + std::to_string(held) + " held by pool workers" +
            (why.empty() ? "" : "; " + why) + ")");
  }
  state_.set_cpus(budget, why);
}

PoolStateMsg PoolServer::State() {
  const double now = Now();
  MutexLock lock(mu_);
  PoolStateMsg s;
  s.cpus = state_.cpus();
  for (const auto& [id, grant] : grants_) {
    PoolStateMsg::Run r;
    r.run_id = id;
    r.extra_workers = grant.extra_workers;
    r.cpus = grant.cpus;
    if (auto h = seen_.find(id); h != seen_.end()) {
      r.held_workers = h->second.held_workers;
      r.gpus = h->second.gpus;
      r.age_s = std::max(0.0, now - h->second.at_s);
      if (s.runs.size() < kMaxPoolStateInputs) {
        r.report = h->second.report;
        if (r.report->rates.size() > kMaxPoolStateCounts)
          r.report->rates.resize(kMaxPoolStateCounts);
      }
    }
    s.runs.push_back(std::move(r));
  }
  for (const Change& c : history_) {
    s.history.push_back({std::max(0.0, now - c.at_s), c.run_id, c.from_cpus, c.to_cpus,
                         c.reason.substr(0, kMaxPoolReasonBytes)});
  }
  return s;
}

}  // namespace gm
