#include "worker/op.h"

namespace gm {

void OpRegistry::Add(std::string name, OpFactory factory) {
  factories_[std::move(name)] = std::move(factory);
}

Result<std::unique_ptr<Op>> OpRegistry::Make(const JsonNode& stage, const OpEnv& env) const {
  if (!stage.is_object()) return stage.Expected("an object such as {\"op\": \"decode_jpeg\"}");
  GM_ASSIGN_OR_RETURN(std::string name, stage.String("op"));
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& [n, f] : factories_) known += (known.empty() ? "" : ", ") + n;
    return stage.Error("unknown op \"" + name + "\" (known ops: " + known + ")");
  }
  return it->second(stage, env);
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : factories_) out.push_back(n);
  return out;
}

const OpRegistry& OpRegistry::BuiltIn() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    RegisterImageOps(r);
    RegisterTextOps(r);
    RegisterExecOps(r);
    return r;
  }();
  return registry;
}

}  // namespace gm
