// The goldminer command line: one table of verbs, each with its CLI11 subcommand
// and a run function. Main() parses, runs the chosen verb and turns a Status into
// a message on stderr and an exit code. Not thread-safe (called once from main).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace gm::cli {

// Exit codes shared by every verb.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the work failed (bad input, I/O, ...)
inline constexpr int kExitUsage = 2;    // bad flags, or a verb not built yet

struct Verb {
  std::string name;
  std::string summary;
  // Adds the verb's flags to `sub` and returns the function that runs it; the
  // function returns the process exit code (or a Status, mapped by Main()).
  std::function<std::function<Result<int>()>(CLI::App& sub)> setup;
};

// JSON text with a trailing newline (indent -1: compact); invalid UTF-8 (a path or
// argument in another encoding) is replaced rather than thrown on.
std::string JsonText(const nlohmann::json& j, int indent);

// Fails before any work is done when an output cannot be written: the directory of
// `path` must exist and be writable. The message names the path and the flag.
Status CheckWritable(const std::string& path, const char* flag);

// The table of verbs, in help order.
const std::vector<Verb>& Verbs();

// Verb definitions (one file each).
Verb ProfileVerb();
Verb PlanVerb();
Verb RunVerb();
Verb ReportVerb();
Verb WorkerVerb();
Verb SimulateVerb();
Verb PoolVerb();
Verb CoordinatorVerb();  // goldminer run's own, hidden

int Main(int argc, char** argv);

}  // namespace gm::cli
