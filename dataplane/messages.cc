#include "dataplane/messages.h"

#include <algorithm>
#include <string_view>

#include "core/json.h"
#include "dataplane/batch_order.h"

namespace gm {
namespace {

// A field read as an integer in [lo, hi]; the error names the message and field.
Result<int64_t> Int(const JsonNode& m, std::string_view key, int64_t lo, int64_t hi) {
  GM_ASSIGN_OR_RETURN(JsonNode n, m.Get(key));
  Result<int64_t> v = n.AsInt();
  if (!v.ok() || *v < lo || *v > hi) {
    return n.Expected("an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v;
}

Result<uint64_t> Count(const JsonNode& m, std::string_view key, uint64_t max) {
  GM_ASSIGN_OR_RETURN(int64_t v, Int(m, key, 0, static_cast<int64_t>(max)));
  return static_cast<uint64_t>(v);
}

// Corrupt (a peer's message is bad input), naming the message: JsonNode's
// errors are InvalidArgument with "MESSAGE: $.field: ...".
template <typename T>
Result<T> AsCorrupt(Result<T> r) {
  if (r.ok()) return r;
  return Status::Corrupt(r.status().message());
}

bool Printable(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

nlohmann::json RegisterMsg::Encode() const { return {{"data_addr", data_addr}}; }

Result<RegisterMsg> RegisterMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<RegisterMsg> {
    const JsonNode m(meta, "REGISTER");
    RegisterMsg r;
    GM_ASSIGN_OR_RETURN(r.data_addr, m.String("data_addr"));
    if (r.data_addr.empty() || r.data_addr.size() > kMaxAddressBytes || !Printable(r.data_addr)) {
      return (*m.Get("data_addr")).Expected("HOST:PORT in printable ASCII, at most 256 bytes");
    }
    return r;
  }());
}

Result<nlohmann::json> DecodeStagesReport(const nlohmann::json& meta, const char* message) {
  auto it = meta.find("stages");
  if (it == meta.end()) return nlohmann::json();
  if (!it->is_array() || it->size() > kMaxReportedStages ||
      !std::all_of(it->begin(), it->end(), [](const nlohmann::json& e) { return e.is_object(); })) {
    return Status::Corrupt(std::string(message) + ": $.stages: expected an array of at most " +
                           std::to_string(kMaxReportedStages) + " objects");
  }
  return *it;
}

nlohmann::json SplitDoneMsg::Encode() const {
  nlohmann::json j = {{"epoch", epoch}, {"split", split}, {"batch_count", batch_count}};
  if (!stages.is_null()) j["stages"] = stages;
  return j;
}

Result<SplitDoneMsg> SplitDoneMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<SplitDoneMsg> {
    const JsonNode m(meta, "SPLIT_DONE");
    SplitDoneMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(r.split, Count(m, "split", kMaxSplitId));
    GM_ASSIGN_OR_RETURN(r.batch_count, Count(m, "batch_count", kMaxSplitBatches));
    GM_ASSIGN_OR_RETURN(r.stages, DecodeStagesReport(meta, "SPLIT_DONE"));
    return r;
  }());
}

nlohmann::json SubscribeMsg::Encode() const {
  nlohmann::json j = {{"rank", rank}};
  if (world_size >= 0) j["world_size"] = world_size;
  return j;
}

Result<SubscribeMsg> SubscribeMsg::Decode(const nlohmann::json& meta, bool need_world_size) {
  return AsCorrupt([&]() -> Result<SubscribeMsg> {
    const JsonNode m(meta, "SUBSCRIBE");
    SubscribeMsg r;
    GM_ASSIGN_OR_RETURN(r.rank, Int(m, "rank", 0, 65535));
    if (need_world_size) {
      GM_ASSIGN_OR_RETURN(r.world_size, Int(m, "world_size", 1, 65536));
    }
    return r;
  }());
}

nlohmann::json GetPlanMsg::Encode() const { return {{"epoch", epoch}}; }

Result<GetPlanMsg> GetPlanMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<GetPlanMsg> {
    GetPlanMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(JsonNode(meta, "GET_PLAN"), "epoch", kMaxEpochs));
    return r;
  }());
}

nlohmann::json AckMsg::Encode() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [split, batch] : batches) list.push_back({split, batch});
  return {{"epoch", epoch}, {"batches", list}};
}

Result<AckMsg> AckMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<AckMsg> {
    const JsonNode m(meta, "ACK");
    AckMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("batches"));
    GM_ASSIGN_OR_RETURN(std::vector<JsonNode> pairs, list.Elements());
    if (pairs.size() > kMaxAckBatches) {
      return list.Expected("at most " + std::to_string(kMaxAckBatches) + " [split, batch] pairs");
    }
    for (const JsonNode& pair : pairs) {
      GM_ASSIGN_OR_RETURN(std::vector<JsonNode> two, pair.Elements());
      if (two.size() != 2) return pair.Expected("a [split, split_batch] pair");
      Result<int64_t> split = two[0].AsInt(), batch = two[1].AsInt();
      if (!split.ok() || !batch.ok() || *split < 0 || *batch < 0 ||
          static_cast<uint64_t>(*split) >= kMaxSplitId ||
          static_cast<uint64_t>(*batch) >= kMaxSplitBatches) {
        return pair.Expected("a [split, split_batch] pair of integers in range");
      }
      r.batches.emplace_back(static_cast<uint64_t>(*split), static_cast<uint64_t>(*batch));
    }
    return r;
  }());
}

nlohmann::json ResumeMsg::Encode() const { return {{"epoch", epoch}, {"position", position}}; }

Result<ResumeMsg> ResumeMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<ResumeMsg> {
    const JsonNode m(meta, "RESUME");
    ResumeMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(r.position, Count(m, "position", kMaxSplitId * kMaxSplitBatches));
    return r;
  }());
}

nlohmann::json CreditMsg::Encode() const { return {{"n", n}}; }

Result<CreditMsg> CreditMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<CreditMsg> {
    CreditMsg r;
    GM_ASSIGN_OR_RETURN(int64_t n,
                        Int(JsonNode(meta, "CREDIT"), "n", 1, static_cast<int64_t>(kMaxCredit)));
    r.n = static_cast<uint64_t>(n);
    return r;
  }());
}

}  // namespace gm
