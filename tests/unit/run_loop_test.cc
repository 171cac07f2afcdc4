// The run loop (launcher/run_loop.h) on a fake launcher, a fake rate source and a
// FakeClock: every autoscaler rule the end-to-end suites used to check in real time
// (input-bound adds, trainer-bound drains, an addition that does not pay sets a
// ceiling that lifts when the workload moves, a removal that costs is undone, the
// settle and hold periods, a drained worker never replaced), with the decisions as
// the run records them. No test waits: the clock moves when the loop waits.
#include "launcher/run_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/os/file_util.h"
#include "core/store/run_store_fake.h"
#include "dataplane/auth.h"
#include "tests/unit/fake_launcher.h"

namespace gm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// How many workers a run's scale events added ("1 -> 3 workers: ..." adds 2).
long Additions(const std::vector<std::string>& scale) {
  long added = 0;
  for (const std::string& e : scale) {
    int from = 0, to = 0;
    if (std::sscanf(e.c_str(), "%d -> %d", &from, &to) == 2 && to > from) added += to - from;
  }
  return added;
}

// The world the loop runs in. Workers are fake processes; together they make
// min(per_worker x workers, pipeline_cap) samples/s, and the trainer takes at most
// trainer_rate, waiting for data the rest of the time. The trainer exits at
// `end_s`; workers take `start_s` to register. Rates may change mid-run (`at`).
class World {
 public:
  double per_worker = 100;                 // samples/s one worker makes
  double pipeline_cap = kInf;              // what all workers together can make (a shared limit)
  double trainer_rate = 1000;              // samples/s the trainer can take
  double start_s = 0;                      // seconds a new worker takes to register
  double end_s = 300;                      // when the trainer exits (0)
  bool elastic_pending = false;            // elastic workers' jobs never start
  std::function<void(World&, double)> at;  // called with the run's time at each sample
  std::function<void(RunLoopOptions&)> tweak;  // changes the loop's options

  FakeClock clock{0};
  FakeLauncher launcher{&clock};
  MemoryRunStore store;

  int Workers() const { return Count(ProcessRole::kWorker, false); }
  int ReadyWorkers() const { return Count(ProcessRole::kWorker, true); }

  // The trainers' totals so far (the loop's rate source), integrated since the
  // last call at the rate the world gives now.
  StepCounter::Totals Trainers() {
    const double now = clock.Now();
    if (at) at(*this, now);
    const double dt = now - last_;
    last_ = now;
    const double make = std::min(per_worker * ReadyWorkers(), pipeline_cap);
    const double rate = std::min(make, trainer_rate);
    samples_ += rate * dt;
    wait_s_ += (1 - rate / trainer_rate) * dt;
    if (now >= end_s) EndTrainers();
    StepCounter::Totals t;
    t.samples = static_cast<uint64_t>(samples_);
    t.wait_ns = static_cast<uint64_t>(wait_s_ * 1e9);
    return t;
  }

  // Ready workers are registered: live, and placed by their tag on node "n".
  CoordinatorSummary Summary() const {
    CoordinatorSummary s;
    s.workers_live = static_cast<size_t>(ReadyWorkers());
    s.workers_producing = s.workers_live;  // a fake worker makes data once it registers
    for (const auto& [pid, r] : launcher.running()) {
      if (r.role != ProcessRole::kWorker || !Ready(pid, r)) continue;
      for (const std::string& e : r.env) {
        if (e.rfind("GOLDMINER_WORKER_TAG=", 0) == 0) {
          s.places[e.substr(e.find('=') + 1)] = {"n", "77." + std::to_string(pid)};
        }
      }
    }
    return s;
  }

  // The worker requests the loop made, in order.
  std::vector<LaunchRequest> WorkerRequests() const {
    std::vector<LaunchRequest> out;
    for (const auto& [pid, r] : launcher.started) {
      if (r.role == ProcessRole::kWorker) out.push_back(r);
    }
    return out;
  }

  // Runs the loop to its end; the scale events it recorded, in order.
  std::vector<std::string> Run(int workers, AutoscalerOptions a) {
    Result<TempDir> dir = TempDir::Make("gm-run-loop-test-");
    EXPECT_TRUE(dir.ok());
    RunLoopOptions o;
    o.spec.workers = workers;
    o.spec.command = {"train"};
    o.run_dir = dir->path();
    o.worker_exe = "goldminer";
    o.sample_interval_s = 1;
    o.autoscale = a;
    if (tweak) tweak(o);
    RunLoopEdges e;
    e.clock = &clock;
    e.launcher = &launcher;
    e.coordinator_address = "127.0.0.1:1";
    e.summary = [this] { return Summary(); };
    e.trainers = [this] { return Trainers(); };
    e.cpu_seconds = [](const std::vector<pid_t>&) { return std::map<pid_t, double>(); };
    if (why_waiting) e.why_waiting = why_waiting;
    e.elastic_job_end = [this](const std::string& step) {
      asked_job_end.push_back(step);
      return std::string("preempted");
    };
    if (pool_grant) {
      e.pool = [this](const PoolReportMsg& r) -> std::optional<PoolGrantMsg> {
        pool_reports.push_back(r);
        const int grant = pool_grant(clock.Now());
        if (grant < 0) return std::nullopt;  // the pool does not answer
        return PoolGrantMsg{grant, 2 * grant, "because " + std::to_string(grant), ""};
      };
    }
    RunRecorder recorder(&store, "r", 1);
    RunRecord record;
    record.id = "r";
    EXPECT_TRUE(recorder.Begin(record).ok());
    RunLoop loop(std::move(o), std::move(e), "r", recorder);
    Result<RunLoopOutcome> out = loop.Execute();
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (out.ok()) {
      EXPECT_EQ(out->exit_code, 0);
      outcome = *out;
    }
    Result<std::vector<EventRecord>> events = store.ListEvents();
    EXPECT_TRUE(events.ok());
    std::vector<std::string> scale;
    if (!events.ok()) return scale;
    for (const EventRecord& ev : *events) {
      if (ev.kind == "scale") scale.push_back(ev.message);
    }
    return scale;
  }

  // The start time of each worker process, in order (replacements included).
  std::vector<double> WorkerStarts() const {
    std::vector<double> out;
    for (size_t i = 0; i < launcher.started.size(); ++i) {
      if (launcher.started[i].second.role == ProcessRole::kWorker) {
        out.push_back(launcher.started_at[i]);
      }
    }
    return out;
  }

  // How each worker's record says it ended.
  std::vector<std::string> WorkerExits() {
    Result<std::vector<WorkerRecord>> workers = store.ListWorkers("r");
    EXPECT_TRUE(workers.ok());
    std::vector<std::string> out;
    if (!workers.ok()) return out;
    for (const WorkerRecord& w : *workers) out.push_back(w.exit.value_or(""));
    return out;
  }

  // Events of `kind`, in order.
  std::vector<std::string> Events(const std::string& kind) {
    std::vector<std::string> out;
    Result<std::vector<EventRecord>> events = store.ListEvents();
    EXPECT_TRUE(events.ok());
    if (!events.ok()) return out;
    for (const EventRecord& ev : *events) {
      if (ev.kind == kind) out.push_back(ev.message);
    }
    return out;
  }

  std::vector<std::string> asked_job_end;        // the steps elastic_job_end was asked about
  std::function<std::string(bool)> why_waiting;  // the loop's edge (empty: none)
  RunLoopOutcome outcome;                        // the last Run's
  std::function<int(double)> pool_grant;         // the pool's grant at a time (-1: no answer)
  std::vector<PoolReportMsg> pool_reports;

 private:
  bool Ready(pid_t pid, const LaunchRequest& r) const {
    if (r.elastic && elastic_pending) return false;
    auto it = std::find_if(launcher.started.begin(), launcher.started.end(),
                           [pid](const auto& s) { return s.first == pid; });
    const double since = launcher.started_at[static_cast<size_t>(it - launcher.started.begin())];
    return clock.Now() - since >= start_s;
  }

  int Count(ProcessRole role, bool ready) const {
    int n = 0;
    for (const auto& [pid, r] : launcher.running()) {
      if (r.role != role) continue;
      if (!ready || Ready(pid, r)) ++n;
    }
    return n;
  }
  void EndTrainers() {
    for (const auto& [pid, r] : std::map<pid_t, LaunchRequest>(launcher.running())) {
      if (r.role == ProcessRole::kTrainer) launcher.End(pid, 0);
    }
  }

  double last_ = 0;
  double samples_ = 0;
  double wait_s_ = 0;
};

AutoscalerOptions Options(int min_workers, int max_workers) {
  AutoscalerOptions a;
  a.min_workers = min_workers;
  a.max_workers = max_workers;
  a.period_s = 5;
  a.hold_periods = 3;
  return a;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

int CountPrefix(const std::vector<std::string>& events, const std::string& prefix) {
  return static_cast<int>(std::count_if(
      events.begin(), events.end(), [&](const std::string& e) { return StartsWith(e, prefix); }));
}

TEST(RunLoopTest, GivenAnInputBoundRunThenWorkersAreAddedUpToTheMostAllowed) {
  World w;  // 100 samples/s a worker, a trainer that takes 1000
  w.end_s = 120;
  const std::vector<std::string> scale = w.Run(1, Options(1, 3));
  ASSERT_EQ(scale.size(), 1u) << ::testing::PrintToString(scale);
  // The trainer's demand (1000) needs 10 workers at 100 each: as many as allowed, at once.
  EXPECT_TRUE(StartsWith(scale[0], "1 -> 3 workers: data wait 90% above 10%")) << scale[0];
  EXPECT_NE(scale[0].find("adding 2 workers (the trainer's demand of "), std::string::npos)
      << scale[0];
  const std::vector<double> starts = w.WorkerStarts();
  ASSERT_EQ(starts.size(), 3u) << "never more than --max-workers";
  EXPECT_EQ(starts[1], starts[2]) << "in one decision";
  EXPECT_EQ(w.launcher.signals.size(), 3u) << "nothing drained: the three stopped at the end";
}

TEST(RunLoopTest, GivenATrainerBoundRunThenAWorkerIsDrainedNotReplacedAndNoneAdded) {
  World w;
  w.trainer_rate = 20;  // one worker makes 100
  w.end_s = 120;
  const std::vector<std::string> scale = w.Run(2, Options(1, 3));
  ASSERT_EQ(scale.size(), 1u) << ::testing::PrintToString(scale);
  EXPECT_TRUE(StartsWith(scale[0], "2 -> 1 workers: data wait 0% below 2%")) << scale[0];
  EXPECT_EQ(w.WorkerStarts().size(), 2u) << "the drained worker is not replaced";
  const std::vector<std::string> exits = w.WorkerExits();
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_TRUE(StartsWith(exits[1], "drained: ")) << "the newest is drained: " << exits[1];
  EXPECT_TRUE(StartsWith(exits[0], "stopped at the end of the run")) << exits[0];
}

TEST(RunLoopTest,
     GivenAnAdditionThatDoesNotPayThenItIsDrainedAndACeilingHoldsUntilTheWorkloadMoves) {
  World w;
  w.pipeline_cap = 100;  // a limit no worker count lifts (a shared disk, say)
  w.end_s = 200;
  double lifted_at = 0;
  w.at = [&lifted_at](World& world, double t) {
    if (t >= 100 && lifted_at == 0) {  // the limit goes, and each worker makes more
      world.pipeline_cap = kInf;
      world.per_worker = 300;
      lifted_at = t;
    }
  };
  const std::vector<std::string> scale = w.Run(1, Options(1, 3));
  ASSERT_GE(scale.size(), 4u) << ::testing::PrintToString(scale);
  EXPECT_TRUE(StartsWith(scale[0], "1 -> 3 workers: data wait 90% above 10%")) << scale[0];
  EXPECT_TRUE(StartsWith(scale[1], "3 -> 2 workers: the 2 workers added did not each pay off"))
      << scale[1];
  EXPECT_TRUE(StartsWith(scale[2], "2 -> 1 workers: the worker added did not pay off")) << scale[2];
  EXPECT_NE(scale[2].find("no more than 1 workers while the rate holds"), std::string::npos);
  // Until the limit goes, the trainer waits 90% and still nothing is added.
  const std::vector<double> starts = w.WorkerStarts();
  ASSERT_GE(starts.size(), 4u);
  EXPECT_GT(starts[3], lifted_at) << "no addition past the ceiling while the rate held";
  EXPECT_TRUE(StartsWith(scale[3], "1 -> 3 workers: data wait")) << scale[3];
  EXPECT_LT(starts[3], lifted_at + 15) << "the ceiling lifts within the periods after the change";
}

TEST(RunLoopTest, GivenARemovalThatCostsThenTheWorkerIsAddedBackAndRemovalsWaitTheHold) {
  World w;
  w.trainer_rate = 100;
  w.per_worker = 60;  // two make 120, more than the trainer takes; one makes 60
  w.end_s = 150;
  const std::vector<std::string> scale = w.Run(2, Options(1, 3));
  ASSERT_GE(scale.size(), 2u) << ::testing::PrintToString(scale);
  EXPECT_TRUE(StartsWith(scale[0], "2 -> 1 workers: data wait 0% below 2%")) << scale[0];
  EXPECT_TRUE(StartsWith(scale[1], "1 -> 2 workers: removing a worker cost 40%")) << scale[1];
  EXPECT_NE(scale[1].find("no change for 3 periods"), std::string::npos) << scale[1];
  // The cycle may repeat after the hold, never faster: each removal is at least the
  // hold's periods (3 x 5 s) plus the settle after the last change after the one before.
  const std::vector<double> starts = w.WorkerStarts();
  ASSERT_GE(starts.size(), 3u);
  for (size_t i = 3; i < starts.size(); ++i) {
    EXPECT_GE(starts[i] - starts[i - 1], 15) << "removals wait the hold's periods";
  }
  EXPECT_EQ(CountPrefix(scale, "1 -> 2 workers: data wait"), 0)
      << "an undone removal is not followed by an addition";
}

TEST(RunLoopTest,
     GivenWorkersThatStartSlowlyThenNothingIsDecidedUntilTheyAreReadyAndAPeriodPassed) {
  World w;
  w.start_s = 20;  // a slow start (a Slurm step, an interpreter)
  w.end_s = 80;
  const std::vector<std::string> scale = w.Run(1, Options(1, 2));
  ASSERT_EQ(scale.size(), 1u) << ::testing::PrintToString(scale);
  const std::vector<double> starts = w.WorkerStarts();
  ASSERT_EQ(starts.size(), 2u);
  // Data from t=20; that period settles (to 25), then two periods of figures (to 35).
  EXPECT_GE(starts[1], 35) << "decided on figures from after the start-up";
  EXPECT_LE(starts[1], 37) << "and not later than two periods after it";
}

TEST(RunLoopTest, GivenAnElasticPartitionThenAdditionsBeyondTheAllocationAreJobsOfTheirOwn) {
  World w;
  w.end_s = 200;
  w.tweak = [](RunLoopOptions& o) {
    o.elastic_from = 2;  // the allocation holds 2 workers
    o.elastic_cpus = 3;
  };
  const std::vector<std::string> scale = w.Run(1, Options(1, 4));
  const std::vector<LaunchRequest> requests = w.WorkerRequests();
  ASSERT_EQ(requests.size(), 4u) << ::testing::PrintToString(scale);
  EXPECT_FALSE(requests[0].elastic);
  EXPECT_FALSE(requests[1].elastic) << "the allocation's second worker";
  for (size_t i = 2; i < requests.size(); ++i) {
    EXPECT_TRUE(requests[i].elastic) << i;
    EXPECT_EQ(requests[i].threads, 3) << i;
  }
  std::vector<std::string> started = w.Events("worker");
  EXPECT_EQ(std::count_if(started.begin(), started.end(),
                          [](const std::string& e) {
                            return e.find("a job of its own in the elastic partition") !=
                                   std::string::npos;
                          }),
            2);
}

TEST(RunLoopTest, GivenAnElasticWorkerAndATrainerBoundRunThenTheElasticOneIsDrainedFirst) {
  World w;
  w.trainer_rate = 150;  // two workers make more than the trainer takes
  w.end_s = 120;
  w.tweak = [](RunLoopOptions& o) { o.elastic_from = 1; };  // the allocation holds one
  w.per_worker = 50;
  w.at = [](World& world, double t) {
    if (t >= 60) world.per_worker = 500;  // the pipeline got cheap: one worker is plenty
  };
  const std::vector<std::string> scale = w.Run(1, Options(1, 3));
  ASSERT_GE(scale.size(), 2u) << ::testing::PrintToString(scale);
  const std::vector<LaunchRequest> requests = w.WorkerRequests();
  ASSERT_GE(requests.size(), 2u);
  EXPECT_TRUE(requests[1].elastic);
  // The first removal drains the elastic worker (SIGTERM to it), not the allocation's.
  const auto& signals = w.launcher.signals;
  auto first_term = std::find_if(signals.begin(), signals.end(),
                                 [](const auto& s) { return s.second == SIGTERM; });
  ASSERT_NE(first_term, signals.end());
  auto drained = std::find_if(w.launcher.started.begin(), w.launcher.started.end(),
                              [&](const auto& st) { return st.first == first_term->first; });
  ASSERT_NE(drained, w.launcher.started.end());
  EXPECT_TRUE(drained->second.elastic) << "an elastic worker goes first";
  EXPECT_NE(first_term->first, w.launcher.started[0].first);
}

TEST(RunLoopTest, GivenAnElasticJobThatNeverStartsThenItIsCancelledAndNoneIsSubmittedForAWhile) {
  World w;
  w.elastic_pending = true;  // the partition has no room
  w.end_s = 600;
  w.tweak = [](RunLoopOptions& o) {
    o.elastic_from = 1;
    o.elastic_start_timeout_s = 120;
    o.elastic_retry_s = 300;
  };
  const std::vector<std::string> scale = w.Run(1, Options(1, 3));
  const std::vector<double> starts = w.WorkerStarts();
  ASSERT_GE(starts.size(), 2u);
  // While none may be submitted, the autoscaler proposes none: each addition it
  // recorded started a worker (the input-bound run would otherwise ask every period).
  EXPECT_EQ(Additions(scale), static_cast<long>(starts.size()) - 1)
      << ::testing::PrintToString(scale);
  // The first elastic job: cancelled (SIGTERM to its srun) 120 s after submission.
  auto elastic = std::find_if(w.launcher.started.begin(), w.launcher.started.end(),
                              [](const auto& st) { return st.second.elastic; });
  ASSERT_NE(elastic, w.launcher.started.end());
  const pid_t first_elastic = elastic->first;
  const std::vector<std::string> events = w.Events("worker");
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const std::string& e) {
                            return e.find(
                                       "did not start within 120 s (the elastic partition "
                                       "has no room): cancelled; no elastic worker for "
                                       "300 s") != std::string::npos;
                          }),
            static_cast<long>(starts.size() - 1))
      << ::testing::PrintToString(events);
  EXPECT_NE(std::find(w.launcher.signals.begin(), w.launcher.signals.end(),
                      std::make_pair(first_elastic, SIGTERM)),
            w.launcher.signals.end());
  // The next are submitted 300 s after the cancel at the earliest: never in a loop
  // (the jobs of one decision go together).
  for (size_t i = 2; i < starts.size(); ++i) {
    if (starts[i] != starts[i - 1]) {
      EXPECT_GE(starts[i] - starts[i - 1], 120 + 300) << i;
    }
  }
}

TEST(RunLoopTest,
     GivenWorkersThatNeverRegisterThenEachIsReportedOnceWithWhyAndTheRunSaysHowManyRan) {
  World w;
  w.start_s = 1000;  // Slurm never starts their steps
  w.end_s = 120;
  std::vector<bool> asked;
  w.why_waiting = [&asked](bool elastic) {
    asked.push_back(elastic);
    return std::string("the job's running steps hold its memory");
  };
  w.Run(2, Options(2, 2));
  const std::vector<std::string> events = w.Events("worker");
  for (const char* who : {"worker 0 (a step)", "worker 1 (a step)"}) {
    EXPECT_EQ(std::count_if(events.begin(), events.end(),
                            [who](const std::string& e) {
                              return e.find(std::string(who) +
                                            " has not started after 30 s: the job's running "
                                            "steps hold its memory") != std::string::npos;
                            }),
              1)
        << who << ": " << ::testing::PrintToString(events);
  }
  EXPECT_EQ(asked, (std::vector<bool>{false, false}));
  EXPECT_EQ(w.outcome.workers_started, 2);
  EXPECT_EQ(w.outcome.workers_ran, 0);
  const std::vector<std::string> run = w.Events("run");
  EXPECT_NE(std::find_if(run.begin(), run.end(),
                         [](const std::string& e) {
                           return e.find("0 of 2 workers ran") != std::string::npos;
                         }),
            run.end())
      << ::testing::PrintToString(run);
  // Workers that register in time are not reported, and all of them ran.
  World quick;
  quick.start_s = 5;
  quick.end_s = 120;
  quick.Run(2, Options(2, 2));
  const std::vector<std::string> none = quick.Events("worker");
  EXPECT_EQ(std::count_if(none.begin(), none.end(),
                          [](const std::string& e) {
                            return e.find("has not started") != std::string::npos;
                          }),
            0);
  EXPECT_EQ(quick.outcome.workers_ran, 2);
  // Workers started too late to register before the run ends (within the 30 s
  // a worker has before it is reported) are no workers that never ran.
  World late;
  late.start_s = 1000;
  late.end_s = 10;
  late.Run(2, Options(2, 2));
  const std::vector<std::string> late_run = late.Events("run");
  EXPECT_EQ(std::count_if(
                late_run.begin(), late_run.end(),
                [](const std::string& e) { return e.find("workers ran") != std::string::npos; }),
            0)
      << ::testing::PrintToString(late_run);
  EXPECT_EQ(late.outcome.workers_started, 0);
  EXPECT_EQ(late.outcome.workers_ran, 0);
}

TEST(RunLoopTest, GivenSlurmRefusesWorkerJobsThenTheRefusalIsSaidOnceAndTriedThreeTimesAtMost) {
  World w;
  w.launcher.refuse_elastic = true;
  w.end_s = 600;
  w.tweak = [](RunLoopOptions& o) {
    o.elastic_from = 1;
    o.elastic_retry_s = 30;
  };
  const std::vector<std::string> scale = w.Run(1, Options(1, 4));
  EXPECT_EQ(w.launcher.elastic_refused, 3) << "an input-bound run of 600 s, tried every 30 s";
  const std::vector<std::string> events = w.Events("worker");
  const auto said = [&events](const std::string& what) {
    return std::count_if(events.begin(), events.end(), [&what](const std::string& e) {
      return e.find(what) != std::string::npos;
    });
  };
  EXPECT_EQ(said("Memory specification can not be satisfied"), 2) << "the first and the last";
  EXPECT_EQ(said("--worker-mem SIZE"), 1) << ::testing::PrintToString(events);
  EXPECT_EQ(said("3 worker jobs refused: no more for this run"), 1);
  // No addition is proposed once none can start: one decision per refusal.
  EXPECT_LE(std::count_if(scale.begin(), scale.end(),
                          [](const std::string& e) { return Additions({e}) > 0; }),
            3)
      << ::testing::PrintToString(scale);
}

TEST(RunLoopTest, GivenAnElasticWorkerThatSlurmEndsThenItsRecordSaysHow) {
  World w;
  w.end_s = 100;
  w.tweak = [](RunLoopOptions& o) { o.elastic_from = 1; };
  bool ended = false;
  w.at = [&ended](World& world, double t) {
    if (t < 60 || ended) return;
    for (const auto& [pid, r] : world.launcher.running()) {
      if (r.elastic) {  // Slurm preempts its job: the worker drains and exits 0
        world.launcher.End(pid, 0);
        ended = true;
        return;
      }
    }
  };
  w.Run(1, Options(1, 2));
  ASSERT_TRUE(ended);
  ASSERT_EQ(w.asked_job_end.size(), 1u);
  EXPECT_EQ(w.asked_job_end[0].rfind("77.", 0), 0u) << "asked by the step it registered with";
  const std::vector<std::string> exits = w.WorkerExits();
  EXPECT_EQ(std::count(exits.begin(), exits.end(), "preempted: exited with status 0"), 1)
      << ::testing::PrintToString(exits);
}

TEST(RunLoopTest, GivenAPoolThenElasticWorkersFollowItsGrantAndItsSilenceCostsNothing) {
  World w;
  w.end_s = 300;
  w.tweak = [](RunLoopOptions& o) {
    o.elastic_from = 1;
    o.elastic_cpus = 2;
    o.pool_period_s = 5;
    o.pool_run_id = "run-7";
    o.pool_gpus = 4;
  };
  // One elastic worker granted until t = 150, none after; silent 100..140.
  w.pool_grant = [](double t) { return t < 100 ? 1 : t < 140 ? -1 : t < 150 ? 1 : 0; };
  const std::vector<std::string> scale = w.Run(1, Options(1, 4));
  ASSERT_FALSE(w.pool_reports.empty());
  const PoolReportMsg& first = w.pool_reports.front();
  EXPECT_EQ(first.run_id, "run-7");
  EXPECT_EQ(first.gpus, 4);
  EXPECT_EQ(first.cpus_per_worker, 2);
  EXPECT_EQ(first.base_workers, 1);
  // The trainer takes 1000 samples/s: one worker's 100 with 90% wait says so.
  EXPECT_NEAR(first.demand_samples_per_s, 1000, 1);
  for (const PoolReportMsg& r : w.pool_reports) {
    EXPECT_NEAR(r.demand_samples_per_s, 1000, 1) << "what it holds changes, its demand does not";
  }
  ASSERT_FALSE(first.rates.empty());
  EXPECT_EQ(first.rates[0].first, 1);
  EXPECT_NEAR(first.rates[0].second, 100, 1e-9) << "one worker makes 100 samples/s";
  // However much the trainer waited, never more than the one elastic worker granted.
  const std::vector<LaunchRequest> requests = w.WorkerRequests();
  EXPECT_EQ(std::count_if(requests.begin(), requests.end(),
                          [](const LaunchRequest& r) { return r.elastic; }),
            1);
  for (const PoolReportMsg& r : w.pool_reports) EXPECT_LE(r.extra_workers, 1);
  // The grant fell to 0 at 150: the elastic worker was drained, and said why.
  const std::vector<std::string> events = w.Events("pool");
  EXPECT_NE(std::find_if(events.begin(), events.end(),
                         [](const std::string& e) {
                           return e.find("drained: the pool grants 0 elastic worker(s)") !=
                                  std::string::npos;
                         }),
            events.end())
      << ::testing::PrintToString(events);
  const std::vector<std::string> exits = w.WorkerExits();
  EXPECT_EQ(std::count_if(exits.begin(), exits.end(),
                          [](const std::string& e) { return e.rfind("drained: ", 0) == 0; }),
            1)
      << ::testing::PrintToString(exits);
  // Each change of the grant is recorded with the pool's reason and the report it
  // answered (the inputs): 1 at first, 0 at 150 (silence is no change).
  const std::vector<PoolGrantRecord> grants = *w.store.ListPoolGrants("r");
  ASSERT_EQ(grants.size(), 2u);
  EXPECT_EQ(grants[0].extra_workers, 1);
  EXPECT_EQ(grants[0].cpus, 2);
  EXPECT_EQ(grants[0].reason, "because 1");
  EXPECT_EQ(grants[1].extra_workers, 0);
  EXPECT_EQ(grants[1].held_workers, 1) << "it held one when the pool said 0";
  const nlohmann::json inputs = nlohmann::json::parse(grants[0].report_json);
  EXPECT_EQ(inputs.at("run_id"), "run-7");
  EXPECT_EQ(inputs.at("rates").at(0).at(0), 1);
  // The elastic worker's record says it was a job of its own.
  const std::vector<WorkerRecord> recorded = *w.store.ListWorkers("r");
  EXPECT_EQ(std::count_if(recorded.begin(), recorded.end(),
                          [](const WorkerRecord& r) { return r.elastic; }),
            1);
  EXPECT_FALSE(recorded.at(0).elastic);
  // The grant is the autoscaler's limit: it proposed no addition that could not start.
  EXPECT_EQ(Additions(scale), static_cast<long>(requests.size()) - 1)
      << ::testing::PrintToString(scale);
}

// A draining elastic worker still holds the CPUs the pool lent until it exits: a
// grant that falls and rises again before then starts no second one beside it.
TEST(RunLoopTest, GivenAnElasticWorkerStillDrainingThenTheGrantCountsItUntilItExits) {
  World w;
  w.end_s = 200;
  w.launcher.obey_term = false;  // a drain takes as long as the test says
  w.tweak = [](RunLoopOptions& o) {
    o.elastic_from = 1;
    o.elastic_cpus = 2;
    o.pool_period_s = 5;
    o.pool_run_id = "run-9";
    o.drain_grace_s = 60;  // no SIGKILL before the test ends it
  };
  w.pool_grant = [](double t) { return t >= 60 && t < 70 ? 0 : 1; };
  int most = 0;
  double drained_end = -1;
  w.at = [&](World& world, double t) {
    int elastic = 0;
    for (const auto& [pid, r] : world.launcher.running()) elastic += r.elastic ? 1 : 0;
    most = std::max(most, elastic);
    // The drained worker exits at 100, long after the grant rose again (70).
    if (t >= 100 && drained_end < 0) {
      for (const auto& [pid, sig] : world.launcher.signals) {
        if (sig == SIGTERM && world.launcher.running().count(pid)) {
          world.launcher.End(pid, 0);
          drained_end = t;
          break;
        }
      }
    }
  };
  const std::vector<std::string> scale = w.Run(1, Options(1, 4));
  ASSERT_GE(drained_end, 0) << "the grant's fall drained the elastic worker";
  EXPECT_EQ(most, 1) << "never two elastic workers on a grant of one";
  const std::vector<LaunchRequest> requests = w.WorkerRequests();
  EXPECT_EQ(std::count_if(requests.begin(), requests.end(),
                          [](const LaunchRequest& r) { return r.elastic; }),
            2)
      << "the second started once the first had exited";
  std::vector<double> elastic_starts;
  for (size_t i = 0; i < w.launcher.started.size(); ++i) {
    if (w.launcher.started[i].second.elastic) elastic_starts.push_back(w.launcher.started_at[i]);
  }
  ASSERT_EQ(elastic_starts.size(), 2u);
  EXPECT_GE(elastic_starts[1], drained_end);
  EXPECT_EQ(Additions(scale), static_cast<long>(requests.size()) - 1)
      << "the autoscaler proposed nothing that could not start: "
      << ::testing::PrintToString(scale);
}

TEST(RunLoopTest, GivenAGrantWithdrawnBeforeItsJobsStartedThenTheirDrainIsNoWorkerThatNeverRan) {
  World w;
  w.elastic_pending = true;  // the granted jobs wait in the partition's queue
  w.end_s = 200;
  w.tweak = [](RunLoopOptions& o) {
    o.elastic_from = 1;
    o.elastic_cpus = 2;
    o.pool_period_s = 5;
    o.pool_run_id = "run-8";
    o.elastic_start_timeout_s = 1000;  // not cancelled for the wait: given back
  };
  w.pool_grant = [](double t) { return t < 60 ? 2 : 0; };
  w.Run(1, Options(1, 4));
  const std::vector<LaunchRequest> requests = w.WorkerRequests();
  const long elastic = std::count_if(requests.begin(), requests.end(),
                                     [](const LaunchRequest& r) { return r.elastic; });
  ASSERT_GE(elastic, 1) << "the grant was used";
  const std::vector<std::string> exits = w.WorkerExits();
  EXPECT_EQ(std::count_if(exits.begin(), exits.end(),
                          [](const std::string& e) { return e.rfind("drained: ", 0) == 0; }),
            elastic)
      << ::testing::PrintToString(exits);
  EXPECT_EQ(w.outcome.workers_started, 1) << "the jobs given back unstarted are not counted";
  EXPECT_EQ(w.outcome.workers_ran, 1);
  const std::vector<std::string> run = w.Events("run");
  EXPECT_EQ(std::count_if(
                run.begin(), run.end(),
                [](const std::string& e) { return e.find("workers ran") != std::string::npos; }),
            0)
      << ::testing::PrintToString(run);
}

TEST(RunLoopTest, GivenTwoRanksWhenOneFails_ThenTheOtherIsStoppedAndTheRunTakesItsStatus) {
  FakeClock clock{0};
  FakeLauncher launcher{&clock};
  launcher.obey_term = true;
  MemoryRunStore store;
  Result<TempDir> dir = TempDir::Make("gm-run-loop-test-");
  ASSERT_TRUE(dir.ok());
  RunLoopOptions o;
  o.spec.workers = 1;
  o.spec.world_size = 2;
  o.spec.command = {"train"};
  o.run_dir = dir->path();
  o.worker_exe = "goldminer";
  o.sample_interval_s = 1;
  RunLoopEdges e;
  e.clock = &clock;
  e.launcher = &launcher;
  e.coordinator_address = "127.0.0.1:1";
  e.summary = [] { return CoordinatorSummary{}; };
  bool failed = false;
  e.trainers = [&] {
    if (!failed && clock.Now() >= 10) {  // rank 1 fails; rank 0 would wait for ever
      for (const auto& [pid, r] : std::map<pid_t, LaunchRequest>(launcher.running())) {
        if (r.role == ProcessRole::kTrainer && !failed) {
          launcher.End(pid, 3);
          failed = true;
        }
      }
    }
    return StepCounter::Totals{};
  };
  e.cpu_seconds = [](const std::vector<pid_t>&) { return std::map<pid_t, double>(); };
  RunRecorder recorder(&store, "r", 1);
  RunRecord record;
  record.id = "r";
  ASSERT_TRUE(recorder.Begin(record).ok());
  RunLoop loop(std::move(o), std::move(e), "r", recorder);
  Result<RunLoopOutcome> out = loop.Execute();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->exit_code, 3);
  EXPECT_EQ(out->exit, "exited with status 3");
  EXPECT_LT(clock.Now(), 100) << "the other rank was not stopped";
  const bool termed = std::any_of(launcher.signals.begin(), launcher.signals.end(),
                                  [](const auto& s) { return s.second == SIGTERM; });
  EXPECT_TRUE(termed) << "no trainer got SIGTERM";
}

// The variable a process was started with that carries its key, "NAME=value".
std::string KeyVariableOf(const LaunchRequest& r) {
  for (const std::string& e : r.env) {
    if (StartsWith(e, "GOLDMINER_SECRET")) return e;
  }
  return "";
}

TEST(RunLoopTest, GivenKeysByValueThenWorkersAndAnSrunTrainerGetTheKeyNotThePathOfItsFile) {
  const std::string worker_key(64, 'a'), client_key(64, 'b');
  struct Case {
    bool by_value, srun_trainer;
    std::string worker, trainer;  // what each is expected to get; "FILE:" + name: its path
  };
  for (const Case& c : {Case{false, false, "FILE:worker.key", "FILE:client.key"},
                        Case{false, true, "FILE:worker.key", "FILE:client.key"},
                        Case{true, false, worker_key, "FILE:client.key"},
                        Case{true, true, worker_key, client_key}}) {
    World w;
    w.end_s = 5;
    std::string run_dir;
    w.tweak = [&](RunLoopOptions& o) {
      o.keys_by_value = c.by_value;
      o.spec.command_starts_ranks = c.srun_trainer;
      run_dir = o.run_dir;
      EXPECT_TRUE(WriteSecretFile(o.run_dir + "/worker.key", worker_key).ok());
      EXPECT_TRUE(WriteSecretFile(o.run_dir + "/client.key", client_key).ok());
    };
    w.Run(1, Options(1, 1));
    auto expected = [&](const std::string& what) {
      return StartsWith(what, "FILE:") ? "GOLDMINER_SECRET_FILE=" + run_dir + "/" + what.substr(5)
                                       : "GOLDMINER_SECRET=" + what;
    };
    int trainers = 0, workers = 0;
    for (const auto& [pid, r] : w.launcher.started) {
      const bool worker = r.role == ProcessRole::kWorker;
      (worker ? workers : trainers) += 1;
      EXPECT_EQ(KeyVariableOf(r), expected(worker ? c.worker : c.trainer))
          << "by value " << c.by_value << ", srun trainer " << c.srun_trainer;
    }
    EXPECT_EQ(trainers, 1);
    EXPECT_GE(workers, 1);
  }
}

TEST(RunLoopTest, GivenACrashedWorkerThenItIsReplacedInItsSlotAndRecorded) {
  World w;
  w.trainer_rate = 150;
  w.end_s = 30;
  bool crashed = false;
  w.at = [&crashed](World& world, double t) {
    if (t < 10 || crashed) return;
    crashed = true;
    for (const auto& [pid, r] : world.launcher.running()) {
      if (r.role == ProcessRole::kWorker) {
        world.launcher.End(pid, 0, 9);  // kill -9
        break;
      }
    }
  };
  w.Run(2, Options(2, 2));
  ASSERT_EQ(w.WorkerStarts().size(), 3u) << "one replacement";
  EXPECT_EQ(w.launcher.started[2].second.slot, w.launcher.started[0].second.slot);
  const std::vector<std::string> exits = w.WorkerExits();
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_EQ(exits[0], "was killed by signal 9");
}

}  // namespace
}  // namespace gm
