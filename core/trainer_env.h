// The environment `goldminer run` gives its trainer and the trainer's client reads
// (client/client_options.cc): the names both sides agree on.
#pragma once

#include <string_view>

namespace gm {

// The coordinator's "HOST:PORT" (or "unix:PATH").
inline constexpr std::string_view kCoordinatorAddrEnv = "GOLDMINER_ADDR";
// The client's buffer, in MiB.
inline constexpr std::string_view kClientBufferEnv = "GOLDMINER_CLIENT_BUFFER_MB";
// The progress deadline (ClientOptions::stall_s), in whole seconds from 1 to
// 86400; `goldminer run --stall-timeout` sets it for the trainer.
inline constexpr std::string_view kStallTimeoutEnv = "GOLDMINER_STALL_TIMEOUT_S";

}  // namespace gm
