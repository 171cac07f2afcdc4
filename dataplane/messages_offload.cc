// Connections 4 and 5 (dataplane/messages_offload.h): the DataLoader offload.
#include "dataplane/messages_offload.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "core/digest.h"
#include "core/json.h"
#include "dataplane/auth.h"
#include "dataplane/message_fields.h"
#include "dataplane/offload_proof.h"

namespace gm {

// ---- the DataLoader offload ----

nlohmann::json OffloadNoteMsg::Encode() const {
  nlohmann::json m = {{"served", served}, {"dataset", dataset}};
  if (served) {
    m["workers"] = workers;
    m["blob_bytes"] = blob_bytes;
    m["mode"] = mode;
  } else {
    m["why"] = why;
    if (in_process) m["place"] = "in-process";
  }
  return m;
}

Result<OffloadNoteMsg> OffloadNoteMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<OffloadNoteMsg> {
    const JsonNode m(meta, "OFFLOAD_NOTE");
    OffloadNoteMsg r;
    GM_ASSIGN_OR_RETURN(JsonNode served_node, m.Get("served"));
    GM_ASSIGN_OR_RETURN(r.served, served_node.AsBool());
    GM_ASSIGN_OR_RETURN(JsonNode dataset_node, m.Get("dataset"));
    GM_ASSIGN_OR_RETURN(r.dataset, dataset_node.AsString());
    if (r.dataset.empty() || r.dataset.size() > 256 || !Printable(r.dataset)) {
      return dataset_node.Expected("a class name in printable ASCII, 1 to 256 bytes");
    }
    if (r.served) {
      GM_ASSIGN_OR_RETURN(int64_t count, Int(m, "workers", 1, 65536));
      r.workers = static_cast<uint64_t>(count);
      GM_ASSIGN_OR_RETURN(r.blob_bytes, Count(m, "blob_bytes", uint64_t{1} << 40));
      // Absent: exact (a client from before the elastic mode).
      GM_ASSIGN_OR_RETURN(r.mode, m.StringOr("mode", "exact"));
      if (r.mode != "exact" && r.mode != "elastic" && r.mode != "native") {
        GM_ASSIGN_OR_RETURN(JsonNode mode_node, m.Get("mode"));
        return mode_node.Expected("exact, elastic or native");
      }
      return r;
    }
    GM_ASSIGN_OR_RETURN(JsonNode why_node, m.Get("why"));
    GM_ASSIGN_OR_RETURN(r.why, why_node.AsString());
    if (r.why.empty() || r.why.size() > kMaxOffloadNoteWhyBytes) {
      return why_node.Expected("1 to " + std::to_string(kMaxOffloadNoteWhyBytes) + " bytes");
    }
    GM_ASSIGN_OR_RETURN(const std::string place, m.StringOr("place", "stock"));
    if (place != "stock" && place != "in-process") {
      GM_ASSIGN_OR_RETURN(JsonNode place_node, m.Get("place"));
      return place_node.Expected("stock or in-process");
    }
    r.in_process = place == "in-process";
    return r;
  }());
}

nlohmann::json OffloadMsg::Encode() const {
  nlohmann::json j = {{"rank", rank}};
  if (channel > 0) j["channel"] = channel;
  return j;
}

Result<OffloadMsg> OffloadMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<OffloadMsg> {
    const JsonNode m(meta, "OFFLOAD");
    OffloadMsg r;
    GM_ASSIGN_OR_RETURN(r.rank, Int(m, "rank", 0, 65535));
    if (m.has("channel")) {
      GM_ASSIGN_OR_RETURN(int64_t number, Int(m, "channel", 1, int64_t{1} << 62));
      r.channel = static_cast<uint64_t>(number);
    }
    return r;
  }());
}

nlohmann::json OffloadingMsg::Encode() const {
  return {{"run_id", run_id}, {"channel", channel}, {"ticket", ticket},
          {"proof", proof},   {"workers", workers}, {"reconnect_s", reconnect_s}};
}

Result<OffloadingMsg> OffloadingMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<OffloadingMsg> {
    const JsonNode m(meta, "OFFLOADING");
    OffloadingMsg r;
    GM_ASSIGN_OR_RETURN(r.run_id, OptionalName(m, "run_id"));
    GM_ASSIGN_OR_RETURN(int64_t number, Int(m, "channel", 1, int64_t{1} << 62));
    r.channel = static_cast<uint64_t>(number);
    GM_ASSIGN_OR_RETURN(r.ticket, m.String("ticket"));
    if (!CheckSecret(r.ticket, "ticket").ok()) {
      return (*m.Get("ticket")).Expected("64 lower-case hex characters");
    }
    GM_ASSIGN_OR_RETURN(r.proof, HexField(m, "proof", kOffloadProofHexChars, false));
    GM_ASSIGN_OR_RETURN(r.workers, Addresses(m));
    GM_ASSIGN_OR_RETURN(r.reconnect_s, Seconds(m, "reconnect_s", 0, 86400, true));
    return r;
  }());
}

nlohmann::json OffloadOpenMsg::Encode() const {
  return {{"python", python}, {"modules", modules}, {"proof", proof}};
}

Result<OffloadOpenMsg> OffloadOpenMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<OffloadOpenMsg> {
    const JsonNode m(meta, "OFFLOAD_OPEN");
    OffloadOpenMsg r;
    GM_ASSIGN_OR_RETURN(r.proof, HexField(m, "proof", kOffloadProofHexChars, false));
    GM_ASSIGN_OR_RETURN(r.python, m.String("python"));
    if (r.python.empty() || r.python.size() > kMaxPythonPathBytes || r.python[0] != '/' ||
        !Printable(r.python)) {
      return (*m.Get("python"))
          .Expected("an absolute path in printable ASCII, at most " +
                    std::to_string(kMaxPythonPathBytes) + " bytes");
    }
    GM_ASSIGN_OR_RETURN(JsonNode list, m.Get("modules"));
    GM_ASSIGN_OR_RETURN(r.modules, list.AsStrings());
    if (r.modules.size() > kMaxOffloadModules) {
      return list.Expected("at most " + std::to_string(kMaxOffloadModules) + " module names");
    }
    for (const std::string& name : r.modules) {
      const bool ok = !name.empty() && name.size() <= kMaxModuleNameBytes &&
                      std::all_of(name.begin(), name.end(), [](unsigned char c) {
                        return std::isalnum(c) || c == '_' || c == '.';
                      });
      if (!ok) {
        return list.Expected("module names of [A-Za-z0-9_.], at most " +
                             std::to_string(kMaxModuleNameBytes) + " bytes each");
      }
    }
    return r;
  }());
}

nlohmann::json OffloadOpenedMsg::Encode() const { return {{"pid", pid}, {"host", host}}; }

Result<OffloadOpenedMsg> OffloadOpenedMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<OffloadOpenedMsg> {
    const JsonNode m(meta, "OFFLOAD_OPENED");
    OffloadOpenedMsg r;
    GM_ASSIGN_OR_RETURN(r.pid, Int(m, "pid", 1, int64_t{1} << 22));
    GM_ASSIGN_OR_RETURN(r.host, OptionalName(m, "host"));
    return r;
  }());
}

nlohmann::json EncodeOffloadData(std::string_view payload, bool fd) {
  nlohmann::json m = {{"sha256", Sha256Hex(payload)}};
  if (fd) m["fd"] = true;
  return m;
}

Result<bool> OffloadDataFd(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<bool> {
    const JsonNode m(meta, "OFFLOAD_DATA");
    return m.BoolOr("fd", false);
  }());
}

Status CheckOffloadData(const nlohmann::json& meta, std::string_view payload) {
  return AsCorrupt([&]() -> Result<bool> {
           const JsonNode m(meta, "OFFLOAD_DATA");
           GM_ASSIGN_OR_RETURN(std::string sha, m.String("sha256"));
           if (sha != Sha256Hex(payload)) {
             return (*m.Get("sha256"))
                 .Expected("the SHA-256 of the frame's " + std::to_string(payload.size()) +
                           " payload bytes (they were altered on the way)");
           }
           return true;
         }())
      .status();
}

nlohmann::json OffloadExitMsg::Encode() const {
  nlohmann::json out = {{"status", status}};
  if (!why.empty()) out["why"] = why.substr(0, 1024);
  return out;
}

Result<OffloadExitMsg> OffloadExitMsg::Decode(const nlohmann::json& meta) {
  return AsCorrupt([&]() -> Result<OffloadExitMsg> {
    const JsonNode m(meta, "OFFLOAD_EXIT");
    OffloadExitMsg r;
    GM_ASSIGN_OR_RETURN(r.status, Int(m, "status", -64, 255));
    GM_ASSIGN_OR_RETURN(r.why, m.StringOr("why", ""));
    if (r.why.size() > 1024) return (*m.Get("why")).Expected("at most 1024 bytes");
    return r;
  }());
}

}  // namespace gm
