// The metrics sampler against the fake NVML, a kubelet peer speaking the PodResources wire
// contract, and a fabricated /proc and kubelet log tree.
#include <gtest/gtest.h>

#include <thread>

#include "../peers/kubelet_peer.h"
#include "agent_fixture.h"
#include "common/clock.h"
#include "common/files.h"
#include "kubelet/pod_resources.h"
#include "metrics/sampler.h"
#include "node_fixture.h"
#include "test_env.h"

namespace kgpu::metrics {
namespace {

using kgpu::testing::FakeNodeFile;
using kgpu::testing::KubeletPeer;
using kgpu::testing::PeerPod;
using kgpu::testing::TempDir;
using namespace kgpu::testing::fixture;

class ExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fabricate_host(dir_);
    node_ = kgpu::testing::open_fake();
    ASSERT_TRUE(node_);
    auto inv = node_->inventory();
    ASSERT_TRUE(inv);
    mig0_ = inv->gpus[2].mig_devices[0].uuid;
    peer_.set_pods(pods(mig0_));
    peer_.start();
  }

  SamplerOptions options() {
    SamplerOptions o;
    o.hostname = "gpu-node-7";
    o.pod_resources_socket = peer_.socket_path();
    o.pod_resources_timeout = std::chrono::milliseconds(300);
    o.proc_root = (dir_.path() / "proc").string();
    o.container_log_dir = (dir_.path() / "containers").string();
    o.pod_log_dir = (dir_.path() / "pods").string();
    o.interval = std::chrono::hours(1);  // tests sample by hand
    return o;
  }

  TempDir dir_;
  FakeNodeFile fake_{node_yaml()};
  KubeletPeer peer_{(dir_.path() / "kubelet.sock").string()};
  std::unique_ptr<gpu::NodeGpus> node_;
  std::string mig0_;
};

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// The value of the first sample line that starts with `prefix`, or "" if none.
std::string value_of(const std::string& page, const std::string& prefix) {
  for (size_t pos = 0; pos < page.size();) {
    const auto end = page.find('\n', pos);
    const std::string line = page.substr(pos, end - pos);
    if (line.starts_with(prefix)) return line.substr(line.rfind(' ') + 1);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

TEST_F(ExporterTest, PodResourcesClientDecodesThePeer) {
  kubelet::PodResourcesClient client(peer_.socket_path());
  auto devices = client.list(std::chrono::milliseconds(500));
  ASSERT_TRUE(devices) << devices.error().message;
  ASSERT_EQ(devices->size(), 5u);
  EXPECT_EQ((*devices)[1].ns, "team-b");
  EXPECT_EQ((*devices)[1].pod, "notebook-b");
  EXPECT_EQ((*devices)[1].container, "jupyter");
  EXPECT_EQ((*devices)[1].resource, "nvidia.com/gpu");
  EXPECT_EQ((*devices)[1].device_id, std::string(kGpu1) + "::0");
  EXPECT_EQ(peer_.list_calls(), 1);

  kubelet::PodResourcesClient missing((dir_.path() / "nope.sock").string());
  auto err = missing.list(std::chrono::milliseconds(200));
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(has(err.error().message, "does not exist")) << err.error().message;
}

TEST_F(ExporterTest, AttributesExclusiveSharedAndMigDevices) {
  Sampler s(*node_, options());
  s.poll_pod_resources_now();
  s.sample_now();
  const std::string page = *s.page();
  const std::string gpu0 =
      std::string("gpu=\"0\",UUID=\"") + kGpu0 + "\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\"";
  // Exclusive whole GPU: the GPU's own series carry the pod.
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_UTIL{" + gpu0 +
                            ",modelName=\"NVIDIA L4\",Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"580.105.08\","
                            "container=\"main\",namespace=\"team-a\",pod=\"trainer-a\"} 40\n"))
      << page;
  // Shared GPU: the GPU's series carry no pod; each container gets its own numbers.
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"" + std::string(kGpu1) +
                            "\",pci_bus_id=\"00000000:28:00.0\",device=\"nvidia1\",modelName=\"NVIDIA L4\","
                            "Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"580.105.08\"} 80\n"))
      << page;
  EXPECT_TRUE(has(page, "container=\"jupyter\",namespace=\"team-b\",pod=\"notebook-b\"} 30\n")) << page;
  EXPECT_TRUE(has(page, "container=\"server\",namespace=\"team-c\",pod=\"svc-c\"} 50\n")) << page;
  EXPECT_TRUE(has(page, "container=\"server\",namespace=\"team-c\",pod=\"svc-c\"} 3000\n")) << page;  // FB_USED
  EXPECT_TRUE(has(page, "kgpu_container_gpu_processes{gpu=\"1\"")) << page;
  // MIG instance held by one container.
  EXPECT_TRUE(has(page,
                  "GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\",Hostname=\"gpu-node-7\","
                  "DCGM_FI_DRIVER_VERSION=\"580.105.08\",container=\"model\",namespace=\"team-d\","
                  "pod=\"infer-d\"} 4000\n"))
      << page;
  // Allocations, so "allocated but idle" is a join.
  EXPECT_TRUE(has(page, "resource=\"nvidia.com/mig-3g.20gb\",device_id=\"" + mig0_ + "\"")) << page;
  EXPECT_TRUE(
      has(page, "resource=\"nvidia.com/gpu\",device_id=\"" + std::string(kGpu1) + "::3\",container=\"server\""));
  EXPECT_FALSE(has(page, "fpga0"));
  EXPECT_TRUE(has(page, "kgpu_pod_resources_up 1\n"));
}

// DRA: the kubelet lists claim devices (ContainerResources.dynamic_resources) by driver, pool and
// device name. This node's (driver gpu.nvidia.com, pool = the node) are attributed as device-plugin
// devices are: a whole GPU and a MIG device; another pool's or another driver's are not.
std::vector<PeerPod> dra_pods() {
  using kgpu::testing::PeerClaim;
  using kgpu::testing::PeerClaimDevice;
  auto claim = [](std::string name, std::string ns, std::string driver, std::string pool, std::string device) {
    const std::string cdi = "k8s." + driver + "/claim=uid-" + device;
    return PeerClaim{
        std::move(name), std::move(ns), {PeerClaimDevice{std::move(driver), std::move(pool), device, {cdi}}}};
  };
  return {
      PeerPod{"team-a",
              "trainer-a",
              {{"main", "", {}, {claim("train-gpu", "team-a", "gpu.nvidia.com", "gpu-node-7", "gpu-0")}}}},
      PeerPod{"team-d",
              "infer-d",
              {{"model", "", {}, {claim("mig", "team-d", "gpu.nvidia.com", "gpu-node-7", "gpu-2-mig-3g20gb-9-0")}}}},
      PeerPod{"team-x", "elsewhere", {{"c", "", {}, {claim("x", "team-x", "gpu.nvidia.com", "other-node", "gpu-1")}}}},
      PeerPod{"team-y", "fpga", {{"c", "", {}, {claim("y", "team-y", "fpga.example.com", "gpu-node-7", "gpu-1")}}}},
  };
}

TEST_F(ExporterTest, PodResourcesClientDecodesDraClaimDevices) {
  peer_.set_pods(dra_pods());
  kubelet::PodResourcesClient client(peer_.socket_path());
  auto all = client.list_all(std::chrono::milliseconds(500));
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_TRUE(all->devices.empty());
  ASSERT_EQ(all->claims.size(), 4u);
  const auto& c = all->claims[1];
  EXPECT_EQ(c.ns, "team-d");
  EXPECT_EQ(c.pod, "infer-d");
  EXPECT_EQ(c.container, "model");
  EXPECT_EQ(c.claim_namespace, "team-d");
  EXPECT_EQ(c.claim_name, "mig");
  EXPECT_EQ(c.driver, "gpu.nvidia.com");
  EXPECT_EQ(c.pool, "gpu-node-7");
  EXPECT_EQ(c.device, "gpu-2-mig-3g20gb-9-0");
  EXPECT_EQ(c.cdi_devices, std::vector<std::string>{"k8s.gpu.nvidia.com/claim=uid-gpu-2-mig-3g20gb-9-0"});
  EXPECT_EQ(all->claims[3].driver, "fpga.example.com");
}

TEST_F(ExporterTest, AttributesDraClaimDevicesOfThisDriverAndPool) {
  peer_.set_pods(dra_pods());
  auto o = options();
  o.dra_driver = "gpu.nvidia.com";
  o.dra_pool = "gpu-node-7";
  Sampler s(*node_, o);
  s.poll_pod_resources_now();
  s.sample_now();
  const std::string page = *s.page();
  // The whole GPU: the same series and labels as when the device plugin gave it.
  const std::string gpu0 =
      std::string("gpu=\"0\",UUID=\"") + kGpu0 + "\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\"";
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_UTIL{" + gpu0 +
                            ",modelName=\"NVIDIA L4\",Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"580.105.08\","
                            "container=\"main\",namespace=\"team-a\",pod=\"trainer-a\"} 40\n"))
      << page;
  // The MIG device (GPU instance 1).
  EXPECT_TRUE(has(page,
                  "GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\",Hostname=\"gpu-node-7\","
                  "DCGM_FI_DRIVER_VERSION=\"580.105.08\",container=\"model\",namespace=\"team-d\","
                  "pod=\"infer-d\"} 4000\n"))
      << page;
  EXPECT_TRUE(has(page, "resource=\"gpu.nvidia.com\",device_id=\"" + std::string(kGpu0) + "\",container=\"main\""))
      << page;
  EXPECT_TRUE(has(page, "resource=\"gpu.nvidia.com\",device_id=\"" + mig0_ + "\",container=\"model\"")) << page;
  // GPU 1 is named only by another node's pool and another driver: nobody's.
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"" + std::string(kGpu1) +
                            "\",pci_bus_id=\"00000000:28:00.0\",device=\"nvidia1\",modelName=\"NVIDIA L4\","
                            "Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"580.105.08\"} 80\n"))
      << page;
  EXPECT_FALSE(has(page, "team-x")) << page;
  EXPECT_FALSE(has(page, "team-y")) << page;

  // Without the driver set (device-plugin mode), claim devices are not attributed.
  Sampler plain(*node_, options());
  plain.poll_pod_resources_now();
  plain.sample_now();
  EXPECT_FALSE(has(*plain.page(), "trainer-a")) << *plain.page();
}

TEST_F(ExporterTest, KubeletGoneMetricsFlowWithoutPodLabelsAndRecover) {
  auto o = options();
  o.pod_resources_grace = std::chrono::milliseconds(0);
  Sampler s(*node_, o);
  s.poll_pod_resources_now();
  s.sample_now();
  EXPECT_TRUE(has(*s.page(), "pod=\"trainer-a\""));
  peer_.stop();
  s.poll_pod_resources_now();
  s.sample_now();
  std::string page = *s.page();
  EXPECT_FALSE(has(page, "pod=\"trainer-a\"")) << page;
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
  EXPECT_TRUE(has(page, "kgpu_pod_resources_up 0\n"));
  EXPECT_TRUE(has(page, "kgpu_pod_resources_errors_total 1\n"));
  peer_.start();
  s.poll_pod_resources_now();
  s.sample_now();
  EXPECT_TRUE(has(*s.page(), "pod=\"trainer-a\""));
}

TEST_F(ExporterTest, GraceKeepsLabelsThroughAShortKubeletRestart) {
  Sampler s(*node_, options());  // default grace: 60 s
  s.poll_pod_resources_now();
  peer_.stop();
  s.poll_pod_resources_now();
  s.sample_now();
  EXPECT_TRUE(has(*s.page(), "pod=\"trainer-a\""));
  EXPECT_TRUE(has(*s.page(), "kgpu_pod_resources_up 0\n"));
}

TEST_F(ExporterTest, SlowKubeletNeverBlocksAScrape) {
  auto o = options();
  o.pod_resources_timeout = std::chrono::milliseconds(200);
  Sampler s(*node_, o);
  s.sample_now();
  peer_.set_delay(std::chrono::milliseconds(1500));
  const int calls = peer_.list_calls();
  std::thread poll([&] { s.poll_pod_resources_now(); });
  // The poll is inside its List call once the peer has counted it (it counts, then delays).
  kgpu::testing::eventually([&] { return peer_.list_calls() > calls; }, std::chrono::seconds(1));
  EXPECT_GT(peer_.list_calls(), calls);  // (not ASSERT: the poll thread must be joined)
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) ASSERT_NE(s.page(), nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  poll.join();
  s.sample_now();
  EXPECT_TRUE(has(*s.page(), "kgpu_pod_resources_errors_total 1\n")) << "the 200 ms deadline expired";
}

TEST_F(ExporterTest, XidGaugeAndResettableCounter) {
  Sampler s(*node_, options());
  s.start();
  EXPECT_TRUE(has(*s.page(), "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\""));
  fake_.rewrite(node_yaml("faults:\n  xids: [{gpu: 0, xid: 79}, {gpu: 0, xid: 79}, {gpu: 1, xid: 31}]\n"));
  std::string page;
  kgpu::testing::eventually(
      [&] {
        s.sample_now();
        page = *s.page();
        return has(page, "xid=\"31\"} 1");
      },
      std::chrono::seconds(3));
  EXPECT_TRUE(has(page, ",xid=\"79\"} 2\n")) << page;
  EXPECT_TRUE(has(page, ",xid=\"31\"} 1\n")) << page;
  EXPECT_EQ(value_of(page, "kgpu_xid_events_total{gpu=\"0\""), "2") << page;
  EXPECT_EQ(value_of(page, "kgpu_xid_events_total{gpu=\"2\""), "0") << page;
  EXPECT_EQ(value_of(page, "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\""), "79") << page;
  EXPECT_EQ(value_of(page, "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\""), "31") << page;
  EXPECT_EQ(value_of(page, "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\""), "0") << page;
  s.stop();
}

TEST_F(ExporterTest, LostGpuIsReportedAndOthersKeepFlowing) {
  Sampler s(*node_, options());
  s.sample_now();
  fake_.rewrite(node_yaml("faults: {lost: [1]}\n"));
  s.sample_now();
  const std::string page = *s.page();
  EXPECT_EQ(value_of(page, "kgpu_gpu_up{gpu=\"1\""), "0") << page;
  EXPECT_EQ(value_of(page, "kgpu_gpu_up{gpu=\"0\""), "1") << page;
  EXPECT_FALSE(has(page, "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"")) << page;
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""));
  EXPECT_TRUE(has(page, "kgpu_nvml_errors_total{call=\"nvmlDeviceGetHandleByIndex_v2\"}")) << page;
}

TEST_F(ExporterTest, NvmlCannotCountTheGpusAllAreDown) {
  Sampler s(*node_, options());
  s.sample_now();
  EXPECT_EQ(value_of(*s.page(), "kgpu_gpu_up{gpu=\"2\""), "1");
  fake_.rewrite(node_yaml("faults:\n  calls: [{call: nvmlDeviceGetCount_v2, error: UNKNOWN}]\n"));
  s.sample_now();
  const std::string page = *s.page();
  for (const char* g : {"0", "1", "2"}) {
    EXPECT_EQ(value_of(page, std::string("kgpu_gpu_up{gpu=\"") + g + "\""), "0") << page;
  }
  EXPECT_EQ(value_of(page, "kgpu_nvml_errors_total{call=\"nvmlDeviceGetCount_v2\"}"), "1") << page;
  EXPECT_FALSE(has(page, "DCGM_FI_DEV_GPU_TEMP{"));
  // Not ready (every GPU down, and why), but alive: the sampler keeps sampling.
  const auto problems = s.problems();
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0], "NVML cannot list the GPUs: nvmlDeviceGetCount_v2 returned UNKNOWN");
  EXPECT_EQ(problems.size(), 4u);
  EXPECT_TRUE(s.healthy());
}

TEST_F(ExporterTest, MigLayoutChangeWithSameInstanceIdsIsNoticed) {
  Sampler s(*node_, options());
  s.sample_now();
  EXPECT_TRUE(has(*s.page(), "GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\""));
  std::string y = node_yaml();
  y.replace(y.find("{profile: 3g.20gb}, {profile: 3g.20gb}"), 38, "{profile: 4g.20gb}, {profile: 2g.10gb}");
  fake_.rewrite(y);
  s.sample_now();
  const std::string page = *s.page();
  EXPECT_TRUE(has(page, "GPU_I_PROFILE=\"4g.20gb\",GPU_I_ID=\"1\"")) << page;
  EXPECT_TRUE(has(page, "GPU_I_PROFILE=\"2g.10gb\",GPU_I_ID=\"2\"")) << page;
  EXPECT_FALSE(has(page, "3g.20gb")) << page;
}

// A MIG-enabled GPU appears through its GPU instances only (dcgm-exporter's shape): every field on
// each instance's series, the pod that holds an instance on all of them.
TEST_F(ExporterTest, MigGpuIsExportedPerInstanceWithPods) {
  Sampler s(*node_, options());
  s.poll_pod_resources_now();
  s.sample_now();
  const std::string page = *s.page();
  const std::string parent = std::string("{gpu=\"2\",UUID=\"") + kGpu2 +
                             "\",pci_bus_id=\"00000000:38:00.0\",device=\"nvidia2\",modelName=\"NVIDIA "
                             "A100-SXM4-40GB\"";
  EXPECT_FALSE(has(page, "DCGM_FI_DEV_GPU_TEMP" + parent + ",Hostname=")) << page;
  EXPECT_FALSE(has(page, "DCGM_FI_DEV_FB_USED" + parent + ",Hostname=")) << page;
  for (const char* family : {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                             "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE"}) {
    EXPECT_TRUE(has(page, std::string(family) + parent +
                              ",GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\",Hostname=\"gpu-node-7\","
                              "DCGM_FI_DRIVER_VERSION=\"580.105.08\","))
        << family << "\n"
        << page;
    EXPECT_TRUE(has(page, std::string(family) + parent + ",GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"2\",")) << family;
  }
  // The instance a pod holds: attributed on every family.
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_TEMP" + parent +
                            ",GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\",Hostname=\"gpu-node-7\","
                            "DCGM_FI_DRIVER_VERSION=\"580.105.08\",container=\"model\",namespace=\"team-d\","
                            "pod=\"infer-d\"} "))
      << page;
  // Not per instance in NVML: no utilization series for the MIG-enabled GPU at all.
  EXPECT_FALSE(has(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\"")) << page;
  // The GPU-wide readings are the parent's.
  auto o = options();
  o.mig_parent_series = true;
  Sampler with_parent(*node_, o);
  with_parent.sample_now();
  const std::string both = *with_parent.page();
  const std::string temp = value_of(both, "DCGM_FI_DEV_GPU_TEMP" + parent + ",Hostname=");
  ASSERT_FALSE(temp.empty()) << both;
  EXPECT_EQ(value_of(both, "DCGM_FI_DEV_GPU_TEMP" + parent + ",GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"2\""), temp);
  EXPECT_EQ(value_of(page, "DCGM_FI_DEV_GPU_TEMP" + parent + ",GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\""), temp);
  EXPECT_TRUE(has(page, "kgpu_gpu_up" + parent + ",Hostname=")) << page;
}

TEST_F(ExporterTest, WindowedXidAndClockEventCountsForget) {
  FakeClock clock;
  auto o = options();
  o.clock = &clock;
  o.xid_count_window = std::chrono::seconds(60);
  o.clock_events_count_window = std::chrono::seconds(60);
  auto set = parse_counters(
      "DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window\n"
      "DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n",
      "c.csv");
  ASSERT_TRUE(set);
  o.counters = set->counters;
  Sampler s(*node_, o);
  s.start();
  fake_.rewrite(node_yaml("faults:\n  xids: [{gpu: 0, xid: 79}, {gpu: 0, xid: 79}, {gpu: 0, xid: 13}]\n"));
  const std::string gpu0 = "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"0\"";
  std::string page;
  EXPECT_TRUE(kgpu::testing::eventually([&] {
    s.sample_now();
    page = *s.page();
    const std::string pod = ",container=\"main\",namespace=\"team-a\",pod=\"trainer-a\"}";
    return has(page, "window_size_in_ms=\"60000\",xid=\"79\"" + pod + " 2\n") &&
           has(page, "window_size_in_ms=\"60000\",xid=\"13\"" + pod + " 1\n");
  })) << page;
  // The fake's clock event reason is "idle": one more sample with it each time.
  EXPECT_TRUE(has(page, "clock_event=\"gpu_idle\",window_size_in_ms=\"60000\"}")) << page;
  EXPECT_TRUE(has(page, "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"1\"")) << page;
  clock.advance(std::chrono::seconds(61));
  s.sample_now();
  page = *s.page();
  EXPECT_EQ(value_of(page, gpu0), "0") << page;
  EXPECT_FALSE(has(page, "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"0\",UUID=\"" + std::string(kGpu0) +
                             "\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA L4\","
                             "Hostname=\"gpu-node-7\",window_size_in_ms=\"60000\",xid="))
      << page;
  EXPECT_EQ(value_of(page, "DCGM_EXP_CLOCK_EVENTS_COUNT{gpu=\"0\""), "1") << page;
  s.stop();
}

TEST_F(ExporterTest, PodUidAndPodLabelsAsDcgmExporterAddsThem) {
  auto o = options();
  o.pod_uid = true;
  o.pod_labels = true;
  o.pod_label_allowlist = {"^app\\.kubernetes", "(invalid"};
  o.pods = [] {
    return std::vector<PodInfo>{
        {"team-a",
         "trainer-a",
         "a0a0a0a0-1111-2222-3333-444455556666",
         {{"app.kubernetes.io/name", "trainer"}, {"team", "a"}}},
        {"elsewhere", "other", "ffff", {{"app.kubernetes.io/name", "x"}}},
    };
  };
  Sampler s(*node_, o);
  s.poll_pod_resources_now();
  s.sample_now();
  const std::string page = *s.page();
  EXPECT_TRUE(has(page,
                  "Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"580.105.08\","
                  "app_kubernetes_io_name=\"trainer\",container=\"main\",namespace=\"team-a\","
                  "pod=\"trainer-a\",pod_uid=\"a0a0a0a0-1111-2222-3333-444455556666\"} 40\n"))
      << page;
  EXPECT_FALSE(has(page, "team=\"a\"")) << page;
  // Not in the API's answer: the UID from the kubelet's pod log directory, no labels.
  EXPECT_TRUE(has(page,
                  "container=\"jupyter\",namespace=\"team-b\",pod=\"notebook-b\","
                  "pod_uid=\"b0b0b0b0-1111-2222-3333-444455556666\"} 30\n"))
      << page;
}

TEST_F(ExporterTest, DeviceNameGpuIds) {
  peer_.set_pods({
      PeerPod{"team-a", "trainer-a", {{"main", "nvidia.com/gpu", {"nvidia0"}}}},
      PeerPod{"team-d", "infer-d", {{"model", "nvidia.com/mig-3g.20gb", {"nvidia2/gi2"}}}},
  });
  auto o = options();
  Sampler by_uid(*node_, o);
  by_uid.poll_pod_resources_now();
  by_uid.sample_now();
  std::string page = *by_uid.page();
  EXPECT_FALSE(has(page, "pod=\"trainer-a\"")) << page;  // "nvidia0" is not a UUID
  EXPECT_TRUE(has(page,
                  "GPU_I_ID=\"2\",Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"580.105.08\","
                  "container=\"model\",namespace=\"team-d\",pod=\"infer-d\"}"))
      << page;
  o.gpu_id_type = "device-name";
  Sampler by_name(*node_, o);
  by_name.poll_pod_resources_now();
  by_name.sample_now();
  page = *by_name.page();
  EXPECT_TRUE(has(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"")) << page;
  EXPECT_TRUE(has(page, "container=\"main\",namespace=\"team-a\",pod=\"trainer-a\"} 40\n")) << page;
}

// Hopper: every instance gets its own profiling ratios (nvmlGpmMigSampleGet), not the GPU's.
TEST(ExporterMigProfiling, GpmRatiosPerInstance) {
  FakeNodeFile fake{
      "gpus:\n"
      "  - model: H100-SXM-80GB\n"
      "    telemetry: {grEngineActive: 90}\n"
      "    mig: {instances: [{profile: 3g.40gb, telemetry: {grEngineActive: 25, tensorActive: 10, dramActive: 40}},\n"
      "                      {profile: 1g.10gb}]}\n"};
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  SamplerOptions o;
  o.hostname = "h";
  o.pod_resources_socket = "";
  o.interval = std::chrono::hours(1);
  Sampler s(*node, o);
  s.sample_now();
  std::string page;
  const std::string gi1 =
      "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\",Hostname=\"h\",DCGM_FI_DRIVER_VERSION=\"580.105.08\"}";
  const std::string gi2 =
      "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"2\",Hostname=\"h\",DCGM_FI_DRIVER_VERSION=\"580.105.08\"}";
  auto value = [&](const std::string& family, const std::string& labels) {
    const auto at = page.find(labels, page.find("# TYPE " + family + " "));
    if (at == std::string::npos) return std::string();
    return page.substr(at + labels.size() + 1, page.find('\n', at) - at - labels.size() - 1);
  };
  // GPM needs two samples more than 100 ms apart (real time, as the GPU takes them), per instance:
  // the instances are sampled one after the other, so one may cross 100 ms a round before the
  // other. Wait for both.
  EXPECT_TRUE(kgpu::testing::eventually([&] {
    s.sample_now();
    page = *s.page();
    return !value("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi1).empty() && !value("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi2).empty();
  })) << page;
  EXPECT_EQ(value("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi1), "0.250000") << page;
  EXPECT_EQ(value("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gi1), "0.100000") << page;
  EXPECT_EQ(value("DCGM_FI_PROF_DRAM_ACTIVE", gi1), "0.400000") << page;
  EXPECT_EQ(value("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gi2), "0.000000") << page;
  EXPECT_FALSE(has(page, "0.900000")) << "the GPU's own ratio is on no series\n" << page;
}

// dcgm-exporter's own counters files, unchanged, through the `kgpu agent` binary.
TEST(ExporterCountersFiles, DcgmExporterFilesRunThroughTheAgent) {
  struct Case {
    const char* file;
    std::vector<std::string> env, present, absent, logged;
  };
  const std::string uid_b = "b0b0b0b0-1111-2222-3333-444455556666";
  const std::vector<Case> cases = {
      {"default-counters.csv",
       {},
       {"DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"", "GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\"", "err_msg=\"No Error\"",
        "DCGM_FI_DRIVER_VERSION=\"580.105.08\",container=\"main\",namespace=\"team-a\",pod=\"trainer-a\"}"},
       {"DCGM_EXP_", "pod_uid="},
       {}},
      {"dcp-metrics-included.csv",
       {"DCGM_EXPORTER_NO_HOSTNAME=true", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE=pci"},
       {"DCGM_FI_DEV_FB_USED{gpu=\"0\"", "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\""},
       {"Hostname="},
       {"DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE (--kubernetes-gpu-id-type) 'pci' is neither uid nor device-name"}},
      {"1.x-compatibility-metrics.csv",
       {"DCGM_EXPORTER_USE_OLD_NAMESPACE=true", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID=true",
        "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS=true", "DCGM_EXPORTER_KUBERNETES_ENABLE_DRA=true",
        "KUBERNETES_VIRTUAL_GPUS=true"},
       {"# TYPE dcgm_gpu_temp gauge\ndcgm_gpu_temp{gpu=\"0\",uuid=\"", "dcgm_fb_used{gpu=\"2\"",
        "dcgm_xid_errors{gpu=\"1\"", "# TYPE dcgm_gpu_utilization gauge\n",
        "container_name=\"jupyter\",pod_name=\"notebook-b\",pod_namespace=\"team-b\",pod_uid=\"" + uid_b + "\"} 30\n"},
       {"DCGM_FI_DEV_GPU_TEMP", "UUID="},
       {"dcgm_fi_prof_pcie_tx_bytes is listed twice",
        "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS is not honoured: pod labels need API access",
        "DCGM_EXPORTER_KUBERNETES_ENABLE_DRA is not honoured", "KUBERNETES_VIRTUAL_GPUS is not honoured"}},
      {"exporter-fields.csv",
       {"DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE=60000"},
       {"DCGM_EXP_XID_ERRORS_COUNT{gpu=\"0\"", "window_size_in_ms=\"60000\",container=\"main\"",
        "DCGM_EXP_CLOCK_EVENTS_COUNT{gpu=\"1\"", ",clock_event=\"gpu_idle\",window_size_in_ms=\"300000\"}"},
       {},
       {"DCGM_EXP_GPU_HEALTH_STATUS is not available", "DCGM_EXP_P2P_STATUS is not available"}},
  };
  std::string mig0;
  {
    FakeNodeFile probe{node_yaml()};
    auto node = kgpu::testing::open_fake();
    ASSERT_TRUE(node);
    mig0 = node->inventory()->gpus[2].mig_devices[0].uuid;
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    TempDir dir;
    fabricate_host(dir);
    KubeletPeer peer{(dir.path() / "kubelet.sock").string()};
    peer.set_pods(pods(mig0));
    peer.start();
    kgpu::testing::PluginAgent agent(
        node_yaml(), "",
        {"-f", std::string(KGPU_SOURCE_DIR + "/test/data/counters/") + c.file, "-c", "200", "--pod-resources-socket",
         peer.socket_path(), "--pod-resources-interval", "200", "--device-plugin", "false", "--proc-root",
         (dir.path() / "proc").string(), "--container-log-dir", (dir.path() / "containers").string(), "--pod-log-dir",
         (dir.path() / "pods").string()},
        c.env);
    std::string page;
    EXPECT_TRUE(kgpu::testing::eventually([&] {
      page = agent.metrics();
      return std::all_of(c.present.begin(), c.present.end(), [&](const std::string& p) { return has(page, p); });
    })) << page
        << "\nlog:\n"
        << agent.log();
    for (const auto& a : c.absent) EXPECT_FALSE(has(page, a)) << a;
    const std::string log = agent.log();
    for (const auto& l : c.logged) EXPECT_TRUE(has(log, l)) << l << "\n" << log;
    EXPECT_FALSE(has(log, "level=error")) << log;
  }
}

TEST_F(ExporterTest, PageIsValidForPromtool) {
  Sampler s(*node_, options());
  s.poll_pod_resources_now();
  s.sample_now();
  const auto path = dir_.write("page.txt", *s.page());
  auto out = kgpu::testing::run_command("promtool check metrics < " + path);
  // promtool's linter complains about dcgm-exporter's own naming (camelCase labels, counters without
  // _total), which a drop-in must keep; a parse error would exit 1 with "error while linting".
  EXPECT_NE(out.status, 1) << out.text;
  EXPECT_FALSE(has(out.text, "error while linting")) << out.text;
}

}  // namespace
}  // namespace kgpu::metrics
