// DCGM's profiling fields through the production loader (dlopen of libdcgm) against the fake
// DCGM (tools/fake-dcgm) serving the fake NVML's node: values and labels on the exporter page,
// the start-up line without DCGM, and hostile cases (missing symbols, dcgmInit failing, a host
// engine that is unreachable or goes away, blank / not supported answers, a GPU falling off).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "common/log.h"
#include "gpu/dcgm/profiler.h"
#include "metrics/dcgm_source.h"
#include "metrics/sampler.h"
#include "test_env.h"

namespace kgpu::dcgm {
namespace {

using kgpu::testing::ChildProcess;
using kgpu::testing::eventually;
using kgpu::testing::FakeNodeFile;
using kgpu::testing::TempDir;

constexpr const char* kA0 = "GPU-0a100000-0000-0000-0000-000000000000";
constexpr const char* kA1 = "GPU-0a100000-0000-0000-0000-000000000001";
constexpr const char* kA2 = "GPU-0a100000-0000-0000-0000-000000000002";

// Three A100s (no GPM) with known activity; GPU 1 is busier.
std::string a100_node(const std::string& faults = "") {
  const std::string busy =
      "{gpuUtil: 70, grEngineActive: 45, smActive: 40, smOccupancy: 25, tensorActive: 30, dramActive: 20, "
      "fp64Active: 1, fp32Active: 12, fp16Active: 8, pcieTxMiBps: 100, pcieRxMiBps: 50, nvlinkTxKiBps: 2048, "
      "nvlinkRxKiBps: 1024}";
  return std::string("gpus:\n") + "  - {model: A100-SXM4-80GB, uuid: " + kA0 + ", telemetry: " + busy + "}\n" +
         "  - {model: A100-SXM4-80GB, uuid: " + kA1 + ", telemetry: {grEngineActive: 90, tensorActive: 60}}\n" +
         "  - {model: A100-SXM4-80GB, uuid: " + kA2 + "}\n" + faults;
}

std::vector<unsigned short> all_fields() {
  std::vector<unsigned short> out;
  for (const auto& f : kProfilingFields) out.push_back(f.id);
  return out;
}

// Log lines written while it lives.
class LogCapture : public log::Sink {
 public:
  LogCapture() { old_ = log::set_sink(this); }
  ~LogCapture() override { log::set_sink(old_); }
  void write(std::string_view line) override {
    std::lock_guard lock(mu_);
    text_ += std::string(line) + "\n";
  }
  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }
  bool has(const std::string& s) const { return text().find(s) != std::string::npos; }

 private:
  log::Sink* old_ = nullptr;
  mutable std::mutex mu_;
  std::string text_;
};

// The fake DCGM's settings file, named by $KGPU_FAKE_DCGM_CONFIG while it lives.
class DcgmSettingsFile {
 public:
  explicit DcgmSettingsFile(const std::string& yaml) {
    path_ = dir_.write("dcgm.yaml", yaml);
    setenv("KGPU_FAKE_DCGM_CONFIG", path_.c_str(), 1);
  }
  ~DcgmSettingsFile() { unsetenv("KGPU_FAKE_DCGM_CONFIG"); }
  // Replaces the contents (write + rename: the fake notices the change).
  void rewrite(const std::string& yaml) {
    const auto tmp = dir_.write("next.yaml", yaml + "\n# " + std::to_string(++generation_) + "\n");
    std::filesystem::rename(tmp, path_);
  }

 private:
  TempDir dir_;
  std::string path_;
  int generation_ = 0;
};

// A stand-in nv-hostengine: a listening unix socket that accepts connections and can drop them.
class HostEngine {
 public:
  explicit HostEngine(std::string path) : path_(std::move(path)) { listen_now(); }
  ~HostEngine() { stop(); }
  void listen_now() {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path_.c_str());
    ::unlink(path_.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
  }
  // Accepts the connections waiting (clients connect before they are accepted).
  void accept_pending() {
    for (;;) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) break;
      clients_.push_back(c);
    }
  }
  // The host engine dies: every connection and the socket close.
  void stop() {
    accept_pending();
    for (int c : clients_) ::close(c);
    clients_.clear();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<int> clients_;
};

ProfilerOptions options(const std::string& library = KGPU_FAKE_DCGM) {
  ProfilerOptions o;
  o.library = library;
  o.fields = all_fields();
  o.interval = std::chrono::milliseconds(1000);
  return o;
}

class DcgmTest : public ::testing::Test {
 protected:
  FakeNodeFile node_{a100_node()};
  LogCapture logs_;
};

TEST_F(DcgmTest, ServesEveryProfilingFieldOfAnA100NodeByUuid) {
  Profiler p(options());
  ASSERT_TRUE(p.start()) << p.problem();
  EXPECT_EQ(p.problem(), "");
  const Readings r = p.read();
  ASSERT_EQ(r.size(), 3u);
  const auto& g0 = r.at(kA0);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfGrEngineActive), 0.45);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfSmActive), 0.40);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfSmOccupancy), 0.25);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPipeTensorActive), 0.30);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfDramActive), 0.20);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPipeFp64Active), 0.01);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPipeFp32Active), 0.12);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPipeFp16Active), 0.08);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPcieTxBytes), 100.0 * 1048576);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPcieRxBytes), 50.0 * 1048576);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfNvlinkTxBytes), 2048.0 * 1024);
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfNvlinkRxBytes), 1024.0 * 1024);
  EXPECT_DOUBLE_EQ(r.at(kA1).at(kFieldProfGrEngineActive), 0.90);
  EXPECT_DOUBLE_EQ(r.at(kA1).at(kFieldProfPipeTensorActive), 0.60);
  EXPECT_DOUBLE_EQ(r.at(kA2).at(kFieldProfGrEngineActive), 0.0);
  EXPECT_EQ(p.watched().at(kA1).size(), 12u);
  EXPECT_TRUE(logs_.has("reading profiling fields through DCGM embedded in the agent")) << logs_.text();
}

TEST_F(DcgmTest, SamplerPageCarriesTheFieldsWithDcgmExporterLabels) {
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  metrics::SamplerOptions so;
  so.hostname = "a100-node";
  so.pod_resources_socket = "";
  so.interval = std::chrono::hours(1);
  auto counters = metrics::parse_counters(
      "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
      "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active.\n"
      "DCGM_FI_PROF_SM_ACTIVE, gauge, SM active.\n"
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Tensor.\n"
      "DCGM_FI_PROF_DRAM_ACTIVE, gauge, DRAM.\n"
      "DCGM_FI_PROF_PCIE_TX_BYTES, gauge, TX.\n"
      "DCGM_FI_PROF_PCIE_RX_BYTES, gauge, RX.\n"
      "DCGM_FI_PROF_NVLINK_TX_BYTES, gauge, NVLink TX.\n",
      "dcp.csv");
  ASSERT_TRUE(counters) << counters.error().message;
  EXPECT_TRUE(counters->warnings.empty());
  so.counters = counters->counters;
  metrics::DcgmOptions dopt;
  dopt.library = KGPU_FAKE_DCGM;
  auto profiler = metrics::start_profiling(dopt, so.counters, *inv, std::chrono::seconds(1), nullptr);
  ASSERT_TRUE(profiler);
  so.enrich = [&](std::vector<gpu::Telemetry>& ts) { profiler->fill(ts); };
  metrics::Sampler s(*node, so);
  s.sample_now();
  const std::string page = *s.page();
  const auto& g0 = inv->gpus[0];
  const std::string labels = "{gpu=\"0\",UUID=\"" + std::string(kA0) + "\",pci_bus_id=\"" + g0.pci.bus_id +
                             "\",device=\"nvidia0\",modelName=\"" + g0.name + "\",Hostname=\"a100-node\"}";
  EXPECT_NE(page.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE" + labels + " 0.450000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("DCGM_FI_PROF_SM_ACTIVE" + labels + " 0.400000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" + labels + " 0.300000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("DCGM_FI_PROF_DRAM_ACTIVE" + labels + " 0.200000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("DCGM_FI_PROF_PCIE_TX_BYTES" + labels + " 104857600.000000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("DCGM_FI_PROF_PCIE_RX_BYTES" + labels + " 52428800.000000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("DCGM_FI_PROF_NVLINK_TX_BYTES" + labels + " 2097152.000000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.\n"
                      "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"1\","), std::string::npos) << page;
  EXPECT_NE(page.find(" 0.600000\n"), std::string::npos) << page;

  // GPU 1 falls off the bus: its series go (NVML and DCGM agree), the others' stay.
  node_.rewrite(a100_node("faults: {lost: [1]}\n"));
  s.sample_now();
  const std::string after = *s.page();
  EXPECT_EQ(after.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"1\","), std::string::npos) << after;
  EXPECT_EQ(after.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"1\","), std::string::npos) << after;
  EXPECT_NE(after.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE" + labels + " 0.450000\n"), std::string::npos) << after;
  EXPECT_NE(after.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"2\","), std::string::npos) << after;
}

TEST_F(DcgmTest, NvmlGpmWinsOnHopperAndDcgmFillsTheRest) {
  node_.rewrite(std::string("gpus:\n  - {model: H100-SXM-80GB, uuid: ") + kA0 +
                ", telemetry: {grEngineActive: 45, tensorActive: 30, smActive: 40}}\n");
  // DCGM would answer differently for the GPM-backed field: the sampler must keep NVML's.
  DcgmSettingsFile settings("gpus:\n  - index: 0\n    fields: {DCGM_FI_PROF_GR_ENGINE_ACTIVE: 0.99}\n");
  Profiler p(options());
  ASSERT_TRUE(p.start()) << p.problem();
  std::vector<gpu::Telemetry> ts(1);
  ts[0].uuid = kA0;
  ts[0].gr_engine_active = 0.45;  // what GPM measured
  p.fill(ts);
  EXPECT_DOUBLE_EQ(*ts[0].gr_engine_active, 0.45);
  EXPECT_DOUBLE_EQ(*ts[0].tensor_active, 0.30);  // GPM had none this sample: DCGM's
  EXPECT_DOUBLE_EQ(ts[0].prof_fields.at(kFieldProfSmActive), 0.40);
  EXPECT_FALSE(ts[0].prof_fields.contains(kFieldProfGrEngineActive));
}

TEST_F(DcgmTest, HopperOnlyNodeWithGpmFieldsDoesNotLoadDcgm) {
  node_.rewrite(std::string("gpus:\n  - {model: H100-SXM-80GB, uuid: ") + kA0 + "}\n");
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  ASSERT_TRUE(inv->gpus[0].gpm_supported);
  metrics::DcgmOptions dopt;
  dopt.library = "/nonexistent/libdcgm.so.4";
  EXPECT_EQ(metrics::start_profiling(dopt, metrics::default_counters(), *inv, std::chrono::seconds(1), nullptr),
            nullptr);
  EXPECT_FALSE(logs_.has("not exported")) << logs_.text();
}

TEST_F(DcgmTest, WithoutDcgmTheStartUpLineNamesTheMissingFieldsAndWhy) {
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  metrics::DcgmOptions dopt;
  dopt.library = "/nonexistent/libdcgm.so.4";
  EXPECT_EQ(metrics::start_profiling(dopt, metrics::default_counters(), *inv, std::chrono::seconds(1), nullptr),
            nullptr);
  const std::string text = logs_.text();
  EXPECT_NE(text.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, DCGM_FI_PROF_DRAM_ACTIVE, "
                      "DCGM_FI_PROF_PCIE_TX_BYTES, DCGM_FI_PROF_PCIE_RX_BYTES not exported for GPU 0 (NVIDIA "
                      "A100-SXM4-80GB, Ampere), GPU 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cannot load the DCGM library (/nonexistent/libdcgm.so.4: cannot open shared object file"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-r / DCGM_REMOTE_HOSTENGINE_INFO"), std::string::npos) << text;
}

TEST_F(DcgmTest, LibraryMissingSymbolsIsAClearErrorNotACrash) {
  Profiler p(options(KGPU_MINIMAL_DCGM));
  EXPECT_FALSE(p.start());
  EXPECT_FALSE(p.may_recover());
  EXPECT_NE(p.problem().find("does not export dcgmGetAllSupportedDevices, dcgmGroupCreate"), std::string::npos)
      << p.problem();
  EXPECT_NE(p.problem().find("dcgmStartEmbedded"), std::string::npos) << p.problem();
  EXPECT_TRUE(p.read().empty());
}

TEST_F(DcgmTest, InitFailureAndEmbeddedFailureAreReported) {
  {
    DcgmSettingsFile settings("faults: {init: INIT_ERROR}\n");
    Profiler p(options());
    EXPECT_FALSE(p.start());
    EXPECT_FALSE(p.may_recover());
    EXPECT_NE(p.problem().find("dcgmInit failed in '" + std::string(KGPU_FAKE_DCGM) +
                               "': DCGM initialization error (INIT_ERROR)"),
              std::string::npos)
        << p.problem();
  }
  DcgmSettingsFile settings("faults: {startEmbedded: MODULE_NOT_LOADED}\n");
  Profiler p(options());
  EXPECT_FALSE(p.start());
  EXPECT_NE(p.problem().find("cannot start DCGM embedded in the agent: "), std::string::npos) << p.problem();
  EXPECT_NE(p.problem().find("(MODULE_NOT_LOADED)"), std::string::npos) << p.problem();
  EXPECT_TRUE(logs_.has("DCGM profiling fields unavailable: cannot start DCGM embedded")) << logs_.text();
}

TEST_F(DcgmTest, UnreachableHostEngineIsRetriedAndLostOneComesBack) {
  TempDir dir;
  const std::string sock = (dir.path() / "hostengine.sock").string();
  FakeClock clock;
  auto o = options();
  o.remote = "unix://" + sock;
  o.clock = &clock;
  o.retry = std::chrono::seconds(30);
  Profiler p(o);
  EXPECT_FALSE(p.start());
  EXPECT_TRUE(p.may_recover());
  EXPECT_NE(p.problem().find("cannot reach the DCGM host engine on unix socket " + sock + ": "), std::string::npos)
      << p.problem();
  EXPECT_NE(p.problem().find("CONNECTION_NOT_VALID"), std::string::npos);

  HostEngine engine(sock);
  EXPECT_TRUE(p.read().empty()) << "not before the retry period";
  clock.advance(std::chrono::seconds(31));
  auto r = p.read();
  EXPECT_EQ(r.size(), 3u) << p.problem();
  EXPECT_EQ(p.problem(), "");

  engine.stop();  // nv-hostengine dies
  EXPECT_TRUE(p.read().empty());
  EXPECT_NE(p.problem().find("lost the DCGM host engine on unix socket " + sock), std::string::npos) << p.problem();
  EXPECT_TRUE(logs_.has("profiling series are omitted until it answers again")) << logs_.text();

  engine.listen_now();
  clock.advance(std::chrono::seconds(31));
  r = p.read();
  EXPECT_EQ(r.size(), 3u) << p.problem();
  EXPECT_DOUBLE_EQ(r.at(kA1).at(kFieldProfGrEngineActive), 0.90);
}

TEST_F(DcgmTest, HostEngineOverTcpAsDcgmExporterReachesIt) {
  // nv-hostengine's TCP port: a listening socket on a port the system chooses.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof sa;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const int port = ntohs(sa.sin_port);
  auto o = options();
  o.remote = "127.0.0.1:" + std::to_string(port);
  {
    Profiler p(o);
    ASSERT_TRUE(p.start()) << p.problem();
    EXPECT_EQ(p.read().size(), 3u);
    EXPECT_TRUE(logs_.has("reading profiling fields through the DCGM host engine at 127.0.0.1:" + std::to_string(port)))
        << logs_.text();
  }
  ::close(fd);  // nothing listens there any more
  Profiler p(o);
  EXPECT_FALSE(p.start());
  EXPECT_TRUE(p.may_recover());
  EXPECT_NE(p.problem().find("cannot reach the DCGM host engine at 127.0.0.1:" + std::to_string(port) +
                             ": The connection to the host engine is not valid any longer (CONNECTION_NOT_VALID)"),
            std::string::npos)
      << p.problem();
}

TEST_F(DcgmTest, BlankAndNotSupportedFieldsAreOmittedAndLoggedOnce) {
  DcgmSettingsFile settings(
      "gpus:\n  - index: 0\n    fields: {DCGM_FI_PROF_SM_ACTIVE: blank, DCGM_FI_PROF_PIPE_FP64_ACTIVE: notSupported, "
      "DCGM_FI_PROF_DRAM_ACTIVE: {status: NO_PERMISSION}}\n");
  Profiler p(options());
  ASSERT_TRUE(p.start()) << p.problem();
  auto r = p.read();
  r = p.read();
  const auto& g0 = r.at(kA0);
  EXPECT_FALSE(g0.contains(kFieldProfSmActive));
  EXPECT_FALSE(g0.contains(kFieldProfPipeFp64Active));
  EXPECT_FALSE(g0.contains(kFieldProfDramActive));
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPipeTensorActive), 0.30);
  EXPECT_TRUE(r.at(kA1).contains(kFieldProfSmActive));
  const std::string text = logs_.text();
  const std::string line = "DCGM answers NOT_SUPPORTED for DCGM_FI_PROF_PIPE_FP64_ACTIVE on GPU " + std::string(kA0);
  EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find(line), text.rfind(line)) << "logged once";
  EXPECT_NE(text.find("DCGM answers a blank value for DCGM_FI_PROF_SM_ACTIVE on GPU " + std::string(kA0)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM reports NO_PERMISSION for GPU " + std::string(kA0) + " (DCGM_FI_PROF_DRAM_ACTIVE)"),
            std::string::npos)
      << text;
}

TEST_F(DcgmTest, GpuThatCannotBeProfiledOrFallsOffCostsOnlyItsOwnSeries) {
  DcgmSettingsFile settings("gpus:\n  - index: 2\n    profiling: false\n");
  Profiler p(options());
  ASSERT_TRUE(p.start()) << p.problem();
  EXPECT_TRUE(p.watched().at(kA2).empty());
  EXPECT_NE(logs_.text().find("DCGM does not serve DCGM_FI_PROF_GR_ENGINE_ACTIVE (PROFILING_NOT_SUPPORTED)"),
            std::string::npos)
      << logs_.text();
  auto r = p.read();
  EXPECT_TRUE(r.contains(kA0));
  EXPECT_FALSE(r.contains(kA2));

  node_.rewrite(a100_node("faults: {lost: [1]}\n"));
  r = p.read();
  EXPECT_TRUE(r.contains(kA0));
  EXPECT_FALSE(r.contains(kA1));
  EXPECT_TRUE(logs_.has("DCGM reports GPU is lost (GPU_IS_LOST) for GPU " + std::string(kA1))) << logs_.text();
  node_.rewrite(a100_node());
  r = p.read();
  EXPECT_TRUE(r.contains(kA1));
  EXPECT_TRUE(logs_.has("DCGM reads GPU " + std::string(kA1) + " again")) << logs_.text();
}

TEST_F(DcgmTest, ValuesDcgmStopsRefreshingAreOmittedNotFrozen) {
  DcgmSettingsFile settings("gpus:\n  - index: 1\n    frozen: true\n");
  FakeClock clock;
  auto o = options();
  o.clock = &clock;
  o.stale_after = std::chrono::seconds(60);
  Profiler p(o);
  ASSERT_TRUE(p.start()) << p.problem();
  EXPECT_TRUE(p.read().contains(kA1));
  clock.advance(std::chrono::seconds(30));
  EXPECT_TRUE(p.read().contains(kA1)) << "not stale yet";
  clock.advance(std::chrono::seconds(31));
  auto r = p.read();
  EXPECT_FALSE(r.contains(kA1));
  EXPECT_TRUE(r.contains(kA0)) << "a GPU whose values move keeps its series";
  EXPECT_TRUE(
      logs_.has("DCGM has not refreshed DCGM_FI_PROF_GR_ENGINE_ACTIVE on GPU " + std::string(kA1) + " for 61 s"))
      << logs_.text();
  settings.rewrite("");
  EXPECT_DOUBLE_EQ(p.read().at(kA1).at(kFieldProfGrEngineActive), 0.90);
}

TEST_F(DcgmTest, DcgmTurnedOffSaysSo) {
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  metrics::DcgmOptions dopt;
  dopt.enabled = false;
  dopt.library = KGPU_FAKE_DCGM;
  EXPECT_EQ(metrics::start_profiling(dopt, metrics::default_counters(), *inv, std::chrono::seconds(1), nullptr),
            nullptr);
  EXPECT_TRUE(logs_.has("but is not available (turned off with --dcgm=off)")) << logs_.text();
}

TEST_F(DcgmTest, WholeReadFailingKeepsTheAgentUp) {
  DcgmSettingsFile settings("");
  Profiler p(options());
  ASSERT_TRUE(p.start()) << p.problem();
  EXPECT_EQ(p.read().size(), 3u);
  settings.rewrite("faults: {read: NVML_ERROR}\n");
  EXPECT_TRUE(p.read().empty());
  EXPECT_NE(p.problem().find("dcgmEntitiesGetLatestValues through DCGM embedded in the agent"), std::string::npos)
      << p.problem();
  settings.rewrite("");
  EXPECT_EQ(p.read().size(), 3u);
  EXPECT_EQ(p.problem(), "");
}

// The agent binary end to end: flags, DCGM found and not found.
std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(DcgmTest, AgentServesDcgmFieldsAndSaysWhyWithout) {
  TempDir dir;
  const std::string log_with = (dir.path() / "with.log").string();
  ChildProcess with(
      {KGPU_BINARY, "agent", "-a", "127.0.0.1:0", "--nvml-library", kgpu::testing::fake_library(), "--dcgm-library",
       KGPU_FAKE_DCGM, "--pod-resources-socket", (dir.path() / "none.sock").string(), "--device-plugin=false"},
      {"KGPU_FAKE_NVML_CONFIG=" + node_.path()}, log_with);
  const int port = kgpu::testing::agent_port(log_with);
  ASSERT_NE(port, 0) << read_all(log_with);
  httplib::Client c("127.0.0.1", port);
  std::string page;
  eventually([&] {
    auto m = c.Get("/metrics");
    page = m ? m->body : "";
    return page.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") != std::string::npos;
  });
  EXPECT_NE(page.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"1\",UUID=\"" + std::string(kA1) + "\""), std::string::npos)
      << page << read_all(log_with);
  EXPECT_NE(page.find("DCGM_FI_PROF_DRAM_ACTIVE{gpu=\"0\""), std::string::npos) << page;

  const std::string log_without = (dir.path() / "without.log").string();
  ChildProcess without({KGPU_BINARY, "agent", "-a", "127.0.0.1:0", "--nvml-library", kgpu::testing::fake_library(),
                        "--pod-resources-socket", (dir.path() / "none.sock").string(), "--device-plugin=false"},
                       {"KGPU_FAKE_NVML_CONFIG=" + node_.path(), "KGPU_DCGM_LIBRARY=/nonexistent/libdcgm.so.4"},
                       log_without);
  ASSERT_NE(kgpu::testing::agent_port(log_without), 0) << read_all(log_without);
  eventually([&] { return read_all(log_without).find("not exported for") != std::string::npos; });
  const std::string text = read_all(log_without);
  EXPECT_NE(text.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), std::string::npos) << text;
  EXPECT_NE(text.find("not exported for GPU 0 (NVIDIA A100-SXM4-80GB, Ampere)"), std::string::npos) << text;

  auto bad = kgpu::testing::run_command(std::string(KGPU_BINARY) + " agent -r '[::1' --nvml-library " +
                                        kgpu::testing::fake_library() + " 2>&1");
  EXPECT_EQ(bad.status, 2) << bad.text;
  EXPECT_NE(bad.text.find("--remote-hostengine-info '[::1': unclosed '['"), std::string::npos) << bad.text;
}

}  // namespace
}  // namespace kgpu::dcgm
