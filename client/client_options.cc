// ResolveClientOptions (client/client.h): the client's settings from the environment.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#include "client/client.h"
#include "dataplane/auth.h"
#include "dataplane/messages_control.h"

namespace gm {
namespace {

Result<int> EnvInt(std::string_view name, bool* found) {
  const char* value = std::getenv(std::string(name).c_str());
  *found = value != nullptr && *value != '\0';
  if (!*found) return 0;
  int out = 0;
  std::string_view text(value);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument("environment variable " + std::string(name) + "=\"" +
                                   std::string(text) + "\" is not an integer");
  }
  return out;
}

// The first of `names` that is set, else `fallback`.
Result<int> EnvIntOr(std::initializer_list<std::string_view> names, int fallback) {
  for (std::string_view name : names) {
    bool found = false;
    GM_ASSIGN_OR_RETURN(int value, EnvInt(name, &found));
    if (found) return value;
  }
  return fallback;
}

}  // namespace

Result<ClientOptions> ResolveClientOptions(ClientOptions options) {
  if (options.coordinator.empty()) {
    const char* addr = std::getenv(std::string(kCoordinatorAddrEnv).c_str());
    if (addr == nullptr || *addr == '\0') {
      return Status::InvalidArgument("no coordinator address: set " +
                                     std::string(kCoordinatorAddrEnv) +
                                     " (HOST:PORT; `goldminer run` sets it for the trainer)");
    }
    options.coordinator = addr;
  }
  if (options.secret.empty()) {
    GM_ASSIGN_OR_RETURN(options.secret, LoadSecret());
  }
  if (options.rank < 0) {
    GM_ASSIGN_OR_RETURN(options.rank, EnvIntOr({"RANK", "SLURM_PROCID"}, 0));
  }
  if (options.world_size < 0) {
    GM_ASSIGN_OR_RETURN(options.world_size, EnvIntOr({"WORLD_SIZE", "SLURM_NTASKS"}, 1));
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return Status::InvalidArgument("rank " + std::to_string(options.rank) +
                                   " is not in [0, world size " +
                                   std::to_string(options.world_size) + ")");
  }
  if (!(options.heartbeat_s > 0) || options.heartbeat_s >= kClientIdleS) {
    return Status::InvalidArgument(
        "the client heartbeat interval must be above 0 and below the "
        "coordinator's idle limit of " +
        std::to_string(static_cast<int>(kClientIdleS)) + " s");
  }
  if (options.max_buffered_bytes == 0) {
    bool found = false;
    GM_ASSIGN_OR_RETURN(int mib, EnvInt(kClientBufferEnv, &found));
    if (found && (mib < 1 || mib > (1 << 20))) {
      return Status::InvalidArgument("environment variable " + std::string(kClientBufferEnv) + "=" +
                                     std::to_string(mib) +
                                     ": the trainer's look-ahead buffer must be 1 to 1048576 MiB");
    }
    options.max_buffered_bytes = found ? static_cast<uint64_t>(mib) << 20 : kDefaultBufferedBytes;
  }
  if (!(options.stall_s > 0)) {
    bool found = false;
    GM_ASSIGN_OR_RETURN(int seconds, EnvInt(kStallTimeoutEnv, &found));
    if (found && (seconds < 1 || seconds > 86400)) {
      return Status::InvalidArgument("environment variable " + std::string(kStallTimeoutEnv) + "=" +
                                     std::to_string(seconds) +
                                     ": the stall timeout must be 1 to 86400 seconds");
    }
    options.stall_s = found ? seconds : kDefaultStallS;
  }
  options.max_lookahead_batches = std::max<uint64_t>(options.max_lookahead_batches, 1);
  // A CREDIT grants 1..kMaxCredit batches.
  options.prefetch = std::clamp(options.prefetch, 1, static_cast<int>(kMaxCredit));
  return options;
}

}  // namespace gm
