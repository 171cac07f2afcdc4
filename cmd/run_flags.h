// The run-shape flags `goldminer run` and `goldminer profile` share, added in one
// place onto a RunSpec (core/run_spec.h), with the RunSpec's limits.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/run_spec.h"

namespace gm::cli {

// What differs between the verbs: the help of --pipeline and --epochs.
struct RunSpecHelp {
  std::string pipeline = "pipeline.json the workers run";
  std::string epochs =
      "Epochs the run serves at most (0: as many as the trainer asks for, e.g. "
      "Loader(epochs=N))";
};

// Adds --pipeline, --workers, --threads-per-worker, --epochs, --world-size,
// --samples-per-split and the trainer command (after --), writing into `spec`
// (which must outlive the parse); the spec's current values are the defaults shown.
void AddRunSpecFlags(CLI::App& sub, RunSpec& spec, const RunSpecHelp& help = {});

}  // namespace gm::cli
