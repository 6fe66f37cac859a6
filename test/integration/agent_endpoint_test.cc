// The agent's HTTP endpoint and lifecycle under hostile clients and failures: the real `kgpu agent`
// binary on the fake NVML, spoken to over raw TCP sockets (so the tests control exactly what is
// sent and how slowly), and signals.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "raw_http.h"
#include "test_env.h"

namespace kgpu::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The real agent with its port chosen by the system (read back from its log).
class AgentProcess {
 public:
  AgentProcess(const std::string& node_yaml, std::vector<std::string> extra = {}) : node_(node_yaml) {
    log_ = (dir_.path() / "agent.log").string();
    std::vector<std::string> argv{KGPU_BINARY, "agent", "--nvml-library", KGPU_FAKE_NVML, "-a", "127.0.0.1:0",
                                  "-c", "200", "--pod-resources-socket", ""};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process_ = std::make_unique<ChildProcess>(argv, std::vector<std::string>{"KGPU_FAKE_NVML_CONFIG=" + node_.path()},
                                              log_);
  }

  // Waits for "listening on host:port"; 0 when the agent never listened.
  int port(std::chrono::milliseconds timeout = 10s) { return agent_port(log_, timeout); }
  std::string log() const { return slurp(log_); }
  ChildProcess& process() { return *process_; }
  FakeNodeFile& node() { return node_; }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  FakeNodeFile node_;
  std::string log_;
  std::unique_ptr<ChildProcess> process_;
};

constexpr const char* kL4 = "preset: pcie-l4-4\n";

TEST(AgentEndpoint, ThousandIdleAndSlowConnectionsDoNotStopScrapesOrHealth) {
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);
  ASSERT_GE(nofile.rlim_cur, 1100u) << "this test needs 1,100 file descriptors";

  AgentProcess agent(kL4, {"--device-plugin=false"});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  std::vector<int> idle;
  for (int i = 0; i < 1000; ++i) {
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0) << "connection " << i;
    // Half say nothing; half start a request and never finish it (a slowloris).
    if (i % 2 == 1) send(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n", 32, MSG_NOSIGNAL);
    idle.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    const auto health = get(port, "/health");
    EXPECT_EQ(status_of(health), 200) << "round " << round << ": " << health.value_or("(no answer)");
    const auto metrics = get(port, "/metrics");
    EXPECT_EQ(status_of(metrics), 200) << "round " << round;
    EXPECT_THAT(metrics.value_or(""), HasSubstr("DCGM_FI_DEV_GPU_TEMP"));
  }
  for (int fd : idle) close(fd);
}

TEST(AgentEndpoint, OversizedHeadersAre431AndTheConnectionIsClosed) {
  AgentProcess agent(kL4, {"--device-plugin=false"});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  // Half a million small headers (4 MB).
  std::string request = "GET /metrics HTTP/1.1\r\nHost: agent\r\n";
  for (int i = 0; i < 500'000; ++i) request += "X-a: b\r\n";
  request += "\r\n";
  const auto r = ask(port, request);
  EXPECT_EQ(status_of(r), 431) << r.value_or("(no answer)").substr(0, 200);
  // The agent serves normally afterwards.
  EXPECT_EQ(status_of(get(port, "/health")), 200);
}

TEST(AgentEndpoint, BodiesAndOtherMethodsAreRefused) {
  AgentProcess agent(kL4, {"--device-plugin=false"});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  const auto post = ask(port, "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(status_of(post), 405);
  EXPECT_THAT(post.value_or(""), HasSubstr("Allow: GET, HEAD"));
  EXPECT_EQ(status_of(ask(port, "GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000\r\n\r\nxx")), 413);
  EXPECT_EQ(status_of(ask(port, "HEAD /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")), 200);
  EXPECT_EQ(status_of(get(port, "/nothing-here")), 404);
}

TEST(AgentEndpoint, KeptAliveConnectionServesManyScrapes) {
  AgentProcess agent(kL4, {"--device-plugin=false"});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  const int fd = connect_to(port);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 20; ++i) {
    const auto r = converse(fd, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_EQ(status_of(r), 200) << "scrape " << i;
    EXPECT_THAT(*r, HasSubstr("DCGM_FI_DEV_GPU_TEMP"));
  }
  close(fd);
}

TEST(AgentEndpoint, HealthIsLivenessAndReadyListsWhatIsWrong) {
  AgentProcess agent(kL4, {"--device-plugin=false"});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  EXPECT_EQ(status_of(get(port, "/ready")), 200);
  agent.node().rewrite(std::string(kL4) + "faults: {lost: [2]}\n");
  std::optional<std::string> ready;
  eventually([&] { return status_of(ready = get(port, "/ready")) == 503; }, 6s);
  EXPECT_EQ(status_of(ready), 503);
  EXPECT_THAT(ready.value_or(""), HasSubstr("GPU 2 ("));
  EXPECT_THAT(ready.value_or(""), Not(HasSubstr("GPU 1 (")));
  // A lost GPU is a readiness problem, not a dead agent.
  EXPECT_EQ(status_of(get(port, "/health")), 200);
}

TEST(AgentEndpoint, NvmlDownWithFailOnInitErrorFalseKeepsServing) {
  const std::string node = std::string(kL4) + "faults: {init: DRIVER_NOT_LOADED}\n";
  {
    AgentProcess agent(node, {"--device-plugin=false"});
    const auto st = agent.process().wait(10s);
    ASSERT_TRUE(st.has_value()) << "failOnInitError defaults to true: the agent must exit";
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << agent.log();
  }
  TempDir dp;
  AgentProcess agent(node, {"--fail-on-init-error=false", "--device-plugin-dir", dp.path().string()});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("failOnInitError is false"));
  EXPECT_EQ(status_of(get(port, "/health")), 200);
  const auto ready = get(port, "/ready");
  EXPECT_EQ(status_of(ready), 503);
  EXPECT_THAT(ready.value_or(""), HasSubstr("NVML"));
  EXPECT_EQ(status_of(get(port, "/metrics")), 200);
  EXPECT_TRUE(agent.process().running());
}

TEST(AgentEndpoint, NvmlThatComesUpLaterIsServed) {
  // The driver is loaded after the agent started (a driver container): the retry picks it up.
  AgentProcess agent(std::string(kL4) + "faults: {init: DRIVER_NOT_LOADED}\n",
                     {"--fail-on-init-error=false", "--device-plugin=false", "--nvml-retry-interval", "200"});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  EXPECT_EQ(status_of(get(port, "/ready")), 503);
  agent.node().rewrite(kL4);
  std::optional<std::string> ready;
  eventually([&] { return status_of(ready = get(port, "/ready")) == 200; }, 5s);
  EXPECT_EQ(status_of(ready), 200) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("NVML is up: serving GPUs"));
  EXPECT_THAT(get(port, "/metrics").value_or(""), HasSubstr("DCGM_FI_DEV_GPU_TEMP"));
}

TEST(AgentEndpoint, SigtermEndsTheAgentEvenWhileNvmlHangs) {
  AgentProcess agent(kL4, {"--device-plugin=false"});
  const int port = agent.port();
  ASSERT_NE(port, 0) << agent.log();
  // Every NVML call now blocks for a minute (a hung driver), the sampler's included.
  agent.node().rewrite(std::string(kL4) + "faults: {calls: [{call: nvmlDeviceGetCount_v2, delayMs: 60000}]}\n");
  // The sampler is inside the call once /health says sampling stalled (three 200 ms intervals + 1 s).
  std::optional<std::string> health;
  eventually([&] { return status_of(health = get(port, "/health")) == 503; }, 5s);
  ASSERT_EQ(status_of(health), 503) << agent.log();
  ASSERT_EQ(kill(agent.process().pid(), SIGTERM), 0);
  const auto st = agent.process().wait(5s);
  ASSERT_TRUE(st.has_value()) << "still running 5 s after SIGTERM\n" << agent.log();
  EXPECT_TRUE(WIFEXITED(*st)) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("shutdown did not finish within 900 ms: exiting now"));
}

TEST(AgentEndpoint, SigtermDuringStartIsHonoured) {
  // NVML hangs while the agent starts (before it listens); SIGTERM must still shut it down in an
  // orderly way (exit status, not death by the signal).
  AgentProcess agent(std::string(kL4) + "faults: {calls: [{call: nvmlDeviceGetCount_v2, delayMs: 60000}]}\n",
                     {"--device-plugin=false"});
  // The agent loaded NVML (its signal handlers come before that): it is in or near the hung call.
  // Until the child has exec'd the agent, its maps are a copy of this test process's, which holds
  // the fake NVML too when an earlier test loaded it: wait for the exec first.
  const std::string proc = "/proc/" + std::to_string(agent.process().pid());
  const auto exe_is_agent = [&] {
    std::error_code ec;
    return std::filesystem::equivalent(std::filesystem::read_symlink(proc + "/exe", ec), KGPU_BINARY, ec);
  };
  ASSERT_TRUE(eventually(exe_is_agent, 10s)) << agent.log();
  ASSERT_TRUE(eventually([&] { return slurp(proc + "/maps").find("libnvidia-ml") != std::string::npos; }, 10s))
      << agent.log();
  ASSERT_EQ(kill(agent.process().pid(), SIGTERM), 0);
  const auto st = agent.process().wait(5s);
  ASSERT_TRUE(st.has_value()) << agent.log();
  EXPECT_TRUE(WIFEXITED(*st)) << "ended by the signal instead of shutting down: " << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("exiting now"));
}

}  // namespace
}  // namespace kgpu::testing
