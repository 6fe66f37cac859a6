// DRA end to end through the API-server stand-in: the real agent in DRA mode on a fake-NVML H100
// node publishes its ResourceSlices; the real `kgpu scheduler`, called as kube-scheduler calls an
// extender, allocates and reserves the claims and binds the pods; the kubelet's side
// (kubelet_dra_peer) prepares them and gets CDI device IDs. The test itself plays the
// resourceclaim controller (a claim from the pod's template, named in pod.status). Covered: the
// guide's dra-gpu.yaml with selectors on memory, product name and driver version; a claim two pods
// share with NVIDIA's GpuConfig MPS sharing (limits seen by a recording nvidia-cuda-mps-control on
// PATH and in the CDI spec); a claim nothing satisfies, left unallocated and explained by
// `kgpu doctor`.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <filesystem>

#include "../peers/kubelet_dra_peer.h"
#include "agent_fixture.h"
#include "dra_claims.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
namespace res = kube::resources;

constexpr const char* kNode = "node-a";

// HGX H100: GPUs 0-6 whole, GPU 7 split into a 1g.10gb and a 3g.40gb MIG device.
constexpr const char* kNodeYaml =
    "preset: hgx-h100-8\ndriverVersion: '580.105.08'\ncudaDriverVersion: 12090\n"
    "gpus:\n  - index: 7\n    mig:\n      enabled: true\n      instances: [{profile: 1g.10gb}, {profile: 3g.40gb}]\n";

// The selectors of the guide's DRA example, made specific: at least 40 GiB, an H100, a driver
// of the 570 series or newer.
const std::vector<std::string> kGuideSelectors = {
    "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0",
    "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().matches(\"^.*h100.*$\")",
    "device.attributes[\"gpu.nvidia.com\"].driverVersion.compareTo(semver(\"570.0.0\")) >= 0"};

json claim_spec(const std::vector<std::string>& selectors, json config = nullptr) {
  json sels = json::array();
  for (const auto& e : selectors) sels.push_back({{"cel", {{"expression", e}}}});
  json spec = {
      {"devices",
       {{"requests",
         json::array({{{"name", "gpu"},
                       {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", 1}, {"selectors", sels}}}}})}}}};
  if (!config.is_null()) spec["devices"]["config"] = config;
  return spec;
}

// The guide's pod: one container using the claim `gpu`, from a template or a named claim.
json guide_pod(const std::string& name, const json& claim_source) {
  json rc = claim_source;
  rc["name"] = "gpu";
  return {{"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"resourceClaims", json::array({rc})},
            {"containers", json::array({{{"name", "cuda"},
                                         {"image", "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04"},
                                         {"command", json::array({"nvidia-smi", "-L"})},
                                         {"resources", {{"claims", json::array({{{"name", "gpu"}}})}}}}})}}}};
}

class SchedulerProcess {
 public:
  explicit SchedulerProcess(const StandIn& s) {
    log_ = (dir_.path() / "log").string();
    proc_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{KGPU_BINARY, "scheduler", "--kubeconfig", s.kubeconfig(), "--address", "127.0.0.1:0",
                                 "--leader-elect=false", "--log-level", "debug"},
        std::vector<std::string>{}, log_);
    port_ = agent_port(log_, std::chrono::seconds(20));
    EXPECT_GT(port_, 0) << log();
  }
  json post(const std::string& verb, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(std::chrono::seconds(10));
    auto r = c.Post("/" + verb, body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer") << log();
    return r && r->status == 200 ? json::parse(r->body) : json();
  }
  bool ready() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/readyz");
    return r && r->status == 200;
  }
  // kube-scheduler's filter with node names: the chosen node or "", the reply in `reply`.
  std::string filter(json pod, json* reply = nullptr) {
    pod.erase("apiVersion");
    pod.erase("kind");
    const json j = post("filter", {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {kNode}}});
    if (reply != nullptr) *reply = j;
    if (!j.is_object() || !j["NodeNames"].is_array() || j["NodeNames"].empty()) return "";
    return j["NodeNames"][0];
  }
  std::string bind(const json& pod) {
    const json j = post("bind", {{"PodName", pod["metadata"]["name"]},
                                 {"PodNamespace", "default"},
                                 {"PodUID", pod["metadata"]["uid"]},
                                 {"Node", kNode}});
    return j.is_object() ? j.value("Error", "no answer") : "no answer";
  }
  std::string log() const { return slurp(log_); }

 private:
  TempDir dir_;
  std::string log_;
  std::unique_ptr<ChildProcess> proc_;
  int port_ = 0;
};

class DraEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = client_for(token_config(api_));
    ASSERT_TRUE(client_->create(res::kNodes, "",
                                {{"apiVersion", "v1"},
                                 {"kind", "Node"},
                                 {"metadata", {{"name", kNode}, {"labels", {{"kgpu.io/gpu-api", "dra"}}}}}}));
    // The DeviceClasses shipped in deploy/dra (YAML read by python3's yaml).
    const auto out = run_command(
        "python3 -c 'import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))' " +
        std::string(KGPU_SOURCE_DIR) + "/deploy/dra/deviceclasses.yaml");
    ASSERT_EQ(out.status, 0) << out.text;
    for (const auto& d : json::parse(out.text)) ASSERT_TRUE(client_->create(res::kDeviceClasses, "", d));
    // A recording nvidia-cuda-mps-control on PATH: what the agent asks the MPS control daemon.
    mps_record_ = (bin_.path() / "mps.log").string();
    const std::string script = bin_.write("nvidia-cuda-mps-control",
                                          "#!/bin/sh\n{ echo \"args:$*\"; echo \"pipe:$CUDA_MPS_PIPE_DIRECTORY\";"
                                          " echo \"visible:$CUDA_VISIBLE_DEVICES\"; cat; } >> " +
                                              mps_record_ + "\n");
    ::chmod(script.c_str(), 0755);
    for (int i = 0; i < 8; ++i) dirs_.write("dev/nvidia" + std::to_string(i), "");  // the agent checks they exist
    dirs_.write("dev/nvidiactl", "");
    const std::string reg = (dirs_.path() / "plugins_registry").string();
    const char* path = std::getenv("PATH");
    agent_ = std::make_unique<PluginAgent>(
        kNodeYaml, "flags:\n  mpsRoot: " + (dirs_.path() / "mps").string() + "\n",
        std::vector<std::string>{"--kubeconfig", api_.kubeconfig(), "--node-name", kNode, "--dra-registry-dir", reg,
                                 "--dra-plugins-dir", (dirs_.path() / "plugins").string(), "--dev-root",
                                 dirs_.path().string()},
        std::vector<std::string>{"PATH=" + bin_.path().string() + ":" + (path ? path : "/usr/bin:/bin")});
    const std::string reg_socket = reg + "/gpu.nvidia.com-reg.sock";
    ASSERT_TRUE(eventually([&] { return fs::exists(reg_socket); })) << agent_->log();
    auto info = dra_register(reg_socket);
    ASSERT_TRUE(info) << info.error().message << agent_->log();
    endpoint_ = info->endpoint;
    // The pool: GPUs 0-6 and GPU 7's two MIG devices.
    ASSERT_TRUE(eventually([&] { return published() == 9; }, std::chrono::seconds(20))) << agent_->log();
    scheduler_ = std::make_unique<SchedulerProcess>(api_);
    ASSERT_TRUE(eventually([&] { return scheduler_->ready(); }, std::chrono::seconds(10))) << scheduler_->log();
  }

  size_t published() {
    auto list = client_->list(res::kResourceSlices, "");
    if (!list) return 0;
    size_t n = 0;
    for (const auto& s : (*list)["items"])
      if (s["spec"].value("nodeName", "") == kNode) n += s["spec"]["devices"].size();
    return n;
  }
  json create(const kube::Resource& r, const json& obj) {
    auto out = client_->create(r, r.namespaced ? "default" : "", obj);
    EXPECT_TRUE(out) << out.error().text();
    return out ? *out : json();
  }
  json get(const kube::Resource& r, const std::string& name) {
    auto out = client_->get(r, "default", name);
    EXPECT_TRUE(out) << out.error().text();
    return out ? *out : json();
  }
  // The scheduler's informers see what the test wrote a moment later: filter until it places.
  std::string place(const json& pod) {
    std::string node;
    json reply;
    EXPECT_TRUE(eventually([&] { return !(node = scheduler_->filter(pod, &reply)).empty(); }))
        << reply.dump() << scheduler_->log();
    return node;
  }
  std::string cdi_spec(const std::string& uid) {
    return slurp(agent_->dir().path() / "cdi" / ("k8s.gpu.nvidia.com-claim_" + uid + ".json"));
  }

  StandIn api_;
  std::unique_ptr<kube::Client> client_;
  TempDir bin_, dirs_;
  std::string mps_record_, endpoint_;
  std::unique_ptr<PluginAgent> agent_;
  std::unique_ptr<SchedulerProcess> scheduler_;
};

TEST_F(DraEndToEnd, TheGuidesClaimIsAllocatedToAMatchingDeviceAndPrepared) {
  create(res::kResourceClaimTemplates,
         {{"metadata", {{"name", "single-gpu"}}}, {"spec", {{"spec", claim_spec(kGuideSelectors)}}}});
  const json pod = create(res::kPods, guide_pod("dra-gpu-test", {{"resourceClaimTemplateName", "single-gpu"}}));
  // No claim generated yet: the pod waits, and says why.
  json reply;
  EXPECT_EQ(scheduler_->filter(pod, &reply), "");
  EXPECT_NE(reply["FailedAndUnresolvableNodes"].value(kNode, "").find("template single-gpu"), std::string::npos)
      << reply.dump();
  // The resourceclaim controller's part: the claim from the template, owned by the pod, named in
  // the pod's status.
  const json claim =
      create(res::kResourceClaims, {{"metadata",
                                     {{"name", "dra-gpu-test-gpu-x7k2p"},
                                      {"annotations", {{"resource.kubernetes.io/pod-claim-name", "gpu"}}},
                                      {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                                                        {"kind", "Pod"},
                                                                        {"name", "dra-gpu-test"},
                                                                        {"uid", pod["metadata"]["uid"]},
                                                                        {"controller", true}}})}}},
                                    {"spec", claim_spec(kGuideSelectors)}});
  ASSERT_TRUE(client_->patch(res::kPods, "default", "dra-gpu-test", kube::PatchType::kMerge,
                             {{"status",
                               {{"resourceClaimStatuses",
                                 json::array({{{"name", "gpu"}, {"resourceClaimName", "dra-gpu-test-gpu-x7k2p"}}})}}}},
                             "status"));
  const json with_status = get(res::kPods, "dra-gpu-test");
  ASSERT_EQ(place(with_status), kNode);
  ASSERT_EQ(scheduler_->bind(with_status), "") << scheduler_->log();
  EXPECT_EQ(get(res::kPods, "dra-gpu-test")["spec"]["nodeName"], kNode);

  // Allocated to a whole H100 (the class takes type "gpu": never GPU 7's MIG devices), reserved.
  const json allocated = get(res::kResourceClaims, "dra-gpu-test-gpu-x7k2p");
  const json& result = allocated["status"]["allocation"]["devices"]["results"][0];
  EXPECT_EQ(result["driver"], "gpu.nvidia.com");
  EXPECT_EQ(result["pool"], kNode);
  const std::string device = result.value("device", "");
  EXPECT_TRUE(device.size() == 5 && device.starts_with("gpu-") && device[4] >= '0' && device[4] <= '6') << device;
  EXPECT_EQ(allocated["status"]["reservedFor"][0]["name"], "dra-gpu-test");
  EXPECT_EQ(allocated["metadata"]["finalizers"][0], "resource.kubernetes.io/delete-protection");

  // The kubelet prepares the claim: the driver answers the claim's CDI device.
  const std::string uid = claim["metadata"]["uid"];
  auto prepared = dra_prepare(endpoint_, "v1", {{"default", uid, "dra-gpu-test-gpu-x7k2p"}});
  ASSERT_TRUE(prepared) << prepared.error().message;
  ASSERT_EQ(prepared->at(uid).error, "") << agent_->log();
  ASSERT_EQ(prepared->at(uid).devices.size(), 1u);
  EXPECT_EQ(prepared->at(uid).devices[0].device_name, device);
  EXPECT_EQ(prepared->at(uid).devices[0].cdi_device_ids,
            std::vector<std::string>{"k8s.gpu.nvidia.com/claim=" + uid + "-" + device});
  EXPECT_NE(cdi_spec(uid).find("/dev/nvidia" + device.substr(4)), std::string::npos);
}

TEST_F(DraEndToEnd, AClaimSharedByTwoPodsWithMpsLimits) {
  const json mps_config = mps_gpu_config(50, "10Gi");
  const json claim = create(res::kResourceClaims, {{"metadata", {{"name", "mps-shared"}}},
                                                   {"spec", claim_spec({kGuideSelectors[0]}, mps_config)}});
  const std::string uid = claim["metadata"]["uid"];
  std::string device;
  for (const char* name : {"mps-a", "mps-b"}) {
    const json pod = create(res::kPods, guide_pod(name, {{"resourceClaimName", "mps-shared"}}));
    ASSERT_EQ(place(pod), kNode);
    ASSERT_EQ(scheduler_->bind(pod), "") << scheduler_->log();
    // Each pod's admission prepares the claim; the second is answered from the checkpoint.
    auto prepared = dra_prepare(endpoint_, "v1", {{"default", uid, "mps-shared"}});
    ASSERT_TRUE(prepared) << prepared.error().message;
    ASSERT_EQ(prepared->at(uid).error, "") << agent_->log();
    ASSERT_EQ(prepared->at(uid).devices.size(), 1u);
    if (device.empty()) device = prepared->at(uid).devices[0].device_name;
    EXPECT_EQ(prepared->at(uid).devices[0].device_name, device);
    EXPECT_EQ(prepared->at(uid).devices[0].cdi_device_ids,
              std::vector<std::string>{"k8s.gpu.nvidia.com/claim=" + uid + "-" + device});
  }
  // One allocation, both pods reserved; the config travels in the allocation (FromClaim).
  const json shared = get(res::kResourceClaims, "mps-shared");
  ASSERT_EQ(shared["status"]["reservedFor"].size(), 2u) << shared.dump();
  EXPECT_EQ(shared["status"]["reservedFor"][0]["name"], "mps-a");
  EXPECT_EQ(shared["status"]["reservedFor"][1]["name"], "mps-b");
  ASSERT_EQ(shared["status"]["allocation"]["devices"]["results"].size(), 1u);
  EXPECT_EQ(shared["status"]["allocation"]["devices"]["config"][0]["source"], "FromClaim");
  EXPECT_EQ(get(res::kPods, "mps-b")["spec"]["nodeName"], kNode);

  // The limits: in every container's environment through the claim's CDI spec, and as the MPS
  // control daemon's defaults for the claim's GPU.
  const std::string spec = cdi_spec(uid);
  EXPECT_NE(spec.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"), std::string::npos) << spec;
  EXPECT_NE(spec.find("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M"), std::string::npos) << spec;
  const std::string pipe = (dirs_.path() / "mps" / ("claim-" + uid) / "pipe").string();
  ASSERT_TRUE(eventually([&] {
    return slurp(mps_record_).find("set_default_active_thread_percentage") != std::string::npos;
  })) << agent_->log();
  const std::string record = slurp(mps_record_);
  EXPECT_NE(record.find("args:-d\npipe:" + pipe + "\n"), std::string::npos) << record;
  EXPECT_NE(record.find("set_default_device_pinned_mem_limit 0 10240M\n"), std::string::npos) << record;
  EXPECT_NE(record.find("set_default_active_thread_percentage 50\n"), std::string::npos) << record;
  // The daemon sees only the claim's GPU.
  const auto vis = record.find("visible:");
  ASSERT_NE(vis, std::string::npos) << record;
  const std::string line = record.substr(vis, record.find('\n', vis) - vis);
  EXPECT_TRUE(line.starts_with("visible:GPU-") && line.find(',') == std::string::npos) << record;
}

TEST_F(DraEndToEnd, AClaimNoDeviceSatisfiesStaysUnallocatedAndDoctorSaysWhy) {
  const std::string selector = "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"100Gi\")) >= 0";
  create(res::kResourceClaims, {{"metadata", {{"name", "too-big"}}}, {"spec", claim_spec({selector})}});
  const json pod = create(res::kPods, guide_pod("too-big", {{"resourceClaimName", "too-big"}}));
  // The scheduler: the one node is refused, naming the selector.
  json reply;
  ASSERT_TRUE(eventually([&] {
    scheduler_->filter(pod, &reply);
    return reply["FailedAndUnresolvableNodes"].value(kNode, "").find("wants 1 device(s), 0 free") != std::string::npos;
  })) << reply.dump();
  EXPECT_NE(reply["FailedAndUnresolvableNodes"].value(kNode, "").find("quantity(\"100Gi\")"), std::string::npos)
      << reply.dump();
  EXPECT_FALSE(get(res::kResourceClaims, "too-big")["status"].contains("allocation"));
  EXPECT_FALSE(get(res::kPods, "too-big")["spec"].contains("nodeName"));
  // kgpu doctor, live: rule dra-claim-unsatisfiable with the selector and the capacities published.
  const auto out = run_command(std::string(KGPU_BINARY) + " doctor --kubeconfig " + api_.kubeconfig() +
                               " --pod default/too-big --output json 2>/dev/null");
  const json findings = json::parse(out.text, nullptr, false);
  ASSERT_FALSE(findings.is_discarded()) << out.text;
  const std::string text = findings.dump();
  EXPECT_NE(text.find("dra-claim-unsatisfiable"), std::string::npos) << out.text;
  EXPECT_NE(text.find("no device satisfies claim request gpu"), std::string::npos) << out.text;
  EXPECT_NE(text.find("quantity(\\\"100Gi\\\")"), std::string::npos) << out.text;
  EXPECT_NE(text.find("81559Mi x7"), std::string::npos) << out.text;
}

}  // namespace
}  // namespace kgpu::testing
