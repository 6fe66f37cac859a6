// The read model's edge: a Document built from parsed JSON reads like the same object loaded from
// text, and the JSON path helpers read absent and mistyped values as absent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "k8s/api/document.h"
#include "k8s/api/json.h"
#include "k8s/objects.h"

namespace kgpu::k8s {
namespace {

using nlohmann::json;

const json kPod = json::parse(R"({"metadata":{"name":"p","namespace":"ml","labels":{"app":"x"},
  "annotations":{"kgpu.io/gpu-resource":"nvidia.com/gpu"}},
  "spec":{"nodeName":"n","tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}],
    "nodeSelector":{"nvidia.com/gpu.product":"H100"},
    "containers":[{"name":"m","resources":{"limits":{"nvidia.com/gpu":2,"memory":"1.5Gi","cpu":0.5}}}]},
  "status":{"phase":"Running"}})");

TEST(DocumentFromJson, ReadsLikeTheSameObjectLoadedFromText) {
  auto doc = api::document_from_json(kPod, "pod ml/p", "Pod");
  ASSERT_TRUE(doc) << doc.error().message;
  json typed = kPod;
  typed["kind"] = "Pod";
  typed["apiVersion"] = "v1";
  auto text = load_text(typed.dump(), "p.json", InputFormat::kJson);
  ASSERT_EQ(text.documents.size(), 1u);
  const auto a = as_pod(*doc);
  const auto b = as_pod(text.documents[0]);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(doc->kind, "Pod");
  EXPECT_EQ(doc->api_version, "v1");
  EXPECT_EQ(doc->metadata.name, "p");
  EXPECT_EQ(doc->metadata.labels, text.documents[0].metadata.labels);
  EXPECT_EQ(doc->metadata.annotations.at("kgpu.io/gpu-resource"), "nvidia.com/gpu");
  EXPECT_EQ(a->spec.node_name.value, "n");
  ASSERT_EQ(a->spec.tolerations.size(), 1u);
  EXPECT_EQ(a->spec.tolerations[0].op, "Exists");
  EXPECT_EQ(a->spec.node_selector, b->spec.node_selector);
  for (const char* r : {"nvidia.com/gpu", "memory", "cpu"})
    EXPECT_EQ(pod_request(a->spec, r), pod_request(b->spec, r)) << r;
  EXPECT_EQ(pod_request(a->spec, "cpu").milli_value(), 500);
  EXPECT_TRUE(a->issues.empty());
}

TEST(DocumentFromJson, RefusesWhatIsNotAnObjectOrTooDeep) {
  EXPECT_FALSE(api::document_from_json(json::array(), "x"));
  EXPECT_FALSE(api::document_from_json(json{{"kind", json::array()}}, "x"));
  json deep = json::object();
  json* cur = &deep;
  for (int i = 0; i < 300; ++i) cur = &((*cur)["a"] = json::object());
  auto r = api::document_from_json(deep, "deep");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("deeper than"), std::string::npos) << r.error().message;
  // An object's own kind wins over the default; an empty object is a Document without fields.
  auto own = api::document_from_json(json{{"kind", "Node"}}, "n", "Pod");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->kind, "Node");
  EXPECT_TRUE(api::document_from_json(json::object(), "e", "Pod"));
}

TEST(JsonPath, AbsentAndMistypedValuesReadAsAbsent) {
  const json j = json::parse(R"({"a":{"b":"x","n":1,"f":true,"l":[1],"m":{"k":"v","i":2}},"s":"t"})");
  EXPECT_EQ(api::text(j, {"a", "b"}), "x");
  EXPECT_EQ(api::text(j, {"a", "n"}), "");
  EXPECT_EQ(api::text(j, {"s", "deeper"}), "");
  EXPECT_TRUE(api::flag(j, {"a", "f"}));
  EXPECT_FALSE(api::flag(j, {"a", "b"}));
  EXPECT_EQ(api::list(j, {"a", "l"}).size(), 1u);
  EXPECT_TRUE(api::list(j, {"a", "m"}).empty());
  EXPECT_EQ(api::string_map(api::at(j, {"a", "m"})), (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_TRUE(api::at(j, {"nope"}).is_null());
  EXPECT_FALSE(api::present(j, {"nope"}));
  EXPECT_EQ(api::quantity(json("40Gi"))->value(), int64_t{40} << 30);
  EXPECT_EQ(api::quantity(json(3))->value(), 3);
  EXPECT_FALSE(api::quantity(json("abc")));
  EXPECT_FALSE(api::quantity(json::object()));
}

}  // namespace
}  // namespace kgpu::k8s
