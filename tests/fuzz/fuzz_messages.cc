// libFuzzer target: the typed message decoders (dataplane/messages*.h). Arbitrary
// bytes are parsed as JSON meta (as ParseFrameMeta does for a frame) and given to
// every decoder. Any input must yield a message or a Corrupt status naming it:
// never a crash, a hang or an exception; a decoded message must encode and decode
// to the same values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/messages_offload.h"
#include "dataplane/messages_pool.h"
#include "dataplane/protocol.h"

namespace {

template <typename Msg, typename Decode>
void Check(const nlohmann::json& meta, Decode decode) {
  auto m = decode(meta);
  if (!m.ok()) {
    if (m.status().code() != gm::Code::kCorrupt) __builtin_trap();
    return;
  }
  auto again = decode(m->Encode());
  if (!again.ok() || again->Encode() != m->Encode()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto meta = gm::ParseFrameMeta(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!meta.ok()) return 0;
  Check<gm::RegisterMsg>(*meta, gm::RegisterMsg::Decode);
  Check<gm::SplitDoneMsg>(*meta, gm::SplitDoneMsg::Decode);
  Check<gm::GetSplitMsg>(*meta, gm::GetSplitMsg::Decode);
  Check<gm::HeartbeatMsg>(*meta, gm::HeartbeatMsg::Decode);
  Check<gm::PoolReportMsg>(*meta, gm::PoolReportMsg::Decode);
  Check<gm::PoolGrantMsg>(*meta, gm::PoolGrantMsg::Decode);
  Check<gm::PoolStateMsg>(*meta, gm::PoolStateMsg::Decode);
  Check<gm::GetPlanMsg>(*meta, gm::GetPlanMsg::Decode);
  Check<gm::AckMsg>(*meta, gm::AckMsg::Decode);
  Check<gm::ResumeMsg>(*meta, gm::ResumeMsg::Decode);
  Check<gm::CreditMsg>(*meta, gm::CreditMsg::Decode);
  Check<gm::SubscribedMsg>(*meta, gm::SubscribedMsg::Decode);
  Check<gm::RegisteredMsg>(*meta, gm::RegisteredMsg::Decode);
  Check<gm::AssignMsg>(*meta, gm::AssignMsg::Decode);
  Check<gm::PlanMsg>(*meta, gm::PlanMsg::Decode);
  Check<gm::WorkersMsg>(*meta, gm::WorkersMsg::Decode);
  Check<gm::FaultMsg>(*meta, gm::FaultMsg::Decode);
  Check<gm::OffloadMsg>(*meta, gm::OffloadMsg::Decode);
  Check<gm::OffloadNoteMsg>(*meta, gm::OffloadNoteMsg::Decode);
  Check<gm::OffloadingMsg>(*meta, gm::OffloadingMsg::Decode);
  Check<gm::OffloadOpenMsg>(*meta, gm::OffloadOpenMsg::Decode);
  Check<gm::OffloadOpenedMsg>(*meta, gm::OffloadOpenedMsg::Decode);
  Check<gm::OffloadExitMsg>(*meta, gm::OffloadExitMsg::Decode);
  const gm::Status digest =
      gm::CheckOffloadData(*meta, std::string_view(reinterpret_cast<const char*>(data), size));
  if (!digest.ok() && digest.code() != gm::Code::kCorrupt) __builtin_trap();
  if (auto fd = gm::OffloadDataFd(*meta); !fd.ok() && fd.status().code() != gm::Code::kCorrupt) {
    __builtin_trap();
  }
  (void)gm::ErrorMsg::Decode(*meta);  // never fails
  Check<gm::SubscribeMsg>(
      *meta, [](const nlohmann::json& j) { return gm::SubscribeMsg::Decode(j, true); });
  Check<gm::SubscribeMsg>(
      *meta, [](const nlohmann::json& j) { return gm::SubscribeMsg::Decode(j, false); });
  if (auto stages = gm::DecodeStagesReport(*meta, "HEARTBEAT");
      !stages.ok() && stages.status().code() != gm::Code::kCorrupt) {
    __builtin_trap();
  }
  return 0;
}
