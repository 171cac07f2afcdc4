// `goldminer coordinator --config FILE`: the coordinator of a `goldminer run`, in a
// process of its own (launcher/coordinator_process.h). Run starts it, talks to it
// on its stdin and stdout, and starts it again from its journal when it dies;
// it is not meant to be started by hand, and is left out of --help.
#include <unistd.h>

#include "cmd/cli.h"
#include "core/file_util.h"
#include "core/json.h"
#include "dataplane/auth.h"
#include "launcher/coordinator_process.h"

namespace gm::cli {

Verb CoordinatorVerb() {
  return Verb{"coordinator", "",  // no summary: hidden (goldminer run's own)
              [](CLI::App& sub) {
                sub.group("");  // not listed in goldminer --help
                auto config_path = std::make_shared<std::string>();
                sub.add_option("--config", *config_path,
                               "The coordinator's config, as goldminer run writes it (JSON, with "
                               "secret_file: the run's secret, a 0600 file)")
                    ->required();
                return std::function<Result<int>()>([config_path]() -> Result<int> {
                  GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(*config_path));
                  GM_ASSIGN_OR_RETURN(CoordinatorConfig config, ConfigFromJson(doc));
                  const std::string key = doc.value("secret_file", "");
                  GM_ASSIGN_OR_RETURN(config.secret, ReadSecretFile(key));
                  return ServeCoordinatorProcess(config, STDIN_FILENO, STDOUT_FILENO);
                });
              }};
}

}  // namespace gm::cli
