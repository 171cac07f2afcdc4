// A run's side of the pool (`goldminer run --pool ADDR`, connection 6 of
// dataplane/messages_pool.h): it sends the run's figures and gets back how many pool
// workers it may hold. A pool that cannot be reached, refuses or answers badly
// costs the run nothing: Report returns nullopt (said once per outage) and the run
// keeps what it holds; the next report dials again. Thread-compatible.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "dataplane/messages_pool.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"

namespace gm {

class PoolClient {
 public:
  // `address`: HOST:PORT of the pool; `secret`: the pool key (its file's contents).
  PoolClient(std::string address, std::string secret, double timeout_s = 5)
      : address_(std::move(address)), secret_(std::move(secret)), timeout_s_(timeout_s) {}
  // The grant for `report`, or nullopt when the pool could not answer.
  std::optional<PoolGrantMsg> Report(const PoolReportMsg& report);
  // The pool's budget and division (POOL_STATUS), or why it could not be had.
  Result<PoolStateMsg> State();
  // Why the last Report returned nullopt ("" after a success).
  const std::string& last_error() const { return last_error_; }

 private:
  Result<PoolGrantMsg> Exchange(const PoolReportMsg& report);
  // Sends one request on the connection (dialled when there is none) and returns
  // the answer's meta, refused unless it is of type `answer` (ERROR: Unavailable).
  Result<nlohmann::json> Call(MsgType request, const nlohmann::json& meta, MsgType answer);
  const std::string address_;
  const std::string secret_;
  const double timeout_s_;
  std::optional<Socket> socket_;
  std::string last_error_;
  std::string token_;  // the run's, from its first grant: sent with every report
};

}  // namespace gm
