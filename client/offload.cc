#include "client/offload.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "client/client_impl.h"  // Dial
#include "core/clock.h"
#include "core/log.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/messages_offload.h"
#include "dataplane/shm.h"

namespace gm {
namespace {

// What a data worker sends on a virtual worker's connection.
constexpr FrameLimits kChannelLimits{64u << 10, kMaxOffloadChunkBytes, 60};
// Opening a virtual worker: the data worker may start its host (a Python that
// imports torch) and import the blob's modules first.
constexpr double kOpenTimeoutS = 180;
constexpr double kWriteTimeoutS = 300;  // a virtual worker that reads nothing for this long

// Sends `type` {meta} and receives the answer, which must be `answer` or ERROR
// (returned as a frame: the callers say what a refusal means). Failures name `who`.
Result<Frame> Exchange(Socket& socket, MsgType type, const nlohmann::json& meta, MsgType answer,
                       Deadline deadline, const std::string& who) {
  Status st = SendFrame(socket, type, meta, deadline);
  Result<Frame> frame = st.ok() ? RecvFrame(socket, kControlLimits, deadline) : Result<Frame>(st);
  if (!frame.ok()) return frame.status().WithContext(who);
  if (frame->type != answer && frame->type != MsgType::kError) {
    return Status::Corrupt(who + " answered " + std::string(MsgTypeName(type)) + " with " +
                           std::string(MsgTypeName(frame->type)));
  }
  return frame;
}

// Dials the coordinator and asks OFFLOAD (`channel`: the one to have back, 0 for a
// new one): the connection and the answer. InvalidArgument when it refuses.
Result<std::pair<Socket, OffloadingMsg>> AskOffload(const ClientOptions& options, uint64_t channel,
                                                    const std::string& who,
                                                    double connect_timeout_s) {
  Result<Socket> socket =
      Dial(options.coordinator, options.secret, kClientRole, connect_timeout_s, "coordinator");
  if (!socket.ok()) return socket.status().WithContext(who);
  OffloadMsg ask{options.rank};
  ask.channel = channel;
  GM_ASSIGN_OR_RETURN(Frame answer,
                      Exchange(*socket, MsgType::kOffload, ask.Encode(), MsgType::kOffloading,
                               Deadline::After(options.timeout_s), who));
  if (answer.type == MsgType::kError) {
    return Status::InvalidArgument(
        who + " refused the offload: " + PeerText(ErrorMsg::Decode(answer.meta).message));
  }
  Result<OffloadingMsg> offloading = OffloadingMsg::Decode(answer.meta);
  if (!offloading.ok()) return offloading.status().WithContext(who);
  return std::pair{std::move(*socket), std::move(*offloading)};
}

}  // namespace

Result<std::unique_ptr<Offload>> Offload::Open(const ClientOptions& given) {
  ClientOptions options = given;
  if (options.world_size < 0 && options.rank >= 0) options.world_size = options.rank + 1;
  GM_ASSIGN_OR_RETURN(options, ResolveClientOptions(options));
  std::unique_ptr<Offload> offload(new Offload());
  offload->coordinator_name_ = "coordinator " + options.coordinator;
  GM_ASSIGN_OR_RETURN(
      auto opened, AskOffload(options, 0, offload->coordinator_name_, options.connect_timeout_s));
  auto& [socket, offloading] = opened;
  // The coordinator says how long it may take to come back; the trainer may say less.
  options.reconnect_s = std::min(options.reconnect_s, offloading.reconnect_s);
  offload->options_ = options;
  offload->channel_ = offloading.channel;
  offload->ticket_ = offloading.ticket;
  offload->proof_ = offloading.proof;
  {
    MutexLock lock(offload->mu_);
    offload->coordinator_ = std::move(socket);
  }
  Offload* raw = offload.get();
  offload->heartbeat_ = std::thread([raw] { raw->HeartbeatLoop(); });
  return offload;
}

Offload::~Offload() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.notify_all();
    (void)SendFrame(coordinator_, MsgType::kBye, nlohmann::json::object(), Deadline::After(1));
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

void Offload::HeartbeatLoop() {
  MutexLock lock(mu_);
  while (!lock.WaitFor(cv_, options_.heartbeat_s, [&]() REQUIRES(mu_) { return stop_; })) {
    // A failure shows at the next request.
    (void)SendFrame(coordinator_, MsgType::kHeartbeat, nlohmann::json::object(),
                    Deadline::After(options_.heartbeat_s));
  }
}

Result<std::vector<std::string>> Offload::Workers() { return AskWorkers(false); }

Result<std::string> Offload::Place() {
  for (;;) {
    GM_ASSIGN_OR_RETURN(std::vector<std::string> one, AskWorkers(true));
    if (one.size() == 1) return one[0];
    // A coordinator started again lists the data workers as they come back to it.
    bool coming_back = false;
    {
      MutexLock lock(mu_);
      coming_back = reconnected_ && MonotonicSeconds() - reconnected_at_ < options_.reconnect_s;
    }
    if (!coming_back) {
      return Status::Unavailable(
          "the run has no data worker up to host virtual DataLoader workers");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status Offload::Reconnect(const Status& why) {
  LogInfo("client: rank " + std::to_string(options_.rank) + " offload channel " +
          std::to_string(channel_) + ": " + why.message() + "; dialling it again for " +
          std::to_string(std::lround(options_.reconnect_s)) + " s");
  return Redial(coordinator_name_, options_.reconnect_s, options_.connect_timeout_s, why,
                [this](double timeout_s, bool* again) REQUIRES(mu_) -> Status {
                  auto opened = AskOffload(options_, channel_, coordinator_name_, timeout_s);
                  // Refused (InvalidArgument): said why.
                  *again = opened.status().code() != Code::kInvalidArgument;
                  if (!opened.ok()) return opened.status();
                  *again = false;
                  if (opened->second.channel != channel_) {
                    return Status::Unavailable(coordinator_name_ +
                                               " came back without offload channel " +
                                               std::to_string(channel_) +
                                               ": it is not the run's coordinator started again");
                  }
                  coordinator_ = std::move(opened->first);
                  reconnected_ = true;
                  reconnected_at_ = MonotonicSeconds();
                  return Status::Ok();
                });
}

Result<std::vector<std::string>> Offload::AskWorkers(bool place) {
  MutexLock lock(mu_);
  const nlohmann::json ask = place ? nlohmann::json{{"place", true}} : nlohmann::json::object();
  Result<Frame> answer = Exchange(coordinator_, MsgType::kGetWorkers, ask, MsgType::kWorkers,
                                  Deadline::After(options_.timeout_s), coordinator_name_);
  if (!answer.ok() && answer.status().code() != Code::kCorrupt && options_.reconnect_s > 0) {
    // The coordinator went away: one started again takes the channel back.
    GM_RETURN_IF_ERROR(Reconnect(answer.status()));
    answer = Exchange(coordinator_, MsgType::kGetWorkers, ask, MsgType::kWorkers,
                      Deadline::After(options_.timeout_s), coordinator_name_);
  }
  if (!answer.ok()) {  // the coordinator is gone, unless it broke the protocol
    return answer.status().code() == Code::kCorrupt
               ? answer.status()
               : Status::Unavailable(answer.status().message());
  }
  if (answer->type != MsgType::kWorkers) {  // ERROR: an offload session is never refused here
    return Status::Corrupt(coordinator_name_ + " answered GET_WORKERS with ERROR");
  }
  Result<WorkersMsg> workers = WorkersMsg::Decode(answer->meta);
  if (!workers.ok()) return workers.status().WithContext(coordinator_name_);
  return std::move(workers->workers);
}

Status Offload::Note(const OffloadNoteMsg& note) {
  // Checked as the coordinator will check it: a bad note would end the session.
  const nlohmann::json meta = note.Encode();
  GM_RETURN_IF_ERROR(OffloadNoteMsg::Decode(meta).status());
  MutexLock lock(mu_);
  Status sent =
      SendFrame(coordinator_, MsgType::kOffloadNote, meta, Deadline::After(options_.timeout_s));
  if (sent.ok()) return Status::Ok();
  const Status why = Status::Unavailable(coordinator_name_ + ": " + sent.message());
  if (options_.reconnect_s <= 0) return why;
  GM_RETURN_IF_ERROR(Reconnect(why));
  return SendFrame(coordinator_, MsgType::kOffloadNote, meta, Deadline::After(options_.timeout_s));
}

Result<std::unique_ptr<VirtualChannel>> Offload::OpenChannel(
    const std::string& worker, const std::string& python, const std::vector<std::string>& modules) {
  const std::string who = "worker " + worker;
  const std::string role = OffloadRole(options_.rank, channel_);
  // The worker's same-host socket first (dataplane/shm.h), as a batch client does:
  // there a result's buffers come as a memfd instead of through the sockets.
  Result<Socket> dialled = Status::Unavailable("no same-host path");
  if (SameHostEnabled()) {
    dialled = DialSameHost(worker, ticket_, role, options_.connect_timeout_s);
    if (!dialled.ok() && dialled.status().code() != Code::kUnavailable) {
      LogWarning("offload: " + who + ": same-host socket refused (" + dialled.status().message() +
                 "); using TCP");
    }
  }
  if (dialled.ok()) {
    dialled->AcceptFds();
  } else {
    dialled = Dial(worker, ticket_, role, options_.connect_timeout_s, "worker");
  }
  GM_ASSIGN_OR_RETURN(Socket socket, std::move(dialled));
  GM_ASSIGN_OR_RETURN(
      Frame answer,
      Exchange(socket, MsgType::kOffloadOpen, OffloadOpenMsg{python, modules, proof_}.Encode(),
               MsgType::kOffloadOpened, Deadline::After(kOpenTimeoutS), who));
  if (answer.type == MsgType::kError) {
    return Status::Unavailable(who + " could not start a virtual DataLoader worker: " +
                               PeerText(ErrorMsg::Decode(answer.meta).message));
  }
  Result<OffloadOpenedMsg> opened = OffloadOpenedMsg::Decode(answer.meta);
  if (!opened.ok()) return opened.status().WithContext(who);
  return std::unique_ptr<VirtualChannel>(
      new VirtualChannel(std::move(socket), worker, opened->pid, opened->host));
}

VirtualChannel::VirtualChannel(Socket socket, std::string worker, int64_t pid, std::string host)
    : socket_(std::move(socket)), worker_(std::move(worker)), pid_(pid), host_(std::move(host)) {}

VirtualChannel::~VirtualChannel() = default;

Status VirtualChannel::Write(std::string_view bytes) {
  while (!bytes.empty()) {
    const std::string_view chunk = bytes.substr(0, kMaxOffloadChunkBytes);
    iovec iov{const_cast<char*>(chunk.data()), chunk.size()};
    Status st = SendFrame(socket_, MsgType::kOffloadData, EncodeOffloadData(chunk),
                          std::span<const iovec>(&iov, 1), Deadline::After(kWriteTimeoutS));
    if (!st.ok()) return Status::Unavailable("worker " + worker_ + ": " + st.message());
    bytes.remove_prefix(chunk.size());
  }
  return Status::Ok();
}

Result<std::string_view> VirtualChannel::Read(std::optional<int>* exit_status) {
  *exit_status = std::nullopt;
  Status st = RecvFrameInto(socket_, kChannelLimits, Deadline::Never(), frame_);
  while (st.ok() && frame_.type == MsgType::kOffloadData && frame_.payload.empty()) {
    st = RecvFrameInto(socket_, kChannelLimits, Deadline::Never(), frame_);  // nothing to say
  }
  if (!st.ok()) return st.WithContext("worker " + worker_);
  const std::string_view payload(reinterpret_cast<const char*>(frame_.payload.data()),
                                 frame_.payload.size());
  switch (frame_.type) {
    case MsgType::kOffloadData: {
      GM_RETURN_IF_ERROR(CheckOffloadData(frame_.meta, payload).WithContext("worker " + worker_));
      GM_ASSIGN_OR_RETURN(const bool said_fd, OffloadDataFd(frame_.meta));
      UniqueFd got(socket_.TakeFd());
      if (said_fd != got.valid()) {
        return Status::Corrupt("worker " + worker_ +
                               (said_fd ? ": an OFFLOAD_DATA frame said a descriptor came with it "
                                          "and none did"
                                        : ": a descriptor came with an OFFLOAD_DATA frame that "
                                          "did not say so"));
      }
      fd_ = std::move(got);
      return payload;
    }
    case MsgType::kOffloadExit: {
      GM_ASSIGN_OR_RETURN(OffloadExitMsg exit, OffloadExitMsg::Decode(frame_.meta));
      *exit_status = exit.status;
      return std::string_view();
    }
    case MsgType::kError:
      return Status::Unavailable("worker " + worker_ +
                                 " sent ERROR: " + PeerText(ErrorMsg::Decode(frame_.meta).message));
    default:
      return Status::Corrupt("worker " + worker_ + " sent " +
                             std::string(MsgTypeName(frame_.type)) +
                             " on a virtual worker's connection");
  }
}

void VirtualChannel::Shutdown() { ::shutdown(socket_.fd(), SHUT_RDWR); }

}  // namespace gm
