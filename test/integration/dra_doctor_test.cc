// kgpu doctor over slices the publisher wrote to the API-server stand-in: a claim no published
// device satisfies is explained naming its selector, a satisfied one is not flagged, and a
// matching device with a health taint is named.
#include <gtest/gtest.h>

#include <map>

#include "doctor/collect.h"
#include "doctor/diagnose.h"
#include "doctor/snapshot.h"
#include "dra_fixture.h"
#include "k8s/document.h"

namespace kgpu::dra {
namespace {

// The guide's DRA claim (dra-gpu.yaml: one device of class gpu.nvidia.com) with a memory selector,
// and its pod, Pending.
void guide_claim(kube::Client& c, const std::string& pod, const std::string& min_memory,
                 const json& tolerations = nullptr) {
  const json tmpl{
      {"metadata", {{"name", pod + "-tmpl"}}},
      {"spec",
       {{"spec",
         {{"devices",
           {{"requests", json::array({json{
                             {"name", "gpu"},
                             {"exactly",
                              {{"deviceClassName", "gpu.nvidia.com"},
                               {"count", 1},
                               {"selectors", json::array({json{
                                                 {"cel",
                                                  {{"expression",
                                                    "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"" +
                                                        min_memory + "\")) >= 0"}}}}})}}}}})}}}}}}}};
  json t = tmpl;
  if (!tolerations.is_null()) t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = tolerations;
  auto r = c.create(res::kResourceClaimTemplates, "default", t);
  ASSERT_TRUE(r) << r.error().text();
  const json p{
      {"metadata", {{"name", pod}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"resourceClaims", json::array({json{{"name", "gpu"}, {"resourceClaimTemplateName", pod + "-tmpl"}}})},
        {"containers", json::array({json{{"name", "cuda"},
                                         {"image", "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04"},
                                         {"command", json::array({"nvidia-smi", "-L"})},
                                         {"resources", {{"claims", json::array({json{{"name", "gpu"}}})}}}}})}}}};
  r = c.create(res::kPods, "default", p);
  ASSERT_TRUE(r) << r.error().text();
}

// The DeviceClasses shipped in deploy/dra (YAML read by python3's yaml), created through the client.
void apply_device_classes(kube::Client& c) {
  const auto out = kgpu::testing::run_command(
      "python3 -c 'import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))' " +
      std::string(KGPU_SOURCE_DIR) + "/deploy/dra/deviceclasses.yaml");
  ASSERT_EQ(out.status, 0) << out.text;
  const json docs = json::parse(out.text);
  ASSERT_EQ(docs.size(), 2u);
  for (const auto& d : docs) {
    auto r = c.create(res::kDeviceClasses, "", d);
    ASSERT_TRUE(r) << r.error().text();
  }
}

TEST(DraSlices, DoctorNamesTheSelectorNoPublishedDeviceSatisfies) {
  Cluster k;
  k.node("node-a");
  apply_device_classes(*k.c);
  SlicePublisher p(*k.c, options());
  std::vector<PublishedDevice> l4s;
  for (int i = 0; i < 4; ++i) l4s.push_back({gpu_device(i, "24Gi"), {}});
  p.update(l4s);
  ASSERT_TRUE(p.sync_once());
  guide_claim(*k.c, "wants-40gi", "40Gi");
  guide_claim(*k.c, "wants-16gi", "16Gi");

  doctor::CollectOptions o;
  o.kubeconfig = k.s.kubeconfig();
  auto text = doctor::collect_snapshot(o);
  ASSERT_TRUE(text) << text.error().message;
  auto snap = doctor::Snapshot::from(k8s::load_text(std::move(*text), "collected.json"));
  EXPECT_EQ(snap.slices.size(), 1u);
  auto fs = doctor::diagnose(snap, doctor::Options{});
  ASSERT_TRUE(fs);
  const doctor::Finding* wants40 = nullptr;
  for (const auto& f : *fs) {
    if (f.rule != "dra-claim-unsatisfiable") continue;
    EXPECT_EQ(f.object.find("wants-16gi"), std::string::npos) << "a satisfiable claim is flagged: " << f.summary;
    if (f.object.find("wants-40gi") != std::string::npos) wants40 = &f;
  }
  ASSERT_NE(wants40, nullptr);
  EXPECT_NE(wants40->summary.find("no device satisfies claim request gpu"), std::string::npos) << wants40->summary;
  bool selector = false, published = false;
  for (const auto& d : wants40->details) {
    selector |= d.find("selector: device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0") !=
                std::string::npos;
    published |= d.find("24Gi x4") != std::string::npos;
  }
  EXPECT_TRUE(selector) << ::testing::PrintToString(wants40->details);
  EXPECT_TRUE(published) << ::testing::PrintToString(wants40->details);
}

// Diagnoses of the stand-in's cluster, by pod name: the dra-claim-unsatisfiable findings.
std::map<std::string, doctor::Finding> dra_findings(Cluster& k) {
  doctor::CollectOptions o;
  o.kubeconfig = k.s.kubeconfig();
  auto text = doctor::collect_snapshot(o);
  EXPECT_TRUE(text) << text.error().message;
  std::map<std::string, doctor::Finding> out;
  if (!text) return out;
  auto snap = doctor::Snapshot::from(k8s::load_text(std::move(*text), "collected.json"));
  auto fs = doctor::diagnose(snap, doctor::Options{});
  EXPECT_TRUE(fs);
  if (!fs) return out;
  for (const auto& f : *fs) {
    if (f.rule == "dra-claim-unsatisfiable") out[f.object.substr(f.object.rfind('/') + 1)] = f;
  }
  return out;
}

TEST(DraSlices, DoctorSaysTheMatchingDeviceIsTainted) {
  Cluster k;
  k.node("node-a");
  apply_device_classes(*k.c);
  SlicePublisher p(*k.c, options());
  std::vector<PublishedDevice> devices{{gpu_device(0, "80Gi"), DeviceHealth{false, false, true, "GPU lost", {}}},
                                       {gpu_device(1, "24Gi"), {}}};
  p.update(devices);
  ASSERT_TRUE(p.sync_once());
  guide_claim(*k.c, "needs-big", "40Gi");
  guide_claim(*k.c, "tolerates", "40Gi",
              json::array({json{{"key", "gpu.nvidia.com/unreachable"}, {"operator", "Exists"}}}));
  const auto found = dra_findings(k);
  ASSERT_TRUE(found.contains("needs-big")) << found.size();
  const auto& f = found.at("needs-big");
  EXPECT_NE(f.summary.find("1 tainted"), std::string::npos) << f.summary;
  bool named = false;
  for (const auto& d : f.details) {
    named |= d == "tainted (not tolerated): gpu-0 gpu.nvidia.com/unreachable=GPU-lost:NoExecute";
  }
  EXPECT_TRUE(named) << ::testing::PrintToString(f.details);
  EXPECT_FALSE(found.contains("tolerates"));
  // The GPU recovers: the taint goes, and the claim can be allocated.
  devices[0].health = {};
  p.update(devices);
  ASSERT_TRUE(p.sync_once());
  EXPECT_FALSE(dra_findings(k).contains("needs-big"));
}

}  // namespace
}  // namespace kgpu::dra
