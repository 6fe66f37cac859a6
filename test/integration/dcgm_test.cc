// DCGM's profiling fields through the production loader (dlopen of libdcgm) against the fake
// DCGM (tools/fake-dcgm) serving the fake NVML's node: values and labels on the exporter page,
// MIG GPU instances of an A100 read through DCGM's GPU-instance entities, the start-up line
// without DCGM, and hostile cases (missing symbols, dcgmInit failing, a host engine that is
// unreachable or goes away, blank / not supported answers, a GPU or GPU instance failing, a MIG
// re-layout).
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

// An A100 in MIG mode (GPU 0: GPU instances 2, 3 and 9, each with its own activity; the GPU's
// own readings differ from all of them) and a whole A100 (GPU 1).
constexpr const char* kMigLayout =
    "[{profile: 3g.40gb, gpuInstanceId: 2, telemetry: {grEngineActive: 25, smActive: 22, tensorActive: 10, "
    "dramActive: 40, pcieTxMiBps: 10, pcieRxMiBps: 5}},\n"
    "      {profile: 2g.20gb, gpuInstanceId: 3, telemetry: {grEngineActive: 61, smActive: 55, fp32Active: 33}},\n"
    "      {profile: 1g.10gb, gpuInstanceId: 9}]";
std::string a100_mig_node(const std::string& layout = kMigLayout) {
  return std::string("gpus:\n") + "  - model: A100-SXM4-80GB\n    uuid: " + kA0 +
         "\n    telemetry: {grEngineActive: 45, smActive: 44, tensorActive: 47, dramActive: 48}\n"
         "    mig:\n      instances: " +
         layout + "\n  - {model: A100-SXM4-80GB, uuid: " + kA1 +
         ", telemetry: {grEngineActive: 90, tensorActive: 60}}\n";
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
  ASSERT_EQ(r.gpus.size(), 3u);
  const auto& g0 = r.gpus.at(kA0);
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
  EXPECT_DOUBLE_EQ(r.gpus.at(kA1).at(kFieldProfGrEngineActive), 0.90);
  EXPECT_DOUBLE_EQ(r.gpus.at(kA1).at(kFieldProfPipeTensorActive), 0.60);
  EXPECT_DOUBLE_EQ(r.gpus.at(kA2).at(kFieldProfGrEngineActive), 0.0);
  EXPECT_EQ(p.watched().at(kA1).size(), 12u);
  EXPECT_TRUE(logs_.has("reading profiling fields through DCGM embedded in the agent")) << logs_.text();
}

// Counters lines: the five GPM-backed fields and SM_ACTIVE.
constexpr const char* kDcp =
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active.\n"
    "DCGM_FI_PROF_SM_ACTIVE, gauge, SM active.\n"
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Tensor.\n"
    "DCGM_FI_PROF_DRAM_ACTIVE, gauge, DRAM.\n"
    "DCGM_FI_PROF_PCIE_TX_BYTES, gauge, TX.\n"
    "DCGM_FI_PROF_PCIE_RX_BYTES, gauge, RX.\n";

// A sampler over the fake node whose telemetry DCGM enriches, set up as the agent sets it up
// (start_profiling with counters `csv`).
class ProfiledSampler {
 public:
  ProfiledSampler(const std::string& hostname, const std::string& csv) {
    node_ = kgpu::testing::open_fake();
    if (!node_) {
      problem_ = "cannot open the fake NVML";
      return;
    }
    auto inv = node_->inventory();
    if (!inv) {
      problem_ = inv.error().message;
      return;
    }
    metrics::SamplerOptions so;
    so.hostname = hostname;
    so.pod_resources_socket = "";
    so.interval = std::chrono::hours(1);
    auto counters = metrics::parse_counters(csv, "dcp.csv");
    if (!counters) {
      problem_ = counters.error().message;
      return;
    }
    if (!counters->warnings.empty()) {
      problem_ = "counters warned: " + counters->warnings.front();
      return;
    }
    so.counters = counters->counters;
    metrics::DcgmOptions dopt;
    dopt.library = KGPU_FAKE_DCGM;
    profiler_ = metrics::start_profiling(dopt, so.counters, *inv, std::chrono::seconds(1), nullptr);
    if (!profiler_) {
      problem_ = "no profiler started";
      return;
    }
    so.enrich = [p = profiler_.get()](std::vector<gpu::Telemetry>& ts) { p->fill(ts); };
    sampler_ = std::make_unique<metrics::Sampler>(*node_, so);
  }
  // Why it could not be set up; empty when it is.
  const std::string& problem() const { return problem_; }
  const gpu::NodeGpus& node() const { return *node_; }
  // Samples once and returns the page.
  std::string sample() {
    sampler_->sample_now();
    return *sampler_->page();
  }

 private:
  std::string problem_;
  std::unique_ptr<gpu::NodeGpus> node_;
  std::unique_ptr<Profiler> profiler_;
  std::unique_ptr<metrics::Sampler> sampler_;  // calls profiler_: destroyed first
};

TEST_F(DcgmTest, SamplerPageCarriesTheFieldsWithDcgmExporterLabels) {
  ProfiledSampler s("a100-node", std::string("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n") + kDcp +
                                     "DCGM_FI_PROF_NVLINK_TX_BYTES, gauge, NVLink TX.\n");
  ASSERT_EQ(s.problem(), "");
  const std::string page = s.sample();
  auto inv = s.node().inventory();
  ASSERT_TRUE(inv);
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
  const std::string after = s.sample();
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
  EXPECT_EQ(r.gpus.size(), 3u) << p.problem();
  EXPECT_EQ(p.problem(), "");

  engine.stop();  // nv-hostengine dies
  EXPECT_TRUE(p.read().empty());
  EXPECT_NE(p.problem().find("lost the DCGM host engine on unix socket " + sock), std::string::npos) << p.problem();
  EXPECT_TRUE(logs_.has("profiling series are omitted until it answers again")) << logs_.text();

  engine.listen_now();
  clock.advance(std::chrono::seconds(31));
  r = p.read();
  EXPECT_EQ(r.gpus.size(), 3u) << p.problem();
  EXPECT_DOUBLE_EQ(r.gpus.at(kA1).at(kFieldProfGrEngineActive), 0.90);
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
    EXPECT_EQ(p.read().gpus.size(), 3u);
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
  const auto& g0 = r.gpus.at(kA0);
  EXPECT_FALSE(g0.contains(kFieldProfSmActive));
  EXPECT_FALSE(g0.contains(kFieldProfPipeFp64Active));
  EXPECT_FALSE(g0.contains(kFieldProfDramActive));
  EXPECT_DOUBLE_EQ(g0.at(kFieldProfPipeTensorActive), 0.30);
  EXPECT_TRUE(r.gpus.at(kA1).contains(kFieldProfSmActive));
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
  EXPECT_TRUE(r.gpus.contains(kA0));
  EXPECT_FALSE(r.gpus.contains(kA2));

  node_.rewrite(a100_node("faults: {lost: [1]}\n"));
  r = p.read();
  EXPECT_TRUE(r.gpus.contains(kA0));
  EXPECT_FALSE(r.gpus.contains(kA1));
  EXPECT_TRUE(logs_.has("DCGM reports GPU is lost (GPU_IS_LOST) for GPU " + std::string(kA1))) << logs_.text();
  node_.rewrite(a100_node());
  r = p.read();
  EXPECT_TRUE(r.gpus.contains(kA1));
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
  EXPECT_TRUE(p.read().gpus.contains(kA1));
  clock.advance(std::chrono::seconds(30));
  EXPECT_TRUE(p.read().gpus.contains(kA1)) << "not stale yet";
  clock.advance(std::chrono::seconds(31));
  auto r = p.read();
  EXPECT_FALSE(r.gpus.contains(kA1));
  EXPECT_TRUE(r.gpus.contains(kA0)) << "a GPU whose values move keeps its series";
  EXPECT_TRUE(
      logs_.has("DCGM has not refreshed DCGM_FI_PROF_GR_ENGINE_ACTIVE on GPU " + std::string(kA1) + " for 61 s"))
      << logs_.text();
  settings.rewrite("");
  EXPECT_DOUBLE_EQ(p.read().gpus.at(kA1).at(kFieldProfGrEngineActive), 0.90);
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
  EXPECT_EQ(p.read().gpus.size(), 3u);
  settings.rewrite("faults: {read: NVML_ERROR}\n");
  EXPECT_TRUE(p.read().empty());
  EXPECT_NE(p.problem().find("dcgmEntitiesGetLatestValues through DCGM embedded in the agent"), std::string::npos)
      << p.problem();
  settings.rewrite("");
  EXPECT_EQ(p.read().gpus.size(), 3u);
  EXPECT_EQ(p.problem(), "");
}

TEST_F(DcgmTest, MigInstancesOfAnA100AreReadThroughDcgmGpuInstanceEntities) {
  node_.rewrite(a100_mig_node());
  Profiler p(options());
  ASSERT_TRUE(p.start()) << p.problem();
  const Readings r = p.read();
  ASSERT_EQ(r.instances.size(), 3u);
  const auto& gi2 = r.instances.at({kA0, 2});
  EXPECT_DOUBLE_EQ(gi2.at(kFieldProfGrEngineActive), 0.25);
  EXPECT_DOUBLE_EQ(gi2.at(kFieldProfSmActive), 0.22);
  EXPECT_DOUBLE_EQ(gi2.at(kFieldProfPipeTensorActive), 0.10);
  EXPECT_DOUBLE_EQ(gi2.at(kFieldProfDramActive), 0.40);
  EXPECT_DOUBLE_EQ(gi2.at(kFieldProfPcieTxBytes), 10.0 * 1048576);
  EXPECT_DOUBLE_EQ(gi2.at(kFieldProfPcieRxBytes), 5.0 * 1048576);
  EXPECT_DOUBLE_EQ(r.instances.at({kA0, 3}).at(kFieldProfGrEngineActive), 0.61);
  EXPECT_DOUBLE_EQ(r.instances.at({kA0, 3}).at(kFieldProfPipeFp32Active), 0.33);
  EXPECT_DOUBLE_EQ(r.instances.at({kA0, 9}).at(kFieldProfGrEngineActive), 0.0);
  EXPECT_DOUBLE_EQ(r.gpus.at(kA0).at(kFieldProfGrEngineActive), 0.45) << "the GPU itself is read too";
  EXPECT_DOUBLE_EQ(r.gpus.at(kA1).at(kFieldProfGrEngineActive), 0.90);
  EXPECT_EQ(p.watched_instances().at({kA0, 3}).size(), 12u);
  EXPECT_FALSE(p.watched_instances().contains({kA1, 0}));
  EXPECT_TRUE(logs_.has(std::string(kA0) + " (12 fields) with MIG GPU instances 2, 3, 9 (12 fields)")) << logs_.text();

  // The sampler's telemetry: each instance entry gets its own instance's values, the GPU's stay on the GPU.
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  auto ts = node->telemetry();
  p.fill(ts);
  std::map<unsigned, const gpu::Telemetry*> by_gi;
  for (const auto& t : ts) {
    if (t.gpu_instance_id) by_gi[*t.gpu_instance_id] = &t;
  }
  ASSERT_EQ(by_gi.size(), 3u);
  EXPECT_DOUBLE_EQ(*by_gi[2]->gr_engine_active, 0.25);
  EXPECT_DOUBLE_EQ(*by_gi[2]->pcie_tx_bytes_per_s, 10.0 * 1048576);
  EXPECT_DOUBLE_EQ(by_gi[2]->prof_fields.at(kFieldProfSmActive), 0.22);
  EXPECT_DOUBLE_EQ(*by_gi[3]->gr_engine_active, 0.61);
  EXPECT_DOUBLE_EQ(*ts[0].gr_engine_active, 0.45);
  EXPECT_DOUBLE_EQ(ts[0].prof_fields.at(kFieldProfSmActive), 0.44);
}

TEST_F(DcgmTest, DcgmWithoutTheMigHierarchyServesTheGpusAndSaysWhy) {
  node_.rewrite(a100_mig_node());
  DcgmSettingsFile settings("faults: {hierarchy: NOT_SUPPORTED}\n");
  Profiler p(options());
  ASSERT_TRUE(p.start()) << p.problem();
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  for (int i = 0; i < 2; ++i) {
    auto ts = node->telemetry();
    p.fill(ts);
    for (const auto& t : ts) {
      EXPECT_EQ(t.gpu_instance_id.has_value(), !t.gr_engine_active.has_value()) << t.uuid;
    }
  }
  EXPECT_TRUE(p.watched_instances().empty());
  const std::string line = "DCGM does not list its MIG GPU instances (dcgmGetGpuInstanceHierarchy: ";
  const std::string text = logs_.text();
  EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find(line), text.rfind(line)) << "logged once";
  EXPECT_NE(text.find(line + "NOT_SUPPORTED); the DCGM profiling series of MIG instances are omitted"),
            std::string::npos)
      << text;
}

// The value after `labels` in `family`'s block of an exporter page, or "".
std::string value_in(const std::string& page, const std::string& family, const std::string& labels) {
  const auto block = page.find("# TYPE " + family + " ");
  if (block == std::string::npos) return "";
  const auto end = page.find("# HELP", block + 1);
  const auto at = page.find(labels, block);
  if (at == std::string::npos || at > end) return "";
  const auto v = at + labels.size() + 1;
  return page.substr(v, page.find('\n', v) - v);
}

TEST_F(DcgmTest, MigInstanceSeriesCarryTheirOwnDcgmValuesAndSurviveARelayout) {
  node_.rewrite(a100_mig_node());
  DcgmSettingsFile settings("gpus:\n  - index: 0\n    instances:\n      - {gpuInstanceId: 3, status: NVML_ERROR}\n");
  ProfiledSampler s("a100-mig", std::string("DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n") + kDcp +
                                    "DCGM_FI_PROF_PIPE_FP32_ACTIVE, gauge, FP32.\n");
  ASSERT_EQ(s.problem(), "");
  std::string page = s.sample();
  auto gi = [](const std::string& profile, unsigned id) {
    return "GPU_I_PROFILE=\"" + profile + "\",GPU_I_ID=\"" + std::to_string(id) + "\",Hostname=\"a100-mig\"}";
  };
  const std::string gi2 = gi("3g.40gb", 2), gi3 = gi("2g.20gb", 3), gi9 = gi("1g.10gb", 9);
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi2), "0.250000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_SM_ACTIVE", gi2), "0.220000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gi2), "0.100000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_DRAM_ACTIVE", gi2), "0.400000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_PCIE_TX_BYTES", gi2), "10485760.000000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_PCIE_RX_BYTES", gi2), "5242880.000000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi9), "0.000000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", gi9), "0.000000") << page;
  // The instance DCGM reports failing loses only its profiling series.
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi3), "") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_SM_ACTIVE", gi3), "") << page;
  EXPECT_NE(value_in(page, "DCGM_FI_DEV_FB_USED", gi3), "") << page;
  EXPECT_TRUE(logs_.has("DCGM reports NVML_ERROR for GPU instance 3 of GPU " + std::string(kA0) +
                        " (DCGM_FI_PROF_GR_ENGINE_ACTIVE)"))
      << logs_.text();
  // The GPU's own values are on no instance series (and the GPU has no series of its own).
  for (const char* whole : {" 0.450000\n", " 0.440000\n", " 0.470000\n", " 0.480000\n"}) {
    EXPECT_EQ(page.find(whole), std::string::npos) << whole << page;
  }
  EXPECT_NE(page.find(std::string("DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"1\",UUID=\"") + kA1), std::string::npos);

  // The instance recovers.
  settings.rewrite("");
  page = s.sample();
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi3), "0.610000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", gi3), "0.330000") << page;

  // MIG re-layout: DCGM numbers its GPU instances anew (GPU instance 0 now has the DCGM id GPU
  // instance 2 had); each series keeps its own instance's values.
  node_.rewrite(
      a100_mig_node("[{profile: 4g.40gb, gpuInstanceId: 0, telemetry: {grEngineActive: 71}}, "
                    "{profile: 3g.40gb, gpuInstanceId: 2, telemetry: {grEngineActive: 26}}]"));
  page = s.sample();
  const std::string gi0 = gi("4g.40gb", 0);
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi0), "0.710000") << page;
  EXPECT_EQ(value_in(page, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi2), "0.260000") << page;
  EXPECT_EQ(page.find("GPU_I_ID=\"3\""), std::string::npos) << page;
  EXPECT_EQ(page.find("GPU_I_ID=\"9\""), std::string::npos) << page;
  EXPECT_TRUE(logs_.has("DCGM's MIG layout of GPU " + std::string(kA0) + " changed: GPU instances 0, 2"))
      << logs_.text();
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

  // A MIG-enabled A100: the instance series carry their own GPU instance's DCGM values.
  node_.rewrite(a100_mig_node());
  const std::string log_mig = (dir.path() / "mig.log").string();
  ChildProcess mig(
      {KGPU_BINARY, "agent", "-a", "127.0.0.1:0", "--nvml-library", kgpu::testing::fake_library(), "--dcgm-library",
       KGPU_FAKE_DCGM, "--pod-resources-socket", (dir.path() / "none.sock").string(), "--device-plugin=false", "-n"},
      {"KGPU_FAKE_NVML_CONFIG=" + node_.path()}, log_mig);
  const int mig_port = kgpu::testing::agent_port(log_mig);
  ASSERT_NE(mig_port, 0) << read_all(log_mig);
  httplib::Client mc("127.0.0.1", mig_port);
  const std::string gi2 = "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",DCGM_FI_DRIVER_VERSION=";
  eventually([&] {
    auto m = mc.Get("/metrics");
    page = m ? m->body : "";
    return value_in(page, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gi2) != "";
  });
  EXPECT_NE(page.find(gi2), std::string::npos) << page << read_all(log_mig);
  const auto tensor = page.find("\n", page.find(gi2, page.find("# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE ")));
  EXPECT_EQ(page.substr(tensor - 9, 9), " 0.100000") << page;
  const auto gr = page.find("\n", page.find(gi2, page.find("# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE ")));
  EXPECT_EQ(page.substr(gr - 9, 9), " 0.250000") << page;
  EXPECT_EQ(page.find(" 0.450000\n"), std::string::npos) << "the GPU's own value is on no series\n" << page;

  auto bad = kgpu::testing::run_command(std::string(KGPU_BINARY) + " agent -r '[::1' --nvml-library " +
                                        kgpu::testing::fake_library() + " 2>&1");
  EXPECT_EQ(bad.status, 2) << bad.text;
  EXPECT_NE(bad.text.find("--remote-hostengine-info '[::1': unclosed '['"), std::string::npos) << bad.text;
}

}  // namespace
}  // namespace kgpu::dcgm
