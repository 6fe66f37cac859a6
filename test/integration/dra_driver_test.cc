// The DRA driver against the kubelet's side written from the wire contract (kubelet_dra_peer), the
// API-server stand-in holding the ResourceClaims, and a fake-NVML node: registration, prepare and
// unprepare (v1 and v1beta1), repeats, a driver restart in between, per-claim errors, MPS config,
// sockets wiped by a kubelet restart, and a corrupt checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../peers/kubelet_dra_peer.h"
#include "../peers/kubelet_peer.h"
#include "agent_fixture.h"
#include "dra_claims.h"
#include "dra/plugin.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::dra {
namespace {

using kgpu::testing::DraClaim;
using kgpu::testing::DraDevice;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kNode = "node-a";

// H100 node: GPUs 0-6 whole, GPU 7 split into a 1g.10gb and a 3g.40gb MIG device.
constexpr const char* kNodeYaml =
    "preset: hgx-h100-8\ndriverVersion: '580.105.08'\ncudaDriverVersion: 12090\n"
    "gpus:\n  - index: 7\n    mig:\n      enabled: true\n      instances: [{profile: 1g.10gb}, {profile: 3g.40gb}]\n";

json claim_object(const std::string& name) {
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"devices",
         {{"requests",
           json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", 1}}}}})}}}}}};
}

class DraDriverTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kgpu::testing::FakeNodeFile f(kNodeYaml);
    auto node = kgpu::testing::open_fake();
    ASSERT_TRUE(node);
    auto inv = node->inventory();
    ASSERT_TRUE(inv);
    devices_ = build_devices(*inv).devices;
    client_ = kgpu::testing::client_for(kgpu::testing::token_config(api_));
    start_driver();
  }

  void start_driver() {
    DriverOptions o;
    o.node_name = kNode;
    o.cdi_root = (dir_.path() / "cdi").string();
    o.state_dir = (dir_.path() / "plugins/gpu.nvidia.com").string();
    o.cdi_config.mps_root = (dir_.path() / "mps").string();
    o.get_claim = [this](const std::string& ns, const std::string& name) -> Result<json> {
      auto c = client_->get(kube::resources::kResourceClaims, ns, name);
      if (!c) return std::unexpected(c.error().to_error());
      return *c;
    };
    o.devices = [this] { return devices_; };
    o.healthy = [this](const Device& d) { return !unhealthy_.contains(d.uuid); };
    o.start_mps = [this](const MpsClaim& m) -> Result<void> {
      mps_started_.push_back(m);
      return {};
    };
    o.stop_mps = [this](const std::string& uid) { mps_stopped_.push_back(uid); };
    driver_ = std::make_unique<Driver>(std::move(o));
    ASSERT_TRUE(driver_->start());
    plugin_ = std::make_unique<Plugin>(
        *driver_, PluginOptions{(dir_.path() / "plugins_registry").string(), (dir_.path() / "plugins").string()});
    auto ok = plugin_->start();
    ASSERT_TRUE(ok) << ok.error().message;
  }

  void restart_driver() {
    plugin_.reset();
    driver_.reset();
    start_driver();
  }

  // Creates a ResourceClaim with the guide's request and writes its allocation; returns its uid.
  std::string make_claim(const std::string& name, const std::vector<std::string>& devices,
                         const json& config = json::array()) {
    json claim = claim_object(name);
    claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = devices.size();
    if (!config.empty()) claim["spec"]["devices"]["config"] = config;
    auto created = client_->create(kube::resources::kResourceClaims, "default", claim);
    EXPECT_TRUE(created) << (created ? "" : created.error().text());
    if (!created) return "";
    json results = json::array();
    for (const auto& d : devices) {
      results.push_back({{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", kNode}, {"device", d}});
    }
    json alloc_config = json::array();
    for (const auto& c : config) {
      json entry = c;
      entry["source"] = "FromClaim";
      alloc_config.push_back(entry);
    }
    json status = {{"allocation", {{"devices", {{"results", results}}}}}};
    if (!alloc_config.empty()) status["allocation"]["devices"]["config"] = alloc_config;
    auto patched = client_->patch(kube::resources::kResourceClaims, "default", name, kube::PatchType::kMerge,
                                  {{"status", status}}, "status");
    EXPECT_TRUE(patched) << (patched ? "" : patched.error().text());
    return (*created)["metadata"].value("uid", "");
  }

  std::string endpoint() const { return plugin_->dra_socket(); }
  json spec_of(const std::string& uid) const {
    return json::parse(kgpu::testing::slurp(driver_->cdi_spec_path(uid)), nullptr, false);
  }

  kgpu::testing::TempDir dir_;
  kgpu::testing::StandIn api_;
  std::unique_ptr<kube::Client> client_;
  std::vector<Device> devices_;
  std::set<std::string> unhealthy_;
  std::vector<MpsClaim> mps_started_;
  std::vector<std::string> mps_stopped_;
  std::unique_ptr<Driver> driver_;
  std::unique_ptr<Plugin> plugin_;
};

TEST_F(DraDriverTest, RegistersAsTheKubeletExpects) {
  auto info = kgpu::testing::dra_register(plugin_->registration_socket());
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->type, "DRAPlugin");
  EXPECT_EQ(info->name, "gpu.nvidia.com");
  EXPECT_EQ(info->endpoint, (dir_.path() / "plugins/gpu.nvidia.com/dra.sock").string());
  EXPECT_EQ(info->supported_versions, (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin"}));
  EXPECT_EQ(plugin_->registration_socket(), (dir_.path() / "plugins_registry/gpu.nvidia.com-reg.sock").string());
  EXPECT_TRUE(plugin_->registered());
  // A refusal is recorded with the kubelet's reason.
  ASSERT_TRUE(kgpu::testing::dra_notify(plugin_->registration_socket(), false, "driver name already registered"));
  EXPECT_FALSE(plugin_->registered());
  EXPECT_EQ(plugin_->registration_error(), "driver name already registered");
  EXPECT_EQ(plugin_->registration_notices(), 2);
}

TEST_P(DraDriverTest, PrepareRepeatUnprepare) {
  const std::string v = GetParam();
  const std::string uid = make_claim("single-gpu", {"gpu-3"});
  ASSERT_FALSE(uid.empty());
  const std::vector<DraClaim> claims = {{"default", uid, "single-gpu"}};
  auto r = kgpu::testing::dra_prepare(endpoint(), v, claims);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  const auto& p = r->at(uid);
  EXPECT_EQ(p.error, "");
  const std::string cdi_id = "k8s.gpu.nvidia.com/claim=" + uid + "-gpu-3";
  EXPECT_EQ(p.devices, (std::vector<DraDevice>{{{"gpu"}, kNode, "gpu-3", {cdi_id}}}));

  const json spec = spec_of(uid);
  ASSERT_FALSE(spec.is_discarded());
  EXPECT_EQ(spec["kind"], "k8s.gpu.nvidia.com/claim");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], uid + "-gpu-3");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia3");
  EXPECT_TRUE(spec["containerEdits"]["env"].dump().find("NVIDIA_VISIBLE_DEVICES=void") != std::string::npos);
  EXPECT_EQ(driver_->cdi_spec_path(uid),
            (dir_.path() / "cdi" / ("k8s.gpu.nvidia.com-claim_" + uid + ".json")).string());

  // The kubelet repeats itself: the same answer.
  auto again = kgpu::testing::dra_prepare(endpoint(), v, claims);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *r);

  auto u = kgpu::testing::dra_unprepare(endpoint(), v, claims);
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(*u, (std::map<std::string, std::string>{{uid, ""}}));
  EXPECT_FALSE(fs::exists(driver_->cdi_spec_path(uid)));
  EXPECT_TRUE(driver_->prepared().empty());
  // Unknown (already unprepared) claims succeed.
  auto u2 = kgpu::testing::dra_unprepare(endpoint(), v, claims);
  ASSERT_TRUE(u2);
  EXPECT_EQ(u2->at(uid), "");
}

TEST_P(DraDriverTest, MigDeviceAndTwoDevices) {
  const std::string v = GetParam();
  const std::string mig = devices_.back().name;  // a MIG device of GPU 7
  ASSERT_TRUE(mig.starts_with("gpu-7-mig-")) << mig;
  const std::string uid = make_claim("pair", {"gpu-0", mig});
  auto r = kgpu::testing::dra_prepare(endpoint(), v, {{"default", uid, "pair"}});
  ASSERT_TRUE(r);
  const auto& p = r->at(uid);
  ASSERT_EQ(p.error, "");
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[1].device_name, mig);
  const json spec = spec_of(uid);
  ASSERT_EQ(spec["devices"].size(), 2u);
  EXPECT_EQ(spec["devices"][1]["name"], uid + "-" + mig);
  EXPECT_EQ(spec["devices"][1]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia7");
}

TEST_P(DraDriverTest, AgentRestartBetweenPrepareAndUnprepare) {
  const std::string v = GetParam();
  const std::string uid = make_claim("restart", {"gpu-1"});
  const std::vector<DraClaim> claims = {{"default", uid, "restart"}};
  auto r = kgpu::testing::dra_prepare(endpoint(), v, claims);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->at(uid).error, "");
  restart_driver();
  EXPECT_EQ(driver_->load_error(), "");
  EXPECT_EQ(driver_->prepared().size(), 1u);
  // The claim is gone from the API: the answer comes from the checkpoint.
  ASSERT_TRUE(client_->remove(kube::resources::kResourceClaims, "default", "restart"));
  auto again = kgpu::testing::dra_prepare(endpoint(), v, claims);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *r);
  auto u = kgpu::testing::dra_unprepare(endpoint(), v, claims);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->at(uid), "");
  EXPECT_FALSE(fs::exists(driver_->cdi_spec_path(uid)));
  restart_driver();
  EXPECT_TRUE(driver_->prepared().empty());
}

TEST_P(DraDriverTest, PerClaimErrors) {
  const std::string v = GetParam();
  const std::string good = make_claim("good", {"gpu-4"});
  const std::string missing = make_claim("missing", {"gpu-9"});
  const std::string sick = make_claim("sick", {"gpu-2"});
  for (const auto& d : devices_) {
    if (d.name == "gpu-2") unhealthy_.insert(d.uuid);
  }
  auto r = kgpu::testing::dra_prepare(endpoint(), v,
                                      {{"default", good, "good"},
                                       {"default", missing, "missing"},
                                       {"default", sick, "sick"},
                                       {"default", "0000-not-the-uid", "good"},
                                       {"default", "u-absent", "absent"},
                                       {"default", "../../escape", "good"}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 6u);
  EXPECT_NE(r->at("../../escape").error.find("not a Kubernetes uid"), std::string::npos) << r->at("../../escape").error;
  auto u = kgpu::testing::dra_unprepare(endpoint(), v, {{"default", "../../escape", "good"}});
  ASSERT_TRUE(u);
  EXPECT_NE(u->at("../../escape").find("not a Kubernetes uid"), std::string::npos);
  EXPECT_EQ(r->at(good).error, "");
  EXPECT_EQ(r->at(good).devices.size(), 1u);
  EXPECT_NE(r->at(missing).error.find("device gpu-9 is not on node node-a"), std::string::npos) << r->at(missing).error;
  EXPECT_TRUE(r->at(missing).devices.empty());
  EXPECT_NE(r->at(sick).error.find("gpu-2"), std::string::npos);
  EXPECT_NE(r->at(sick).error.find("unhealthy"), std::string::npos) << r->at(sick).error;
  EXPECT_NE(r->at("0000-not-the-uid").error.find("uid"), std::string::npos) << r->at("0000-not-the-uid").error;
  EXPECT_NE(r->at("u-absent").error.find("absent"), std::string::npos) << r->at("u-absent").error;
  EXPECT_FALSE(fs::exists(driver_->cdi_spec_path(missing)));
  EXPECT_EQ(driver_->prepared().size(), 1u);
}

TEST_P(DraDriverTest, MpsConfigPutsLimitsInTheClaimSpec) {
  const std::string v = GetParam();
  const json config = kgpu::testing::mps_gpu_config(50, "10Gi");
  const std::string uid = make_claim("mps", {"gpu-5"}, config);
  auto r = kgpu::testing::dra_prepare(endpoint(), v, {{"default", uid, "mps"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->at(uid).error, "");
  const json edits = spec_of(uid)["devices"][0]["containerEdits"];
  const std::string env = edits["env"].dump();
  EXPECT_NE(env.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"), std::string::npos) << env;
  EXPECT_NE(edits["mounts"].dump().find((dir_.path() / "mps" / ("claim-" + uid) / "pipe").string()), std::string::npos);
  ASSERT_EQ(mps_started_.size(), 1u);
  EXPECT_EQ(mps_started_[0].settings.active_thread_percentage, 50);
  EXPECT_EQ(mps_started_[0].settings.pinned_memory_bytes, 10ull << 30);
  ASSERT_TRUE(kgpu::testing::dra_unprepare(endpoint(), v, {{"default", uid, "mps"}}));
  EXPECT_EQ(mps_stopped_, std::vector<std::string>{uid});

  json bad = config;
  bad[0]["opaque"]["parameters"]["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"] = 150;
  const std::string bad_uid = make_claim("mps-bad", {"gpu-6"}, bad);
  auto b = kgpu::testing::dra_prepare(endpoint(), v, {{"default", bad_uid, "mps-bad"}});
  ASSERT_TRUE(b);
  EXPECT_NE(b->at(bad_uid).error.find("sharing.mpsConfig.defaultActiveThreadPercentage"), std::string::npos)
      << b->at(bad_uid).error;
}

TEST_F(DraDriverTest, SocketsWipedByAKubeletRestartAreServedAgain) {
  ASSERT_TRUE(kgpu::testing::dra_register(plugin_->registration_socket()));
  auto same = plugin_->check_sockets();
  ASSERT_TRUE(same);
  EXPECT_FALSE(*same);
  fs::remove(plugin_->registration_socket());
  fs::remove(plugin_->dra_socket());
  auto again = plugin_->check_sockets();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE(*again);
  EXPECT_FALSE(plugin_->registered());
  ASSERT_TRUE(kgpu::testing::dra_register(plugin_->registration_socket()));
  const std::string uid = make_claim("after", {"gpu-0"});
  auto r = kgpu::testing::dra_prepare(endpoint(), "v1", {{"default", uid, "after"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at(uid).error, "");
}

TEST_F(DraDriverTest, CorruptCheckpointIsNotTrusted) {
  const std::string uid = make_claim("c", {"gpu-0"});
  ASSERT_TRUE(kgpu::testing::dra_prepare(endpoint(), "v1", {{"default", uid, "c"}}));
  const std::string path = driver_->checkpoint_path();
  for (const std::string& text :
       {std::string("{not json"), std::string(R"({"version": 7, "driver": "gpu.nvidia.com", "claims": {}})"),
        std::string(R"({"version": 1, "driver": "gpu.nvidia.com", "claims": {"u": {"namespace": 1}}})")}) {
    plugin_.reset();
    driver_.reset();
    std::ofstream(path) << text;
    start_driver();
    EXPECT_NE(driver_->load_error().find(path), std::string::npos) << driver_->load_error();
    EXPECT_TRUE(driver_->prepared().empty());
    EXPECT_TRUE(fs::exists(path + ".corrupt"));
  }
  // Unprepare still removes the claim's CDI spec (its name follows from the uid).
  auto u = kgpu::testing::dra_unprepare(endpoint(), "v1beta1", {{"default", uid, "c"}});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->at(uid), "");
  EXPECT_FALSE(fs::exists(driver_->cdi_spec_path(uid)));
}

INSTANTIATE_TEST_SUITE_P(Versions, DraDriverTest, ::testing::Values("v1", "v1beta1"));

}  // namespace
}  // namespace kgpu::dra

// ---- The real agent in DRA mode ----

namespace kgpu::dra {
namespace {

// Creates the claim and allocates `device` of node-a to it; returns the uid.
std::string allocate(kube::Client& client, const std::string& name, const std::string& device) {
  auto created = client.create(kube::resources::kResourceClaims, "default", claim_object(name));
  EXPECT_TRUE(created) << (created ? "" : created.error().text());
  if (!created) return "";
  json status = {
      {"allocation",
       {{"devices",
         {{"results",
           json::array({{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", kNode}, {"device", device}}})}}}}}};
  auto patched = client.patch(kube::resources::kResourceClaims, "default", name, kube::PatchType::kMerge,
                              {{"status", status}}, "status");
  EXPECT_TRUE(patched) << (patched ? "" : patched.error().text());
  return (*created)["metadata"].value("uid", "");
}

// The devices of node-a's gpu.nvidia.com pool in the stand-in, by name.
std::map<std::string, json> published_pool(kube::Client& client) {
  std::map<std::string, json> out;
  auto list = client.list(kube::resources::kResourceSlices, "");
  if (!list) return out;
  for (const auto& s : (*list)["items"]) {
    if (s["spec"].value("nodeName", "") != kNode || s["spec"].value("driver", "") != "gpu.nvidia.com") continue;
    for (const auto& d : s["spec"].value("devices", json::array())) out[d.value("name", "")] = d;
  }
  return out;
}

// The pool's generation in the stand-in (-1: no slice).
int64_t published_generation(kube::Client& client) {
  int64_t g = -1;
  auto list = client.list(kube::resources::kResourceSlices, "");
  if (!list) return g;
  for (const auto& s : (*list)["items"]) {
    if (s["spec"].value("nodeName", "") == kNode) g = std::max<int64_t>(g, s["spec"]["pool"].value("generation", -1));
  }
  return g;
}

// "<key>:<effect>:<value>" of a device's first taint ("" when it has none or is not published).
std::string taint_of(kube::Client& client, const std::string& device) {
  auto p = published_pool(client);
  if (!p.contains(device) || !p[device].contains("taints") || p[device]["taints"].empty()) return "";
  const json& t = p[device]["taints"][0];
  return t.value("key", "") + ":" + t.value("effect", "") + ":" + t.value("value", "");
}

// A DRA-mode agent on node-a (labelled kgpu.io/gpu-api=dra) with its API-server stand-in.
struct DraAgentNode {
  explicit DraAgentNode(std::vector<std::string> extra = {}, const std::string& node_yaml = kNodeYaml,
                        std::vector<std::string> env = {}) {
    client = kgpu::testing::client_for(kgpu::testing::token_config(api));
    json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", kNode}, {"labels", {{"kgpu.io/gpu-api", "dra"}}}}}};
    EXPECT_TRUE(client->create(kube::resources::kNodes, "", node));
    for (int i = 0; i < 8; ++i) dirs.write("dev/nvidia" + std::to_string(i), "");  // the agent checks they exist
    dirs.write("dev/nvidiactl", "");
    std::vector<std::string> flags = {"--kubeconfig",       api.kubeconfig(),    "--node-name",       kNode,
                                      "--dra-registry-dir", registry(),          "--dra-plugins-dir", plugins(),
                                      "--dev-root",         dirs.path().string()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    agent = std::make_unique<kgpu::testing::PluginAgent>(node_yaml, "", flags, env);
  }
  std::string registry() const { return (dirs.path() / "plugins_registry").string(); }
  std::string plugins() const { return (dirs.path() / "plugins").string(); }

  kgpu::testing::StandIn api;
  std::unique_ptr<kube::Client> client;
  kgpu::testing::TempDir dirs;
  std::unique_ptr<kgpu::testing::PluginAgent> agent;
};

TEST(DraAgent, NodeLabelTurnsTheAgentIntoTheDraDriver) {
  // A short quiet period for the recovery rule, so that a GPU back from lost is untainted quickly.
  DraAgentNode n({"--health-recovery", "1s"});
  auto& agent = *n.agent;
  auto& client = n.client;
  const std::string reg = n.registry();
  const std::string plugins = n.plugins();
  const auto& dirs = n.dirs;
  const std::string reg_socket = reg + "/gpu.nvidia.com-reg.sock";
  ASSERT_TRUE(kgpu::testing::eventually([&] { return fs::exists(reg_socket); })) << agent.log();
  auto info = kgpu::testing::dra_register(reg_socket);
  ASSERT_TRUE(info) << info.error().message << "\n" << agent.log();
  EXPECT_EQ(info->endpoint, plugins + "/gpu.nvidia.com/dra.sock");

  // The pool's ResourceSlices: GPUs 0-6 whole, GPU 7's two MIG devices; a lost GPU's devices stay,
  // tainted NoExecute, and the taint goes when the GPU is back and the recovery rule says so.
  auto pool = [&] { return published_pool(*client); };
  ASSERT_TRUE(kgpu::testing::eventually([&] { return pool().size() == 9; })) << agent.log();
  EXPECT_TRUE(pool().contains("gpu-3"));
  EXPECT_FALSE(pool().at("gpu-3").contains("taints"));
  EXPECT_EQ(std::ranges::count_if(pool(), [](const auto& kv) { return kv.first.starts_with("gpu-7-mig-"); }), 2);
  agent.fake().rewrite(std::string(kNodeYaml) + "faults:\n  lost: [3]\n");
  ASSERT_TRUE(kgpu::testing::eventually([&] {
    return taint_of(*client, "gpu-3").starts_with("gpu.nvidia.com/unreachable:NoExecute:");
  })) << json(pool()).dump()
      << agent.log();
  EXPECT_EQ(pool().size(), 9u);
  EXPECT_EQ(taint_of(*client, "gpu-2"), "");
  agent.fake().rewrite(kNodeYaml);
  ASSERT_TRUE(kgpu::testing::eventually([&] { return pool().contains("gpu-3") && taint_of(*client, "gpu-3").empty(); }))
      << agent.log();

  const std::string uid = allocate(*client, "agent-claim", "gpu-2");
  auto r = kgpu::testing::dra_prepare(info->endpoint, "v1", {{"default", uid, "agent-claim"}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->at(uid).error, "") << agent.log();
  EXPECT_EQ(r->at(uid).devices[0].cdi_device_ids[0], "k8s.gpu.nvidia.com/claim=" + uid + "-gpu-2");
  const fs::path spec = agent.dir().path() / "cdi" / ("k8s.gpu.nvidia.com-claim_" + uid + ".json");
  ASSERT_TRUE(fs::exists(spec));
  const json written = json::parse(kgpu::testing::slurp(spec));
  EXPECT_EQ(written["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"],
            dirs.path().string() + "/dev/nvidia2");
  // One API per GPU: no device plugin registered.
  EXPECT_TRUE(agent.kubelet().registrations().empty());

  // Restarted between prepare and unprepare.
  agent.restart();
  ASSERT_TRUE(kgpu::testing::eventually([&] { return kgpu::testing::dra_get_info(reg_socket).has_value(); }))
      << agent.log();
  auto again = kgpu::testing::dra_prepare(info->endpoint, "v1beta1", {{"default", uid, "agent-claim"}});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *r);
  auto u = kgpu::testing::dra_unprepare(info->endpoint, "v1beta1", {{"default", uid, "agent-claim"}});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->at(uid), "");
  EXPECT_FALSE(fs::exists(spec));
}

// Dynamic MIG (--dra-dynamic-mig): GPU 7 in MIG mode with no instances is published as 25
// partitions; a claim allocated the 4g.40gb partition gets its instance at prepare (a MIG device
// with a UUID in the CDI spec), the instance outlives an agent restart as the claim's (the GPU stays
// partitionable), a claim over an overlapping placement fails on NVML's refusal, and unprepare
// destroys the instance so the 7g.80gb partition can be made after it. A GPU with instances nobody
// prepared is published as it is.
TEST(DraAgent, DynamicMigCreatesThePartitionAtPrepareAndDestroysItAtUnprepare) {
  kgpu::testing::TempDir state;
  const std::string yaml = "preset: hgx-h100-8\ngpus:\n  - index: 6\n    mig:\n      enabled: true\n"
                           "      instances: [{profile: 1g.10gb}]\n  - index: 7\n    mig: {enabled: true}\n";
  DraAgentNode n({"--dra-dynamic-mig"}, yaml,
                 {"KGPU_FAKE_NVML_STATE=" + (state.path() / "mig.state").string()});
  auto& agent = *n.agent;
  auto& client = *n.client;
  const std::string reg_socket = n.registry() + "/gpu.nvidia.com-reg.sock";
  ASSERT_TRUE(kgpu::testing::eventually([&] { return fs::exists(reg_socket); })) << agent.log();
  auto info = kgpu::testing::dra_register(reg_socket);
  ASSERT_TRUE(info) << info.error().message << "\n" << agent.log();
  auto pool = [&] { return published_pool(client); };
  // GPUs 0-5 whole, GPU 6's instance as it is, GPU 7's 25 partitions.
  ASSERT_TRUE(kgpu::testing::eventually([&] { return pool().size() == 6 + 1 + 25; })) << agent.log();
  EXPECT_TRUE(pool().contains("gpu-6-mig-1g10gb-19-0"));
  EXPECT_TRUE(pool().at("gpu-7-mig-4g40gb-5-0").contains("consumesCounters"));
  EXPECT_NE(agent.log().find("GPU 6: not partitionable, it has MIG instances no claim prepared here made (1g.10gb at 0)"),
            std::string::npos)
      << agent.log();

  const std::string a = allocate(client, "four", "gpu-7-mig-4g40gb-5-0");
  auto r = kgpu::testing::dra_prepare(info->endpoint, "v1", {{"default", a, "four"}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->at(a).error, "") << agent.log();
  const fs::path spec = agent.dir().path() / "cdi" / ("k8s.gpu.nvidia.com-claim_" + a + ".json");
  const json written = json::parse(kgpu::testing::slurp(spec));
  EXPECT_EQ(written["devices"][0]["name"], a + "-gpu-7-mig-4g40gb-5-0");
  EXPECT_NE(agent.log().find("DRA: MIG partition created\" device=gpu-7-mig-4g40gb-5-0 uuid=MIG-"), std::string::npos)
      << agent.log();

  // The instance is the claim's: after a restart GPU 7 is still partitionable.
  agent.restart();
  ASSERT_TRUE(kgpu::testing::eventually([&] { return kgpu::testing::dra_get_info(reg_socket).has_value(); }))
      << agent.log();
  ASSERT_TRUE(kgpu::testing::eventually([&] { return pool().size() == 32; }, std::chrono::seconds(10))) << agent.log();
  auto again = kgpu::testing::dra_prepare(info->endpoint, "v1", {{"default", a, "four"}});
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *r);

  // A placement over the 4g.40gb: NVML refuses; nothing is left behind for that claim.
  const std::string b = allocate(client, "seven", "gpu-7-mig-7g80gb-0-0");
  auto refused = kgpu::testing::dra_prepare(info->endpoint, "v1", {{"default", b, "seven"}});
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->at(b).error.find("MIG partition gpu-7-mig-7g80gb-0-0: GPU 7: 7g.80gb at memory slice 0: creating"),
            std::string::npos)
      << refused->at(b).error;
  const std::string checkpoint = kgpu::testing::slurp(n.plugins() + "/gpu.nvidia.com/checkpoint.json");
  EXPECT_EQ(checkpoint.find(b), std::string::npos) << checkpoint;

  // Unprepare destroys the 4g.40gb: the 7g.80gb can be made now.
  auto u = kgpu::testing::dra_unprepare(info->endpoint, "v1", {{"default", a, "four"}});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->at(a), "");
  auto seven = kgpu::testing::dra_prepare(info->endpoint, "v1", {{"default", b, "seven"}});
  ASSERT_TRUE(seven);
  EXPECT_EQ(seven->at(b).error, "") << agent.log();
  auto u7 = kgpu::testing::dra_unprepare(info->endpoint, "v1", {{"default", b, "seven"}});
  ASSERT_TRUE(u7);
  EXPECT_EQ(u7->at(b), "");
}

// XID health in DRA mode, with the device plugin's rules: a reset-class XID taints the device
// reset-required NoSchedule (a MIG-enabled GPU's MIG devices follow it), an ignored XID changes
// nothing, waiting alone does not clear a reset-class fault, and the GPU seen gone and back (a
// reset) and then quiet for the recovery period clears it. Each change is a new pool generation.
TEST(DraAgent, XidHealthTaintsDevicesAndTheRecoveryRuleClearsThem) {
  DraAgentNode n({"--health-recovery", "1s"});
  auto& agent = *n.agent;
  kube::Client& client = *n.client;
  ASSERT_TRUE(kgpu::testing::eventually([&] { return published_pool(client).size() == 9; })) << agent.log();
  const std::string mig_a = "gpu-7-mig-1g10gb-19-0", mig_b = "gpu-7-mig-3g40gb-9-4";
  ASSERT_TRUE(published_pool(client).contains(mig_a) && published_pool(client).contains(mig_b))
      << json(published_pool(client)).dump();
  const int64_t g0 = published_generation(client);

  // XID 31 (an application error, ignored) on GPU 1 comes before XID 79 on GPU 2 and XID 48 on
  // GPU 7: once GPU 2's taint is published, GPU 1's event has been handled.
  const std::string xids = "faults:\n  xids:\n  - {gpu: 1, xid: 31}\n  - {gpu: 2, xid: 79}\n  - {gpu: 7, xid: 48}\n";
  agent.fake().rewrite(std::string(kNodeYaml) + xids);
  const std::string reset = "gpu.nvidia.com/reset-required:NoSchedule:";
  ASSERT_TRUE(kgpu::testing::eventually([&] {
    return taint_of(client, "gpu-2") == reset + "XID-79" && taint_of(client, mig_a) == reset + "XID-48" &&
           taint_of(client, mig_b) == reset + "XID-48";
  })) << json(published_pool(client)).dump()
      << agent.log();
  EXPECT_EQ(taint_of(client, "gpu-1"), "") << "XID 31 is ignored";
  EXPECT_EQ(taint_of(client, "gpu-3"), "");
  const int64_t g1 = published_generation(client);
  EXPECT_GT(g1, g0);
  EXPECT_TRUE(published_pool(client).at("gpu-2")["taints"][0].contains("timeAdded"));

  // GPU 3 lost and back: untainted once quiet for 1 s. By then GPU 2's XID is more than 1 s old,
  // and it still needs a reset.
  agent.fake().rewrite(std::string(kNodeYaml) + "faults:\n  lost: [3]\n");
  ASSERT_TRUE(kgpu::testing::eventually([&] {
    return taint_of(client, "gpu-3").starts_with("gpu.nvidia.com/unreachable:NoExecute:");
  })) << agent.log();
  agent.fake().rewrite(kNodeYaml);
  ASSERT_TRUE(kgpu::testing::eventually([&] { return taint_of(client, "gpu-3").empty(); })) << agent.log();
  EXPECT_EQ(taint_of(client, "gpu-2"), reset + "XID-79") << "a reset-class XID is not cleared by waiting";
  EXPECT_EQ(taint_of(client, mig_a), reset + "XID-48");

  // GPUs 2 and 7 reset (gone, then back): unreachable NoExecute while gone, then untainted after
  // the quiet period.
  agent.fake().rewrite(std::string(kNodeYaml) + "faults:\n  lost: [2, 7]\n");
  ASSERT_TRUE(kgpu::testing::eventually([&] {
    const std::string lost = "gpu.nvidia.com/unreachable:NoExecute:";
    return taint_of(client, "gpu-2").starts_with(lost) && taint_of(client, mig_a).starts_with(lost) &&
           taint_of(client, mig_b).starts_with(lost);
  })) << json(published_pool(client)).dump()
      << agent.log();
  EXPECT_EQ(published_pool(client).size(), 9u);
  agent.fake().rewrite(kNodeYaml);
  ASSERT_TRUE(kgpu::testing::eventually([&] {
    return taint_of(client, "gpu-2").empty() && taint_of(client, mig_a).empty() && taint_of(client, mig_b).empty();
  })) << json(published_pool(client)).dump()
      << agent.log();
  EXPECT_GT(published_generation(client), g1);
  for (const auto& [name, d] : published_pool(client)) EXPECT_FALSE(d.contains("taints")) << name;
}

// The agent in DRA mode attributes its claims' devices in PodResources (dynamic_resources: this
// driver, this node's pool) to their containers on /metrics: a whole GPU and a MIG device. A claim
// of another pool naming gpu-5 is not this node's.
TEST(DraAgent, MetricsAttributeClaimDevicesToTheirContainers) {
  using kgpu::testing::PeerClaim;
  using kgpu::testing::PeerClaimDevice;
  using kgpu::testing::PeerPod;
  kgpu::testing::TempDir kubelet;
  kgpu::testing::KubeletPeer peer((kubelet.path() / "kubelet.sock").string());
  auto claim = [](std::string pool, std::string device) {
    return PeerClaim{"c", "team-a", {PeerClaimDevice{"gpu.nvidia.com", std::move(pool), std::move(device), {}}}};
  };
  peer.set_pods({
      PeerPod{"team-a", "trainer", {{"main", "", {}, {claim(kNode, "gpu-3")}}}},
      PeerPod{"team-a", "infer", {{"model", "", {}, {claim(kNode, "gpu-7-mig-1g10gb-19-0")}}}},
      PeerPod{"team-a", "elsewhere", {{"x", "", {}, {claim("node-b", "gpu-5")}}}},
  });
  peer.start();
  DraAgentNode n({"--pod-resources-socket", peer.socket_path(), "--pod-resources-interval", "100", "-c", "100"});
  auto& agent = *n.agent;
  // The sample lines of `metric` that carry `labels` (all of them).
  auto lines_with = [](const std::string& page, const std::string& metric, const std::vector<std::string>& labels) {
    size_t count = 0;
    std::istringstream in(page);
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with(metric + "{")) continue;
      if (std::ranges::all_of(labels, [&](const std::string& l) { return line.find(l) != std::string::npos; })) ++count;
    }
    return count;
  };
  std::string page;
  ASSERT_TRUE(kgpu::testing::eventually([&] {
    page = agent.metrics();
    return lines_with(page, "DCGM_FI_DEV_FB_USED",
                      {"gpu=\"3\"", "container=\"main\",namespace=\"team-a\",pod=\"trainer\""}) == 1 &&
           lines_with(page, "DCGM_FI_DEV_FB_USED",
                      {"gpu=\"7\"", "GPU_I_PROFILE=\"1g.10gb\"",
                       "container=\"model\",namespace=\"team-a\",pod=\"infer\""}) == 1;
  })) << page
      << agent.log();
  EXPECT_EQ(lines_with(page, "kgpu_device_allocated", {"gpu=\"3\"", "resource=\"gpu.nvidia.com\"", "pod=\"trainer\""}),
            1u)
      << page;
  EXPECT_EQ(page.find("elsewhere"), std::string::npos) << page;
}

TEST(DraAgent, RefusesBothApis) {
  kgpu::testing::TempDir dirs;
  kgpu::testing::FakeNodeFile f(kNodeYaml);
  kgpu::testing::ChildProcess p({KGPU_BINARY, "agent", "--gpu-api", "dra", "--device-plugin", "true"}, {},
                                (dirs.path() / "log").string());
  auto status = p.wait(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2);
  EXPECT_NE(kgpu::testing::slurp(dirs.path() / "log").find("never both"), std::string::npos);
}

}  // namespace
}  // namespace kgpu::dra
