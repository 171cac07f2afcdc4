#include "launcher/coordinator_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "core/os/spawn.h"
#include "dataplane/auth.h"

namespace gm {
namespace {

constexpr double kStartS = 60;   // a child's first line (a large journal replays first)
constexpr double kAnswerS = 30;  // its answer to one op
constexpr size_t kMaxLineBytes = 64 << 20;

// Writes `j` and a newline to `fd`.
Status WriteLine(int fd, const nlohmann::json& j) {
  const std::string text = j.dump() + "\n";
  std::string_view left = text;
  while (!left.empty()) {
    const ssize_t n = ::write(fd, left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable(std::string("write: ") + std::strerror(errno));
    left.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// One line from `fd` (`pending`: what was read past the last one), parsed;
// Unavailable on end of input or when `timeout_s` passes.
Result<nlohmann::json> ReadLine(int fd, std::string& pending, double timeout_s) {
  const Deadline deadline = Deadline::After(timeout_s);
  for (;;) {
    if (const size_t end = pending.find('\n'); end != std::string::npos) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      return ParseJson(line, "the coordinator process");
    }
    if (pending.size() > kMaxLineBytes) return Status::Corrupt("a line past 64 MiB");
    pollfd p{fd, POLLIN, 0};
    const int ms = static_cast<int>(std::max(0.0, deadline.remaining_s()) * 1000);
    const int ready = ::poll(&p, 1, ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0)
      return Status::Unavailable("no answer within " + std::to_string(static_cast<int>(timeout_s)) +
                                 " s");
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable("it closed its output");
    pending.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

// One field list per type, for both directions (nlohmann's macros): a field
// added to a struct and not here is not carried, never carried one way only.
// The config leaves out the secret (sent apart) and the clock.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WorkerStats, id, status, splits_assigned, splits_done,
                                   splits_completed, batches, reassigned)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoordinatorStats, epoch, epoch_done, pending_splits,
                                   incomplete_splits, acks, duplicate_acks, reassignments,
                                   stale_split_done, samples_skipped, rank_positions, workers)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StageStats, name, count, cpu_s, extra_cpu_s, wall_s, bytes_in,
                                   bytes_out, peak_bytes_out)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoordinatorSummary::Place, host, step)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoordinatorSummary, state, epochs_done, workers_registered,
                                   connections_refused, connections_dropped, workers_faulted,
                                   worker_cpu_s, connections_open, workers_live, workers_producing,
                                   failure, splits_unchecked, offload_notes, offload_notes_dropped,
                                   dataloaders_served, dataloaders_native, dataloaders_stock,
                                   dataloaders_in_process, offload_only, worker_stages, places)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoordinatorConfig, host, advertise_host, port, pipeline_doc,
                                   pipeline_origin, base_dir, offload_only, samples_per_split,
                                   world_size, epochs, epochs_in_flight, heartbeat_s,
                                   liveness_timeout_s, client_idle_s, run_id, journal_path,
                                   reconnect_s)

nlohmann::json SummaryJson(const CoordinatorSummary& summary) { return summary; }

Result<CoordinatorSummary> SummaryFromJson(const nlohmann::json& j) {
  // Written by SummaryJson of this binary: a mismatch is an error, not a peer's.
  try {
    return j.get<CoordinatorSummary>();
  } catch (const std::exception& e) {
    return Status::Corrupt(std::string("the coordinator process's summary: ") + e.what());
  }
}

nlohmann::json ConfigJson(const CoordinatorConfig& config) { return config; }

Result<CoordinatorConfig> ConfigFromJson(const nlohmann::json& j) {
  try {
    return j.get<CoordinatorConfig>();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("coordinator config: ") + e.what());
  }
}

int ServeCoordinatorProcess(int in_fd, int out_fd) {
  ::signal(SIGPIPE, SIG_IGN);  // run gone: its pipe's write fails instead
  std::string pending;
  Result<nlohmann::json> line = ReadLine(in_fd, pending, kStartS);
  Result<CoordinatorConfig> config =
      line.ok() ? ConfigFromJson(*line) : Result<CoordinatorConfig>(line.status());
  if (config.ok()) {
    config->secret = line->value("secret", "");
    if (Status st = CheckSecret(config->secret, "the coordinator's config"); !st.ok()) config = st;
  }
  if (!config.ok()) {
    LogError("coordinator: no config from goldminer run (it is run's own verb): " +
             config.status().message());
    return 1;
  }
  Result<std::unique_ptr<CoordinatorServer>> started = CoordinatorServer::Start(*config);
  if (!started.ok()) {
    (void)WriteLine(out_fd, {{"error", started.status().message()}});
    return 1;
  }
  std::unique_ptr<CoordinatorServer> server = std::move(*started);
  const std::string address = server->address();
  if (!WriteLine(out_fd, {{"address", address},
                          {"port", server->port()},
                          {"order_notice", server->pipeline().OrderNotice()}})
           .ok()) {
    return 0;  // run is gone
  }
  for (;;) {
    Result<nlohmann::json> request = ReadLine(in_fd, pending, 1e9);
    if (!request.ok()) break;  // run is gone: stop
    const std::string op = request->value("op", "");
    if (op == "summary") {
      if (!WriteLine(out_fd, SummaryJson(server->Summary())).ok()) break;
    } else if (op == "end_workers") {
      server->EndWorkers();
      if (!WriteLine(out_fd, {{"ok", true}}).ok()) break;
    } else if (op == "stop") {
      server->Stop();
      server->SayEnd();
      (void)WriteLine(out_fd, SummaryJson(server->Summary()));
      return 0;
    } else {
      LogError("coordinator: run asked \"" + op + "\", which is not an op");
      break;
    }
  }
  server->Stop();
  return 0;
}

Result<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(CoordinatorConfig config,
                                                                      Options options) {
  // A child that died makes the next write to its pipe fail with EPIPE, not kill
  // run with SIGPIPE (the processes run starts get the default back: core/os/spawn.h).
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<CoordinatorProcess> p(
      new CoordinatorProcess(std::move(config), std::move(options)));
  MutexLock lock(p->mu_);
  GM_RETURN_IF_ERROR(p->Spawn());
  return p;
}

CoordinatorProcess::~CoordinatorProcess() {
  MutexLock lock(mu_);
  if (pid_ > 0) (void)Reap();
}

Status CoordinatorProcess::Spawn() {
  GM_ASSIGN_OR_RETURN(Pipe in, MakePipe());
  GM_ASSIGN_OR_RETURN(Pipe out, MakePipe());
  std::vector<std::string> argv = {options_.exe};
  argv.insert(argv.end(), options_.log_flags.begin(), options_.log_flags.end());
  argv.emplace_back("coordinator");
  SpawnRequest request(std::move(argv));
  request.dup2 = {{in.read.get(), 0}, {out.write.get(), 1}};
  // Run stops it; a terminal's Ctrl-C and a Slurm step's drain signal are run's.
  request.own_process_group = true;
  request.ignore_drain_signals = true;
  GM_ASSIGN_OR_RETURN(pid_, SpawnProcess(request));
  last_pid_ = pid_;
  to_child_ = std::move(in.write);
  from_child_ = std::move(out.read);
  pending_.clear();
  // Its config first, the secret with it: over the pipe, never in a file or argv.
  nlohmann::json config = ConfigJson(config_);
  config["secret"] = config_.secret;
  if (Status st = WriteLine(to_child_.get(), config); !st.ok()) {
    const std::string how = Reap();
    return Status::Unavailable("the coordinator process " + how + " before it read its config");
  }
  Result<nlohmann::json> hello = ReadLine(from_child_.get(), pending_, kStartS);
  if (!hello.ok()) {
    const std::string how = Reap();
    return Status::Unavailable("the coordinator process " + how + " before it listened (" +
                               hello.status().message() + ")");
  }
  if (hello->contains("error")) {
    (void)Reap();
    return Status::InvalidArgument(hello->value("error", ""));
  }
  address_ = hello->value("address", "");
  order_notice_ = hello->value("order_notice", "");
  config_.port = hello->value("port", 0);  // the one it starts again on
  return Status::Ok();
}

std::string CoordinatorProcess::Reap() {
  if (pid_ <= 0) return "was not running";
  to_child_.Reset();
  int status = 0;
  // A child told to stop, or whose input closed, exits by itself; else SIGKILL.
  for (int i = 0; i < 50; ++i) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return DescribeExit(status);
    }
    if (r < 0) {
      pid_ = -1;
      return "could not be waited for";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  (void)::waitpid(pid_, &status, 0);
  pid_ = -1;
  return "did not exit (killed)";
}

Result<nlohmann::json> CoordinatorProcess::AskOnce(const std::string& op) {
  if (pid_ <= 0) return Status::Unavailable("not running");
  GM_RETURN_IF_ERROR(WriteLine(to_child_.get(), {{"op", op}}));
  return ReadLine(from_child_.get(), pending_, kAnswerS);
}

Result<nlohmann::json> CoordinatorProcess::Ask(const std::string& op) {
  if (!failure_.empty()) return Status::Unavailable(failure_);
  Result<nlohmann::json> answer = AskOnce(op);
  if (answer.ok() || finished_) return answer;
  GM_RETURN_IF_ERROR(Restart(Reap()));
  return AskOnce(op);
}

bool CoordinatorProcess::Watch() {
  MutexLock lock(mu_);
  if (finished_ || !failure_.empty() || pid_ <= 0) return failure_.empty();
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;  // still serving
  pid_ = -1;
  (void)Restart(DescribeExit(status));
  return failure_.empty();
}

Status CoordinatorProcess::Restart(const std::string& how) {
  const pid_t old = last_pid_;
  if (restarts_ >= options_.max_restarts) {
    failure_ = "the coordinator (pid " + std::to_string(old) + ") " + how + ", its death number " +
               std::to_string(restarts_ + 1) + " in this run: not started again (at most " +
               std::to_string(options_.max_restarts) + " restarts)";
    return Status::Unavailable(failure_);
  }
  ++restarts_;
  LogWarning("run: the coordinator (pid " + std::to_string(old) + ") " + how +
             "; starting it again on " + address_ + " from its journal");
  if (Status st = Spawn(); !st.ok()) {
    // Said once, as the run's error: the run stops (RunTraining).
    failure_ = "the coordinator (pid " + std::to_string(old) + ") " + how +
               " and could not be started again: " + st.message();
    return Status::Unavailable(failure_);
  }
  LogInfo("run: the coordinator is back (pid " + std::to_string(pid_) + ")");
  return Status::Ok();
}

CoordinatorSummary CoordinatorProcess::Summary() {
  MutexLock lock(mu_);
  if (finished_) return last_;
  Result<nlohmann::json> answer = Ask("summary");
  if (!answer.ok()) return last_;
  Result<CoordinatorSummary> s = SummaryFromJson(*answer);
  if (!s.ok()) {
    LogError("run: " + s.status().message());
    return last_;
  }
  last_ = std::move(*s);
  return last_;
}

void CoordinatorProcess::EndWorkers() {
  MutexLock lock(mu_);
  if (!finished_) (void)Ask("end_workers");
}

CoordinatorSummary CoordinatorProcess::Finish() {
  MutexLock lock(mu_);
  if (finished_) return last_;
  Result<nlohmann::json> answer = Ask("stop");
  finished_ = true;
  if (answer.ok()) {
    if (Result<CoordinatorSummary> s = SummaryFromJson(*answer); s.ok()) last_ = std::move(*s);
  }
  (void)Reap();
  return last_;
}

std::string CoordinatorProcess::failure() const {
  MutexLock lock(mu_);
  return failure_;
}

int CoordinatorProcess::restarts() const {
  MutexLock lock(mu_);
  return restarts_;
}

}  // namespace gm
