// PLACEHOLDER: replaced by the sources implementation.
#include "worker/source.h"
namespace gm {
Result<std::unique_ptr<Source>> MakeSource(const JsonNode& source, const SourceEnv&) {
  return source.Error("sources are not built yet");
}
std::unique_ptr<HttpClient> MakeCurlHttpClient(const HttpOptions&) { return nullptr; }
}  // namespace gm
