// HttpClient: the narrow edge to HTTP(S). The real one uses libcurl; tests also
// use FakeHttpClient. Implementations are thread-safe (Get may be called from
// several threads at once).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "core/thread_annotations.h"

namespace gm {

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // Fetches `url` whole. NotFound for 404, Unavailable for an unreachable host or a
  // timeout, IoError for other HTTP errors; every message names the URL.
  virtual Result<std::string> Get(const std::string& url) = 0;
};

struct HttpOptions {
  double connect_timeout_s = 10;
  double total_timeout_s = 300;  // per request
  int retries = 2;               // for transient failures (not for 404)
  // A response body larger than this fails (IoError) instead of filling memory:
  // bodies are held whole (a tar shard is read into memory).
  uint64_t max_body_bytes = uint64_t{4} << 30;
};

// `url` fit for a message: user and password ("user:pass@") and the query string
// (often a signed token) replaced by "***".
std::string RedactUrl(const std::string& url);

// The protocols a redirect from `url` may go to: an https URL never downgrades
// to http ("https"); an http one may go to either ("http,https").
const char* RedirectProtocols(const std::string& url);

// libcurl-backed client.
std::unique_ptr<HttpClient> MakeCurlHttpClient(const HttpOptions& options = {});

// In-memory client for unit tests: serves `pages`, 404 for anything else.
class FakeHttpClient : public HttpClient {
 public:
  void Put(const std::string& url, std::string body) {
    MutexLock lock(mu_);
    pages_[url] = std::move(body);
  }
  Result<std::string> Get(const std::string& url) override {
    MutexLock lock(mu_);
    auto it = pages_.find(url);
    if (it == pages_.end()) return Status::NotFound(url + ": HTTP 404");
    return it->second;
  }

 private:
  Mutex mu_;
  std::map<std::string, std::string> pages_;
};

}  // namespace gm
