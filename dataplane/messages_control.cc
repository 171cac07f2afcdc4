// Connections 1 to 3 (dataplane/messages_control.h): a worker and a client with the
// coordinator, and a client's CREDIT at a worker's data port.
#include "dataplane/messages_control.h"

#include <algorithm>
#include <limits>
#include <string_view>

#include "core/host.h"
#include "core/json.h"
#include "dataplane/auth.h"
#include "dataplane/message_fields.h"
#include "dataplane/offload_proof.h"

namespace gm {

namespace {

// A list of at most `max_pairs` [split, n] pairs of integers, split below
// kMaxSplitId and n below `n_limit`; `what` names the pair in errors.
Result<std::vector<std::pair<uint64_t, uint64_t>>> SplitPairs(const JsonNode& list,
                                                              size_t max_pairs, uint64_t n_limit,
                                                              const std::string& what) {
  GM_ASSIGN_OR_RETURN(std::vector<JsonNode> pairs, list.Elements());
  if (pairs.size() > max_pairs) {
    return list.Expected("at most " + std::to_string(max_pairs) + " " + what + " pairs");
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const JsonNode& pair : pairs) {
    GM_ASSIGN_OR_RETURN(std::vector<JsonNode> two, pair.Elements());
    if (two.size() != 2) return pair.Expected("a " + what + " pair");
    Result<int64_t> split = JsonInteger(two[0]), n = JsonInteger(two[1]);
    if (!split.ok() || !n.ok() || *split < 0 || *n < 0 ||
        static_cast<uint64_t>(*split) >= kMaxSplitId || static_cast<uint64_t>(*n) >= n_limit) {
      return pair.Expected("a " + what + " pair of integers in range");
    }
    out.emplace_back(static_cast<uint64_t>(*split), static_cast<uint64_t>(*n));
  }
  return out;
}

}  // namespace

nlohmann::json RegisterMsg::Encode() const {
  nlohmann::json out = {{"data_addr", data_addr}};
  if (!host.empty()) out["host"] = host;
  if (!tag.empty()) out["tag"] = tag;
  if (!step.empty()) out["step"] = step;
  if (pid > 0) out["pid"] = pid;
  if (threads > 0) out["threads"] = threads;
  if (worker_id > 0) {
    out["worker_id"] = worker_id;
    nlohmann::json list = nlohmann::json::array();
    for (const SplitDoneMsg& m : made) {
      list.push_back({{"epoch", m.epoch},
                      {"split", m.split},
                      {"batch_count", m.batch_count},
                      {"skipped", m.skipped}});
    }
    out["made"] = std::move(list);
  }
  return out;
}

Result<RegisterMsg> RegisterMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<RegisterMsg> {
    const JsonNode m(meta, "REGISTER");
    RegisterMsg r;
    GM_ASSIGN_OR_RETURN(JsonNode addr, m.Get("data_addr"));
    GM_ASSIGN_OR_RETURN(r.data_addr, Address(addr));
    if (!ParseHostPort(r.data_addr, "data_addr", 1).ok()) {
      return addr.Expected("HOST:PORT with a port from 1 to 65535");
    }
    // Optional; what the launcher shows (a Linux pid is at most 2^22).
    if (m.has("pid")) {
      GM_ASSIGN_OR_RETURN(r.pid, Int(m, "pid", 1, int64_t{1} << 22));
    }
    if (m.has("threads")) {
      GM_ASSIGN_OR_RETURN(r.threads, Int(m, "threads", 1, 4096));
    }
    for (auto [key, field] : {std::pair<const char*, std::string*>{"host", &r.host},
                              {"tag", &r.tag},
                              {"step", &r.step}}) {
      GM_ASSIGN_OR_RETURN(*field, m.StringOr(key, ""));
      if (field->size() > 256 || (!field->empty() && !Printable(*field))) {
        return (*m.Get(key)).Expected("printable ASCII, at most 256 bytes");
      }
    }
    if (m.has("worker_id")) {  // registering again, at a restarted coordinator
      GM_ASSIGN_OR_RETURN(int64_t id, Int(m, "worker_id", 1, int64_t{1} << 62));
      r.worker_id = static_cast<uint64_t>(id);
      if (m.has("made")) {
        GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("made"));
        GM_ASSIGN_OR_RETURN(std::vector<JsonNode> items, list.Elements());
        if (items.size() > kMaxRegisterMade) {
          return list.Expected("at most " + std::to_string(kMaxRegisterMade) + " splits");
        }
        for (const JsonNode& item : items) {
          if (!item.is_object()) return item.Expected("{epoch, split, batch_count, skipped}");
          GM_ASSIGN_OR_RETURN(SplitDoneMsg done, SplitDoneMsg::Decode(item.json()));
          done.stages.reset();
          r.made.push_back(std::move(done));
        }
      }
    }
    return r;
  }());
}

Result<std::optional<std::vector<StageStats>>> DecodeStagesReport(const nlohmann::json& meta,
                                                                  const char* message) {
  return AsCorrupt([&]() -> Result<std::optional<std::vector<StageStats>>> {
    const JsonNode m(meta, message);
    if (!m.has("stages")) return std::optional<std::vector<StageStats>>();
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("stages"));
    GM_ASSIGN_OR_RETURN(std::vector<JsonNode> entries, list.Elements());
    if (entries.size() > kMaxReportedStages) {
      return list.Expected("an array of at most " + std::to_string(kMaxReportedStages) + " stages");
    }
    std::vector<StageStats> out;
    for (const JsonNode& e : entries) {
      StageStats s;
      GM_ASSIGN_OR_RETURN(JsonNode name, e.Get("name"));
      GM_ASSIGN_OR_RETURN(s.name, name.AsString());
      if (s.name.empty() || s.name.size() > kMaxStageNameBytes ||
          !std::all_of(s.name.begin(), s.name.end(),
                       [](unsigned char c) { return c >= 0x20 && c < 0x7f; })) {
        return name.Expected("a stage name in printable ASCII, 1 to " +
                             std::to_string(kMaxStageNameBytes) + " bytes");
      }
      GM_ASSIGN_OR_RETURN(s.count, Count(e, "count", kMaxStageTotal));
      GM_ASSIGN_OR_RETURN(s.bytes_in, Count(e, "bytes_in", kMaxStageTotal));
      GM_ASSIGN_OR_RETURN(s.bytes_out, Count(e, "bytes_out", kMaxStageTotal));
      for (auto [key, field] : {std::pair{"cpu_s", &s.cpu_s}, std::pair{"wall_s", &s.wall_s}}) {
        GM_ASSIGN_OR_RETURN(JsonNode n, e.Get(key));
        Result<double> v = n.AsNumber();
        if (!v.ok() || !(*v >= 0 && *v <= kMaxStageSeconds)) {
          return n.Expected("seconds from 0 to 1e12");
        }
        *field = *v;
      }
      out.push_back(std::move(s));
    }
    return std::optional<std::vector<StageStats>>(std::move(out));
  }());
}

nlohmann::json EncodeStagesReport(const std::vector<StageStats>& stages) {
  nlohmann::json out = nlohmann::json::array();
  for (const StageStats& s : stages) {
    out.push_back({{"name", s.name},
                   {"count", s.count},
                   {"cpu_s", s.cpu_s},
                   {"wall_s", s.wall_s},
                   {"bytes_in", s.bytes_in},
                   {"bytes_out", s.bytes_out}});
  }
  return out;
}

nlohmann::json GetSplitMsg::Encode() const {
  nlohmann::json j = nlohmann::json::object();
  if (draining) j["draining"] = true;
  return j;
}

Result<GetSplitMsg> GetSplitMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<GetSplitMsg> {
    const JsonNode m(meta, "GET_SPLIT");
    GetSplitMsg r;
    GM_ASSIGN_OR_RETURN(r.draining, m.BoolOr("draining", false));
    return r;
  }());
}

nlohmann::json HeartbeatMsg::Encode() const {
  return {{"batches_sent", batches_sent},
          {"splits_done", splits_done},
          {"making_split", making_split},
          {"cpu_s", cpu_s},
          {"virtual_workers", virtual_workers}};
}

Result<HeartbeatMsg> HeartbeatMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<HeartbeatMsg> {
    const JsonNode m(meta, "HEARTBEAT");
    HeartbeatMsg r;
    if (m.has("batches_sent")) {
      GM_ASSIGN_OR_RETURN(r.batches_sent, Count(m, "batches_sent", uint64_t{1} << 62));
    }
    if (m.has("splits_done")) {
      GM_ASSIGN_OR_RETURN(r.splits_done, Count(m, "splits_done", uint64_t{1} << 62));
    }
    GM_ASSIGN_OR_RETURN(r.making_split, m.BoolOr("making_split", false));
    GM_ASSIGN_OR_RETURN(r.cpu_s, m.NumberOr("cpu_s", 0));
    if (!(r.cpu_s >= 0 && r.cpu_s <= kMaxStageSeconds)) {
      return Status::Corrupt("HEARTBEAT: $.cpu_s: " + std::to_string(r.cpu_s) +
                             " is not a number of seconds from 0 to 1e12");
    }
    if (m.has("virtual_workers")) {
      GM_ASSIGN_OR_RETURN(r.virtual_workers, Count(m, "virtual_workers", uint64_t{1} << 20));
    }
    return r;
  }());
}

nlohmann::json SplitDoneMsg::Encode() const {
  nlohmann::json j = {{"epoch", epoch}, {"split", split}, {"batch_count", batch_count}};
  if (skipped > 0) j["skipped"] = skipped;
  if (stages) j["stages"] = EncodeStagesReport(*stages);
  return j;
}

Result<SplitDoneMsg> SplitDoneMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<SplitDoneMsg> {
    const JsonNode m(meta, "SPLIT_DONE");
    SplitDoneMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(r.split, Count(m, "split", kMaxSplitId));
    GM_ASSIGN_OR_RETURN(r.batch_count, Count(m, "batch_count", kMaxSplitBatches));
    if (m.has("skipped")) {
      GM_ASSIGN_OR_RETURN(r.skipped, Count(m, "skipped", kMaxSplitSamples));
    }
    GM_ASSIGN_OR_RETURN(r.stages, DecodeStagesReport(meta, "SPLIT_DONE"));
    return r;
  }());
}

nlohmann::json SubscribeMsg::Encode() const {
  nlohmann::json j = {{"rank", rank}};
  if (world_size >= 0) j["world_size"] = world_size;
  if (shm) j["shm"] = true;
  if (session > 0) j["session"] = session;
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
    GM_ASSIGN_OR_RETURN(r.shm, m.BoolOr("shm", false));
    if (m.has("session")) {
      GM_ASSIGN_OR_RETURN(int64_t number, Int(m, "session", 1, int64_t{1} << 62));
      r.session = static_cast<uint64_t>(number);
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
  nlohmann::json out = {{"epoch", epoch}, {"batches", list}};
  if (!samples.empty()) out["samples"] = samples;
  return out;
}

Result<AckMsg> AckMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<AckMsg> {
    const JsonNode m(meta, "ACK");
    AckMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("batches"));
    GM_ASSIGN_OR_RETURN(r.batches,
                        SplitPairs(list, kMaxAckBatches, kMaxSplitBatches, "[split, split_batch]"));
    if (m.has("samples")) {
      GM_ASSIGN_OR_RETURN(JsonNode counts, m.Get("samples"));
      GM_ASSIGN_OR_RETURN(std::vector<JsonNode> each, counts.Elements());
      if (each.size() != r.batches.size()) {
        return counts.Expected("one sample count per batch (" + std::to_string(r.batches.size()) +
                               ")");
      }
      for (const JsonNode& n : each) {
        Result<int64_t> v = JsonInteger(n);
        if (!v.ok() || *v < 1 || static_cast<uint64_t>(*v) > kMaxSplitSamples) {
          return n.Expected("a sample count from 1 to 2^40");
        }
        r.samples.push_back(static_cast<uint64_t>(*v));
      }
    }
    return r;
  }());
}

namespace {

// A rank's place in its sequence (RESUME's and PLAN's position, split_index and
// split_batch): `at` both or neither.
void EncodePlace(nlohmann::json& out, uint64_t position, const std::optional<SequenceKey>& at) {
  out["position"] = position;
  if (at) {
    out["split_index"] = at->index;
    out["split_batch"] = at->batch;
  }
}

Status DecodePlace(const JsonNode& m, uint64_t* position, std::optional<SequenceKey>* at) {
  GM_ASSIGN_OR_RETURN(*position, Count(m, "position", kMaxSplitId * kMaxSplitBatches));
  if (m.has("split_index") || m.has("split_batch")) {
    SequenceKey key;
    GM_ASSIGN_OR_RETURN(uint64_t index, Count(m, "split_index", kMaxSplitId));
    key.index = static_cast<size_t>(index);
    GM_ASSIGN_OR_RETURN(key.batch, Count(m, "split_batch", kMaxSplitBatches));
    *at = key;
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json ResumeMsg::Encode() const {
  nlohmann::json out = {{"epoch", epoch}};
  EncodePlace(out, position, at);
  return out;
}

Result<ResumeMsg> ResumeMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<ResumeMsg> {
    const JsonNode m(meta, "RESUME");
    ResumeMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_RETURN_IF_ERROR(DecodePlace(m, &r.position, &r.at));
    return r;
  }());
}

nlohmann::json CreditMsg::Encode() const {
  nlohmann::json j = {{"n", n}};
  if (!release.empty()) j["release"] = release;
  return j;
}

Result<CreditMsg> CreditMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<CreditMsg> {
    const JsonNode m(meta, "CREDIT");
    CreditMsg r;
    if (m.has("release")) {
      GM_ASSIGN_OR_RETURN(JsonNode ids, m.Get("release"));
      const nlohmann::json& j = ids.json();
      bool ok = j.is_array() && j.size() <= kMaxCreditReleases;
      for (size_t i = 0; ok && i < j.size(); ++i) {
        ok = j[i].is_number_unsigned() && j[i].get<uint64_t>() < kMaxCreditReleases;
        if (ok) r.release.push_back(j[i].get<uint64_t>());
      }
      if (!ok) {
        return ids.Expected("an array of at most " + std::to_string(kMaxCreditReleases) +
                            " segment ids below " + std::to_string(kMaxCreditReleases));
      }
    }
    // n may be 0 only in a CREDIT that releases segments.
    GM_ASSIGN_OR_RETURN(int64_t credit,
                        Int(m, "n", r.release.empty() ? 1 : 0, static_cast<int64_t>(kMaxCredit)));
    r.n = static_cast<uint64_t>(credit);
    return r;
  }());
}

nlohmann::json SubscribedMsg::Encode() const {
  return {{"run_id", run_id},
          {"batch_size", batch_size},
          {"world_size", world_size},
          {"epochs", epochs},
          {"session", session},
          {"ticket", ticket},
          {"order", order},
          {"seed", seed},
          {"device_stages", device_stages},
          {"reconnect_s", reconnect_s}};
}

Result<SubscribedMsg> SubscribedMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<SubscribedMsg> {
    const JsonNode m(meta, "SUBSCRIBED");
    SubscribedMsg r;
    GM_ASSIGN_OR_RETURN(r.run_id, OptionalName(m, "run_id"));
    GM_ASSIGN_OR_RETURN(r.batch_size, Int(m, "batch_size", 1, int64_t{1} << 24));
    GM_ASSIGN_OR_RETURN(r.world_size, Int(m, "world_size", 1, 65536));
    GM_ASSIGN_OR_RETURN(r.epochs, Int(m, "epochs", 0, static_cast<int64_t>(kMaxEpochs)));
    GM_ASSIGN_OR_RETURN(int64_t number, Int(m, "session", 1, int64_t{1} << 62));
    r.session = static_cast<uint64_t>(number);
    GM_ASSIGN_OR_RETURN(r.ticket, m.String("ticket"));
    if (!CheckSecret(r.ticket, "ticket").ok()) {  // a key, written like the run's secret
      return (*m.Get("ticket")).Expected("64 lower-case hex characters");
    }
    GM_ASSIGN_OR_RETURN(r.order, m.StringOr("order", ""));
    if (!r.order.empty() && !CheckSecret(r.order, "order").ok()) {
      return (*m.Get("order")).Expected("64 lower-case hex characters");
    }
    if (m.has("seed")) {
      GM_ASSIGN_OR_RETURN(r.seed, Int(m, "seed", 0, std::numeric_limits<int64_t>::max()));
    }
    if (m.has("device_stages")) {
      GM_ASSIGN_OR_RETURN(JsonNode stages, m.Get("device_stages"));
      const nlohmann::json& j = stages.json();
      bool ok = j.is_array() && j.size() <= kMaxDeviceStages;
      for (size_t i = 0; ok && i < j.size(); ++i) {
        ok = j[i].is_object() && j[i].contains("op") && j[i]["op"].is_string();
      }
      if (!ok) {
        return stages.Expected("an array of at most " + std::to_string(kMaxDeviceStages) +
                               " stage objects with an \"op\"");
      }
      r.device_stages = j;
    }
    GM_ASSIGN_OR_RETURN(r.reconnect_s, Seconds(m, "reconnect_s", 0, 86400, true));
    return r;
  }());
}

nlohmann::json RegisteredMsg::Encode() const {
  nlohmann::json j = {{"worker_id", worker_id},
                      {"pipeline", pipeline},
                      {"pipeline_origin", pipeline_origin},
                      {"base_dir", base_dir},
                      {"samples_per_split", samples_per_split},
                      {"heartbeat_s", heartbeat_s},
                      {"liveness_timeout_s", liveness_timeout_s}};
  if (!offload_key.empty()) j["offload_key"] = offload_key;
  j["reconnect_s"] = reconnect_s;
  return j;
}

Result<RegisteredMsg> RegisteredMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<RegisteredMsg> {
    const JsonNode m(meta, "REGISTERED");
    RegisteredMsg r;
    GM_ASSIGN_OR_RETURN(int64_t id, Int(m, "worker_id", 0, int64_t{1} << 62));
    r.worker_id = static_cast<uint64_t>(id);
    GM_ASSIGN_OR_RETURN(JsonNode doc, m.Get("pipeline"));
    if (!doc.is_object()) return doc.Expected("a pipeline document (a JSON object)");
    r.pipeline = doc.json();
    GM_ASSIGN_OR_RETURN(r.pipeline_origin, m.StringOr("pipeline_origin", "pipeline"));
    GM_ASSIGN_OR_RETURN(r.base_dir, m.StringOr("base_dir", "."));
    if (m.has("samples_per_split")) {
      GM_ASSIGN_OR_RETURN(r.samples_per_split, Int(m, "samples_per_split", 1, int64_t{1} << 24));
    }
    GM_ASSIGN_OR_RETURN(r.heartbeat_s, Seconds(m, "heartbeat_s", 1.0, 3600, false));
    GM_ASSIGN_OR_RETURN(r.liveness_timeout_s, Seconds(m, "liveness_timeout_s", 10, 86400, false));
    GM_ASSIGN_OR_RETURN(r.reconnect_s, Seconds(m, "reconnect_s", 15, 86400, false));
    GM_ASSIGN_OR_RETURN(r.offload_key, HexField(m, "offload_key", kOffloadKeyHexChars, true));
    return r;
  }());
}

namespace {
constexpr std::pair<AssignMsg::Kind, std::string_view> kAssignKinds[] = {
    {AssignMsg::Kind::kAssign, "assign"},
    {AssignMsg::Kind::kWait, "wait"},
    {AssignMsg::Kind::kDrain, "drain"},
    {AssignMsg::Kind::kExit, "exit"},
    {AssignMsg::Kind::kEpochDone, "epoch_done"}};
}  // namespace

nlohmann::json AssignMsg::Encode() const {
  std::string_view name = "wait";
  for (const auto& [k, n] : kAssignKinds) {
    if (k == kind) name = n;
  }
  nlohmann::json j = {{"kind", name}, {"retry_s", retry_s}};
  if (kind == Kind::kAssign) {
    j.update({{"epoch", epoch},
              {"split", split},
              {"rank", rank},
              {"start_batch", start_batch},
              {"end_batch", end_batch}});
    if (session > 0) j["session"] = session;
  }
  return j;
}

Result<AssignMsg> AssignMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<AssignMsg> {
    const JsonNode m(meta, "ASSIGN");
    AssignMsg r;
    GM_ASSIGN_OR_RETURN(std::string kind_text, m.String("kind"));
    bool known = false;
    for (const auto& [k, n] : kAssignKinds) {
      if (n == kind_text) {
        r.kind = k;
        known = true;
      }
    }
    if (!known) {
      return (*m.Get("kind"))
          .Expected(
              "one of \"assign\", \"wait\", \"drain\", \"exit\", "
              "\"epoch_done\"");
    }
    GM_ASSIGN_OR_RETURN(r.retry_s, Seconds(m, "retry_s", 0.05, 3600, true));
    if (r.kind != Kind::kAssign) return r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(r.split, Count(m, "split", kMaxSplitId));
    GM_ASSIGN_OR_RETURN(r.rank, Int(m, "rank", 0, 65535));
    GM_ASSIGN_OR_RETURN(r.start_batch, Count(m, "start_batch", kMaxSplitBatches));
    GM_ASSIGN_OR_RETURN(r.end_batch,
                        Int(m, "end_batch", -1, static_cast<int64_t>(kMaxSplitBatches)));
    if (r.end_batch >= 0 && static_cast<uint64_t>(r.end_batch) < r.start_batch) {
      return (*m.Get("end_batch")).Expected("-1 or at least start_batch");
    }
    if (m.has("session")) {
      GM_ASSIGN_OR_RETURN(r.session, Count(m, "session", uint64_t{1} << 62));
    }
    return r;
  }());
}

nlohmann::json PlanMsg::Encode() const {
  nlohmann::json j = {{"epoch", epoch}};
  switch (kind) {
    case Kind::kWait:
      j.update({{"wait", true}, {"retry_s", retry_s}});
      break;
    case Kind::kEnd:
      j.update({{"end", true}, {"epochs", epochs}});
      break;
    case Kind::kDone:
      j["done"] = true;
      break;
    case Kind::kPlan: {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [split, count] : splits) list.push_back({split, count});
      j["splits"] = std::move(list);
      j["workers"] = workers;
      if (position) EncodePlace(j, *position, at);
      break;
    }
  }
  return j;
}

Result<PlanMsg> PlanMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<PlanMsg> {
    const JsonNode m(meta, "PLAN");
    PlanMsg r;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(bool end, m.BoolOr("end", false));
    GM_ASSIGN_OR_RETURN(bool done, m.BoolOr("done", false));
    GM_ASSIGN_OR_RETURN(bool wait, m.BoolOr("wait", false));
    if (int{end} + int{done} + int{wait} > 1) {
      return m.Error("at most one of end, done and wait may be true");
    }
    if (end) {
      r.kind = Kind::kEnd;
      GM_ASSIGN_OR_RETURN(r.epochs, Int(m, "epochs", 0, static_cast<int64_t>(kMaxEpochs)));
      return r;
    }
    if (done) {
      r.kind = Kind::kDone;
      return r;
    }
    if (wait) {
      r.kind = Kind::kWait;
      GM_ASSIGN_OR_RETURN(r.retry_s, Seconds(m, "retry_s", 0.05, 3600, true));
      return r;
    }
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("splits"));
    GM_ASSIGN_OR_RETURN(std::vector<JsonNode> items, list.Elements());
    if (items.size() > kMaxPlanSplits) {
      return list.Expected("at most " + std::to_string(kMaxPlanSplits) + " splits");
    }
    r.splits.reserve(items.size());
    for (const JsonNode& item : items) {
      GM_ASSIGN_OR_RETURN(std::vector<JsonNode> two, item.Elements());
      Result<int64_t> split =
          two.size() == 2 ? two[0].AsInt() : Result<int64_t>(Status::Corrupt(""));
      Result<int64_t> count =
          two.size() == 2 ? two[1].AsInt() : Result<int64_t>(Status::Corrupt(""));
      if (!split.ok() || !count.ok() || *split < 0 ||
          static_cast<uint64_t>(*split) >= kMaxSplitId || *count < -1 ||
          *count > static_cast<int64_t>(kMaxSplitBatches)) {
        return item.Expected("a [split, batch_count (-1: unknown)] pair of integers in range");
      }
      r.splits.emplace_back(static_cast<uint64_t>(*split), *count);
    }
    GM_ASSIGN_OR_RETURN(r.workers, Addresses(m));
    if (m.has("position")) {
      uint64_t place = 0;
      GM_RETURN_IF_ERROR(DecodePlace(m, &place, &r.at));
      r.position = place;
    }
    return r;
  }());
}

nlohmann::json WorkersMsg::Encode() const {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [split, index] : holders) pairs.push_back({split, index});
  if (!holders_known) return {{"workers", workers}};
  nlohmann::json out = {{"workers", workers}, {"epoch", epoch}, {"holders", std::move(pairs)}};
  if (!revoked.empty()) {
    nlohmann::json gone = nlohmann::json::array();
    for (const auto& [split, index] : revoked) gone.push_back({split, index});
    out["revoked"] = std::move(gone);
  }
  return out;
}

Result<WorkersMsg> WorkersMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<WorkersMsg> {
    const JsonNode m(meta, "WORKERS");
    WorkersMsg r;
    GM_ASSIGN_OR_RETURN(r.workers, Addresses(m));
    if (!m.has("holders")) return r;  // a coordinator that tells no holders
    r.holders_known = true;
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("holders"));
    GM_ASSIGN_OR_RETURN(r.holders,
                        SplitPairs(list, kMaxSplitId, r.workers.size(), "[split, worker index]"));
    if (!m.has("revoked")) return r;
    GM_ASSIGN_OR_RETURN(JsonNode gone, m.Get("revoked"));
    GM_ASSIGN_OR_RETURN(r.revoked,
                        SplitPairs(gone, kMaxRevoked, r.workers.size(), "[split, worker index]"));
    return r;
  }());
}

nlohmann::json FaultMsg::Encode() const {
  // Cut at a character's first byte, so that the text stays UTF-8.
  size_t end = std::min(why.size(), kMaxFaultWhyBytes);
  while (end < why.size() && end > 0 && (static_cast<unsigned char>(why[end]) & 0xC0) == 0x80)
    --end;
  return {{"worker", worker}, {"epoch", epoch}, {"why", why.substr(0, end)}};
}

Result<FaultMsg> FaultMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<FaultMsg> {
    const JsonNode m(meta, "FAULT");
    FaultMsg r;
    GM_ASSIGN_OR_RETURN(JsonNode worker_node, m.Get("worker"));
    GM_ASSIGN_OR_RETURN(r.worker, Address(worker_node));
    GM_ASSIGN_OR_RETURN(r.epoch, Count(m, "epoch", kMaxEpochs));
    GM_ASSIGN_OR_RETURN(JsonNode why_node, m.Get("why"));
    GM_ASSIGN_OR_RETURN(r.why, why_node.AsString());
    if (r.why.size() > kMaxFaultWhyBytes) {
      return why_node.Expected("at most " + std::to_string(kMaxFaultWhyBytes) + " bytes");
    }
    return r;
  }());
}

}  // namespace gm
