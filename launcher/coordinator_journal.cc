#include "launcher/coordinator_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/json.h"

namespace gm {
namespace {

nlohmann::json PlanJson(const EpochPlan& plan) {
  nlohmann::json splits = nlohmann::json::array();
  for (const PlanSplit& s : plan.splits) splits.push_back({s.split, s.batch_count});
  return {{"epoch", plan.epoch}, {"splits", std::move(splits)}};
}

// A field of a journal entry, typed; an error says which (the caller adds where).
Result<uint64_t> U64(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_number_unsigned()) {
    return Status::InvalidArgument(std::string("no unsigned \"") + key + "\"");
  }
  return it->get<uint64_t>();
}

Result<int> RankOf(const nlohmann::json& e) {
  GM_ASSIGN_OR_RETURN(uint64_t rank, U64(e, "rank"));
  if (rank > 1u << 20) return Status::InvalidArgument("rank " + std::to_string(rank));
  return static_cast<int>(rank);
}

Result<EpochPlan> PlanOf(const nlohmann::json& e) {
  auto it = e.find("plan");
  if (it == e.end() || !it->is_object()) return Status::InvalidArgument("no \"plan\"");
  EpochPlan plan;
  GM_ASSIGN_OR_RETURN(plan.epoch, U64(*it, "epoch"));
  auto splits = it->find("splits");
  if (splits == it->end() || !splits->is_array()) {
    return Status::InvalidArgument("no \"plan\".\"splits\"");
  }
  for (const nlohmann::json& s : *splits) {
    if (!s.is_array() || s.size() != 2 || !s[0].is_number_unsigned() ||
        !s[1].is_number_unsigned()) {
      return Status::InvalidArgument("a plan split that is not [split, batch_count]");
    }
    plan.splits.push_back({s[0].get<uint64_t>(), s[1].get<uint64_t>()});
  }
  return plan;
}

const char* KindName(Assignment::Kind kind) {
  switch (kind) {
    case Assignment::Kind::kAssign:
      return "assign";
    case Assignment::Kind::kWait:
      return "wait";
    case Assignment::Kind::kDrain:
      return "drain";
    case Assignment::Kind::kExit:
      return "exit";
    case Assignment::Kind::kEpochDone:
      return "epoch_done";
  }
  return "?";
}

// What RequestSplit answered, as the journal keeps it.
nlohmann::json AnswerJson(const Assignment& a) {
  nlohmann::json j = {{"kind", KindName(a.kind)}};
  if (a.kind == Assignment::Kind::kAssign) {
    j["epoch"] = a.epoch;
    j["split"] = a.split;
    j["start"] = a.start_batch;
    j["end"] = a.end_batch;
  }
  return j;
}

}  // namespace

std::string JournalHash(std::string_view json) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : json) h = (h ^ c) * 1099511628211ULL;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

Result<JournaledCoordinator> JournaledCoordinator::Create(const CoordinatorOptions& options,
                                                          JournalSink sink) {
  GM_ASSIGN_OR_RETURN(CoordinatorState state, CoordinatorState::Create(options));
  return JournaledCoordinator(std::move(state), std::move(sink));
}

Result<JournaledCoordinator> JournaledCoordinator::Replay(const CoordinatorOptions& options,
                                                          std::string_view journal,
                                                          const std::string& origin, double now_s,
                                                          JournalSink sink, NoteHandler on_note) {
  GM_ASSIGN_OR_RETURN(CoordinatorState state, CoordinatorState::Create(options));
  JournaledCoordinator c(std::move(state), std::move(sink));
  c.on_note_ = std::move(on_note);
  size_t line = 0;
  while (!journal.empty()) {
    ++line;
    const std::string where = origin + ":" + std::to_string(line) + ": ";
    const size_t end = journal.find('\n');
    if (end == std::string_view::npos) {
      return Status::InvalidArgument(where +
                                     "cut short (no end of line: the coordinator died while "
                                     "writing it); the journal cannot be trusted past line " +
                                     std::to_string(line - 1));
    }
    const std::string_view text = journal.substr(0, end);
    journal.remove_prefix(end + 1);
    const size_t tab = text.rfind('\t');
    if (tab == std::string_view::npos || text.size() - tab - 1 != 16) {
      return Status::InvalidArgument(where + "not a journal line (JSON, a tab, a 16-digit hash)");
    }
    const std::string_view json = text.substr(0, tab);
    if (JournalHash(json) != text.substr(tab + 1)) {
      return Status::InvalidArgument(where + "corrupted: its hash does not match its content");
    }
    Result<nlohmann::json> entry = ParseJson(json, origin);
    if (!entry.ok()) return Status::InvalidArgument(where + entry.status().message());
    Result<uint64_t> seq = entry->is_object() ? U64(*entry, "seq")
                                              : Result<uint64_t>(Status::InvalidArgument("no seq"));
    if (!seq.ok() || *seq != c.seq_ + 1) {
      return Status::InvalidArgument(where + "line " + (seq.ok() ? std::to_string(*seq) : "?") +
                                     " follows line " + std::to_string(c.seq_) +
                                     ": lines are missing or out of order");
    }
    Status applied = c.Apply(*entry);
    if (!applied.ok()) {
      return Status::InvalidArgument(where + "does not replay: " + applied.message() +
                                     " (a journal of another run, or of another version)");
    }
    c.seq_ = *seq;
  }
  c.on_note_ = nullptr;
  // Every worker not gone was last heard now: one that does not come back is
  // declared lost a liveness timeout later.
  for (const WorkerStats& w : c.state_.Stats().workers) {
    if (w.status != WorkerStatus::kGone) GM_RETURN_IF_ERROR(c.state_.Heartbeat(w.id, now_s));
  }
  return c;
}

Status JournaledCoordinator::Write(std::string_view op, nlohmann::json entry) {
  if (!sink_) return Status::Ok();  // journaling off: nothing is built
  entry["seq"] = seq_ + 1;
  entry["op"] = op;
  const std::string json = entry.dump();
  GM_RETURN_IF_ERROR(sink_(json + "\t" + JournalHash(json) + "\n"));
  ++seq_;
  return Status::Ok();
}

Status JournaledCoordinator::Apply(const nlohmann::json& e) {
  auto op_it = e.find("op");
  if (op_it == e.end() || !op_it->is_string()) return Status::InvalidArgument("no \"op\"");
  const std::string op = op_it->get<std::string>();
  if (op == "start_epoch" || op == "plan_ahead" || op == "skip_to") {
    GM_ASSIGN_OR_RETURN(EpochPlan plan, PlanOf(e));
    if (op == "start_epoch") return state_.StartEpoch(plan);
    if (op == "plan_ahead") return state_.PlanAhead(plan);
    return state_.SkipToEpoch(plan);
  }
  if (op == "end_run") {
    state_.EndRun();
    return Status::Ok();
  }
  if (op == "note") {
    auto what = e.find("note");
    if (what == e.end() || !what->is_object()) return Status::InvalidArgument("no \"note\"");
    return on_note_ ? on_note_(*what) : Status::Ok();
  }
  if (op == "ack" || op == "resume" || op == "resume_at") {
    GM_ASSIGN_OR_RETURN(int rank, RankOf(e));
    GM_ASSIGN_OR_RETURN(uint64_t epoch, U64(e, "epoch"));
    if (op == "ack") {
      GM_ASSIGN_OR_RETURN(uint64_t split, U64(e, "split"));
      GM_ASSIGN_OR_RETURN(uint64_t batch, U64(e, "batch"));
      std::optional<uint64_t> samples;
      if (e.contains("samples")) {
        GM_ASSIGN_OR_RETURN(samples, U64(e, "samples"));
      }
      return state_.Ack(rank, epoch, split, batch, samples).status();
    }
    GM_ASSIGN_OR_RETURN(uint64_t position, U64(e, "position"));
    if (op == "resume") return state_.Resume(rank, epoch, position);
    GM_ASSIGN_OR_RETURN(uint64_t index, U64(e, "index"));
    GM_ASSIGN_OR_RETURN(uint64_t batch, U64(e, "batch"));
    return state_.ResumeAt(rank, epoch, position, SequenceKey{index, batch});
  }
  if (op == "register") {
    GM_ASSIGN_OR_RETURN(uint64_t worker, U64(e, "worker"));
    const WorkerId got = state_.RegisterWorker(0);
    if (got != worker) {
      return Status::InvalidArgument("registered as worker " + std::to_string(got) + ", not " +
                                     std::to_string(worker));
    }
    return Status::Ok();
  }
  GM_ASSIGN_OR_RETURN(uint64_t worker, U64(e, "worker"));
  if (op == "drain") return state_.Drain(worker);
  if (op == "exited") return state_.WorkerExited(worker);
  if (op == "split_done") {
    GM_ASSIGN_OR_RETURN(uint64_t epoch, U64(e, "epoch"));
    GM_ASSIGN_OR_RETURN(uint64_t split, U64(e, "split"));
    GM_ASSIGN_OR_RETURN(uint64_t count, U64(e, "count"));
    GM_ASSIGN_OR_RETURN(uint64_t skipped, U64(e, "skipped"));
    return state_.SplitDone(worker, epoch, split, count, skipped);
  }
  if (op == "request") {
    GM_ASSIGN_OR_RETURN(Assignment a, state_.RequestSplit(worker));
    const nlohmann::json answer = AnswerJson(a);
    if (!e.contains("answer") || e["answer"] != answer) {
      return Status::InvalidArgument("worker " + std::to_string(worker) +
                                     "'s request is answered " + answer.dump() +
                                     ", not as journaled");
    }
    return Status::Ok();
  }
  return Status::InvalidArgument("unknown op \"" + op + "\"");
}

Status JournaledCoordinator::StartEpoch(const EpochPlan& plan) {
  GM_RETURN_IF_ERROR(state_.StartEpoch(plan));
  return Write("start_epoch", {{"plan", PlanJson(plan)}});
}

Status JournaledCoordinator::PlanAhead(const EpochPlan& plan) {
  GM_RETURN_IF_ERROR(state_.PlanAhead(plan));
  return Write("plan_ahead", {{"plan", PlanJson(plan)}});
}

Status JournaledCoordinator::SkipToEpoch(const EpochPlan& plan) {
  GM_RETURN_IF_ERROR(state_.SkipToEpoch(plan));
  return Write("skip_to", {{"plan", PlanJson(plan)}});
}

Result<WorkerId> JournaledCoordinator::RegisterWorker(double now_s) {
  const WorkerId id = state_.RegisterWorker(now_s);
  GM_RETURN_IF_ERROR(Write("register", {{"worker", id}}));
  return id;
}

Status JournaledCoordinator::Heartbeat(WorkerId worker, double now_s) {
  return state_.Heartbeat(worker, now_s);
}

Result<std::vector<WorkerId>> JournaledCoordinator::Tick(double now_s) {
  std::vector<WorkerId> lost = state_.Tick(now_s);
  for (WorkerId id : lost) GM_RETURN_IF_ERROR(Write("exited", {{"worker", id}}));
  return lost;
}

Status JournaledCoordinator::Drain(WorkerId worker) {
  GM_RETURN_IF_ERROR(state_.Drain(worker));
  return Write("drain", {{"worker", worker}});
}

Status JournaledCoordinator::WorkerExited(WorkerId worker) {
  // Already gone (declared lost, or its exit said): nothing changes.
  const bool gone = state_.ShouldExit(worker) && !state_.Draining(worker);
  GM_RETURN_IF_ERROR(state_.WorkerExited(worker));
  if (gone) return Status::Ok();
  return Write("exited", {{"worker", worker}});
}

Status JournaledCoordinator::Note(nlohmann::json note) {
  return Write("note", {{"note", std::move(note)}});
}

Status JournaledCoordinator::EndRun() {
  state_.EndRun();
  return Write("end_run", nlohmann::json::object());
}

Result<Assignment> JournaledCoordinator::RequestSplit(WorkerId worker) {
  GM_ASSIGN_OR_RETURN(Assignment a, state_.RequestSplit(worker));
  // Only an assignment changes the state: "wait", "drain", "exit" and
  // "epoch_done" (most answers, where workers outnumber splits) are not written.
  if (a.kind != Assignment::Kind::kAssign) return a;
  GM_RETURN_IF_ERROR(Write("request", {{"worker", worker}, {"answer", AnswerJson(a)}}));
  return a;
}

Status JournaledCoordinator::SplitDone(WorkerId worker, uint64_t epoch, uint64_t split,
                                       uint64_t batch_count, uint64_t skipped) {
  GM_RETURN_IF_ERROR(state_.SplitDone(worker, epoch, split, batch_count, skipped));
  return Write("split_done", {{"worker", worker},
                              {"epoch", epoch},
                              {"split", split},
                              {"count", batch_count},
                              {"skipped", skipped}});
}

Result<AckOutcome> JournaledCoordinator::Ack(int rank, uint64_t epoch, uint64_t split,
                                             uint64_t split_batch,
                                             std::optional<uint64_t> samples) {
  GM_ASSIGN_OR_RETURN(AckOutcome outcome, state_.Ack(rank, epoch, split, split_batch, samples));
  // A repeat changes nothing but a counter; not written, so that a peer that
  // sends the same acknowledgement again and again cannot grow the journal.
  if (outcome == AckOutcome::kDuplicate) return outcome;
  nlohmann::json e = {{"rank", rank}, {"epoch", epoch}, {"split", split}, {"batch", split_batch}};
  if (samples) e["samples"] = *samples;
  GM_RETURN_IF_ERROR(Write("ack", std::move(e)));
  return outcome;
}

Status JournaledCoordinator::Resume(int rank, uint64_t epoch, uint64_t position) {
  GM_RETURN_IF_ERROR(state_.Resume(rank, epoch, position));
  return Write("resume", {{"rank", rank}, {"epoch", epoch}, {"position", position}});
}

Status JournaledCoordinator::ResumeAt(int rank, uint64_t epoch, uint64_t position, SequenceKey at) {
  GM_RETURN_IF_ERROR(state_.ResumeAt(rank, epoch, position, at));
  return Write("resume_at", {{"rank", rank},
                             {"epoch", epoch},
                             {"position", position},
                             {"index", at.index},
                             {"batch", at.batch}});
}

Result<JournalFile> JournalFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IoError("journal " + path + ": cannot open: " + std::strerror(errno));
  }
  return JournalFile(fd, path);
}

JournalFile::~JournalFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status JournalFile::Append(std::string_view line) {
  // O_APPEND and one write: the line lands whole, or (a crash mid-write) torn at
  // the end, which Replay reports as cut short.
  while (!line.empty()) {
    const ssize_t n = ::write(fd_, line.data(), line.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IoError("journal " + path_ + ": write: " + std::strerror(errno));
    line.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status JournalFile::Sync() {
  if (::fdatasync(fd_) != 0) {
    return Status::IoError("journal " + path_ + ": fdatasync: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace gm
