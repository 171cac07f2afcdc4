#include "cmd/cli.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "core/log.h"
#include "core/os/memory.h"

namespace gm::cli {

std::string JsonText(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Status CheckWritable(const std::string& path, const char* flag) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK) != 0) {
    return Status::IoError(path + " (" + flag + "): cannot write in " + dir.string() + ": " +
                           std::strerror(errno) + "; create the directory or give another path");
  }
  return Status::Ok();
}

const std::vector<Verb>& Verbs() {
  static const std::vector<Verb> verbs = {ProfileVerb(), PlanVerb(),       RunVerb(),
                                          ReportVerb(),  WorkerVerb(),     SimulateVerb(),
                                          PoolVerb(),    CoordinatorVerb()};
  return verbs;
}

int Main(int argc, char** argv) {
  TuneAllocatorForTensors();
  RaiseDescriptorLimit();
  CLI::App app{
      "goldminer: elastic data workers for GPU training jobs.\n"
      "  profile -> plan -> run -> report; `goldminer VERB --help` for each verb.",
      "goldminer"};
  app.set_version_flag("--version", std::string("goldminer ") + GOLDMINER_VERSION);
  app.require_subcommand(1);
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Log debug messages");
  app.add_flag("-q,--quiet", quiet, "Log errors only");

  std::function<Result<int>()> chosen;
  for (const Verb& verb : Verbs()) {
    CLI::App* sub = app.add_subcommand(verb.name, verb.summary);
    sub->fallthrough();  // -v and -q after the verb too: goldminer run -v ...
    auto run = verb.setup(*sub);
    sub->callback([&chosen, run] { chosen = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Prints help or the version (exit 0), or the usage error with a hint (exit 2).
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  SetLogLevel(verbose ? LogLevel::kDebug : quiet ? LogLevel::kError : LogLevel::kInfo);
  if (!chosen) return kExitUsage;
  Result<int> rc = chosen();
  if (!rc.ok()) {
    LogError(rc.status().message());
    return rc.status().code() == Code::kUnimplemented ? kExitUsage : kExitFailure;
  }
  return *rc;
}

}  // namespace gm::cli
