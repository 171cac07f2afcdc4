#include "core/profile.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "core/json.h"
#include "core/json_fields.h"

namespace gm {

using nlohmann::json;

namespace {

// ---- Writing -------------------------------------------------------------------

// Optional values are left out of the document rather than written as null.
void PutIfSet(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = *v;
}

}  // namespace

// ToJson and Convert overloads live in namespace gm: ArrayOf and Fields
// (core/json_fields.h) find them by argument-dependent lookup.

json ToJson(const StageProfile& s) {
  return {{"index", s.index},
          {"name", s.name},
          {"stateless", s.stateless},
          {"cpu_s_per_sample", s.cpu_s_per_sample},
          {"wall_s_per_sample", s.wall_s_per_sample},
          {"bytes_in_per_sample", s.bytes_in_per_sample},
          {"bytes_out_per_sample", s.bytes_out_per_sample},
          {"peak_bytes_out", s.peak_bytes_out},
          {"cpu_share", s.cpu_share}};
}

json ToJson(const CutPoint& c) {
  return {{"after_stage", c.after_stage},
          {"allowed", c.allowed},
          {"bytes_per_sample", c.bytes_per_sample},
          {"remote_cpu_s_per_sample", c.remote_cpu_s_per_sample},
          {"local_cpu_s_per_sample", c.local_cpu_s_per_sample},
          {"reason", c.reason},
          {"pipeline_cut", c.pipeline_cut},
          {"device_tail", c.device_tail}};
}

json ToJson(const PipelineRun& r) {
  return {{"threads", r.threads},
          {"cpus", r.cpus},
          {"samples", r.samples},
          {"seconds", r.seconds},
          {"cpu_s", r.cpu_s},
          {"samples_per_s", r.samples_per_s},
          {"samples_per_cpu_s", r.samples_per_cpu_s}};
}

json ToJson(const StepProfile& s) {
  json j = {{"step", s.step},
            {"pid", s.pid},
            {"wait_s", s.wait_s},
            {"compute_s", s.compute_s},
            {"samples", s.samples}};
  PutIfSet(j, "gpu_busy_s", s.gpu_busy_s);
  PutIfSet(j, "gpu_idle_s", s.gpu_idle_s);
  PutIfSet(j, "gpu_stall_s", s.gpu_stall_s);
  return j;
}

json ToJson(const GpuProfile& g) {
  json j = {{"available", g.available},
            {"reason", g.reason},
            {"records", g.records},
            {"dropped_records", g.dropped_records},
            {"devices", g.devices},
            {"busy_s", g.busy_s},
            {"idle_s", g.idle_s},
            {"stall_s", g.stall_s},
            {"busy_fraction", g.busy_fraction},
            {"stall_fraction", g.stall_fraction}};
  PutIfSet(j, "instrumentation_overhead", g.instrumentation_overhead);
  return j;
}

json ToJson(const PipelineProfile& p) {
  return {{"path", p.path},
          {"sha256", p.sha256},
          {"batch_size", p.batch_size},
          {"warmup_samples", p.warmup_samples},
          {"samples", p.samples},
          {"runs", ArrayOf(p.runs)},
          {"cpu_s_per_sample", p.cpu_s_per_sample},
          {"stage_cpu_s_per_sample", p.stage_cpu_s_per_sample},
          {"reader_cpu_s_per_sample", p.reader_cpu_s_per_sample},
          {"batcher_cpu_s_per_sample", p.batcher_cpu_s_per_sample},
          {"queue_cpu_s_per_sample", p.queue_cpu_s_per_sample},
          {"samples_per_s_per_core", p.samples_per_s_per_core},
          {"peak_rss_bytes", p.peak_rss_bytes},
          {"instrumentation_overhead", p.instrumentation_overhead},
          {"delivery",
           {{"frame_cpu_s", p.delivery.frame_cpu_s},
            {"tcp_cpu_s_per_byte", p.delivery.tcp_cpu_s_per_byte}}},
          {"stages", ArrayOf(p.stages)},
          {"cuts", ArrayOf(p.cuts)}};
}

json ToJson(const DataLoaderProfile& d) {
  return {{"workers", d.workers},
          {"cpu_s", d.cpu_s},
          {"samples", d.samples},
          {"cpu_s_per_sample", d.cpu_s_per_sample},
          {"bytes_per_sample", d.bytes_per_sample}};
}

json ToJson(const NativeProfile& n) {
  return {{"samples", n.samples},
          {"cpu_s_per_sample", n.cpu_s_per_sample},
          {"bytes_per_sample", n.bytes_per_sample},
          {"cut_cpu_s_per_sample", n.cut_cpu_s_per_sample},
          {"cut_bytes_per_sample", n.cut_bytes_per_sample}};
}

json ToJson(const TrainerProfile& t) {
  json j = {{"command", t.command},
            {"source", t.source},
            {"workers", t.workers},
            {"exit_code", t.exit_code},
            {"exit", t.exit},
            {"stopped_by_profile", t.stopped_by_profile},
            {"steps_recorded", t.steps_recorded},
            {"warmup_steps", t.warmup_steps},
            {"steps", t.steps},
            {"seconds", t.seconds},
            {"samples_per_s", t.samples_per_s},
            {"batch_size", t.batch_size},
            {"step_s_median", t.step_s_median},
            {"wait_s_median", t.wait_s_median},
            {"wait_s_mean", t.wait_s_mean},
            {"compute_s_median", t.compute_s_median},
            {"demand_samples_per_s", t.demand_samples_per_s},
            {"stall_fraction", t.stall_fraction},
            {"instrumentation_s_per_step", t.instrumentation_s_per_step},
            {"instrumentation_overhead", t.instrumentation_overhead},
            {"gpu", ToJson(t.gpu)},
            {"step_list", ArrayOf(t.step_list)}};
  if (t.dataloader) j["dataloader"] = ToJson(*t.dataloader);
  if (t.native) j["native"] = ToJson(*t.native);
  if (!t.not_native.empty()) j["not_native"] = t.not_native;
  return j;
}

// ---- Reading -------------------------------------------------------------------

// Required: what a plan is computed from and what identifies a measurement.
// Optional: labels and diagnostics.
Status Convert(const JsonNode& n, StageProfile& out) {
  Fields f(n);
  f.Required("index", out.index);
  f.Required("name", out.name);
  f.Optional("stateless", out.stateless);
  f.Required("cpu_s_per_sample", out.cpu_s_per_sample);
  f.Optional("wall_s_per_sample", out.wall_s_per_sample);
  f.Required("bytes_in_per_sample", out.bytes_in_per_sample);
  f.Required("bytes_out_per_sample", out.bytes_out_per_sample);
  f.Optional("peak_bytes_out", out.peak_bytes_out);
  f.Optional("cpu_share", out.cpu_share);
  return f.status();
}

Status Convert(const JsonNode& n, CutPoint& out) {
  Fields f(n);
  f.Required("after_stage", out.after_stage);
  f.Optional("allowed", out.allowed);
  f.Required("bytes_per_sample", out.bytes_per_sample);
  f.Required("remote_cpu_s_per_sample", out.remote_cpu_s_per_sample);
  f.Required("local_cpu_s_per_sample", out.local_cpu_s_per_sample);
  f.Optional("reason", out.reason);
  f.Optional("pipeline_cut", out.pipeline_cut);
  f.Optional("device_tail", out.device_tail);
  return f.status();
}

Status Convert(const JsonNode& n, PipelineRun& out) {
  Fields f(n);
  f.Required("threads", out.threads);
  f.Optional("cpus", out.cpus);
  f.Required("samples", out.samples);
  f.Required("seconds", out.seconds);
  f.Optional("cpu_s", out.cpu_s);
  f.Required("samples_per_s", out.samples_per_s);
  f.Optional("samples_per_cpu_s", out.samples_per_cpu_s);
  return f.status();
}

Status Convert(const JsonNode& n, DeliveryCost& out) {
  Fields f(n);
  f.Optional("frame_cpu_s", out.frame_cpu_s);
  f.Check(out.frame_cpu_s >= 0 && std::isfinite(out.frame_cpu_s), "frame_cpu_s",
          "seconds, 0 or more");
  f.Optional("tcp_cpu_s_per_byte", out.tcp_cpu_s_per_byte);
  f.Check(out.tcp_cpu_s_per_byte >= 0 && std::isfinite(out.tcp_cpu_s_per_byte),
          "tcp_cpu_s_per_byte", "seconds per byte, 0 or more");
  return f.status();
}

Status Convert(const JsonNode& n, PipelineProfile& out) {
  Fields f(n);
  f.Required("path", out.path);
  f.Optional("sha256", out.sha256);
  f.Required("batch_size", out.batch_size);
  f.Optional("warmup_samples", out.warmup_samples);
  f.Required("samples", out.samples);
  f.Optional("runs", out.runs);
  f.Required("cpu_s_per_sample", out.cpu_s_per_sample);
  f.Optional("stage_cpu_s_per_sample", out.stage_cpu_s_per_sample);
  f.Optional("reader_cpu_s_per_sample", out.reader_cpu_s_per_sample);
  f.Optional("batcher_cpu_s_per_sample", out.batcher_cpu_s_per_sample);
  f.Optional("queue_cpu_s_per_sample", out.queue_cpu_s_per_sample);
  f.Required("samples_per_s_per_core", out.samples_per_s_per_core);
  f.Optional("peak_rss_bytes", out.peak_rss_bytes);
  f.Optional("instrumentation_overhead", out.instrumentation_overhead);
  f.Optional("delivery", out.delivery);
  f.Required("stages", out.stages);
  f.Optional("cuts", out.cuts);
  return f.status();
}

Status Convert(const JsonNode& n, StepProfile& out) {
  Fields f(n);
  f.Required("step", out.step);
  f.Optional("pid", out.pid);
  f.Required("wait_s", out.wait_s);
  f.Required("compute_s", out.compute_s);
  f.Optional("samples", out.samples);
  f.Optional("gpu_busy_s", out.gpu_busy_s);
  f.Optional("gpu_idle_s", out.gpu_idle_s);
  f.Optional("gpu_stall_s", out.gpu_stall_s);
  return f.status();
}

Status Convert(const JsonNode& n, GpuProfile& out) {
  Fields f(n);
  f.Required("available", out.available);
  f.Optional("reason", out.reason);
  f.Optional("records", out.records);
  f.Optional("dropped_records", out.dropped_records);
  f.Optional("devices", out.devices);
  f.Optional("busy_s", out.busy_s);
  f.Optional("idle_s", out.idle_s);
  f.Optional("stall_s", out.stall_s);
  f.Optional("busy_fraction", out.busy_fraction);
  f.Optional("stall_fraction", out.stall_fraction);
  f.Optional("instrumentation_overhead", out.instrumentation_overhead);
  return f.status();
}

Status Convert(const JsonNode& n, DataLoaderProfile& out) {
  Fields f(n);
  f.Required("workers", out.workers);
  f.Optional("cpu_s", out.cpu_s);
  f.Optional("samples", out.samples);
  f.Required("cpu_s_per_sample", out.cpu_s_per_sample);
  f.Optional("bytes_per_sample", out.bytes_per_sample);
  f.Check(out.workers >= 1, "workers", "a worker count of at least 1");
  f.Check(out.cpu_s_per_sample > 0 && std::isfinite(out.cpu_s_per_sample), "cpu_s_per_sample",
          "a positive number of seconds");
  f.Check(out.bytes_per_sample >= 0 && std::isfinite(out.bytes_per_sample), "bytes_per_sample",
          "a number of bytes, 0 or more");
  return f.status();
}

Status Convert(const JsonNode& n, NativeProfile& out) {
  Fields f(n);
  f.Required("samples", out.samples);
  f.Required("cpu_s_per_sample", out.cpu_s_per_sample);
  f.Optional("bytes_per_sample", out.bytes_per_sample);
  f.Optional("cut_cpu_s_per_sample", out.cut_cpu_s_per_sample);
  f.Optional("cut_bytes_per_sample", out.cut_bytes_per_sample);
  f.Check(out.samples >= 1, "samples", "a sample count of at least 1");
  for (auto [name, v] : {std::pair{"cpu_s_per_sample", out.cpu_s_per_sample},
                         std::pair{"cut_cpu_s_per_sample", out.cut_cpu_s_per_sample}}) {
    f.Check(v >= 0 && std::isfinite(v), name, "a number of seconds, 0 or more");
  }
  f.Check(out.cpu_s_per_sample > 0, "cpu_s_per_sample", "a positive number of seconds");
  for (auto [name, v] : {std::pair{"bytes_per_sample", out.bytes_per_sample},
                         std::pair{"cut_bytes_per_sample", out.cut_bytes_per_sample}}) {
    f.Check(v >= 0 && std::isfinite(v), name, "a number of bytes, 0 or more");
  }
  return f.status();
}

Status Convert(const JsonNode& n, TrainerProfile& out) {
  Fields f(n);
  f.Required("command", out.command);
  f.Optional("source", out.source);
  f.Optional("workers", out.workers);
  f.Optional("exit_code", out.exit_code);
  f.Optional("exit", out.exit);
  f.Optional("stopped_by_profile", out.stopped_by_profile);
  f.Optional("steps_recorded", out.steps_recorded);
  f.Optional("warmup_steps", out.warmup_steps);
  f.Required("steps", out.steps);
  f.Required("seconds", out.seconds);
  f.Required("samples_per_s", out.samples_per_s);
  f.Required("batch_size", out.batch_size);
  f.Required("step_s_median", out.step_s_median);
  f.Required("wait_s_median", out.wait_s_median);
  f.Optional("wait_s_mean", out.wait_s_mean);
  f.Required("compute_s_median", out.compute_s_median);
  f.Required("demand_samples_per_s", out.demand_samples_per_s);
  f.Required("stall_fraction", out.stall_fraction);
  f.Optional("instrumentation_s_per_step", out.instrumentation_s_per_step);
  f.Optional("instrumentation_overhead", out.instrumentation_overhead);
  f.Optional("gpu", out.gpu);
  f.Optional("dataloader", out.dataloader);
  f.Optional("native", out.native);
  f.Optional("not_native", out.not_native);
  f.Optional("step_list", out.step_list);
  return f.status();
}

namespace {

Status CheckVerdict(const JsonNode& root, const std::string& verdict) {
  if (verdict == "input-bound" || verdict == "compute-bound" || verdict == "unknown") {
    return Status::Ok();
  }
  GM_ASSIGN_OR_RETURN(JsonNode node, root.Get("verdict"));
  return node.Expected("\"input-bound\", \"compute-bound\" or \"unknown\"");
}

}  // namespace

nlohmann::json ProfileToJson(const Profile& p) {
  json j = {{"schema", kProfileSchema},
            {"version", kProfileVersion},
            {"created_utc", p.created_utc},
            {"host", p.host},
            {"cores", p.cores},
            {"goldminer_version", p.goldminer_version},
            {"verdict", p.verdict},
            {"input_bound_fraction", p.input_bound_fraction}};
  if (p.pipeline) j["pipeline"] = ToJson(*p.pipeline);
  if (p.trainer) j["trainer"] = ToJson(*p.trainer);
  return j;
}

Result<Profile> ProfileFromJson(const nlohmann::json& j, const std::string& origin) {
  JsonNode root(j, origin);
  if (!root.is_object()) {
    return root.Expected("a profile object ({\"schema\": \"goldminer.profile\", ...})");
  }
  GM_RETURN_IF_ERROR(CheckSchemaAndVersion(root, kProfileSchema, kProfileVersion,
                                           "a profile.json written by `goldminer profile`",
                                           "re-run `goldminer profile` with this goldminer"));
  Profile p;
  p.version = kProfileVersion;
  Fields f(root);
  f.Required("created_utc", p.created_utc);
  f.Required("host", p.host);
  f.Required("cores", p.cores);
  f.Optional("goldminer_version", p.goldminer_version);
  f.Optional("pipeline", p.pipeline);
  f.Optional("trainer", p.trainer);
  f.Required("verdict", p.verdict);
  f.Required("input_bound_fraction", p.input_bound_fraction);
  GM_RETURN_IF_ERROR(f.status());
  GM_RETURN_IF_ERROR(CheckVerdict(root, p.verdict));
  return p;
}

Result<Profile> LoadProfile(const std::string& path) {
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(path));
  return ProfileFromJson(doc, path);
}

}  // namespace gm
