#include "reports/profile_text.h"

#include <cstdarg>
#include <cstdio>

namespace gm::reports {
namespace {

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

std::string Ms(double s) { return Format("%.3f", s * 1e3); }
std::string Kb(double b) { return Format("%.1f", b / 1024.0); }
std::string Pct(double f) { return Format("%.1f%%", f * 100.0); }

std::string PipelineText(const PipelineProfile& p) {
  std::string out = "pipeline " + p.path + ": " + std::to_string(p.samples) +
                    " samples per run after " + std::to_string(p.warmup_samples) +
                    " warm-up, batch " + std::to_string(p.batch_size) + "\n";
  out += Format("  %-3s %-34s %10s %10s %9s %9s %7s %s\n", "#", "stage", "cpu ms", "wall ms",
                "KB in", "KB out", "share", "stateless");
  for (const StageProfile& s : p.stages) {
    out += Format("  %-3d %-34s %10s %10s %9s %9s %7s %s\n", s.index, s.name.c_str(),
                  Ms(s.cpu_s_per_sample).c_str(), Ms(s.wall_s_per_sample).c_str(),
                  Kb(s.bytes_in_per_sample).c_str(), Kb(s.bytes_out_per_sample).c_str(),
                  Pct(s.cpu_share).c_str(), s.stateless ? "yes" : "no");
  }
  out += Format("  %-38s %10s   (stages %s + hand-off %s + reader %s + batcher %s ms)\n",
                "process CPU per sample", Ms(p.cpu_s_per_sample).c_str(),
                Ms(p.stage_cpu_s_per_sample).c_str(), Ms(p.queue_cpu_s_per_sample).c_str(),
                Ms(p.reader_cpu_s_per_sample).c_str(), Ms(p.batcher_cpu_s_per_sample).c_str());
  for (const PipelineRun& r : p.runs) {
    const std::string on = r.cpus > 0 ? Format(" on %d CPU%s", r.cpus, r.cpus == 1 ? "" : "s") : "";
    out += Format("  %d thread%s%s: %.0f samples/s, %.0f samples per CPU-second\n", r.threads,
                  r.threads == 1 ? "" : "s", on.c_str(), r.samples_per_s, r.samples_per_cpu_s);
  }
  if (p.delivery.frame_cpu_s > 0 || p.delivery.tcp_cpu_s_per_byte > 0) {
    out += Format("  delivery: %.1f us of a worker CPU per batch frame, %.3f ms per MB over TCP\n",
                  p.delivery.frame_cpu_s * 1e6, p.delivery.tcp_cpu_s_per_byte * 1048576 * 1e3);
  }
  for (const CutPoint& c : p.cuts) {
    if (!c.allowed) continue;
    const std::string where = c.after_stage < 0 ? "before stage 0 (raw records)"
                                                : "after stage " + std::to_string(c.after_stage);
    out += Format("  cut %-30s %9s KB/sample on the wire, worker CPU %s ms, trainer CPU %s ms%s\n",
                  where.c_str(), Kb(c.bytes_per_sample).c_str(),
                  Ms(c.remote_cpu_s_per_sample).c_str(), Ms(c.local_cpu_s_per_sample).c_str(),
                  c.pipeline_cut  ? " (the pipeline's cut: the rest on the device)"
                  : c.device_tail ? " (the rest could run on the device)"
                                  : "");
  }
  // A tail the device could run, while the file runs it on the workers: what
  // marking it would save on the wire (the last cut is what crosses it today).
  bool file_cut = false;
  for (const CutPoint& c : p.cuts) file_cut = file_cut || c.pipeline_cut;
  for (const CutPoint& c : p.cuts) {
    if (file_cut || !c.allowed || !c.device_tail || p.cuts.empty()) continue;
    const double now = p.cuts.back().bytes_per_sample;
    if (c.bytes_per_sample >= now) continue;
    out += Format(
        "  hint: the stages after stage %d could run on the trainer's GPU: mark them "
        "\"on\": \"device\" and read with goldminer.torch.DeviceLoader to send %s "
        "instead of %s KB per sample (goldminer-pipeline(5), DEVICE STAGES)\n",
        c.after_stage, Kb(c.bytes_per_sample).c_str(), Kb(now).c_str());
    break;
  }
  out += "  peak memory " + Format("%.1f MB", static_cast<double>(p.peak_rss_bytes) / 1e6) +
         "; stage timing overhead " + Pct(p.instrumentation_overhead) +
         " (timed vs untimed runs, median)\n";
  return out;
}

std::string GpuText(const GpuProfile& g) {
  if (!g.available) return "  GPU: not measured: " + g.reason + "; stall is data wait alone\n";
  std::string out = Format(
      "  GPU: busy %s, idle %s, idle while waiting for data %s (%llu records, %llu dropped, "
      "%d device%s)\n",
      Pct(g.busy_fraction).c_str(), Pct(1.0 - g.busy_fraction).c_str(),
      Pct(g.stall_fraction).c_str(), static_cast<unsigned long long>(g.records),
      static_cast<unsigned long long>(g.dropped_records), g.devices, g.devices == 1 ? "" : "s");
  if (g.instrumentation_overhead) {
    out += "  CUPTI overhead " + Pct(*g.instrumentation_overhead) + " (run with vs without)\n";
  }
  return out;
}

std::string TrainerText(const TrainerProfile& t) {
  std::string cmd;
  for (const std::string& a : t.command) cmd += (cmd.empty() ? "" : " ") + a;
  std::string out =
      "trainer " + cmd + " (" +
      (t.source == "torch" ? std::string("its own DataLoader")
                           : "fed by " + std::to_string(t.workers) + " data workers") +
      "): " + t.exit + "\n";
  out += Format("  steps: %llu measured after %llu warm-up (%llu batch requests), batch %.0f\n",
                static_cast<unsigned long long>(t.steps),
                static_cast<unsigned long long>(t.warmup_steps),
                static_cast<unsigned long long>(t.steps_recorded), t.batch_size);
  if (t.steps == 0) return out;
  out += Format("  delivered %.1f samples/s; demand %.1f samples/s (if data were never late)\n",
                t.samples_per_s, t.demand_samples_per_s);
  out += "  per step (median): " + Ms(t.step_s_median) + " ms, of which data wait " +
         Ms(t.wait_s_median) + " ms (mean " + Ms(t.wait_s_mean) + " ms), compute " +
         Ms(t.compute_s_median) + " ms\n";
  out += "  data wait: " + Pct(t.stall_fraction) + " of step time; step log overhead " +
         Pct(t.instrumentation_overhead) + "\n";
  if (t.dataloader) {
    const DataLoaderProfile& d = *t.dataloader;
    out += Format(
        "  DataLoader workers: %d process(es), %s ms CPU per sample (%.2f CPU-s over %llu "
        "samples), %.1f kB per sample in its batches%s\n",
        d.workers, Ms(d.cpu_s_per_sample).c_str(), d.cpu_s,
        static_cast<unsigned long long>(d.samples), d.bytes_per_sample / 1e3,
        t.native ? "" : ": what `goldminer plan` sizes data workers by");
  }
  if (t.native) {
    const NativeProfile& n = *t.native;
    const std::string against =
        t.dataloader
            ? Format(" (%.2fx its workers')", t.dataloader->cpu_s_per_sample / n.cpu_s_per_sample)
            : std::string();
    out += Format(
        "  native engine (--offload native): %s ms CPU per sample over %llu samples%s, %.1f kB "
        "per sample; to the uint8 cut %s ms, %.1f kB: what `goldminer plan` sizes data workers "
        "by\n",
        Ms(n.cpu_s_per_sample).c_str(), static_cast<unsigned long long>(n.samples), against.c_str(),
        n.bytes_per_sample / 1e3, Ms(n.cut_cpu_s_per_sample).c_str(), n.cut_bytes_per_sample / 1e3);
  }
  for (const std::string& why : t.not_native) out += "  not native: " + why + "\n";
  out += GpuText(t.gpu);
  return out;
}

}  // namespace

std::string ProfileText(const Profile& p) {
  std::string out;
  if (p.pipeline) out += PipelineText(*p.pipeline);
  if (p.trainer) out += TrainerText(*p.trainer);
  if (p.verdict == "unknown") {
    out += "verdict: unknown (no trainer measured; add `-- TRAINER CMD` to measure its demand)\n";
  } else {
    out += "verdict: " + p.verdict + ": " + Pct(p.input_bound_fraction) + " of step time " +
           (p.trainer && p.trainer->gpu.available ? "the GPU idled waiting for data"
                                                  : "was spent waiting for data") +
           "\n";
  }
  return out;
}

}  // namespace gm::reports
