// libFuzzer target: the coordinator's message handlers, driven the way hostile or
// buggy peers would drive them. The input is a script: each step picks a peer
// message (REGISTER, GET_SPLIT, SPLIT_DONE, HEARTBEAT, ACK, RESUME with or without
// a split index, a jump to a later epoch, a worker that
// leaves, time passing, the next epoch), builds its meta from the fuzzer's bytes
// (fields of any type, in or out of range, or garbage JSON), decodes it with the
// typed Decode the coordinator uses (dataplane/messages_control.h) and hands what decodes
// to CoordinatorState as CoordinatorServer does. It must never crash or throw; a
// refusal is InvalidArgument or Unavailable, never anything else; and the
// exactly-once counters hold: first acknowledgements never exceed the batches the
// epochs planned, and an epoch is done only when every split is acknowledged.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "launcher/coordinator_state.h"

namespace {

// A field value: usually a small in-range integer, sometimes anything.
nlohmann::json Value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return in.ConsumeIntegral<int64_t>();
    case 1:
      return in.ConsumeRandomLengthString(8);
    case 2:
      return in.ConsumeBool();
    case 3:
      return nullptr;
    case 4:
      return nlohmann::json::array({in.ConsumeIntegralInRange<int>(0, 8)});
    case 5:
      return in.ConsumeFloatingPoint<double>();
    case 6: {  // [[split, batch], ...]: what ACK carries
      nlohmann::json pairs = nlohmann::json::array();
      for (int n = in.ConsumeIntegralInRange<int>(0, 4); n > 0; --n) {
        pairs.push_back(
            {in.ConsumeIntegralInRange<int>(0, 20), in.ConsumeIntegralInRange<int>(0, 5)});
      }
      return pairs;
    }
    default:
      return in.ConsumeIntegralInRange<int>(0, 8);
  }
}

// A meta object with `keys` (each present or not), or garbage bytes parsed as meta.
nlohmann::json Meta(FuzzedDataProvider& in, const std::vector<const char*>& keys) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    auto parsed = gm::ParseFrameMeta(in.ConsumeRandomLengthString(64));
    return parsed.ok() ? *parsed : nlohmann::json::object();
  }
  nlohmann::json meta = nlohmann::json::object();
  for (const char* key : keys) {
    if (in.ConsumeIntegralInRange<int>(0, 7) != 0) meta[key] = Value(in);
  }
  return meta;
}

void Expect(bool ok) {
  if (!ok) __builtin_trap();
}

// A refusal the coordinator sends back or logs; anything else is a bug.
void ExpectRefusal(const gm::Status& st) {
  Expect(st.ok() || st.code() == gm::Code::kInvalidArgument || st.code() == gm::Code::kUnavailable);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  gm::CoordinatorOptions options;
  options.world_size = in.ConsumeIntegralInRange<int>(1, 3);
  options.max_inflight_per_worker = in.ConsumeIntegralInRange<int>(1, 3);
  options.liveness_timeout_s = 1;
  auto state = gm::CoordinatorState::Create(options);
  Expect(state.ok());
  uint64_t planned = 0;  // batches of every epoch started
  auto start_epoch = [&](uint64_t epoch) {
    gm::EpochPlan plan;
    plan.epoch = epoch;
    const int splits = in.ConsumeIntegralInRange<int>(0, 6);
    for (int s = 0; s < splits; ++s) {
      // Unknown counts only with one rank (LayOutPlan needs them known otherwise).
      const bool unknown = options.world_size == 1 && in.ConsumeBool();
      plan.splits.push_back(
          {static_cast<uint64_t>(s) * 3 + 1,
           unknown ? gm::kUnknownCount : in.ConsumeIntegralInRange<uint64_t>(0, 4)});
    }
    gm::Status st = state->StartEpoch(plan);
    ExpectRefusal(st);
    if (!st.ok()) return;
    for (const auto& s : plan.splits) {
      planned += s.batch_count == gm::kUnknownCount ? gm::kMaxSplitBatches : s.batch_count;
    }
  };
  start_epoch(0);
  double now = 0;
  while (in.remaining_bytes() > 0) {
    const gm::WorkerId worker = in.ConsumeIntegralInRange<gm::WorkerId>(0, 4);
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:
        if (gm::RegisterMsg::Decode(Meta(in, {"data_addr"})).ok()) state->RegisterWorker(now);
        break;
      case 1: {
        auto a = state->RequestSplit(worker);
        ExpectRefusal(a.status());
        break;
      }
      case 2: {
        auto msg = gm::SplitDoneMsg::Decode(Meta(in, {"epoch", "split", "batch_count", "stages"}));
        if (msg.ok())
          ExpectRefusal(state->SplitDone(worker, msg->epoch, msg->split, msg->batch_count));
        break;
      }
      case 3:
        ExpectRefusal(state->Heartbeat(worker, now));
        break;
      case 4: {
        auto msg = gm::AckMsg::Decode(Meta(in, {"epoch", "batches"}));
        const int rank = in.ConsumeIntegralInRange<int>(0, 3);
        if (!msg.ok()) break;
        for (const auto& [split, batch] : msg->batches) {
          ExpectRefusal(state->Ack(rank, msg->epoch, split, batch).status());
        }
        break;
      }
      case 5: {
        auto msg =
            gm::ResumeMsg::Decode(Meta(in, {"epoch", "position", "split_index", "split_batch"}));
        if (!msg.ok()) break;
        const int rank = in.ConsumeIntegralInRange<int>(0, 3);
        ExpectRefusal(msg->at ? state->ResumeAt(rank, msg->epoch, msg->position, *msg->at)
                              : state->Resume(rank, msg->epoch, msg->position));
        break;
      }
      case 6:
        ExpectRefusal(state->WorkerExited(worker));
        break;
      case 7:
        ExpectRefusal(state->Drain(worker));
        break;
      case 8:
        now += in.ConsumeIntegralInRange<int>(0, 3);
        state->Tick(now);
        break;
      case 9:
        if (state->EpochDone()) {
          start_epoch(state->epoch() + 1);
        } else if (!state->EpochTouched()) {  // a new run jumps to a resumed trainer's epoch
          gm::EpochPlan plan;
          plan.epoch = state->epoch() + in.ConsumeIntegralInRange<uint64_t>(0, 2);
          plan.splits.push_back({1, options.world_size == 1 && in.ConsumeBool()
                                        ? gm::kUnknownCount
                                        : in.ConsumeIntegralInRange<uint64_t>(0, 4)});
          gm::Status st = state->SkipToEpoch(plan);
          ExpectRefusal(st);
          if (st.ok())
            planned += plan.splits[0].batch_count == gm::kUnknownCount ? gm::kMaxSplitBatches
                                                                       : plan.splits[0].batch_count;
        }
        break;
    }
    const gm::CoordinatorStats stats = state->Stats();
    Expect(stats.acks <= planned);
    Expect(!state->EpochDone() || stats.incomplete_splits == 0);
  }
  return 0;
}
