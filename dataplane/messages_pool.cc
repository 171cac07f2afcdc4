// Connection 6 (dataplane/messages_pool.h): a run with `goldminer pool`.
#include "dataplane/messages_pool.h"

#include <string_view>

#include "core/json.h"
#include "dataplane/message_fields.h"

namespace gm {

namespace {

// A number field in (0, max] (or [0, max] with zero_ok).
Result<double> Positive(const JsonNode& m, std::string_view key, double max, bool zero_ok) {
  GM_ASSIGN_OR_RETURN(JsonNode n, m.Get(key));
  Result<double> v = n.AsNumber();
  if (!v.ok() || !(zero_ok ? *v >= 0 : *v > 0) || !(*v <= max)) {
    return n.Expected(std::string(zero_ok ? "a number from 0" : "a positive number") + " to " +
                      std::to_string(static_cast<int64_t>(max)));
  }
  return v;
}

Result<std::string> RunId(const JsonNode& m) {
  GM_ASSIGN_OR_RETURN(JsonNode n, m.Get("run_id"));
  GM_ASSIGN_OR_RETURN(std::string id, n.AsString());
  if (id.empty() || id.size() > 128 || !Printable(id)) {
    return n.Expected("a run id in printable ASCII, 1 to 128 bytes");
  }
  return id;
}

}  // namespace

nlohmann::json PoolReportMsg::Encode() const {
  nlohmann::json rate_list = nlohmann::json::array();
  for (const auto& [workers, rate] : rates) rate_list.push_back({workers, rate});
  nlohmann::json j = {{"run_id", run_id},
                      {"gpus", gpus},
                      {"cpus_per_worker", cpus_per_worker},
                      {"base_workers", base_workers},
                      {"extra_workers", extra_workers},
                      {"demand_samples_per_s", demand_samples_per_s},
                      {"rates", rate_list}};
  if (!token.empty()) j["token"] = token;
  if (!slurm_job.empty()) j["slurm_job"] = slurm_job;
  return j;
}

Result<PoolReportMsg> PoolReportMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<PoolReportMsg> {
    const JsonNode m(meta, "POOL_REPORT");
    PoolReportMsg r;
    GM_ASSIGN_OR_RETURN(r.run_id, RunId(m));
    GM_ASSIGN_OR_RETURN(r.gpus, Positive(m, "gpus", 1e6, false));
    GM_ASSIGN_OR_RETURN(r.cpus_per_worker, Int(m, "cpus_per_worker", 1, 4096));
    GM_ASSIGN_OR_RETURN(r.base_workers, Int(m, "base_workers", 0, 65536));
    GM_ASSIGN_OR_RETURN(r.extra_workers, Int(m, "extra_workers", 0, 65536));
    GM_ASSIGN_OR_RETURN(r.demand_samples_per_s, Positive(m, "demand_samples_per_s", 1e12, false));
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("rates"));
    GM_ASSIGN_OR_RETURN(std::vector<JsonNode> items, list.Elements());
    if (items.size() > kMaxPoolCounts) {
      return list.Expected("at most " + std::to_string(kMaxPoolCounts) + " [workers, rate] pairs");
    }
    for (const JsonNode& item : items) {
      GM_ASSIGN_OR_RETURN(std::vector<JsonNode> two, item.Elements());
      if (two.size() != 2) return item.Expected("a [workers, samples_per_s] pair");
      Result<int64_t> workers = JsonInteger(two[0]);
      if (!workers.ok() || *workers < 1 || *workers > 65536) {
        return two[0].Expected("a worker count from 1 to 65536");
      }
      Result<double> rate = two[1].AsNumber();
      if (!rate.ok() || !(*rate >= 0) || !(*rate <= 1e12)) {
        return two[1].Expected("a rate from 0 to 1000000000000 samples/s");
      }
      r.rates.emplace_back(*workers, *rate);
    }
    GM_ASSIGN_OR_RETURN(r.token, HexField(m, "token", kPoolTokenHexChars, true));
    if (m.has("slurm_job")) {
      GM_ASSIGN_OR_RETURN(JsonNode job, m.Get("slurm_job"));
      Result<std::string> id = job.AsString();
      if (!id.ok() || id->empty() || id->size() > 32 ||
          id->find_first_not_of("0123456789_") != std::string::npos || id->front() == '_') {
        return job.Expected("a Slurm job id (digits, '_' for an array task, 1 to 32 characters)");
      }
      r.slurm_job = *id;
    }
    return r;
  }());
}

nlohmann::json PoolGrantMsg::Encode() const {
  nlohmann::json j = {{"extra_workers", extra_workers}, {"cpus", cpus}};
  if (!reason.empty()) j["reason"] = reason;
  if (!token.empty()) j["token"] = token;
  return j;
}

namespace {

// An optional reason ("" when absent): printable ASCII and spaces, at most
// kMaxPoolReasonBytes (it is shown to people and recorded).
Result<std::string> PoolReason(const JsonNode& m) {
  GM_ASSIGN_OR_RETURN(std::string v, m.StringOr("reason", ""));
  bool ok = v.size() <= kMaxPoolReasonBytes;
  for (unsigned char c : v) ok = ok && c >= 0x20 && c <= 0x7e;
  if (!ok) {
    return (*m.Get("reason"))
        .Expected("printable ASCII and spaces, at most " + std::to_string(kMaxPoolReasonBytes) +
                  " bytes");
  }
  return v;
}

}  // namespace

Result<PoolGrantMsg> PoolGrantMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<PoolGrantMsg> {
    const JsonNode m(meta, "POOL_GRANT");
    PoolGrantMsg r;
    GM_ASSIGN_OR_RETURN(r.extra_workers, Int(m, "extra_workers", 0, 65536));
    GM_ASSIGN_OR_RETURN(r.cpus, Int(m, "cpus", 0, int64_t{1} << 31));
    GM_ASSIGN_OR_RETURN(r.reason, PoolReason(m));
    GM_ASSIGN_OR_RETURN(r.token, HexField(m, "token", kPoolTokenHexChars, true));
    return r;
  }());
}

nlohmann::json PoolStateMsg::Encode() const {
  nlohmann::json list = nlohmann::json::array();
  for (const Run& run : runs) {
    list.push_back({{"run_id", run.run_id},
                    {"gpus", run.gpus},
                    {"extra_workers", run.extra_workers},
                    {"cpus", run.cpus},
                    {"held_workers", run.held_workers},
                    {"age_s", run.age_s}});
    if (run.report) list.back()["report"] = run.report->Encode();
  }
  nlohmann::json changes = nlohmann::json::array();
  for (const Change& c : history) {
    changes.push_back({{"age_s", c.age_s},
                       {"run_id", c.run_id},
                       {"from_cpus", c.from_cpus},
                       {"to_cpus", c.to_cpus},
                       {"reason", c.reason}});
  }
  return {{"cpus", cpus}, {"runs", list}, {"history", changes}};
}

Result<PoolStateMsg> PoolStateMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<PoolStateMsg> {
    const JsonNode m(meta, "POOL_STATE");
    PoolStateMsg r;
    GM_ASSIGN_OR_RETURN(r.cpus, Int(m, "cpus", 0, int64_t{1} << 31));
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("runs"));
    GM_ASSIGN_OR_RETURN(std::vector<JsonNode> items, list.Elements());
    if (items.size() > kMaxPoolRuns) {
      return list.Expected("at most " + std::to_string(kMaxPoolRuns) + " runs");
    }
    for (const JsonNode& item : items) {
      Run run;
      GM_ASSIGN_OR_RETURN(run.run_id, RunId(item));
      GM_ASSIGN_OR_RETURN(run.gpus, Positive(item, "gpus", 1e6, false));
      GM_ASSIGN_OR_RETURN(run.extra_workers, Int(item, "extra_workers", 0, 65536));
      GM_ASSIGN_OR_RETURN(run.cpus, Int(item, "cpus", 0, int64_t{1} << 31));
      GM_ASSIGN_OR_RETURN(run.held_workers, Int(item, "held_workers", 0, 65536));
      GM_ASSIGN_OR_RETURN(run.age_s, Positive(item, "age_s", 1e9, true));
      if (item.has("report")) {
        GM_ASSIGN_OR_RETURN(run.report, PoolReportMsg::Decode(item.json().at("report")));
      }
      r.runs.push_back(std::move(run));
    }
    if (!m.has("history")) return r;  // an older pool
    GM_ASSIGN_OR_RETURN(JsonNode changes, m.Get("history"));
    GM_ASSIGN_OR_RETURN(std::vector<JsonNode> entries, changes.Elements());
    if (entries.size() > kMaxPoolHistory) {
      return changes.Expected("at most " + std::to_string(kMaxPoolHistory) + " changes");
    }
    for (const JsonNode& item : entries) {
      Change c;
      GM_ASSIGN_OR_RETURN(c.age_s, Positive(item, "age_s", 1e9, true));
      GM_ASSIGN_OR_RETURN(c.run_id, RunId(item));
      GM_ASSIGN_OR_RETURN(c.from_cpus, Int(item, "from_cpus", 0, int64_t{1} << 31));
      GM_ASSIGN_OR_RETURN(c.to_cpus, Int(item, "to_cpus", 0, int64_t{1} << 31));
      GM_ASSIGN_OR_RETURN(c.reason, PoolReason(item));
      r.history.push_back(std::move(c));
    }
    return r;
  }());
}

}  // namespace gm
