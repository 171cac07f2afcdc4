// The libcurl-backed HttpClient: one easy handle per request, so Get is
// thread-safe without locks; transient failures are retried with backoff.
#include <curl/curl.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "worker/http.h"

namespace gm {
namespace {

constexpr double kFirstBackoffS = 0.2;

struct Attempt {
  Status status;
  bool transient = false;  // worth retrying
  std::string body;
  uint64_t max_body_bytes = 0;
  bool too_large = false;
};

// Returning less than given makes curl fail the transfer (CURLE_WRITE_ERROR).
size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  auto* a = static_cast<Attempt*>(out);
  if (a->body.size() + size * count > a->max_body_bytes) {
    a->too_large = true;
    return 0;
  }
  a->body.append(data, size * count);
  return size * count;
}

// Maps a curl failure to a Status; only dropped or reset connections are transient.
Attempt CurlFailure(const std::string& url, CURLcode code, const char* detail) {
  std::string msg = RedactUrl(url) + ": " + (detail[0] != '\0' ? detail : curl_easy_strerror(code));
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
      return {Status::Unavailable(msg), false, {}};
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return {Status::Unavailable(msg), true, {}};
    default:
      return {Status::IoError(msg), false, {}};
  }
}

class CurlHttpClient : public HttpClient {
 public:
  explicit CurlHttpClient(const HttpOptions& options) : options_(options) {}

  Result<std::string> Get(const std::string& url) override {
    double backoff_s = kFirstBackoffS;
    for (int attempt = 0;; ++attempt) {
      Attempt a = GetOnce(url);
      if (a.status.ok()) return std::move(a.body);
      if (!a.transient || attempt >= options_.retries) return a.status;
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff_s));
      backoff_s *= 2;
    }
  }

 private:
  Attempt GetOnce(const std::string& url) const {
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return {Status::Internal(RedactUrl(url) + ": curl_easy_init failed"), false, {}};
    Attempt a;
    char error[CURL_ERROR_SIZE] = {0};
    CURL* h = curl.get();
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, RedirectProtocols(url));
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
                     static_cast<curl_off_t>(options_.max_body_bytes));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ToMs(options_.connect_timeout_s));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ToMs(options_.total_timeout_s));
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, AppendBody);
    a.max_body_bytes = options_.max_body_bytes;
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    CURLcode code = curl_easy_perform(h);
    if (a.too_large || code == CURLE_FILESIZE_EXCEEDED) {
      return {Status::IoError(RedactUrl(url) + ": the response is larger than " +
                              std::to_string(options_.max_body_bytes) + " bytes"),
              false,
              {}};
    }
    if (code != CURLE_OK) return CurlFailure(url, code, error);
    long http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    if (http < 400) return a;
    std::string msg = RedactUrl(url) + ": HTTP " + std::to_string(http);
    if (http == 404) return {Status::NotFound(msg), false, {}};
    bool transient = http >= 500 || http == 429;
    return {Status::IoError(msg), transient, {}};
  }

  static long ToMs(double seconds) {
    return seconds <= 0 ? 0L : static_cast<long>(seconds * 1000.0 + 0.5);
  }

  HttpOptions options_;
};

}  // namespace

std::string RedactUrl(const std::string& url) {
  std::string out = url;
  const size_t scheme = out.find("://");
  const size_t host_start = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t path_start = out.find_first_of("/?#", host_start);
  const size_t at = out.rfind('@', path_start == std::string::npos ? out.size() : path_start);
  if (at != std::string::npos && at >= host_start) out.replace(host_start, at - host_start, "***");
  const size_t query = out.find('?');
  if (query != std::string::npos) out.replace(query + 1, std::string::npos, "***");
  return out;
}

const char* RedirectProtocols(const std::string& url) {
  return url.rfind("https://", 0) == 0 ? "https" : "http,https";
}

std::unique_ptr<HttpClient> MakeCurlHttpClient(const HttpOptions& options) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::make_unique<CurlHttpClient>(options);
}

}  // namespace gm
