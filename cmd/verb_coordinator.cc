// `goldminer coordinator`: the coordinator of a `goldminer run`, in a process of
// its own (launcher/coordinator_process.h). Run starts it, gives it its config on
// its stdin, talks to it there and on its stdout, and starts it again from its
// journal when it dies; it is not meant to be started by hand, and is left out
// of --help.
#include <unistd.h>

#include "cmd/cli.h"
#include "launcher/coordinator_process.h"

namespace gm::cli {

Verb CoordinatorVerb() {
  return Verb{"coordinator", "",  // no summary: hidden (goldminer run's own)
              [](CLI::App& sub) {
                sub.group("");  // not listed in goldminer --help
                return std::function<Result<int>()>([] {
                  return Result<int>(ServeCoordinatorProcess(STDIN_FILENO, STDOUT_FILENO));
                });
              }};
}

}  // namespace gm::cli
