// The `exec` stage: user pre-processing code run in long-lived child processes.
//
//   {"op": "exec", "cmd": ["/usr/bin/python3", "-m", "goldminer.stage", "mymodule:myfn"],
//    "processes": 4, "env": {"K": "V"}, "timeout_s": 60}
//
// The op keeps a pool of at most `processes` children (default: OpEnv::threads),
// started lazily. For each sample Apply() takes a free child (waiting for one
// when all are busy), writes one request frame, reads one response frame (see
// worker/sample_frame.h) and returns the child to the pool. An error frame fails
// that sample only (Corrupt, with the child's message). A child that dies,
// stalls past `timeout_s` or breaks the protocol fails the sample with an error
// naming the command and how the child ended; it is killed and the next sample
// gets a fresh child. Children inherit our stderr and environment, plus `env`,
// with PYTHONPATH prefixed by PythonPackageDir() and the pipeline's directory.
//
// The CPU the child spent on a sample (from /proc/<pid>/stat, 10 ms ticks) is
// added to Sample::extra_cpu_s. The returned sample keeps `normalized` only when
// its tensor is still float32.
//
// Thread-safe: Apply() may be called from many threads; the pool is locked.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "worker/op.h"

namespace gm {

struct ExecOptions {
  std::vector<std::string> cmd;            // argv; cmd[0] is searched in PATH
  int processes = 1;                       // pool size, >= 1
  std::map<std::string, std::string> env;  // set in the children's environment
  double timeout_s = 60;                   // for one exchange (request + response)
  std::string base_dir;                    // added to PYTHONPATH after the package dir
};

// Builds an exec op from options (no child is started yet).
std::unique_ptr<Op> MakeExecOp(ExecOptions options);

// Parses an "exec" stage of pipeline.json; errors name the file and JSON path.
Result<ExecOptions> ParseExecOptions(const JsonNode& stage, const OpEnv& env);

}  // namespace gm
