// `goldminer pool`: the service that divides a cluster's spare CPUs between the
// runs that report to it (launcher/pool_server.h), and `--status` to see its
// division. See man/goldminer-pool.1.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cmd/cli.h"
#include "cmd/stop_signals.h"
#include "core/host.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/text_format.h"
#include "dataplane/auth.h"
#include "dataplane/socket.h"
#include "launcher/pool_client.h"
#include "launcher/pool_server.h"
#include "launcher/slurm_job.h"
#include "launcher/slurm_query.h"
#include "reports/pool_text.h"

namespace gm::cli {
namespace {

struct PoolFlags {
  std::string listen = "127.0.0.1:0";
  std::string key_file;
  int cpus = 0;
  std::string partition;  // --partition: the budget is its idle CPUs, as sinfo says
  double min_gain = 0.02;
  double min_lifetime_s = 60;
  double report_timeout_s = 60;
  std::string check_gpus;  // --check-gpus: "slurm" or "off" ("": slurm with --partition)
  size_t max_runs_per_host = kMaxPoolRunsPerHost;
  std::string status;  // HOST:PORT of a pool to ask
  bool json = false;
};

// The pool key: the file's, or a new one written to it (0600) when it is missing.
Result<std::string> PoolKey(const PoolFlags& f, bool create) {
  if (f.key_file.empty()) {
    return Status::InvalidArgument(
        "pool needs --key-file FILE: the pool key the runs prove (a file of mode 0600; "
        "`goldminer pool` creates it when missing)");
  }
  std::error_code ec;
  if (std::filesystem::exists(f.key_file, ec) || !create) return ReadSecretFile(f.key_file);
  GM_ASSIGN_OR_RETURN(std::string secret, NewSecret());
  GM_RETURN_IF_ERROR(WriteSecretFile(f.key_file, secret));
  LogInfo("pool: created the pool key " + f.key_file +
          " (mode 0600): runs need it (goldminer run --pool ADDR, GOLDMINER_POOL_KEY_FILE)");
  return secret;
}

Result<int> AskStatus(const PoolFlags& f) {
  GM_ASSIGN_OR_RETURN(std::string secret, PoolKey(f, false));
  GM_RETURN_IF_ERROR(ParseHostPort(f.status, "--status").status());
  PoolClient pool(f.status, secret, 10);
  GM_ASSIGN_OR_RETURN(PoolStateMsg state, pool.State());
  std::cout << (f.json ? JsonText(state.Encode(), 2) : reports::PoolStateText(state.Encode()));
  return kExitOk;
}

Result<int> Serve(const PoolFlags& f) {
  GM_ASSIGN_OR_RETURN(auto listen, ParseHostPort(f.listen, "--listen"));
  PoolServerOptions o;
  o.host = listen.host;
  o.port = listen.port;
  GM_ASSIGN_OR_RETURN(o.secret, PoolKey(f, true));
  o.pool.cpus = f.cpus;
  o.pool.division.min_gain = f.min_gain;
  o.pool.division.min_lifetime_s = f.min_lifetime_s;
  o.pool.report_timeout_s = f.report_timeout_s;
  if (!f.partition.empty()) {
    o.idle_cpus = [partition = f.partition] { return AskIdleCpus(partition); };
    o.pending_cpus = [partition = f.partition] { return AskPendingCpus(partition); };
  }
  o.max_runs_per_host = f.max_runs_per_host;
  if (f.check_gpus == "slurm" || (f.check_gpus.empty() && !f.partition.empty())) {
    o.job_gpus = [](const std::string& job) { return AskJobGpus(job); };
  }
  StopOnSignal signals;  // before the server's threads start
  GM_ASSIGN_OR_RETURN(std::unique_ptr<PoolServer> server, PoolServer::Start(o));
  // The address runs dial, on stdout (a script reads it), and in the log.
  const std::string addr = JoinHostPort(o.host, server->port());
  std::cout << addr << std::endl;
  const std::string budget = f.partition.empty()
                                 ? std::to_string(f.cpus) + " CPUs"
                                 : std::to_string(server->State().cpus) +
                                       " CPUs (the idle CPUs of partition " + f.partition +
                                       " and what pool workers hold, asked every 10 s)";
  LogInfo("pool: listening on " + addr + ", dividing " + budget + " (min gain " +
          Fixed(100 * f.min_gain, 0) + "%, min worker lifetime " + Fixed(f.min_lifetime_s, 0) +
          " s, runs silent " + Fixed(f.report_timeout_s, 0) + " s forgotten)");
  int sig = 0;
  while ((sig = signals.TakePending()) == 0) ::usleep(200 * 1000);
  LogInfo("pool: stopping on signal " + std::to_string(sig));
  server->Stop();
  return kExitOk;
}

}  // namespace

Verb PoolVerb() {
  return Verb{"pool",
              "Divide a cluster's spare CPUs between the runs that report to it (or --status: show "
              "the division)",
              [](CLI::App& sub) {
                auto f = std::make_shared<PoolFlags>();
                sub.add_option("--listen", f->listen,
                               "HOST:PORT to listen on (port 0: any; the address is printed)")
                    ->capture_default_str();
                sub.add_option("--key-file", f->key_file,
                               "The pool key (a file of mode 0600, created when missing): runs and "
                               "--status prove it")
                    ->required();
                sub.add_option("--cpus", f->cpus, "The CPUs the pool divides between the runs")
                    ->check(CLI::Range(0, 1 << 24));
                sub.add_option("--partition", f->partition,
                               "Instead of --cpus: divide the idle CPUs of this Slurm partition "
                               "(sinfo, every 10 s) plus those the runs' pool workers hold");
                sub.add_option("--min-gain", f->min_gain,
                               "A new division is applied only when it is worth this fraction more")
                    ->capture_default_str()
                    ->check(CLI::Range(0.0, 1.0));
                sub.add_option("--min-lifetime", f->min_lifetime_s,
                               "Seconds a run's grant is kept at least once it rose")
                    ->capture_default_str()
                    ->check(CLI::Range(0.0, 1e9));
                sub.add_option("--report-timeout", f->report_timeout_s,
                               "Seconds after which a run that stopped reporting is forgotten")
                    ->capture_default_str()
                    ->check(CLI::Range(1.0, 1e9));
                sub.add_option("--check-gpus", f->check_gpus,
                               "slurm: count a run's GPUs as at most what its Slurm job holds "
                               "(squeue; a report naming a job that is not running is refused, "
                               "one naming none counts 1 GPU); off: believe the reports "
                               "(default: slurm with --partition, else off)")
                    ->check(CLI::IsMember({"slurm", "off"}));
                sub.add_option("--max-runs-per-host", f->max_runs_per_host,
                               "Runs first reported from one host that the pool serves at once")
                    ->capture_default_str()
                    ->check(CLI::Range(size_t{1}, kMaxPoolRuns));
                sub.add_option(
                    "--status", f->status,
                    "HOST:PORT of a running pool: print its budget and division, and exit");
                sub.add_flag("--json", f->json, "With --status: print POOL_STATE as JSON");
                return std::function<Result<int>()>([f, &sub]() -> Result<int> {
                  if (!f->status.empty()) return AskStatus(*f);
                  if ((sub.count("--cpus") == 0) == f->partition.empty()) {
                    return Status::InvalidArgument(
                        "pool needs --cpus N (the CPUs it divides) or --partition P (the idle "
                        "CPUs of a Slurm partition), one of them");
                  }
                  return Serve(*f);
                });
              }};
}

}  // namespace gm::cli
