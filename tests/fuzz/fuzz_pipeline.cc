// Fuzzes the pipeline.json parser: any bytes must yield a Pipeline or a Status,
// never a crash, a hang or an exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/json.h"
#include "worker/http.h"
#include "worker/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = gm::ParseJson(text, "fuzz.json");
  if (!doc.ok()) return 0;
  gm::FakeHttpClient http;
  gm::PipelineOptions options;
  options.http = &http;
  // A base directory that does not exist keeps the files source off the disk.
  auto pipeline = gm::Pipeline::FromJson(*doc, "fuzz.json", "/nonexistent-goldminer-fuzz", options);
  (void)pipeline;
  return 0;
}
