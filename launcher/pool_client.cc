#include "launcher/pool_client.h"

#include "core/host.h"
#include "core/log.h"
#include "dataplane/auth.h"
#include "dataplane/protocol.h"
#include "launcher/pool_server.h"

namespace gm {

Result<nlohmann::json> PoolClient::Call(MsgType request, const nlohmann::json& meta,
                                        MsgType answer) {
  const Deadline deadline = Deadline::After(timeout_s_);
  if (!socket_) {
    GM_ASSIGN_OR_RETURN(auto addr, ParseHostPort(address_, "--pool"));
    GM_ASSIGN_OR_RETURN(
        Socket s,
        DialHandshake(
            [&] { return Socket::ConnectTcp(addr.host, addr.port, deadline.remaining_s()); },
            RoleKey(secret_, kPoolRunRole), kPoolRunRole, deadline, nullptr));
    socket_.emplace(std::move(s));
  }
  GM_RETURN_IF_ERROR(SendFrame(*socket_, request, meta, deadline));
  GM_ASSIGN_OR_RETURN(Frame frame, RecvFrame(*socket_, kControlLimits, deadline));
  if (frame.type == MsgType::kError) {
    return Status::Unavailable("it refused " + std::string(MsgTypeName(request)) + ": " +
                               PeerText(ErrorMsg::Decode(frame.meta).message));
  }
  if (frame.type != answer) {
    return Status::Corrupt("it sent " + std::string(MsgTypeName(frame.type)) + " where " +
                           std::string(MsgTypeName(answer)) + " was expected");
  }
  return std::move(frame.meta);
}

Result<PoolGrantMsg> PoolClient::Exchange(const PoolReportMsg& report) {
  PoolReportMsg mine = report;
  mine.token = token_;  // so that a new connection still reports for this run
  GM_ASSIGN_OR_RETURN(nlohmann::json meta,
                      Call(MsgType::kPoolReport, mine.Encode(), MsgType::kPoolGrant));
  GM_ASSIGN_OR_RETURN(PoolGrantMsg grant, PoolGrantMsg::Decode(meta));
  if (!grant.token.empty()) token_ = grant.token;
  return grant;
}

Result<PoolStateMsg> PoolClient::State() {
  Result<nlohmann::json> meta =
      Call(MsgType::kPoolStatus, nlohmann::json::object(), MsgType::kPoolState);
  if (!meta.ok()) {
    socket_.reset();
    return meta.status().WithContext("pool " + address_);
  }
  return PoolStateMsg::Decode(*meta);
}

std::optional<PoolGrantMsg> PoolClient::Report(const PoolReportMsg& report) {
  Result<PoolGrantMsg> grant = Exchange(report);
  if (grant.ok()) {
    if (!last_error_.empty()) LogInfo("run: the pool " + address_ + " answers again");
    last_error_.clear();
    return *grant;
  }
  socket_.reset();  // dial again next time
  const std::string why = grant.status().message();
  if (last_error_.empty()) {
    LogWarning("run: the pool " + address_ + " did not answer (" + why +
               "); the run keeps what it holds and reports again");
  }
  last_error_ = why;
  return std::nullopt;
}

}  // namespace gm
