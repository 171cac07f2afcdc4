#include "simulator/trace.h"

#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "simulator/text.h"

namespace gm::sim {
namespace {

// One CSV: its header's columns by name and its rows, each with its line.
struct Csv {
  std::map<std::string, size_t, std::less<>> columns;
  std::vector<std::pair<size_t, std::vector<std::string_view>>> rows;
};

Result<Csv> ParseCsv(std::string_view text, const std::string& origin) {
  Csv csv;
  bool header = true;
  GM_RETURN_IF_ERROR(ForEachLine(text, [&](std::string_view line, size_t number) -> Status {
    std::vector<std::string_view> fields = SplitFields(line, ',');
    if (header) {
      for (size_t i = 0; i < fields.size(); ++i) csv.columns.emplace(std::string(fields[i]), i);
      header = false;
      return Status::Ok();
    }
    if (fields.size() != csv.columns.size()) {
      return Status::InvalidArgument(origin + ":" + std::to_string(number) + ": " +
                                     std::to_string(fields.size()) + " fields, the header has " +
                                     std::to_string(csv.columns.size()));
    }
    csv.rows.emplace_back(number, std::move(fields));
    return Status::Ok();
  }));
  if (header) return Status::InvalidArgument(origin + ": empty (no header line)");
  return csv;
}

// Reads the fields of one row by column name, keeping the first error.
class Row {
 public:
  Row(const Csv& csv, const std::vector<std::string_view>& fields, const std::string& origin,
      size_t line)
      : csv_(csv), fields_(fields), where_(origin + ":" + std::to_string(line) + ": ") {}

  std::string_view Text(std::string_view column) const {
    auto it = csv_.columns.find(column);
    return it == csv_.columns.end() ? std::string_view() : fields_[it->second];
  }
  // The column's number; `fallback` for an empty field when one is given.
  double Number(std::string_view column, std::optional<double> fallback = std::nullopt) {
    const std::string_view t = Text(column);
    if (t.empty() && fallback) return *fallback;
    double v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) {
      Fail(std::string(column) + " is \"" + std::string(t) + "\", not a number");
    } else if (v < 0) {
      Fail(std::string(column) + " is negative (" + std::string(t) + ")");
    }
    return v;
  }
  void Fail(const std::string& why) {
    if (status_.ok()) status_ = Status::InvalidArgument(where_ + why);
  }
  const Status& status() const { return status_; }

 private:
  const Csv& csv_;
  const std::vector<std::string_view>& fields_;
  std::string where_;
  Status status_;
};

Status NeedColumns(const Csv& csv, const std::vector<std::string_view>& names,
                   const std::string& origin, const std::string& format) {
  for (std::string_view n : names) {
    if (!csv.columns.contains(n)) {
      return Status::InvalidArgument(origin + ":1: no column \"" + std::string(n) + "\" (" +
                                     format + " needs " +
                                     [&] {
                                       std::string all;
                                       for (std::string_view m : names)
                                         all += (all.empty() ? "" : ", ") + std::string(m);
                                       return all;
                                     }() +
                                     ")");
    }
  }
  return Status::Ok();
}

int Milli(double v) { return static_cast<int>(std::lround(v)); }

Result<Trace> ReadPods(const Csv& csv, const std::string& origin) {
  GM_RETURN_IF_ERROR(NeedColumns(csv,
                                 {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                                  "creation_time", "deletion_time", "scheduled_time"},
                                 origin, "a v2023 pod list"));
  Trace t;
  t.origin = origin;
  for (const auto& [line, fields] : csv.rows) {
    Row r(csv, fields, origin, line);
    if (r.Text("scheduled_time").empty()) {
      ++t.never_scheduled;
      continue;
    }
    SimTask task;
    task.name = std::string(r.Text("name"));
    task.line = line;
    task.cpus = std::max(1, static_cast<int>(std::ceil(r.Number("cpu_milli") / 1000 - 1e-9)));
    task.memory_mib = static_cast<uint64_t>(r.Number("memory_mib"));
    const double gpus = r.Number("num_gpu");
    const double milli = r.Number("gpu_milli", 1000);
    task.gpu_milli = gpus > 0 ? Milli(gpus * std::min(milli, 1000.0)) : 0;
    const double created = r.Number("creation_time"), scheduled = r.Number("scheduled_time");
    const double deleted = r.Number("deletion_time");
    GM_RETURN_IF_ERROR(r.status());
    if (scheduled < created) r.Fail("scheduled_time is before creation_time");
    if (deleted <= scheduled) r.Fail("deletion_time is not after scheduled_time (no run)");
    GM_RETURN_IF_ERROR(r.status());
    task.submit_s = created;
    task.duration_s = deleted - scheduled;
    t.tasks.push_back(std::move(task));
  }
  return t;
}

Result<Trace> ReadGeneric(const Csv& csv, const std::string& origin) {
  GM_RETURN_IF_ERROR(
      NeedColumns(csv, {"submit_s", "duration_s", "gpus", "cpus"}, origin, "a generic trace"));
  Trace t;
  t.origin = origin;
  for (const auto& [line, fields] : csv.rows) {
    Row r(csv, fields, origin, line);
    SimTask task;
    task.line = line;
    task.name = "task-" + std::to_string(line);
    task.submit_s = r.Number("submit_s");
    task.samples = r.Number("samples", 0.0);
    // A task's size: how long it ran, or how many samples it reads (then its
    // family's rate gives its work, and duration_s is left empty).
    task.duration_s = r.Number("duration_s", task.samples > 0 ? std::optional(0.0) : std::nullopt);
    task.gpu_milli = Milli(r.Number("gpus") * 1000);
    task.cpus = std::max(1, static_cast<int>(std::ceil(r.Number("cpus") - 1e-9)));
    task.memory_mib = static_cast<uint64_t>(r.Number("memory_mib", 0.0));
    task.job_class = std::string(r.Text("class"));
    GM_RETURN_IF_ERROR(r.status());
    if (task.samples > 0 && !r.Text("duration_s").empty()) {
      r.Fail("both duration_s and samples: give one (samples: leave duration_s empty)");
    } else if (task.samples > 0 && (task.gpu_milli == 0 || task.job_class.empty())) {
      r.Fail("samples needs a GPU task with a class (a family's rate gives its work)");
    } else if (task.samples <= 0 && !(task.duration_s > 0)) {
      r.Fail("duration_s must be positive");
    }
    GM_RETURN_IF_ERROR(r.status());
    t.tasks.push_back(std::move(task));
  }
  return t;
}

Result<Trace> ReadCsvTrace(std::string_view text, const std::string& origin) {
  GM_ASSIGN_OR_RETURN(Csv csv, ParseCsv(text, origin));
  return csv.columns.contains("pod_phase") || csv.columns.contains("scheduled_time")
             ? ReadPods(csv, origin)
             : ReadGeneric(csv, origin);
}

}  // namespace

Result<Trace> ParseTrace(std::string_view text, const std::string& origin) {
  Result<Trace> t =
      IsSlurmHistory(text) ? ParseSlurmHistory(text, origin) : ReadCsvTrace(text, origin);
  if (t.ok() && t->tasks.empty()) {
    return Status::InvalidArgument(origin + ": no task to replay (" +
                                   std::to_string(t->never_scheduled) +
                                   " never scheduled): an empty trace");
  }
  return t;
}

Result<std::vector<SimNode>> ParseNodes(std::string_view text, const std::string& origin) {
  GM_ASSIGN_OR_RETURN(Csv csv, ParseCsv(text, origin));
  const bool v2023 = csv.columns.contains("sn");
  GM_RETURN_IF_ERROR(
      NeedColumns(csv,
                  v2023 ? std::vector<std::string_view>{"sn", "cpu_milli", "memory_mib", "gpu"}
                        : std::vector<std::string_view>{"name", "cpus", "memory_mib", "gpus"},
                  origin, v2023 ? "a v2023 node list" : "a generic node list"));
  std::vector<SimNode> nodes;
  int gpus = 0;
  for (const auto& [line, fields] : csv.rows) {
    Row r(csv, fields, origin, line);
    SimNode n;
    n.name = std::string(r.Text(v2023 ? "sn" : "name"));
    n.cpus = static_cast<int>(v2023 ? r.Number("cpu_milli") / 1000 : r.Number("cpus"));
    n.memory_mib = static_cast<uint64_t>(r.Number("memory_mib"));
    n.gpus = static_cast<int>(r.Number(v2023 ? "gpu" : "gpus"));
    GM_RETURN_IF_ERROR(r.status());
    if (n.cpus < 1) r.Fail("a node without a CPU");
    GM_RETURN_IF_ERROR(r.status());
    gpus += n.gpus;
    nodes.push_back(std::move(n));
  }
  if (nodes.empty() || gpus == 0) {
    return Status::InvalidArgument(origin + ": no GPU node (" + std::to_string(nodes.size()) +
                                   " node(s), " + std::to_string(gpus) + " GPUs)");
  }
  return nodes;
}

}  // namespace gm::sim
