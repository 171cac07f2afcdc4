#include "worker/exec_op.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "core/clock.h"
#include "core/os/paths.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "worker/sample_frame.h"
#include "worker/subprocess.h"

extern char** environ;

namespace gm {
namespace {

// How long a child that closed its output may take to exit before it is killed,
// so the error can say how it ended (its exit status) rather than "killed".
constexpr double kExitGraceSeconds = 2.0;

// At most `max` children; idle ones wait in a stack (the warmest is reused first).
class ChildPool {
 public:
  explicit ChildPool(int max) : max_(max) {}

  // An idle child, or a non-running Subprocess when the caller may start a new
  // one (its slot is then reserved). Blocks while `max` children are busy.
  Subprocess Acquire() {
    MutexLock lock(mu_);
    lock.Wait(cv_, [&]() REQUIRES(mu_) { return !idle_.empty() || live_ < max_; });
    if (!idle_.empty()) {
      Subprocess child = std::move(idle_.back());
      idle_.pop_back();
      return child;
    }
    ++live_;
    return Subprocess();
  }

  // Returns a healthy child for the next sample.
  void Release(Subprocess child) {
    {
      MutexLock lock(mu_);
      idle_.push_back(std::move(child));
    }
    cv_.notify_one();
  }

  // Frees the slot of a child that died, was killed or never started.
  void Discard() {
    {
      MutexLock lock(mu_);
      --live_;
    }
    cv_.notify_one();
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  std::vector<Subprocess> idle_;
  int live_ = 0;
  const int max_;
};

std::string JoinCommand(const std::vector<std::string>& cmd) {
  std::string out;
  for (const auto& a : cmd) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Our environment plus `extra`, with PYTHONPATH led by the goldminer package dir
// and the pipeline's directory (so `-m goldminer.stage mymodule:fn` finds both).
std::vector<std::string> ChildEnvironment(const ExecOptions& o) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string_view::npos) vars[std::string(kv.substr(0, eq))] = kv.substr(eq + 1);
  }
  // User code gets no key to the run: a stage is not a role of the data plane.
  vars.erase(std::string(kSecretEnv));
  vars.erase(std::string(kSecretFileEnv));
  for (const auto& [k, v] : o.env) vars[k] = v;
  std::string path = PythonPackageDir();
  if (!o.base_dir.empty()) path += ":" + o.base_dir;
  if (!vars["PYTHONPATH"].empty()) path += ":" + vars["PYTHONPATH"];
  vars["PYTHONPATH"] = path;
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

class ExecOp : public Op {
 public:
  explicit ExecOp(ExecOptions o)
      : options_(std::move(o)),
        env_(ChildEnvironment(options_)),
        label_("exec stage [" + JoinCommand(options_.cmd) + "]"),
        pool_(std::make_unique<ChildPool>(options_.processes)) {}

  std::string name() const override { return "exec"; }

  Status Apply(Sample& sample, const RunContext& run) const override {
    // The sample's own seed for this stage: Python stages draw from it (seeded by
    // goldminer.stage), so a sample re-made anywhere is bit-identical.
    const uint64_t seed = MakeRng(sample, run).Next();
    GM_ASSIGN_OR_RETURN(std::string request, EncodeSampleFrame(sample, seed));
    Subprocess child = pool_->Acquire();
    if (!child.running()) {
      auto started = Subprocess::Start(options_.cmd, env_);
      if (!started.ok()) {
        pool_->Discard();
        return started.status().WithContext(label_);
      }
      child = std::move(started).value();
    }
    bool healthy = false;
    Status status = Exchange(child, request, sample, healthy);
    if (healthy) {
      pool_->Release(std::move(child));
      return status;
    }
    pid_t pid = child.pid();
    int ended = 0;
    std::string how = child.Kill(status.code() == Code::kIoError ? kExitGraceSeconds : 0, &ended);
    pool_->Discard();
    // Killed by SIGKILL that we did not send (Kill reports its own as such only
    // after the grace): the kernel's out-of-memory killer, most likely, or an
    // admin; not the sample's fault, so the split is made again, not skipped.
    const bool oom = ended == Subprocess::kKilledByOthers;
    return Status(oom ? Code::kResourceExhausted : status.code(),
                  label_ + ": " + status.message() + "; child process " + std::to_string(pid) +
                      " " + how +
                      (oom ? " by something other than goldminer (out of memory?)" : "") +
                      " (a fresh process will serve the next sample)");
  }

 private:
  // One request/response. `healthy` says whether the child may serve again: true
  // after a well-formed response (a sample or an error frame).
  Status Exchange(Subprocess& child, const std::string& request, Sample& sample,
                  bool& healthy) const {
    Result<double> cpu_before = child.CpuSeconds();
    double deadline = MonotonicSeconds() + options_.timeout_s;
    GM_RETURN_IF_ERROR(child.WriteAll(request, deadline));
    std::string header, body;
    GM_RETURN_IF_ERROR(child.ReadExact(kFrameHeaderBytes, header, deadline));
    GM_ASSIGN_OR_RETURN(FrameHeader h, DecodeFrameHeader(header));
    GM_RETURN_IF_ERROR(child.ReadExact(h.body_bytes, body, deadline));
    Result<double> cpu_after = child.CpuSeconds();
    double cpu = (cpu_before.ok() && cpu_after.ok()) ? std::max(0.0, *cpu_after - *cpu_before) : 0;
    if (h.kind == FrameKind::kSeededSample) {
      // A seeded sample sent back (a program that echoes its input, like cat):
      // its seed is dropped.
      if (body.size() < sizeof(uint64_t)) return Status::Corrupt("response: no room for the seed");
      body.erase(0, sizeof(uint64_t));
    }
    if (h.kind == FrameKind::kError || h.kind == FrameKind::kResourceError) {
      healthy = true;
      sample.extra_cpu_s += cpu;
      // A resource error is not the sample's: never skipped, the split is made again.
      return h.kind == FrameKind::kError
                 ? Status::Corrupt(label_ + ": " + body)
                 : Status::ResourceExhausted(label_ + ": " + body +
                                             " (the child is short of a resource)");
    }
    Sample out;
    GM_RETURN_IF_ERROR(DecodeSampleBody(body, out).WithContext("response"));
    healthy = true;
    out.normalized =
        sample.normalized && !out.tensor.empty() && out.tensor.dtype == DType::kFloat32;
    out.extra_cpu_s = sample.extra_cpu_s + cpu;
    sample = std::move(out);
    return Status::Ok();
  }

  const ExecOptions options_;
  const std::vector<std::string> env_;
  const std::string label_;
  std::unique_ptr<ChildPool> pool_;
};

Result<std::map<std::string, std::string>> ParseEnv(const JsonNode& stage) {
  std::map<std::string, std::string> out;
  if (!stage.has("env")) return out;
  GM_ASSIGN_OR_RETURN(JsonNode env, stage.Get("env"));
  if (!env.is_object())
    return env.Expected("an object of strings such as {\"OMP_NUM_THREADS\": \"1\"}");
  for (const auto& [key, value] : env.json().items()) {
    GM_ASSIGN_OR_RETURN(JsonNode v, env.Get(key));
    GM_ASSIGN_OR_RETURN(out[key], v.AsString());
    if (key.empty() || key.find('=') != std::string::npos) return v.Error("invalid variable name");
  }
  return out;
}

}  // namespace

std::unique_ptr<Op> MakeExecOp(ExecOptions options) {
  options.processes = std::max(1, options.processes);
  return std::make_unique<ExecOp>(std::move(options));
}

Result<ExecOptions> ParseExecOptions(const JsonNode& stage, const OpEnv& env) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "cmd", "processes", "env", "timeout_s"}));
  ExecOptions o;
  GM_ASSIGN_OR_RETURN(JsonNode cmd, stage.Get("cmd"));
  GM_ASSIGN_OR_RETURN(o.cmd, cmd.AsStrings());
  if (o.cmd.empty() || o.cmd[0].empty()) {
    return cmd.Expected(
        "a non-empty array of strings such as [\"/usr/bin/python3\", \"-m\", "
        "\"goldminer.stage\", \"mymodule:myfn\"]");
  }
  GM_ASSIGN_OR_RETURN(int64_t processes,
                      stage.IntOr("processes", std::clamp(env.threads, 1, 1024)));
  if (processes < 1 || processes > 1024) {
    return (*stage.Get("processes")).Expected("an integer from 1 to 1024");
  }
  o.processes = static_cast<int>(processes);
  GM_ASSIGN_OR_RETURN(o.env, ParseEnv(stage));
  GM_ASSIGN_OR_RETURN(o.timeout_s, stage.NumberOr("timeout_s", 60));
  if (!(o.timeout_s > 0)) return (*stage.Get("timeout_s")).Expected("a positive number of seconds");
  o.base_dir = env.base_dir;
  return o;
}

void RegisterExecOps(OpRegistry& registry) {
  registry.Add("exec", [](const JsonNode& stage, const OpEnv& env) -> Result<std::unique_ptr<Op>> {
    GM_ASSIGN_OR_RETURN(ExecOptions o, ParseExecOptions(stage, env));
    return MakeExecOp(std::move(o));
  });
}

}  // namespace gm
