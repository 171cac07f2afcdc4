// The pool service (launcher/pool_server.h) over real loopback sockets and the
// handshake, on a fake clock: grants as planner/pool_state.h computes them by hand,
// the status, a run that reports for another (refused, nothing kept), a wrong key,
// a malformed report, and a run that stops reporting.
#include "launcher/pool_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <map>

#include "dataplane/auth.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

constexpr double kWait = 30;

class PoolServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = *NewSecret();
    PoolServerOptions o;
    o.secret = secret_;
    o.pool.cpus = 8;
    o.pool.division.min_gain = 0;
    o.pool.division.min_lifetime_s = 0;
    o.pool.report_timeout_s = 60;
    o.clock = &clock_;
    auto server = PoolServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
  }

  Result<Socket> Connect(const std::string& secret) {
    const Deadline deadline = Deadline::After(kWait);
    return DialHandshake(
        [&] { return Socket::ConnectTcp("127.0.0.1", server_->port(), deadline.remaining_s()); },
        RoleKey(secret, kPoolRunRole), kPoolRunRole, deadline, nullptr);
  }

  // Sends `meta` as POOL_REPORT; the answer frame.
  Frame Ask(Socket& s, MsgType type, const nlohmann::json& meta) {
    EXPECT_TRUE(SendFrame(s, type, meta, Deadline::After(kWait)).ok());
    auto f = RecvFrame(s, kControlLimits, Deadline::After(kWait));
    return f.ok() ? std::move(*f) : Frame{};
  }

  static PoolReportMsg Report(const std::string& id, std::vector<std::pair<int64_t, double>> rates,
                              int64_t extra = 0) {
    PoolReportMsg r;
    r.run_id = id;
    r.gpus = 1;
    r.cpus_per_worker = 2;
    r.base_workers = 1;
    r.extra_workers = extra;
    r.demand_samples_per_s = 1000;
    r.rates = std::move(rates);
    return r;
  }

  int64_t Granted(Socket& s, const PoolReportMsg& report) {
    Frame f = Ask(s, MsgType::kPoolReport, report.Encode());
    EXPECT_EQ(f.type, MsgType::kPoolGrant) << f.meta.dump();
    auto grant = PoolGrantMsg::Decode(f.meta);
    EXPECT_TRUE(grant.ok()) << grant.status().message();
    return grant.ok() ? grant->extra_workers : -1;
  }

  FakeClock clock_{1000};
  std::string secret_;
  std::unique_ptr<PoolServer> server_;
};

TEST_F(PoolServerTest, GivenTwoRunsThenEachIsGrantedWhatTheDivisionGivesIt) {
  auto a = Connect(secret_);
  auto b = Connect(secret_);
  ASSERT_TRUE(a.ok() && b.ok());
  // a alone: each worker adds 0.25 of its speed up to the demand: 3 workers.
  EXPECT_EQ(Granted(*a, Report("a", {{1, 250}})), 3);
  // b's workers add 0.1 each: it gets the 2 CPUs a leaves (planner/pool_state.h).
  EXPECT_EQ(Granted(*b, Report("b", {{1, 500}, {2, 600}})), 1);
  EXPECT_EQ(Granted(*a, Report("a", {{1, 250}}, 3)), 3);
  const PoolStateMsg state = server_->State();
  EXPECT_EQ(state.cpus, 8);
  ASSERT_EQ(state.runs.size(), 2u);
  EXPECT_EQ(state.runs[0].run_id, "a");
  EXPECT_EQ(state.runs[0].extra_workers, 3);
  EXPECT_EQ(state.runs[0].held_workers, 3);
  EXPECT_EQ(state.runs[1].cpus, 2);
  ASSERT_TRUE(state.runs[1].report.has_value()) << "its inputs, for a hand computation";
  EXPECT_EQ(state.runs[1].report->rates,
            (std::vector<std::pair<int64_t, double>>{{1, 500}, {2, 600}}));
  EXPECT_EQ(state.runs[1].report->demand_samples_per_s, 1000);
  // The same over the wire (POOL_STATUS), as `goldminer pool --status` asks it.
  Frame f = Ask(*b, MsgType::kPoolStatus, nlohmann::json::object());
  ASSERT_EQ(f.type, MsgType::kPoolState);
  auto wire = PoolStateMsg::Decode(f.meta);
  ASSERT_TRUE(wire.ok()) << wire.status().message();
  EXPECT_EQ(wire->runs.size(), 2u);
  // Its history: a 0 -> 6 CPUs, b 0 -> 2 CPUs, each with the pool's reason.
  ASSERT_EQ(wire->history.size(), 2u) << f.meta.dump();
  EXPECT_EQ(wire->history[0].run_id, "a");
  EXPECT_EQ(wire->history[0].from_cpus, 0);
  EXPECT_EQ(wire->history[0].to_cpus, 6);
  EXPECT_EQ(wire->history[1].run_id, "b");
  EXPECT_EQ(wire->history[1].to_cpus, 2);
  EXPECT_NE(wire->history[1].reason.find("its 2 CPU(s) add 10%"), std::string::npos)
      << wire->history[1].reason;
}

TEST_F(PoolServerTest, GivenManyChangesThenTheHistoryKeepsTheLast64) {
  auto a = Connect(secret_);
  ASSERT_TRUE(a.ok());
  // a's measured rate swings: its grant goes 3, 0, 3, 0, ...
  for (int i = 0; i < 80; ++i) {
    Granted(*a, Report("a", {{1, i % 2 == 0 ? 250.0 : 1000.0}}));
    clock_.Advance(1);
  }
  const PoolStateMsg state = server_->State();
  ASSERT_EQ(state.history.size(), kMaxPoolHistory);
  EXPECT_DOUBLE_EQ(state.history.back().age_s, 1) << "newest last";
  EXPECT_TRUE(PoolStateMsg::Decode(state.Encode()).ok());
}

TEST_F(PoolServerTest, GivenAFrameBeyond64KiBThenItIsRefusedBeforeItIsRead) {
  auto a = Connect(secret_);
  ASSERT_TRUE(a.ok());
  nlohmann::json big = Report("a", {{1, 250}}).Encode();
  big["padding"] = std::string(65 << 10, 'x');  // a hostile peer: 65 KiB of meta
  (void)SendFrame(*a, MsgType::kPoolReport, big, Deadline::After(kWait));
  auto f = RecvFrame(*a, kControlLimits, Deadline::After(kWait));
  if (f.ok()) {
    EXPECT_EQ(f->type, MsgType::kError) << f->meta.dump();
    EXPECT_FALSE(RecvFrame(*a, kControlLimits, Deadline::After(kWait)).ok()) << "then closed";
  }
  EXPECT_TRUE(server_->State().runs.empty()) << "nothing of it kept";
  // The pool serves the next peer as before.
  auto b = Connect(secret_);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Granted(*b, Report("b", {{1, 250}})), 3);
}

// A connection from `source` (a loopback address: the whole of 127/8 is this
// host's) to the pool, after the handshake.
Result<Socket> ConnectFrom(const std::string& source, int port, const std::string& secret) {
  const Deadline deadline = Deadline::After(kWait);
  return DialHandshake(
      [&]() -> Result<Socket> {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return Status::FromErrno(errno, "socket");
        Socket s(fd, "127.0.0.1:" + std::to_string(port));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        ::inet_pton(AF_INET, source.c_str(), &a.sin_addr);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
          return Status::FromErrno(errno, "bind " + source);
        a.sin_port = htons(static_cast<uint16_t>(port));
        ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
          return Status::FromErrno(errno, "connect");
        return s;
      },
      RoleKey(secret, kPoolRunRole), kPoolRunRole, deadline, nullptr);
}

// `r` as POOL_REPORT on a new connection from `source`, with its run's token from
// `tokens`, where a grant's token is kept (as PoolClient keeps it); the answer.
Frame ReportFrom(const std::string& source, int port, const std::string& secret, PoolReportMsg r,
                 std::map<std::string, std::string>& tokens) {
  auto s = ConnectFrom(source, port, secret);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return Frame{};
  r.token = tokens[r.run_id];
  EXPECT_TRUE(SendFrame(*s, MsgType::kPoolReport, r.Encode(), Deadline::After(kWait)).ok());
  auto f = RecvFrame(*s, kControlLimits, Deadline::After(kWait));
  if (f.ok() && f->type == MsgType::kPoolGrant)
    tokens[r.run_id] = PoolGrantMsg::Decode(f->meta)->token;
  return f.ok() ? std::move(*f) : Frame{};
}

TEST(PoolServerRunsTest, GivenAsManyRunsAsItServesThenOneMoreIsRefusedUntilOneIsForgotten) {
  FakeClock clock(1000);
  PoolServerOptions o;
  o.secret = *NewSecret();
  o.pool.cpus = 8;
  o.pool.report_timeout_s = 60;
  o.clock = &clock;
  o.max_runs = 3;
  auto server = PoolServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::map<std::string, std::string> tokens;  // each run's, from its grants
  auto report = [&](const std::string& id) {
    return ReportFrom("127.0.0.1", (*server)->port(), o.secret,
                      {id, 1, 1, 1, 0, 1000, {{1, 250}}, "", ""}, tokens);
  };
  for (const char* id : {"a", "b", "c"}) EXPECT_EQ(report(id).type, MsgType::kPoolGrant) << id;
  Frame refused = report("d");  // a fourth run (or a peer inventing run ids)
  ASSERT_EQ(refused.type, MsgType::kError);
  EXPECT_NE(ErrorMsg::Decode(refused.meta).message.find("3 runs report already"), std::string::npos)
      << refused.meta.dump();
  EXPECT_EQ((*server)->State().runs.size(), 3u);
  EXPECT_EQ(report("a").type, MsgType::kPoolGrant) << "a known run reports again";
  clock.Advance(61);  // all silent past the timeout: forgotten at the next division
  EXPECT_EQ(report("a").type, MsgType::kPoolGrant);
  EXPECT_EQ(report("d").type, MsgType::kPoolGrant) << "room again";
}

// Attack (goldminer-pool(1) SECURITY): a peer with the pool key reports an
// honest run's id from a connection of its own, to take its CPUs away.
TEST_F(PoolServerTest, GivenAnotherConnectionReportingARunsId_ThenOnlyTheRunsTokenLetsItIn) {
  auto a = Connect(secret_);
  ASSERT_TRUE(a.ok());
  Frame first = Ask(*a, MsgType::kPoolReport, Report("a", {{1, 250}}).Encode());
  ASSERT_EQ(first.type, MsgType::kPoolGrant) << first.meta.dump();
  auto grant = PoolGrantMsg::Decode(first.meta);
  ASSERT_TRUE(grant.ok()) << grant.status().message();
  EXPECT_EQ(grant->extra_workers, 3);
  ASSERT_EQ(grant->token.size(), kPoolTokenHexChars) << "the first grant gives the run its token";
  // Another connection: no token, a wrong one; each refused, nothing of it kept.
  for (const std::string& token : {std::string(), std::string(kPoolTokenHexChars, '0')}) {
    auto b = Connect(secret_);
    ASSERT_TRUE(b.ok());
    PoolReportMsg hostile = Report("a", {{1, 1}});  // flat: nothing more is worth a CPU
    hostile.token = token;
    Frame f = Ask(*b, MsgType::kPoolReport, hostile.Encode());
    ASSERT_EQ(f.type, MsgType::kError) << f.meta.dump();
    EXPECT_NE(ErrorMsg::Decode(f.meta).message.find("reports on another connection"),
              std::string::npos)
        << f.meta.dump();
  }
  const PoolStateMsg state = server_->State();
  ASSERT_EQ(state.runs.size(), 1u);
  ASSERT_TRUE(state.runs[0].report.has_value());
  EXPECT_EQ(state.runs[0].report->rates, (std::vector<std::pair<int64_t, double>>{{1, 250}}))
      << "the honest report stands";
  EXPECT_TRUE(state.runs[0].report->token.empty()) << "a token is never shown";
  EXPECT_EQ(Granted(*a, Report("a", {{1, 250}})), 3) << "its own connection needs no token";
  // The run dialling again (its connection lost) reports with its token.
  auto again = Connect(secret_);
  ASSERT_TRUE(again.ok());
  PoolReportMsg back = Report("a", {{1, 250}});
  back.token = grant->token;
  EXPECT_EQ(Granted(*again, back), 3);
}

// Attack (goldminer-pool(1) SECURITY): one key holder invents runs on sequential
// connections to fill every run slot; a run from another host still gets in.
TEST(PoolServerRunsTest, GivenOneHostFillingItsShareOfRuns_ThenAnotherHostsRunStillGetsIn) {
  FakeClock clock(1000);
  PoolServerOptions o;
  o.secret = *NewSecret();
  o.pool.cpus = 8;
  o.clock = &clock;
  o.max_runs = 6;
  o.max_runs_per_host = 3;
  auto server = PoolServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::map<std::string, std::string> tokens;  // none: every run id is new
  auto report = [&](const std::string& source, const std::string& id) {
    return ReportFrom(source, (*server)->port(), o.secret,
                      {id, 1, 1, 1, 0, 1000, {{1, 250}}, "", ""}, tokens);
  };
  int refused = 0;
  for (int i = 0; i < 50; ++i) {  // the flood: fake run ids from one host
    refused += report("127.0.0.9", "fake-" + std::to_string(i)).type == MsgType::kError ? 1 : 0;
  }
  EXPECT_EQ(refused, 47);
  Frame more = report("127.0.0.9", "fake-x");
  ASSERT_EQ(more.type, MsgType::kError);
  EXPECT_NE(ErrorMsg::Decode(more.meta).message.find("3 runs report from 127.0.0.9 already"),
            std::string::npos)
      << more.meta.dump();
  EXPECT_EQ(report("127.0.0.1", "honest").type, MsgType::kPoolGrant) << "another host's run";
  EXPECT_EQ((*server)->State().runs.size(), 4u);
}

// Attack (goldminer-pool(1) SECURITY): a report claiming 65,536 GPUs; with
// job_gpus (Slurm) it counts what its job holds, a job not running is refused,
// and a report naming no job counts 1 GPU.
TEST(PoolServerRunsTest, GivenGpusCheckedAgainstSlurm_ThenAReportCountsWhatItsJobHolds) {
  FakeClock clock(1000);
  PoolServerOptions o;
  o.secret = *NewSecret();
  o.pool.cpus = 8;
  o.clock = &clock;
  std::map<std::string, double> jobs = {{"101", 2}, {"102", 0}};
  int asked = 0;
  o.job_gpus = [&](const std::string& job) -> Result<double> {
    ++asked;
    auto it = jobs.find(job);
    if (it == jobs.end()) return Status::NotFound("Slurm job " + job + " is not running");
    return it->second;
  };
  auto server = PoolServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::map<std::string, std::string> tokens;  // each run's, from its grants
  auto report = [&](const std::string& id, const std::string& job) {
    return ReportFrom("127.0.0.1", (*server)->port(), o.secret,
                      {id, 65536, 1, 1, 0, 1000, {{1, 250}}, "", job}, tokens);
  };
  EXPECT_EQ(report("liar", "101").type, MsgType::kPoolGrant);
  EXPECT_EQ(report("cpu-only", "102").type, MsgType::kPoolGrant);
  EXPECT_EQ(report("outside", "").type, MsgType::kPoolGrant);
  Frame gone = report("ended", "103");
  ASSERT_EQ(gone.type, MsgType::kError);
  EXPECT_NE(ErrorMsg::Decode(gone.meta).message.find("names Slurm job 103: Slurm job 103 is not "
                                                     "running"),
            std::string::npos)
      << gone.meta.dump();
  std::map<std::string, double> gpus;
  for (const auto& r : (*server)->State().runs) gpus[r.run_id] = r.gpus;
  EXPECT_EQ(gpus, (std::map<std::string, double>{{"cpu-only", 1e-3}, {"liar", 2}, {"outside", 1}}));
  const int before = asked;
  EXPECT_EQ(report("liar", "101").type, MsgType::kPoolGrant);
  EXPECT_EQ(asked, before) << "a job's GPUs are asked at most every job_every_s";
  clock.Advance(o.job_every_s);
  EXPECT_EQ(report("liar", "101").type, MsgType::kPoolGrant);
  EXPECT_EQ(asked, before + 1);
}

TEST_F(PoolServerTest, GivenAReportForAnotherRunThenItIsRefusedAndNothingOfItKept) {
  auto a = Connect(secret_);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(Granted(*a, Report("a", {{1, 250}})), 3);
  Frame f = Ask(*a, MsgType::kPoolReport, Report("b", {{1, 900}}).Encode());
  ASSERT_EQ(f.type, MsgType::kError);
  EXPECT_NE(ErrorMsg::Decode(f.meta).message.find("a run reports for itself only"),
            std::string::npos)
      << f.meta.dump();
  EXPECT_FALSE(RecvFrame(*a, kControlLimits, Deadline::After(kWait)).ok()) << "then closed";
  const PoolStateMsg state = server_->State();
  ASSERT_EQ(state.runs.size(), 1u);
  EXPECT_EQ(state.runs[0].run_id, "a");
}

TEST_F(PoolServerTest, GivenAWrongKeyThenTheHandshakeFails) {
  auto wrong = Connect(*NewSecret());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("authentication failed"), std::string::npos)
      << wrong.status().message();
}

TEST_F(PoolServerTest, GivenAMalformedReportThenTheErrorNamesTheFieldAndTheConnectionCloses) {
  auto a = Connect(secret_);
  ASSERT_TRUE(a.ok());
  nlohmann::json bad = Report("a", {{1, 250}}).Encode();
  bad["rates"] = {{0, 250}};
  Frame f = Ask(*a, MsgType::kPoolReport, bad);
  ASSERT_EQ(f.type, MsgType::kError);
  EXPECT_NE(ErrorMsg::Decode(f.meta).message.find("POOL_REPORT: $.rates[0][0]"), std::string::npos)
      << f.meta.dump();
  EXPECT_TRUE(server_->State().runs.empty());
}

TEST_F(PoolServerTest, GivenARunThatStopsReportingThenItIsForgottenAndTheOthersGetItsCpus) {
  auto a = Connect(secret_);
  auto b = Connect(secret_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Granted(*a, Report("a", {{1, 250}})), 3);
  EXPECT_EQ(Granted(*b, Report("b", {{1, 500}, {2, 600}})), 1);
  clock_.Advance(61);  // a is silent past the timeout
  EXPECT_EQ(Granted(*b, Report("b", {{1, 500}, {2, 600}}, 1)), 4);
  const PoolStateMsg state = server_->State();
  ASSERT_EQ(state.runs.size(), 1u);
  EXPECT_EQ(state.runs[0].run_id, "b");
}

TEST(PoolServerBudgetTest, GivenIdleCpusThenTheBudgetIsThemPlusWhatPoolWorkersHold) {
  FakeClock clock(1000);
  int idle = 4;
  bool failing = false;
  PoolServerOptions o;
  o.secret = *NewSecret();
  o.pool.division.min_gain = 0;
  o.pool.division.min_lifetime_s = 0;
  o.clock = &clock;
  o.budget_every_s = 10;
  o.idle_cpus = [&]() -> Result<int> {
    if (failing) return Status::Unavailable("sinfo: slurmctld is down");
    return idle;
  };
  auto server = PoolServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  EXPECT_EQ((*server)->State().cpus, 4) << "asked at the start";
  const Deadline deadline = Deadline::After(kWait);
  auto run = DialHandshake(
      [&] { return Socket::ConnectTcp("127.0.0.1", (*server)->port(), deadline.remaining_s()); },
      RoleKey(o.secret, kPoolRunRole), kPoolRunRole, deadline, nullptr);
  ASSERT_TRUE(run.ok());
  PoolReportMsg r{"a", 1, 2, 1, 1, 1000, {{1, 250}}, "", ""};
  auto grant = [&]() {
    EXPECT_TRUE(SendFrame(*run, MsgType::kPoolReport, r.Encode(), deadline).ok());
    auto f = RecvFrame(*run, kControlLimits, deadline);
    return f.ok() ? PoolGrantMsg::Decode(f->meta)->extra_workers : -1;
  };
  // a holds 1 pool worker (2 CPUs, not idle any more): 2 idle + 2 held = 4.
  idle = 2;
  clock.Advance(10);
  EXPECT_EQ(grant(), 2);
  EXPECT_EQ((*server)->State().cpus, 4);
  // More becomes idle, but the budget is asked every 10 s only.
  idle = 6;
  clock.Advance(5);
  EXPECT_EQ(grant(), 2);
  clock.Advance(5);
  EXPECT_EQ(grant(), 3) << "6 idle + 2 held: 8 CPUs, a's curve takes 6";
  // Slurm cannot be asked: the last budget stays.
  failing = true;
  clock.Advance(10);
  EXPECT_EQ(grant(), 3);
  EXPECT_EQ((*server)->State().cpus, 8);
}

TEST(PoolServerBudgetTest, GivenJobsWaitingForCpusThenThePoolGivesBackWhatTheyWant) {
  FakeClock clock(1000);
  int idle = 6, pending = 0;
  PoolServerOptions o;
  o.secret = *NewSecret();
  o.pool.division.min_gain = 0;
  o.pool.division.min_lifetime_s = 0;
  o.clock = &clock;
  o.idle_cpus = [&]() -> Result<int> { return idle; };
  o.pending_cpus = [&]() -> Result<int> { return pending; };
  auto server = PoolServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const Deadline deadline = Deadline::After(kWait);
  auto run = DialHandshake(
      [&] { return Socket::ConnectTcp("127.0.0.1", (*server)->port(), deadline.remaining_s()); },
      RoleKey(o.secret, kPoolRunRole), kPoolRunRole, deadline, nullptr);
  ASSERT_TRUE(run.ok());
  PoolReportMsg r{"a", 1, 2, 1, 3, 1000, {{1, 250}}, "", ""};  // holds 3 pool workers: 6 CPUs
  PoolGrantMsg last;
  auto grant = [&]() {
    EXPECT_TRUE(SendFrame(*run, MsgType::kPoolReport, r.Encode(), deadline).ok());
    auto f = RecvFrame(*run, kControlLimits, deadline);
    if (f.ok()) last = *PoolGrantMsg::Decode(f->meta);
    return f.ok() ? last.extra_workers : -1;
  };
  idle = 0;
  clock.Advance(10);
  EXPECT_EQ(grant(), 3) << "0 idle + 6 held";
  // A job waits for 4 CPUs (no scavenger partition preempts the pool's workers):
  // 6 held - 4 wanted = 2 CPUs, one worker; and no idle CPU is granted meanwhile.
  pending = 4;
  idle = 2;
  clock.Advance(10);
  EXPECT_EQ(grant(), 1);
  EXPECT_NE(last.reason.find("a budget of 2 CPUs (jobs waiting for CPUs want 4: the pool gives "
                             "them back)"),
            std::string::npos)
      << last.reason;
  // It wants more than the pool holds: everything goes back.
  pending = 10;
  r.extra_workers = 1;
  clock.Advance(10);
  EXPECT_EQ(grant(), 0);
  // It started; nothing waits: the idle CPUs are divided again.
  pending = 0;
  idle = 4;
  r.extra_workers = 0;
  clock.Advance(10);
  EXPECT_EQ(grant(), 2);
  EXPECT_EQ(last.reason.find("waiting"), std::string::npos) << last.reason;
}

}  // namespace
}  // namespace gm
