// The real HttpClient against a real HTTP server (tests/http_server.py), and the
// tar source reading shards through it.
#include "worker/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/unit/tar_fixture.h"
#include "tests/unit/test_util.h"
#include "worker/source.h"

namespace gm {
namespace {

using Clock = std::chrono::steady_clock;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool CanConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// A port that nothing listens on: bound by us, then released.
int UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int out[2];
    ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
    std::string script = testing::SourcePath("tests/http_server.py");
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::execl("/usr/bin/python3", "python3", script.c_str(), dir_.path().c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    port_ = ReadPort(out[0]);
    ::close(out[0]);
    ASSERT_GT(port_, 0) << "the test HTTP server did not report a port";
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!CanConnect(port_) && Clock::now() < deadline) {
      ::poll(nullptr, 0, 10);
    }
    ASSERT_TRUE(CanConnect(port_));
    base_ = "http://127.0.0.1:" + std::to_string(port_) + "/";
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Reads the first line of the server's stdout, waiting at most 20 s for it.
  static int ReadPort(int fd) {
    std::string line;
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos && Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[64];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    return line.find('\n') == std::string::npos ? -1 : std::atoi(line.c_str());
  }

  static HttpOptions FastOptions(int retries) {
    HttpOptions o;
    o.connect_timeout_s = 2;
    o.total_timeout_s = 20;
    o.retries = retries;
    return o;
  }

  testing::TempDir dir_;
  pid_t pid_ = -1;
  int port_ = -1;
  std::string base_;
};

TEST_F(HttpTest, GivenServedFile_WhenGet_ThenBodyComesBackWhole) {
  std::string body(300000, 'q');
  body[12345] = 'z';
  dir_.Write("big.bin", body);
  auto http = MakeCurlHttpClient(FastOptions(0));

  Result<std::string> got = http->Get(base_ + "big.bin");

  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, body);
}

TEST_F(HttpTest, GivenABodyOverTheLimit_WhenGet_ThenIoErrorInsteadOfMemory) {
  dir_.Write("big.bin", std::string(300000, 'q'));
  HttpOptions o = FastOptions(2);
  o.max_body_bytes = 100000;
  auto http = MakeCurlHttpClient(o);

  Result<std::string> got = http->Get(base_ + "big.bin");

  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kIoError);
  EXPECT_NE(got.status().message().find("larger than 100000 bytes"), std::string::npos)
      << got.status().message();
}

TEST_F(HttpTest, GivenCredentialsAndATokenInTheUrl_WhenGetFails_ThenTheMessageHidesThem) {
  auto http = MakeCurlHttpClient(FastOptions(0));
  const std::string url = "http://user:hunter2@127.0.0.1:" + std::to_string(port_) +
                          "/missing.tar?X-Amz-Signature=s3cr3t";

  Result<std::string> got = http->Get(url);

  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message().find("hunter2"), std::string::npos) << got.status().message();
  EXPECT_EQ(got.status().message().find("s3cr3t"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("missing.tar?***"), std::string::npos)
      << got.status().message();
}

TEST(HttpUrlTest, GivenUrlsThenRedactionAndRedirectProtocolsFollowTheScheme) {
  EXPECT_EQ(RedactUrl("https://a:b@host/x?sig=1"), "https://***@host/x?***");
  EXPECT_EQ(RedactUrl("http://host/p@q"), "http://host/p@q");
  EXPECT_EQ(RedactUrl("shards/a.tar"), "shards/a.tar");
  EXPECT_STREQ(RedirectProtocols("https://host/a.tar"), "https");  // never down to http
  EXPECT_STREQ(RedirectProtocols("http://host/a.tar"), "http,https");
}

TEST_F(HttpTest, GivenMissingUrl_WhenGet_ThenNotFoundNamingUrl) {
  auto http = MakeCurlHttpClient(FastOptions(2));
  std::string url = base_ + "nope.tar";

  Result<std::string> got = http->Get(url);

  ASSERT_EQ(got.status().code(), Code::kNotFound);
  EXPECT_EQ(got.status().message(), url + ": HTTP 404");
}

TEST_F(HttpTest, GivenUnreachablePort_WhenGet_ThenUnavailable) {
  auto http = MakeCurlHttpClient(FastOptions(2));
  std::string url = "http://127.0.0.1:" + std::to_string(UnusedPort()) + "/x.tar";

  Result<std::string> got = http->Get(url);

  ASSERT_EQ(got.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(got.status().message(), url)) << got.status().message();
}

TEST_F(HttpTest, GivenTransient503_WhenGetWithRetries_ThenSucceedsElseIoError) {
  dir_.Write("a.txt", "after retry");
  dir_.Write("b.txt", "never served");
  auto retrying = MakeCurlHttpClient(FastOptions(2));
  auto single = MakeCurlHttpClient(FastOptions(0));

  Result<std::string> retried = retrying->Get(base_ + "flaky/a.txt");
  Result<std::string> failed = single->Get(base_ + "flaky/b.txt");

  ASSERT_TRUE(retried.ok()) << retried.status().message();
  EXPECT_EQ(*retried, "after retry");
  ASSERT_EQ(failed.status().code(), Code::kIoError);
  EXPECT_TRUE(Contains(failed.status().message(), "HTTP 503"));
}

TEST_F(HttpTest, GivenRedirectOrDroppedConnection_WhenGet_ThenFollowedOrUnavailable) {
  dir_.Write("target.txt", "landed");
  auto http = MakeCurlHttpClient(FastOptions(1));

  Result<std::string> redirected = http->Get(base_ + "redirect/target.txt");
  Result<std::string> dropped = http->Get(base_ + "reset/target.txt");

  ASSERT_TRUE(redirected.ok()) << redirected.status().message();
  EXPECT_EQ(*redirected, "landed");
  EXPECT_EQ(dropped.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(dropped.status().message(), "reset/target.txt"));
}

TEST_F(HttpTest, GivenTarShardsOverHttp_WhenReadFromThreads_ThenEverySampleArrives) {
  std::filesystem::create_directories(dir_.path() + "/src");
  for (int k = 0; k < 4; ++k) {
    dir_.Write("src/" + std::to_string(k) + ".jpg", "img" + std::to_string(k));
    dir_.Write("src/" + std::to_string(k) + ".cls", std::to_string(k));
  }
  for (int shard = 0; shard < 4; ++shard) {
    testing::PackTar(dir_.path() + "/src", {"0.jpg", "0.cls", "1.jpg", "1.cls", "2.jpg", "2.cls"},
                     dir_.path() + "/shard-" + std::to_string(shard) + ".tar");
  }
  auto http = MakeCurlHttpClient(FastOptions(0));
  SourceEnv env;
  env.http = http.get();
  nlohmann::json doc = {{"type", "tar"},
                        {"urls", {base_ + "shard-{0..3}.tar", base_ + "gone.tar"}}};
  auto source = MakeSource(JsonNode(doc, "pipeline.json", "$.source"), env);
  ASSERT_TRUE(source.ok()) << source.status().message();

  std::vector<Status> results(5);
  std::vector<int> counts(5, 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      results[i] = (*source)->ReadSplit(i, [&](Sample&& s, const Status& st) {
        if (st.ok() && s.label == static_cast<int64_t>(s.index & 0xffffffff)) ++counts[i];
        return true;
      });
    });
  }
  for (auto& t : threads) t.join();

  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(results[i].ok()) << results[i].message();
    EXPECT_EQ(counts[i], 3);
  }
  EXPECT_EQ(results[4].code(), Code::kNotFound);
  EXPECT_TRUE(Contains(results[4].message(), base_ + "gone.tar"));
}

}  // namespace
}  // namespace gm
