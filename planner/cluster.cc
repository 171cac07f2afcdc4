#include "planner/cluster.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>
#include <utility>

#include "core/json.h"
#include "core/json_fields.h"

namespace gm {

// Readers of cluster.json (namespace gm: Fields finds them by argument-dependent lookup).
Status Convert(const JsonNode& n, planner::ClusterNode& out) {
  Fields f(n);
  f.Required("name", out.name);
  f.Required("partitions", out.partitions);
  f.Required("cpus", out.cpus);
  f.Optional("cpus_alloc", out.cpus_alloc);
  f.Optional("memory_mb", out.memory_mb);
  f.Optional("memory_alloc_mb", out.memory_alloc_mb);
  f.Optional("gpus", out.gpus);
  f.Optional("gpus_alloc", out.gpus_alloc);
  f.Optional("state", out.state);
  f.Optional("nic_gbps", out.nic_gbps);
  f.Check(!out.name.empty(), "name", "a node name");
  f.Check(out.cpus >= 1 && out.cpus <= 1000000, "cpus", "an integer from 1 to 1000000");
  f.Check(out.cpus_alloc >= 0 && out.cpus_alloc <= out.cpus, "cpus_alloc",
          "an integer from 0 to the node's cpus");
  f.Check(out.gpus >= 0 && out.gpus <= 1024, "gpus", "an integer from 0 to 1024");
  f.Check(out.gpus_alloc >= 0 && out.gpus_alloc <= out.gpus, "gpus_alloc",
          "an integer from 0 to the node's gpus");
  f.Check(out.memory_alloc_mb <= out.memory_mb || out.memory_mb == 0, "memory_alloc_mb",
          "at most the node's memory_mb");
  f.Check(out.nic_gbps >= 0 && out.nic_gbps <= 100000, "nic_gbps", "a number from 0 to 100000");
  std::transform(out.state.begin(), out.state.end(), out.state.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return f.status();
}

Status Convert(const JsonNode& n, planner::ClusterPartition& out) {
  Fields f(n);
  f.Required("name", out.name);
  f.Optional("default", out.is_default);
  f.Optional("up", out.up);
  f.Check(!out.name.empty(), "name", "a partition name");
  return f.status();
}

namespace planner {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

// A whole non-negative integer ("8", "16000", "16000M" with unit M); nullopt otherwise.
std::optional<int64_t> Integer(const std::string& s) {
  if (s.empty() || s.size() > 15) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Count of GPUs in a Gres= or TRES list: "gpu:2", "gpu:a100:4(S:0-1)", "gres/gpu=2",
// "gres/gpu:a100=2"; only the untyped total counts when both appear.
int GpusIn(const std::string& list, bool tres) {
  int untyped = -1, typed = 0;
  for (const std::string& item : Split(list, ',')) {
    if (tres) {
      auto eq = item.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = item.substr(0, eq);
      auto n = Integer(item.substr(eq + 1));
      if (!n) continue;
      if (key == "gres/gpu")
        untyped = static_cast<int>(*n);
      else if (key.rfind("gres/gpu:", 0) == 0)
        typed += static_cast<int>(*n);
    } else {
      std::string g = item.substr(0, item.find('('));
      std::vector<std::string> parts = Split(g, ':');
      if (parts.size() < 2 || parts[0] != "gpu") continue;
      auto n = Integer(parts.back());
      if (n) typed += static_cast<int>(*n);
    }
  }
  return untyped >= 0 ? untyped : typed;
}

}  // namespace

bool ClusterNode::usable() const {
  std::vector<std::string> words;
  std::string w;
  for (char c : state) {
    if (c == '+' || c == '*' || c == '~' || c == '#' || c == '!' || c == '%' || c == '$' ||
        c == '@' || c == '^' || c == '-') {
      if (!w.empty()) words.push_back(w);
      w.clear();
      if (c == '*' || c == '~' || c == '#' || c == '!' || c == '%' || c == '$' || c == '@' ||
          c == '^') {
        return false;  // not responding, powered off, powering up, ... (sinfo's suffixes)
      }
    } else {
      w += c;
    }
  }
  if (!w.empty()) words.push_back(w);
  if (words.empty()) return false;
  const std::string& base = words.front();
  if (base != "idle" && base != "mixed" && base != "allocated" && base != "completing") {
    return false;
  }
  for (const std::string& flag : words) {
    if (flag == "drain" || flag == "draining" || flag == "drained" || flag == "down" ||
        flag == "fail" || flag == "failing" || flag == "maint" || flag == "reboot_requested" ||
        flag == "reboot_issued" || flag == "not_responding" || flag == "powered_down" ||
        flag == "powering_down" || flag == "power_down" || flag == "reserved" ||
        flag == "planned" || flag == "inval") {
      return false;
    }
  }
  return true;
}

bool ClusterNode::in(const std::string& partition) const {
  return std::find(partitions.begin(), partitions.end(), partition) != partitions.end();
}

const ClusterPartition* Cluster::partition(const std::string& name) const {
  for (const ClusterPartition& p : partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Result<Cluster> ClusterFromJson(const nlohmann::json& j, const std::string& origin) {
  JsonNode root(j, origin);
  if (!root.is_object()) {
    return root.Expected("a cluster object ({\"schema\": \"goldminer.cluster\", ...})");
  }
  GM_RETURN_IF_ERROR(CheckSchemaAndVersion(root, kClusterSchema, kClusterVersion,
                                           "a cluster.json (see goldminer-plan(1))",
                                           "write it in this version's shape"));
  Cluster c;
  c.source = "file:" + origin;
  Fields f(root);
  f.Required("partitions", c.partitions);
  f.Required("nodes", c.nodes);
  GM_RETURN_IF_ERROR(f.status());
  GM_ASSIGN_OR_RETURN(JsonNode nodes, root.Get("nodes"));
  std::map<std::string, int> seen;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    GM_ASSIGN_OR_RETURN(JsonNode node, nodes.At(i));
    if (seen[c.nodes[i].name]++)
      return node.Error("node \"" + c.nodes[i].name + "\" is listed twice");
    for (const std::string& p : c.nodes[i].partitions) {
      if (!c.partition(p)) {
        return node.Error("partition \"" + p + "\" is not listed under $.partitions");
      }
    }
  }
  return c;
}

nlohmann::json ClusterToJson(const Cluster& c) {
  nlohmann::json parts = nlohmann::json::array(), nodes = nlohmann::json::array();
  for (const ClusterPartition& p : c.partitions) {
    parts.push_back({{"name", p.name}, {"default", p.is_default}, {"up", p.up}});
  }
  for (const ClusterNode& n : c.nodes) {
    nodes.push_back({{"name", n.name},
                     {"partitions", n.partitions},
                     {"cpus", n.cpus},
                     {"cpus_alloc", n.cpus_alloc},
                     {"memory_mb", n.memory_mb},
                     {"memory_alloc_mb", n.memory_alloc_mb},
                     {"gpus", n.gpus},
                     {"gpus_alloc", n.gpus_alloc},
                     {"state", n.state},
                     {"nic_gbps", n.nic_gbps}});
  }
  return {{"schema", kClusterSchema},
          {"version", kClusterVersion},
          {"partitions", parts},
          {"nodes", nodes}};
}

Result<Cluster> ClusterFromScontrol(const std::string& nodes_text,
                                    const std::string& partitions_text,
                                    const std::string& gres_used_text, const std::string& origin) {
  std::map<std::string, int> gpus_used;
  {
    std::istringstream in(gres_used_text);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> cols = Split(line, '|');
      if (cols.size() < 2) continue;
      std::string name = cols[0];
      name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
      gpus_used[name] = std::max(gpus_used[name], GpusIn(cols[1], /*tres=*/false));
    }
  }
  Cluster c;
  c.source = "slurm";
  int line_no = 0;
  std::istringstream parts(partitions_text);
  std::string line;
  while (std::getline(parts, line)) {
    ++line_no;
    auto fields = ScontrolFields(line);
    if (fields.empty()) continue;
    std::map<std::string, std::string> m(fields.begin(), fields.end());
    if (!m.count("PartitionName")) {
      return Status::InvalidArgument(origin + ": partition line " + std::to_string(line_no) +
                                     " has no PartitionName=: \"" + line.substr(0, 80) + "\"");
    }
    ClusterPartition p;
    p.name = m["PartitionName"];
    p.is_default = m["Default"] == "YES";
    p.up = !m.count("State") || m["State"] == "UP";
    c.partitions.push_back(p);
  }
  line_no = 0;
  std::istringstream nodes(nodes_text);
  while (std::getline(nodes, line)) {
    ++line_no;
    auto fields = ScontrolFields(line);
    if (fields.empty()) continue;
    std::map<std::string, std::string> m(fields.begin(), fields.end());
    auto bad = [&](const std::string& what) {
      return Status::InvalidArgument(origin + ": node line " + std::to_string(line_no) + ": " +
                                     what + ": \"" + line.substr(0, 80) + "\"");
    };
    if (!m.count("NodeName")) return bad("no NodeName=");
    ClusterNode n;
    n.name = m["NodeName"];
    for (const ClusterNode& seen : c.nodes) {
      if (seen.name == n.name) return bad("node " + n.name + " is listed twice");
    }
    const std::string cpus = m.count("CPUEfctv") ? m["CPUEfctv"] : m["CPUTot"];
    auto total = Integer(cpus);
    if (!total || *total < 1) return bad("CPUTot is not a positive integer");
    n.cpus = static_cast<int>(*total);
    n.cpus_alloc = static_cast<int>(Integer(m["CPUAlloc"]).value_or(0));
    n.memory_mb = static_cast<uint64_t>(Integer(m["RealMemory"]).value_or(0));
    n.memory_alloc_mb = static_cast<uint64_t>(Integer(m["AllocMem"]).value_or(0));
    n.gpus = GpusIn(m["Gres"], /*tres=*/false);
    n.gpus_alloc = std::min(n.gpus, std::max(GpusIn(m["AllocTRES"], /*tres=*/true),
                                             gpus_used.count(n.name) ? gpus_used[n.name] : 0));
    n.state = Lower(m.count("State") ? m["State"] : "unknown");
    n.partitions = Split(m["Partitions"], ',');
    c.nodes.push_back(std::move(n));
  }
  return c;
}

}  // namespace planner
}  // namespace gm
