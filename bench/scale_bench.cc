// At cluster scale. (1) One real coordinator (launcher/coordinator_server.h, in a
// process of its own, so that its CPU and memory are its own) under many light
// workers and trainer ranks that speak the real protocol over real sockets with
// the run's real keys: each worker connects, authenticates and registers, then
// asks for splits (GET_SPLIT), "makes" each for a paced while (it sleeps: the
// coordinator's load is the protocol, not the data) and says SPLIT_DONE; each rank
// subscribes, reads its plan and acknowledges the batches its splits' makers made
// (one ACK frame per ~20 ms, as the client library batches them).
//
// For each count of workers and ranks it prints: handshakes per second (connect,
// HELLO, key exchange and REGISTER, 8 at a time), hand-out latency p50/p99 (a
// GET_SPLIT answered with a split), the coordinator's CPU per 1,000 splits and its
// share of a core at --rate splits/min, its resident memory and threads, and what
// each connection adds to them.
// (2) The pool's division (planner/pool_state.h, what `goldminer pool` runs on
// every report): for 1 to 4,096 runs, each with measured rates at three worker
// counts, the time to divide (median of 5) and the memory each run adds.
// --journal DIR: the coordinator journals every change of its state into DIR
// (CoordinatorConfig::journal_path, one file each), and each row says the
// journal's bytes per split: the journal's cost, beside a run without it.
// Usage: scale_bench [--workers 16,64,256,1024] [--ranks 1,64] [--splits-per-worker 4]
//                    [--min-splits 2000] [--rate 10000] [--runs 1,16,256,1024,4096]
//                    [--journal DIR]
#include <malloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/os/memory.h"
#include "core/os/spawn.h"
#include "dataplane/auth.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "launcher/coordinator_server.h"
#include "planner/pool_state.h"

namespace {

constexpr double kWaitS = 30;

std::vector<int> IntList(int argc, char** argv, const char* name, std::vector<int> fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) != 0) continue;
    std::vector<int> out;
    std::stringstream in(argv[i + 1]);
    std::string item;
    while (std::getline(in, item, ',')) out.push_back(std::max(1, std::atoi(item.c_str())));
    return out;
  }
  return fallback;
}

int IntArg(int argc, char** argv, const char* name, int fallback) {
  std::vector<int> v = IntList(argc, argv, name, {fallback});
  return v.empty() ? fallback : v.front();
}

// The coordinator process's CPU seconds (core/os/spawn.h), resident bytes and threads
// (/proc/PID/status).
struct ProcUse {
  double cpu_s = 0;
  double rss_bytes = 0;
  int threads = 0;
};

ProcUse Use(pid_t pid) {
  ProcUse u;
  const gm::Result<double> cpu = gm::CpuSecondsOfProcess(pid);
  u.cpu_s = cpu.ok() ? *cpu : 0.0;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) u.rss_bytes = std::stod(line.substr(6)) * 1024;
    if (line.rfind("Threads:", 0) == 0) u.threads = std::stoi(line.substr(8));
  }
  return u;
}

// Starts the coordinator in a child process; returns its pid, its port, and the
// pipe whose closing ends it.
struct Child {
  pid_t pid = -1;
  int port = 0;
  int stop_fd = -1;
};

std::string g_journal_dir;  // --journal; empty: no journal

std::string JournalOf(pid_t coordinator) {
  return g_journal_dir + "/coordinator-" + std::to_string(coordinator) + ".journal";
}

gm::Result<Child> StartCoordinator(const std::string& secret, int world_size, uint64_t splits) {
  int address[2], stop[2];
  if (::pipe(address) != 0 || ::pipe(stop) != 0) return gm::Status::Internal("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) return gm::Status::Internal("fork failed");
  if (pid == 0) {
    ::close(address[0]);
    ::close(stop[1]);
    gm::CoordinatorConfig c;
    c.secret = secret;
    c.pipeline_doc = {{"version", 1},
                      {"source", {{"type", "range"}, {"count", splits}}},
                      {"stages", nlohmann::json::array()},
                      {"batch", {{"size", 1}}}};
    c.pipeline_origin = "scale_bench";
    c.base_dir = "/";
    c.samples_per_split = 1;  // a split is one batch of one sample
    c.world_size = world_size;
    c.epochs = 1;
    c.liveness_timeout_s = 60;
    if (!g_journal_dir.empty()) c.journal_path = JournalOf(::getpid());
    auto server = gm::CoordinatorServer::Start(c);
    int port = 0;
    if (server.ok()) {
      const std::string where = (*server)->address();
      port = std::atoi(where.substr(where.rfind(':') + 1).c_str());
    }
    if (!server.ok()) std::fprintf(stderr, "coordinator: %s\n", server.status().message().c_str());
    (void)!::write(address[1], &port, sizeof port);
    char byte;
    while (::read(stop[0], &byte, 1) < 0 && errno == EINTR) {
    }
    std::_Exit(0);  // the server's threads go with the process
  }
  ::close(address[1]);
  ::close(stop[0]);
  Child child;
  child.pid = pid;
  child.stop_fd = stop[1];
  if (::read(address[0], &child.port, sizeof child.port) != sizeof child.port || child.port == 0)
    return gm::Status::Internal("the coordinator did not start");
  ::close(address[0]);
  return child;
}

void StopCoordinator(Child& child) {
  ::close(child.stop_fd);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
}

gm::Result<gm::Socket> Connect(int port, const std::string& secret, const std::string& role) {
  GM_ASSIGN_OR_RETURN(gm::Socket s, gm::Socket::ConnectTcp("127.0.0.1", port, kWaitS));
  GM_RETURN_IF_ERROR(gm::ClientHandshake(s, gm::RoleKey(secret, role), role,
                                         gm::Deadline::After(kWaitS), nullptr));
  return s;
}

gm::Result<gm::Frame> Ask(gm::Socket& s, gm::MsgType type, const nlohmann::json& meta) {
  GM_RETURN_IF_ERROR(gm::SendFrame(s, type, meta, gm::Deadline::After(kWaitS)));
  return gm::RecvFrame(s, gm::kControlLimits, gm::Deadline::After(kWaitS));
}

// What a rank acknowledges: batches its splits' makers said they made.
struct RankInbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint64_t> made;  // split ids (one batch each)
};

struct Figures {
  int workers = 0, ranks = 0;
  uint64_t splits = 0;
  double handshakes_per_s = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double cpu_ms_per_1000 = 0;
  double splits_per_s = 0;
  double waits_per_split = 0;
  double rss_mb = 0, kb_per_connection = 0;
  int threads = 0;
  double journal_bytes_per_split = 0;  // --journal
  std::string error;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// One measurement: `workers` workers and `ranks` ranks, splits paced at `rate`
// per minute over all workers.
Figures Measure(int workers, int ranks, uint64_t splits, double rate_per_min) {
  Figures r;
  r.workers = workers;
  r.ranks = ranks;
  auto secret = gm::NewSecret();
  if (!secret.ok()) return r.error = secret.status().message(), r;
  auto child = StartCoordinator(*secret, ranks, splits);
  if (!child.ok()) return r.error = child.status().message(), r;
  const ProcUse before = Use(child->pid);

  // The ranks: subscribe, read the plan (its splits are what they will acknowledge).
  std::vector<gm::Socket> rank_sockets(static_cast<size_t>(ranks));
  uint64_t planned = 0;
  for (int k = 0; k < ranks && r.error.empty(); ++k) {
    auto s = Connect(child->port, *secret, "client");
    if (!s.ok()) {
      r.error = "rank " + std::to_string(k) + ": " + s.status().message();
      break;
    }
    auto sub = Ask(*s, gm::MsgType::kSubscribe, {{"rank", k}, {"world_size", ranks}});
    auto plan = sub.ok() ? Ask(*s, gm::MsgType::kGetPlan, {{"epoch", 0}}) : sub;
    if (!plan.ok() || plan->type != gm::MsgType::kPlan) {
      r.error = "rank " + std::to_string(k) + ": no plan (" +
                (plan.ok() ? plan->meta.dump().substr(0, 200) : plan.status().message()) + ")";
      break;
    }
    planned = plan->meta["splits"].size();  // the epoch's, every rank's share in it
    rank_sockets[static_cast<size_t>(k)] = std::move(*s);
  }
  // The workers: connect, authenticate and register, 8 at a time.
  std::vector<gm::Socket> worker_sockets(static_cast<size_t>(workers));
  std::atomic<int> next{0};
  std::mutex error_mu;
  const double t0 = gm::MonotonicSeconds();
  {
    std::vector<std::thread> connectors;
    for (int c = 0; c < 8 && r.error.empty(); ++c) {
      connectors.emplace_back([&] {
        for (int i = next++; i < workers; i = next++) {
          auto s = Connect(child->port, *secret, "worker");
          gm::Result<gm::Frame> reg =
              s.ok() ? Ask(*s, gm::MsgType::kRegister, {{"data_addr", "127.0.0.1:9"}})
                     : gm::Result<gm::Frame>(s.status());
          if (!reg.ok() || reg->type != gm::MsgType::kRegistered) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (r.error.empty())
              r.error = "worker " + std::to_string(i) + ": " +
                        (reg.ok() ? reg->meta.dump().substr(0, 200) : reg.status().message());
            return;
          }
          worker_sockets[static_cast<size_t>(i)] = std::move(*s);
        }
      });
    }
    for (std::thread& t : connectors) t.join();
  }
  r.handshakes_per_s = (workers + 0.0) / std::max(1e-9, gm::MonotonicSeconds() - t0);
  const ProcUse connected = Use(child->pid);
  r.rss_mb = connected.rss_bytes / 1e6;
  r.threads = connected.threads;
  r.kb_per_connection = (connected.rss_bytes - before.rss_bytes) / 1e3 / (workers + ranks);
  if (!r.error.empty()) {
    StopCoordinator(*child);
    return r;
  }
  r.splits = planned;

  // The run: workers ask, "make" (sleep) and say SPLIT_DONE; ranks acknowledge.
  std::vector<RankInbox> inboxes(static_cast<size_t>(ranks));
  std::atomic<uint64_t> acked{0};
  std::atomic<bool> over{false};
  std::atomic<uint64_t> waits{0};  // GET_SPLITs answered "wait" (nothing to hand out now)
  std::vector<std::vector<double>> latencies(static_cast<size_t>(workers));
  const double make_s = workers / (rate_per_min / 60.0);  // each worker's time per split
  const ProcUse start = Use(child->pid);
  const double run_t0 = gm::MonotonicSeconds();
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      gm::Socket& s = worker_sockets[static_cast<size_t>(i)];
      std::mt19937 rng(static_cast<uint32_t>(i));
      // Workers start spread over one make time, as a run's do.
      std::this_thread::sleep_for(
          std::chrono::duration<double>(std::uniform_real_distribution<double>(0, make_s)(rng)));
      while (!over) {
        const double asked = gm::MonotonicSeconds();
        auto answer = Ask(s, gm::MsgType::kGetSplit, nlohmann::json::object());
        if (!answer.ok()) return;
        auto a = gm::AssignMsg::Decode(answer->meta);
        if (!a.ok()) return;
        if (a->kind == gm::AssignMsg::Kind::kWait) {
          ++waits;
          std::this_thread::sleep_for(std::chrono::duration<double>(a->retry_s));
          continue;
        }
        if (a->kind != gm::AssignMsg::Kind::kAssign) return;
        latencies[static_cast<size_t>(i)].push_back((gm::MonotonicSeconds() - asked) * 1e3);
        std::this_thread::sleep_for(std::chrono::duration<double>(make_s));
        if (!gm::SendFrame(s, gm::MsgType::kSplitDone,
                           {{"epoch", a->epoch}, {"split", a->split}, {"batch_count", 1}},
                           gm::Deadline::After(kWaitS))
                 .ok())
          return;
        RankInbox& inbox = inboxes[static_cast<size_t>(a->rank)];
        std::lock_guard<std::mutex> lock(inbox.mu);
        inbox.made.push_back(a->split);
        inbox.cv.notify_one();
      }
    });
  }
  for (int k = 0; k < ranks; ++k) {
    threads.emplace_back([&, k] {
      RankInbox& inbox = inboxes[static_cast<size_t>(k)];
      while (!over) {
        std::vector<uint64_t> made;
        {
          std::unique_lock<std::mutex> lock(inbox.mu);
          inbox.cv.wait_for(lock, std::chrono::milliseconds(20));
          made.swap(inbox.made);
        }
        if (made.empty()) continue;
        nlohmann::json batches = nlohmann::json::array();
        for (uint64_t split : made) batches.push_back({split, 0});
        if (!gm::SendFrame(rank_sockets[static_cast<size_t>(k)], gm::MsgType::kAck,
                           {{"epoch", 0}, {"batches", batches}}, gm::Deadline::After(kWaitS))
                 .ok())
          return;
        acked += made.size();
      }
    });
  }
  const double limit_s = 3.0 * static_cast<double>(planned) / (rate_per_min / 60.0) + 60;
  while (acked < planned && gm::MonotonicSeconds() - run_t0 < limit_s)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double run_s = gm::MonotonicSeconds() - run_t0;
  const ProcUse end = Use(child->pid);
  over = true;
  StopCoordinator(*child);  // first: it would say each worker's end
  for (gm::Socket& s : worker_sockets) ::shutdown(s.fd(), SHUT_RDWR);  // wakes their threads
  for (gm::Socket& s : rank_sockets) ::shutdown(s.fd(), SHUT_RDWR);
  for (RankInbox& inbox : inboxes) inbox.cv.notify_all();
  for (std::thread& t : threads) t.join();
  if (acked < planned) {
    r.error = "only " + std::to_string(acked.load()) + " of " + std::to_string(planned) +
              " splits acknowledged within " + std::to_string(static_cast<int>(limit_s)) + " s";
  }
  std::vector<double> all;
  for (const auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  r.p50_ms = Quantile(all, 0.5);
  r.p99_ms = Quantile(all, 0.99);
  r.max_ms = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  r.splits_per_s = static_cast<double>(acked) / run_s;
  r.waits_per_split = static_cast<double>(waits) / std::max<double>(1, acked);
  r.cpu_ms_per_1000 = (end.cpu_s - start.cpu_s) * 1e3 / std::max<double>(1, acked) * 1000;
  if (!g_journal_dir.empty()) {
    struct stat st {};
    if (::stat(JournalOf(child->pid).c_str(), &st) == 0) {
      r.journal_bytes_per_split = static_cast<double>(st.st_size) / std::max<double>(1, acked);
    }
    ::unlink(JournalOf(child->pid).c_str());
  }
  return r;
}

// The pool's division of 8 CPUs a run over `runs` runs: the median of 5 Divide
// times (ms), and the heap bytes each run's report added (mallinfo2: bytes in use).
struct PoolFigures {
  double divide_ms = 0;
  double kb_per_run = 0;
  size_t granted_runs = 0;
  std::string error;
};

PoolFigures MeasurePool(int runs) {
  PoolFigures f;
  gm::planner::PoolStateOptions options;
  options.cpus = 8 * runs;
  const double heap_before = static_cast<double>(mallinfo2().uordblks);
  auto state = std::make_unique<gm::planner::PoolState>(options);
  std::mt19937 rng(static_cast<uint32_t>(runs));
  std::uniform_real_distribution<double> per_worker(20, 200);
  for (int i = 0; i < runs; ++i) {
    gm::planner::RunReport report;
    report.run_id = "run-" + std::to_string(i);
    report.gpus = 1 + static_cast<double>(i % 8);
    report.base_workers = 1;
    report.extra_workers = i % 4;
    const double one = per_worker(rng);
    report.demand_samples_per_s = one * (4 + i % 13);
    for (int w : {1, 2, 4}) report.rates.emplace_back(w, one * w * (1 - 0.05 * (w - 1)));
    gm::Status st = state->Report("", report, 0);
    if (!st.ok()) return f.error = st.message(), f;
  }
  f.kb_per_run = (static_cast<double>(mallinfo2().uordblks) - heap_before) / 1e3 / runs;
  std::vector<double> times;
  for (int round = 0; round < 5; ++round) {
    std::vector<std::string> forgotten;
    const double t0 = gm::MonotonicSeconds();
    auto grants = state->Divide(1, &forgotten);
    times.push_back((gm::MonotonicSeconds() - t0) * 1e3);
    if (!grants.ok()) return f.error = grants.status().message(), f;
    f.granted_runs = 0;
    for (const auto& g : *grants) f.granted_runs += g.extra_workers > 0 ? 1 : 0;
  }
  f.divide_ms = Quantile(times, 0.5);
  return f;
}
}  // namespace

int main(int argc, char** argv) {
  gm::RaiseDescriptorLimit();  // a connection each: 1,088 and more
  const std::vector<int> worker_counts = IntList(argc, argv, "--workers", {16, 64, 256, 1024});
  const std::vector<int> rank_counts = IntList(argc, argv, "--ranks", {1, 64});
  const int per_worker = IntArg(argc, argv, "--splits-per-worker", 4);
  const int min_splits = IntArg(argc, argv, "--min-splits", 2000);
  const double rate = IntArg(argc, argv, "--rate", 10000);
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--journal") == 0) g_journal_dir = argv[i + 1];
  }
  std::printf("scale_bench: paced at %.0f splits/min; one batch a split%s\n", rate,
              g_journal_dir.empty() ? "" : "; the coordinator journals (--journal)");
  std::printf("%7s %5s %6s %9s %8s %8s %8s %11s %9s %8s %7s %8s %10s\n", "workers", "ranks",
              "splits", "hshake/s", "p50 ms", "p99 ms", "max ms", "CPU ms/1k", "core@rate",
              "RSS MB", "threads", "KB/conn", "waits/split");
  if (!g_journal_dir.empty()) std::printf("  (then: journal bytes/split)\n");
  int failures = 0;
  for (int ranks : rank_counts) {
    for (int workers : worker_counts) {
      const uint64_t splits = static_cast<uint64_t>(std::max(min_splits, per_worker * workers) /
                                                    ranks * ranks);  // equal shares
      Figures r = Measure(workers, ranks, splits, rate);
      if (!r.error.empty()) {
        ++failures;
        std::printf("%7d %5d  FAILED: %s\n", workers, ranks, r.error.c_str());
        std::fflush(stdout);
        continue;
      }
      std::printf("%7d %5d %6llu %9.0f %8.2f %8.2f %8.2f %11.1f %9.3f %8.1f %7d %8.1f %10.2f",
                  workers, ranks, static_cast<unsigned long long>(r.splits), r.handshakes_per_s,
                  r.p50_ms, r.p99_ms, r.max_ms, r.cpu_ms_per_1000,
                  r.cpu_ms_per_1000 / 1e6 * rate / 60, r.rss_mb, r.threads, r.kb_per_connection,
                  r.waits_per_split);
      if (!g_journal_dir.empty()) std::printf(" %8.0f", r.journal_bytes_per_split);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  std::printf("\npool: 8 CPUs a run to divide, each run measured at 1, 2 and 4 workers\n");
  std::printf("%6s %10s %9s %12s\n", "runs", "divide ms", "KB/run", "runs granted");
  for (int runs : IntList(argc, argv, "--runs", {1, 16, 256, 1024, 4096})) {
    PoolFigures f = MeasurePool(runs);
    if (!f.error.empty()) {
      ++failures;
      std::printf("%6d  FAILED: %s\n", runs, f.error.c_str());
      continue;
    }
    std::printf("%6d %10.3f %9.2f %12zu\n", runs, f.divide_ms, f.kb_per_run, f.granted_runs);
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}
