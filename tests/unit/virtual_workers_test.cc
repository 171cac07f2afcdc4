// Virtual DataLoader workers at a real data port (DataServer + VirtualWorkers),
// with a real Python host: the handshake with offload tickets, the bounds and
// refusals, the relay with its digests, the exit status, and the process ending
// with its connection.
#include "worker/virtual_workers.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "dataplane/auth.h"
#include "dataplane/data_server.h"
#include "dataplane/messages.h"
#include "dataplane/messages_offload.h"
#include "dataplane/offload_proof.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

constexpr double kWait = 60;  // the host imports torch before its first worker
const std::string kWorkerKey(64, 'a');

// The parent of `pid` (/proc/PID/stat), 0 when it cannot be read.
pid_t ParentOf(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string state;
  pid_t ppid = 0;
  fields >> state >> ppid;
  return ppid;
}

// The pids of this process's children whose command line holds `text`.
std::vector<pid_t> ChildrenRunning(const std::string& text) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (ParentOf(pid) != ::getpid()) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(text) != std::string::npos) out.push_back(pid);
  }
  return out;
}

// ChildrenRunning(text) once it names `count` children (a child just spawned may
// not have run its exec yet), or what it names after a minute.
std::vector<pid_t> ChildrenOnceRunning(const std::string& text, size_t count) {
  const Deadline deadline = Deadline::After(60);
  std::vector<pid_t> out = ChildrenRunning(text);
  while (out.size() != count && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    out = ChildrenRunning(text);
  }
  return out;
}

bool ProcessGone(int64_t pid, double within_s) {
  const Deadline deadline = Deadline::After(within_s);
  while (!deadline.expired()) {
    struct stat st;
    if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class VirtualWorkersTest : public ::testing::Test {
 protected:
  // With `issuer`, the workers hold the coordinator's public key (as after
  // REGISTERED); without, they were never told one.
  void Start(size_t max_channels, bool with_handler = true, bool issuer = true) {
    auto server = DataServer::Start("127.0.0.1", 0, kWorkerKey);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
    VirtualWorkers::Options options;
    options.max_channels = max_channels;
    options.package_dir = std::string(GOLDMINER_SOURCE_DIR) + "/python";
    options.host_name = "test-worker";
    workers_ = std::make_unique<VirtualWorkers>(options);
    if (issuer) workers_->SetIssuer(issuer_.public_key());
    if (with_handler) {
      server_->SetOffloadHandler([w = workers_.get()](Socket& s, int64_t rank, uint64_t channel) {
        return w->Serve(s, rank, channel);
      });
    }
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    workers_.reset();
  }

  Result<Socket> Dial(const std::string& key, const std::string& role) {
    GM_ASSIGN_OR_RETURN(Socket s, Socket::ConnectTcp("127.0.0.1", server_->port(), kWait));
    GM_RETURN_IF_ERROR(ClientHandshake(s, key, role, Deadline::After(kWait), nullptr));
    return s;
  }
  Result<Socket> DialOffload(int64_t rank = 0, uint64_t channel = 1) {
    return Dial(OffloadTicketKey(kWorkerKey, rank, channel), OffloadRole(rank, channel));
  }
  // OFFLOAD_OPEN with the coordinator's proof for `rank` and `channel` (those of
  // the ticket the connection used), or with `proof` when given.
  Status Open(Socket& s, const std::string& python = "/usr/bin/python3",
              const nlohmann::json& modules = nlohmann::json::array(), int64_t rank = 0,
              uint64_t channel = 1, const std::string& proof = "") {
    const std::string p = proof.empty() ? *issuer_.Proof(rank, channel) : proof;
    return SendFrame(s, MsgType::kOffloadOpen,
                     {{"python", python}, {"modules", modules}, {"proof", p}},
                     Deadline::After(kWait));
  }
  static Result<Frame> Next(Socket& s) {
    return RecvFrame(s, FrameLimits{64u << 10, kMaxOffloadChunkBytes, 0}, Deadline::After(kWait));
  }
  // OFFLOAD_OPENED's pid (the test fails otherwise).
  static int64_t Opened(Socket& s) {
    Result<Frame> f = Next(s);
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok()) return 0;
    EXPECT_EQ(f->type, MsgType::kOffloadOpened) << f->meta.dump();
    Result<OffloadOpenedMsg> opened = OffloadOpenedMsg::Decode(f->meta);
    EXPECT_TRUE(opened.ok());
    if (!opened.ok()) return 0;
    EXPECT_EQ(opened->host, "test-worker");
    return opened->pid;
  }
  static std::string ErrorOf(Socket& s) {
    Result<Frame> f = Next(s);
    if (!f.ok()) return "(no frame: " + f.status().message() + ")";
    if (f->type != MsgType::kError) return "(a " + std::string(MsgTypeName(f->type)) + " frame)";
    return ErrorMsg::Decode(f->meta).message;
  }

  // Virtual workers open, once the server has finished with what ended (it
  // answers before it lets a slot go).
  size_t OpenOnceSettled() {
    const Deadline deadline = Deadline::After(10);
    while (workers_->open() != 0 && !deadline.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return workers_->open();
  }

  OffloadIssuer issuer_ = *OffloadIssuer::Create();  // the run's coordinator's
  std::unique_ptr<DataServer> server_;
  std::unique_ptr<VirtualWorkers> workers_;
};

TEST_F(VirtualWorkersTest, GivenNoHandler_WhenAnOffloadTicketConnects_ThenErrorSaysSo) {
  Start(4, /*with_handler=*/false);
  auto s = DialOffload();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_NE(ErrorOf(*s).find("hosts no virtual DataLoader workers"), std::string::npos);
}

TEST_F(VirtualWorkersTest, GivenABatchTicket_WhenItClaimsTheOffloadRole_ThenAuthenticationFails) {
  Start(4);
  auto s = Dial(TicketKey(kWorkerKey, 0, 1), OffloadRole(0, 1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("authentication failed"), std::string::npos)
      << s.status().message();
  // And an offload ticket does not subscribe to batches: its key is not a batch ticket's.
  auto t = Dial(OffloadTicketKey(kWorkerKey, 0, 1), TicketRole(0, 1));
  EXPECT_FALSE(t.ok());
}

TEST_F(VirtualWorkersTest, GivenAPythonThatCannotRun_ThenTheErrorNamesItAndTheFix) {
  Start(4);
  auto s = DialOffload();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(Open(*s, "/nonexistent/bin/python3").ok());
  const std::string why = ErrorOf(*s);
  EXPECT_NE(why.find("/nonexistent/bin/python3"), std::string::npos) << why;
  EXPECT_NE(why.find("GOLDMINER_PYTHON"), std::string::npos) << why;
  EXPECT_NE(why.find("test-worker"), std::string::npos) << why;
  EXPECT_EQ(workers_->served(), 0u);
}

// Attack (goldminer-protocol(7)): a client-key holder's OFFLOAD_OPEN naming a
// program that is no Python interpreter; the worker starts nothing.
TEST_F(VirtualWorkersTest, GivenAnInterpreterThatIsNoPython_ThenNothingStartsAndTheErrorSaysWhy) {
  Start(4);
  for (const std::string program : {"/bin/sh", "/usr/bin/env", "/tmp/python3-evil",
                                    "/usr/bin/pythonx", "/usr/bin/python3..1"}) {
    auto s = DialOffload();
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(Open(*s, program).ok());
    const std::string why = ErrorOf(*s);
    EXPECT_NE(why.find("does not start " + program + " for a virtual DataLoader worker"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("GOLDMINER_PYTHON"), std::string::npos) << why;
  }
  EXPECT_EQ(workers_->served(), 0u);
  EXPECT_EQ(OpenOnceSettled(), 0u);  // the refusal is sent before the slot is let go
}

TEST_F(VirtualWorkersTest, GivenBadOpenFields_ThenEachIsRefusedNamingTheField) {
  Start(4);
  for (const auto& [python, modules, field] :
       {std::tuple<std::string, nlohmann::json, std::string>{"python3", nlohmann::json::array(),
                                                             "$.python"},
        {"/usr/bin/python3", nlohmann::json::array({"os; import x"}), "$.modules"},
        {"/usr/bin/python3", nlohmann::json::array({1}), "$.modules"},
        {"/usr/bin/python3", nlohmann::json::array({std::string(300, 'a')}), "$.modules"}}) {
    auto s = DialOffload();
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(Open(*s, python, modules).ok());
    const std::string why = ErrorOf(*s);
    EXPECT_NE(why.find(field), std::string::npos) << why;
  }
  EXPECT_EQ(OpenOnceSettled(), 0u);
}

TEST_F(VirtualWorkersTest,
       GivenAStreamThatIsNotAJob_ThenTheWorkerSaysWhyAndItsExitStatusComesBack) {
  Start(4);
  auto s = DialOffload(2, 7);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(Open(*s, "/usr/bin/python3", {"json"}, 2, 7).ok());
  const int64_t pid = Opened(*s);
  ASSERT_GT(pid, 0);
  const std::string garbage(64, 'x');  // not a GMV1 frame
  iovec iov{const_cast<char*>(garbage.data()), garbage.size()};
  ASSERT_TRUE(SendFrame(*s, MsgType::kOffloadData, EncodeOffloadData(garbage),
                        std::span<const iovec>(&iov, 1), Deadline::After(kWait))
                  .ok());
  std::string out;
  int64_t status = 0;
  for (;;) {
    Result<Frame> f = Next(*s);
    ASSERT_TRUE(f.ok()) << f.status().message();
    const std::string_view payload(reinterpret_cast<const char*>(f->payload.data()),
                                   f->payload.size());
    if (f->type == MsgType::kOffloadData) {
      ASSERT_TRUE(CheckOffloadData(f->meta, payload).ok());
      out += payload;
      continue;
    }
    ASSERT_EQ(f->type, MsgType::kOffloadExit) << MsgTypeName(f->type);
    Result<OffloadExitMsg> exit = OffloadExitMsg::Decode(f->meta);
    ASSERT_TRUE(exit.ok());
    status = exit->status;
    break;
  }
  EXPECT_EQ(status, 3);  // _vworker's "cannot go on"
  ASSERT_GE(out.size(), 5u);
  EXPECT_EQ(out.substr(0, 4), "GMV1");
  EXPECT_EQ(out[4], 4) << "a FAILED frame";
  EXPECT_FALSE(Next(*s).ok()) << "the worker closes after OFFLOAD_EXIT";
  EXPECT_TRUE(ProcessGone(pid, 10));
}

TEST_F(VirtualWorkersTest, GivenAnAlteredPayload_ThenTheConnectionEndsAndTheProcessIsKilled) {
  Start(4);
  auto s = DialOffload();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(Open(*s).ok());
  const int64_t pid = Opened(*s);
  ASSERT_GT(pid, 0);
  const std::string sent = "GMV1 honest bytes", claimed = "GMV1 other bytes!";
  iovec iov{const_cast<char*>(sent.data()), sent.size()};
  ASSERT_TRUE(SendFrame(*s, MsgType::kOffloadData, EncodeOffloadData(claimed),
                        std::span<const iovec>(&iov, 1), Deadline::After(kWait))
                  .ok());
  // Whatever comes (an OFFLOAD_EXIT of the killed process, an ERROR), no data.
  for (Result<Frame> f = Next(*s); f.ok(); f = Next(*s)) {
    EXPECT_NE(f->type, MsgType::kOffloadData);
  }
  EXPECT_TRUE(ProcessGone(pid, 10));
}

TEST_F(VirtualWorkersTest, GivenTheTrainerCloses_ThenTheProcessIsKilledAndTheSlotFreed) {
  Start(1);
  {
    auto s = DialOffload();
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(Open(*s).ok());
    const int64_t pid = Opened(*s);
    ASSERT_GT(pid, 0);
    EXPECT_EQ(workers_->open(), 1u);
    // The bound: a second channel is refused while the first is open.
    auto t = DialOffload(0, 2);
    ASSERT_TRUE(t.ok());
    const std::string why = ErrorOf(*t);
    EXPECT_NE(why.find("at most 1 virtual DataLoader workers"), std::string::npos) << why;
    s->Close();
    EXPECT_TRUE(ProcessGone(pid, 10));
  }
  EXPECT_EQ(OpenOnceSettled(), 0u);
  EXPECT_EQ(workers_->served(), 1u);  // the refused one never started
  auto again = DialOffload(0, 3);     // the slot is free again; the host is reused
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(Open(*again, "/usr/bin/python3", nlohmann::json::array(), 0, 3).ok());
  EXPECT_GT(Opened(*again), 0);
}

// Attack (goldminer-protocol(7)): a holder of the worker key mints an offload
// ticket for a channel the coordinator never issued. The handshake passes (the
// ticket is the worker key's), but without the coordinator's proof for that
// rank and channel nothing starts: no proof, a made-up one, the proof of another
// channel or rank, or another coordinator's.
TEST_F(VirtualWorkersTest, GivenAMintedTicket_WhenItOpensWithoutTheCoordinatorsProof_ThenRefused) {
  Start(4);
  const OffloadIssuer other = *OffloadIssuer::Create();
  const std::vector<std::pair<std::string, std::string>> proofs = {
      {"made up", std::string(128, 'a')},
      {"another channel's", *issuer_.Proof(0, 1)},
      {"another rank's", *issuer_.Proof(1, 777)},
      {"another coordinator's", *other.Proof(0, 777)}};
  for (const auto& [what, proof] : proofs) {
    auto s = DialOffload(0, 777);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE(Open(*s, "/usr/bin/python3", nlohmann::json::array(), 0, 777, proof).ok());
    const std::string why = ErrorOf(*s);
    EXPECT_NE(why.find("offload channel 777 of rank 0 is not one this run's coordinator issued"),
              std::string::npos)
        << what << ": " << why;
  }
  // No proof at all: the message itself is refused, naming the field.
  auto s = DialOffload(0, 1000000000000);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(SendFrame(*s, MsgType::kOffloadOpen,
                        {{"python", "/usr/bin/python3"}, {"modules", nlohmann::json::array()}},
                        Deadline::After(kWait))
                  .ok());
  const std::string why = ErrorOf(*s);
  EXPECT_NE(why.find("OFFLOAD_OPEN: $: missing required key \"proof\""), std::string::npos) << why;
  EXPECT_EQ(OpenOnceSettled(), 0u);
  EXPECT_EQ(workers_->served(), 0u) << "nothing started";
}

TEST_F(VirtualWorkersTest, GivenNoCoordinatorKey_ThenEvenAnIssuedChannelIsRefused) {
  Start(4, /*with_handler=*/true, /*issuer=*/false);
  auto s = DialOffload();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(Open(*s).ok());
  const std::string why = ErrorOf(*s);
  EXPECT_NE(why.find("is not one this run's coordinator issued"), std::string::npos) << why;
  EXPECT_EQ(workers_->served(), 0u);
}

// The blob cache folders ("goldminer-vhost-PID-*", python/goldminer/_vhost.py) of
// host `pid`, in /dev/shm or the temporary folder.
std::vector<std::filesystem::path> CachesOf(pid_t pid) {
  std::vector<std::filesystem::path> found;
  const std::string prefix = "goldminer-vhost-" + std::to_string(pid) + "-";
  const char* tmp = std::getenv("TMPDIR");
  for (const std::string& root : {std::string("/dev/shm"), std::string(tmp ? tmp : "/tmp")}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path());
    }
  }
  return found;
}

TEST_F(VirtualWorkersTest, GivenAHostKilledWithSigkill_ThenItsBlobCacheIsRemovedAllTheSame) {
  Start(4);
  ASSERT_TRUE(workers_->Warm("/usr/bin/python3").ok());
  const std::vector<pid_t> hosts = ChildrenOnceRunning("goldminer._vhost", 1);
  ASSERT_EQ(hosts.size(), 1u);
  // The host makes its cache once it has imported torch.
  const Deadline deadline = Deadline::After(120);
  while (CachesOf(hosts[0]).empty() && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::vector<std::filesystem::path> caches = CachesOf(hosts[0]);
  ASSERT_EQ(caches.size(), 1u) << "the host made its blob cache";
  ASSERT_EQ(::kill(hosts[0], SIGKILL), 0);
  EXPECT_TRUE(std::filesystem::exists(caches[0])) << "a host killed removes nothing itself";
  server_->Shutdown();
  workers_.reset();  // the worker ends: it sees its host gone
  EXPECT_FALSE(std::filesystem::exists(caches[0])) << caches[0] << " was left behind";
}

}  // namespace
TEST_F(VirtualWorkersTest, GivenAWarmedInterpreter_ThenItsHostRunsAheadAndForksTheFirstWorker) {
  Start(4);
  Status not_python = workers_->Warm("/bin/sh");
  EXPECT_FALSE(not_python.ok());
  EXPECT_NE(not_python.message().find("/bin/sh is not a Python interpreter"), std::string::npos)
      << not_python.message();
  EXPECT_FALSE(workers_->Warm("/nonexistent/python3").ok());
  EXPECT_TRUE(ChildrenRunning("goldminer._vhost").empty()) << "nothing started for those";
  ASSERT_TRUE(workers_->Warm("/usr/bin/python3").ok());
  const std::vector<pid_t> hosts = ChildrenOnceRunning("goldminer._vhost", 1);
  ASSERT_EQ(hosts.size(), 1u) << "its host runs before any DataLoader asks";
  auto s = DialOffload();
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(Open(*s).ok());
  const int64_t pid = Opened(*s);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(ParentOf(pid), hosts[0]) << "the first virtual worker comes from the warmed host";
  EXPECT_EQ(ChildrenRunning("goldminer._vhost").size(), 1u);
}

}  // namespace gm
