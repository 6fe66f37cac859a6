// The API-server stand-in's semantics, below HTTP: selectors, patches, the store's rules (uid,
// generation, resourceVersion, conflicts, status subresource, finalizers, binding, watch history)
// and the protobuf and manifest decoders on hostile input. Real clients drive it over HTTP in
// test/integration/apiserver_*_test.*.
#include <gtest/gtest.h>

#include "manifest.h"
#include "patch.h"
#include "protobuf.h"
#include "selectors.h"
#include "store.h"

namespace kgpu::apiserver {
namespace {

using nlohmann::json;

json pod(const std::string& name, json labels = json::object()) {
  return json{{"metadata", {{"name", name}, {"labels", labels}}},
              {"spec", {{"containers", json::array({json{{"name", "c"}, {"image", "i:1"}}})}}}};
}

class StoreTest : public ::testing::Test {
 protected:
  StoreTest() : store_(100) {
    store_.create(*registry_.find("", "v1", "namespaces"), "", json{{"metadata", {{"name", "default"}}}}, false);
  }
  const ResourceInfo& pods() { return *registry_.find("", "v1", "pods"); }
  Registry registry_;
  Store store_;
};

TEST(Selectors, LabelRequirements) {
  std::string error;
  const auto s = parse_label_selector("app=web, tier in (gold,silver),!canary,env!=prod,zone", error);
  ASSERT_TRUE(s) << error;
  const json yes = pod("a", {{"app", "web"}, {"tier", "gold"}, {"env", "dev"}, {"zone", "z1"}});
  EXPECT_TRUE(matches_labels(*s, yes));
  json no = yes;
  no["metadata"]["labels"]["canary"] = "1";
  EXPECT_FALSE(matches_labels(*s, no));
  no = yes;
  no["metadata"]["labels"]["tier"] = "bronze";
  EXPECT_FALSE(matches_labels(*s, no));
  no = yes;
  no["metadata"]["labels"].erase("zone");
  EXPECT_FALSE(matches_labels(*s, no));
  EXPECT_TRUE(matches_labels(*parse_label_selector("", error), pod("x")));
}

TEST(Selectors, MalformedAndUnsupported) {
  std::string error;
  EXPECT_FALSE(parse_label_selector("a in (b", error));
  EXPECT_FALSE(parse_label_selector("a in b)", error));
  EXPECT_FALSE(parse_label_selector("a=b,c d (e)", error));
  EXPECT_FALSE(parse_label_selector("sp ace=1", error));
  std::string many;
  for (int i = 0; i < 100; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_FALSE(parse_label_selector(many, error));
  EXPECT_FALSE(parse_field_selector("spec.nope=1", {"spec.nodeName"}, error));
  EXPECT_EQ(error, "field label not supported: spec.nope");
  EXPECT_FALSE(parse_field_selector("spec.nodeName", {"spec.nodeName"}, error));
}

TEST(Selectors, FieldValues) {
  std::string error;
  json p = pod("a");
  p["spec"]["nodeName"] = "n1";
  p["status"]["phase"] = "Running";
  EXPECT_TRUE(matches_fields(*parse_field_selector("spec.nodeName=n1,status.phase!=Pending", {"spec.nodeName", "status.phase"}, error), p));
  EXPECT_FALSE(matches_fields(*parse_field_selector("spec.nodeName==n2", {"spec.nodeName"}, error), p));
  EXPECT_TRUE(matches_fields(*parse_field_selector("spec.hostNetwork=false", {"spec.hostNetwork"}, error), p));
  EXPECT_TRUE(matches_fields(*parse_field_selector("metadata.name=a", {}, error), p));
}

TEST(Patch, StrategicMergesListsByKey) {
  json target = pod("a");
  target["spec"]["containers"].push_back(json{{"name", "side"}, {"image", "s:1"}, {"env", json::array({json{{"name", "A"}, {"value", "1"}}})}});
  std::string error;
  ASSERT_TRUE(apply_patch(target, json::parse(R"({"spec":{"containers":[{"name":"side","image":"s:2","env":[{"name":"B","value":"2"}]}]}})"),
                          PatchType::kStrategic, error))
      << error;
  ASSERT_EQ(target["spec"]["containers"].size(), 2u);
  EXPECT_EQ(target["spec"]["containers"][0]["image"], "i:1");
  EXPECT_EQ(target["spec"]["containers"][1]["image"], "s:2");
  EXPECT_EQ(target["spec"]["containers"][1]["env"].size(), 2u);
  ASSERT_TRUE(apply_patch(target, json::parse(R"({"spec":{"containers":[{"name":"side","$patch":"delete"}]}})"),
                          PatchType::kStrategic, error));
  EXPECT_EQ(target["spec"]["containers"].size(), 1u);
  EXPECT_FALSE(apply_patch(target, json::parse(R"({"spec":{"containers":[{"image":"x"}]}})"), PatchType::kStrategic, error));
  // A Service's ports merge by port.
  json svc = json::parse(R"({"spec":{"ports":[{"name":"a","port":80},{"name":"b","port":90}]}})");
  ASSERT_TRUE(apply_patch(svc, json::parse(R"({"spec":{"ports":[{"port":90,"name":"metrics"}]}})"), PatchType::kApply, error))
      << error;
  EXPECT_EQ(svc["spec"]["ports"], json::parse(R"([{"name":"a","port":80},{"name":"metrics","port":90}])"));
}

TEST(Patch, MergeAndJsonPatch) {
  json target = pod("a", {{"x", "1"}, {"y", "2"}});
  std::string error;
  ASSERT_TRUE(apply_patch(target, json::parse(R"({"metadata":{"labels":{"x":null,"z":"3"}}})"), PatchType::kMerge, error));
  EXPECT_EQ(target["metadata"]["labels"], json::parse(R"({"y":"2","z":"3"})"));
  ASSERT_TRUE(apply_patch(target, json::parse(R"([{"op":"replace","path":"/metadata/labels/y","value":"9"}])"),
                          PatchType::kJsonPatch, error));
  EXPECT_EQ(target["metadata"]["labels"]["y"], "9");
  EXPECT_FALSE(apply_patch(target, json::parse(R"([{"op":"test","path":"/metadata/labels/y","value":"0"}])"),
                           PatchType::kJsonPatch, error));
  EXPECT_FALSE(apply_patch(target, json::parse(R"([{"op":"remove","path":"/nope/deeper"}])"), PatchType::kJsonPatch, error));
  EXPECT_FALSE(apply_patch(target, json::parse("[1]"), PatchType::kMerge, error));
}

TEST_F(StoreTest, CreateSetsServerFieldsAndRefusesDuplicates) {
  const Answer a = store_.create(pods(), "default", pod("p"), false);
  ASSERT_EQ(a.code, 201) << a.body.dump();
  EXPECT_EQ(a.body["metadata"]["generation"], 1);
  EXPECT_EQ(a.body["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_FALSE(a.body["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_EQ(a.body["status"]["phase"], "Pending");
  EXPECT_EQ(a.body["kind"], "Pod");
  const Answer dup = store_.create(pods(), "default", pod("p"), false);
  EXPECT_EQ(dup.code, 409);
  EXPECT_EQ(dup.body["reason"], "AlreadyExists");
  EXPECT_EQ(dup.body["message"], "pods \"p\" already exists");
  EXPECT_EQ(store_.create(pods(), "nowhere", pod("q"), false).body["message"], "namespaces \"nowhere\" not found");
  EXPECT_EQ(store_.create(pods(), "default", pod("Bad_Name"), false).code, 422);
  json gen = pod("");
  gen["metadata"].erase("name");
  gen["metadata"]["generateName"] = "worker-";
  const Answer g = store_.create(pods(), "default", gen, false);
  ASSERT_EQ(g.code, 201);
  EXPECT_TRUE(g.body["metadata"]["name"].get<std::string>().starts_with("worker-"));
  EXPECT_EQ(g.body["metadata"]["name"].get<std::string>().size(), 12u);
}

TEST_F(StoreTest, StaleUpdatesConflictAndStatusIsSeparate) {
  const json created = store_.create(pods(), "default", pod("p"), false).body;
  json update = created;
  update["spec"]["containers"][0]["image"] = "i:2";
  update["status"]["phase"] = "Running";  // ignored by the main resource
  const Answer u = store_.update(pods(), "default", "p", update, Part::kMain, false);
  ASSERT_EQ(u.code, 200) << u.body.dump();
  EXPECT_EQ(u.body["metadata"]["generation"], 2);
  EXPECT_EQ(u.body["status"]["phase"], "Pending");
  const Answer stale = store_.update(pods(), "default", "p", update, Part::kMain, false);
  EXPECT_EQ(stale.code, 409);
  EXPECT_NE(stale.body["message"].get<std::string>().find("the object has been modified"), std::string::npos);
  json status = u.body;
  status["status"]["phase"] = "Running";
  status["spec"]["containers"][0]["image"] = "ignored";
  const Answer s = store_.update(pods(), "default", "p", status, Part::kStatus, false);
  ASSERT_EQ(s.code, 200);
  EXPECT_EQ(s.body["status"]["phase"], "Running");
  EXPECT_EQ(s.body["spec"]["containers"][0]["image"], "i:2");
  EXPECT_EQ(s.body["metadata"]["generation"], 2);
}

TEST_F(StoreTest, FinalizersHoldDeletion) {
  json p = pod("p");
  p["metadata"]["finalizers"] = json::array({"example.com/x"});
  store_.create(pods(), "default", p, false);
  const Answer d = store_.remove(pods(), "default", "p", nullptr, false);
  ASSERT_EQ(d.code, 200);
  EXPECT_TRUE(d.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(store_.get(pods(), "default", "p").code, 200);
  const Answer done = store_.patch(pods(), "default", "p", json::parse(R"({"metadata":{"finalizers":null}})"),
                                   PatchType::kMerge, Part::kMain, false);
  EXPECT_EQ(done.code, 200);
  EXPECT_EQ(store_.get(pods(), "default", "p").code, 404);
}

TEST_F(StoreTest, DeletePreconditions) {
  store_.create(pods(), "default", pod("p"), false);
  const Answer d = store_.remove(pods(), "default", "p", json::parse(R"({"preconditions":{"uid":"other"}})"), false);
  EXPECT_EQ(d.code, 409);
  EXPECT_NE(d.body["message"].get<std::string>().find("Precondition failed: UID in precondition: other"), std::string::npos);
  EXPECT_EQ(store_.remove(pods(), "default", "p", nullptr, false).code, 200);
  EXPECT_EQ(store_.remove(pods(), "default", "p", nullptr, false).code, 404);
}

TEST_F(StoreTest, BindingRules) {
  json p = pod("p");
  p["metadata"]["annotations"] = json{{"keep", "me"}};
  const std::string uid = store_.create(pods(), "default", p, false).body["metadata"]["uid"];
  json binding{{"metadata", {{"name", "p"}, {"uid", "wrong"}}}, {"target", {{"kind", "Node"}, {"name", "n1"}}}};
  EXPECT_EQ(store_.bind(pods(), "default", "p", binding).code, 409);
  binding["metadata"]["uid"] = uid;
  binding["metadata"]["annotations"] = json{{"kgpu.io/gpus", "3"}};
  ASSERT_EQ(store_.bind(pods(), "default", "p", binding).code, 201);
  const json bound = store_.get(pods(), "default", "p").body;
  EXPECT_EQ(bound["spec"]["nodeName"], "n1");
  EXPECT_EQ(bound["metadata"]["annotations"], json::parse(R"({"keep":"me","kgpu.io/gpus":"3"})"));
  EXPECT_EQ(bound["status"]["conditions"][0]["type"], "PodScheduled");
  EXPECT_EQ(bound["status"]["conditions"][0]["status"], "True");
  const Answer again = store_.bind(pods(), "default", "p", binding);
  EXPECT_EQ(again.code, 409);
  EXPECT_NE(again.body["message"].get<std::string>().find("is already assigned to node \"n1\""), std::string::npos);
  json gated = pod("g");
  gated["spec"]["schedulingGates"] = json::array({json{{"name", "wait"}}});
  store_.create(pods(), "default", gated, false);
  EXPECT_EQ(store_.bind(pods(), "default", "g", json{{"target", {{"name", "n1"}}}}).code, 409);
  EXPECT_EQ(store_.bind(pods(), "default", "g", json{{"target", json::object()}}).code, 422);
}

TEST_F(StoreTest, PagedListIsComplete) {
  for (int i = 0; i < 7; ++i) store_.create(pods(), "default", pod("p" + std::to_string(i)), false);
  ListOptions lo;
  lo.limit = 3;
  std::vector<std::string> names;
  int pages = 0;
  while (true) {
    const json page = store_.list(pods(), lo).body;
    ++pages;
    for (const auto& item : page["items"]) names.push_back(item["metadata"]["name"]);
    if (!page["metadata"].contains("continue")) break;
    EXPECT_EQ(page["metadata"]["remainingItemCount"], 7 - static_cast<int>(names.size()));
    lo.continue_token = page["metadata"]["continue"];
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}));
  lo.continue_token = "garbage";
  EXPECT_EQ(store_.list(pods(), lo).code, 400);
}

TEST_F(StoreTest, WatchHistoryAndExpiry) {
  const uint64_t start = store_.resource_version();
  store_.create(pods(), "default", pod("a"), false);
  store_.create(pods(), "default", pod("b"), false);
  std::vector<Change> changes;
  uint64_t rv = start;
  ASSERT_EQ(store_.changes_after(pods(), rv, std::chrono::milliseconds(0), changes, nullptr), Store::WatchResult::kOk);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].type, "ADDED");
  EXPECT_EQ(rv, store_.resource_version());
  changes.clear();
  // Nothing new: returns after the wait with no changes.
  EXPECT_EQ(store_.changes_after(pods(), rv, std::chrono::milliseconds(10), changes, nullptr), Store::WatchResult::kOk);
  EXPECT_TRUE(changes.empty());
  uint64_t old = start;
  store_.compact();
  EXPECT_EQ(store_.changes_after(pods(), old, std::chrono::milliseconds(0), changes, nullptr), Store::WatchResult::kExpired);
  // The history limit (100) compacts by itself.
  const uint64_t before = store_.resource_version();
  for (int i = 0; i < 150; ++i) store_.create(pods(), "default", pod("x" + std::to_string(i)), false);
  uint64_t from = before;
  EXPECT_EQ(store_.changes_after(pods(), from, std::chrono::milliseconds(0), changes, nullptr), Store::WatchResult::kExpired);
  EXPECT_EQ(store_.changes_after(pods(), rv, std::chrono::milliseconds(0), changes,
                                 [] { return true; }),
            Store::WatchResult::kStopped);
}

TEST_F(StoreTest, QuantitiesBecomeStrings) {
  json p = pod("p");
  p["spec"]["containers"][0]["resources"] = json::parse(R"({"limits":{"nvidia.com/gpu":1,"cpu":0.5},"requests":{"memory":"1Gi"}})");
  const json created = store_.create(pods(), "default", p, false).body;
  EXPECT_EQ(created["spec"]["containers"][0]["resources"]["limits"], json::parse(R"({"nvidia.com/gpu":"1","cpu":"500m"})"));
  EXPECT_EQ(created["spec"]["containers"][0]["resources"]["requests"]["memory"], "1Gi");
  // So are those of a workload's pod template.
  json d = json::parse(R"({"metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":2}}}]}}}})");
  const json deployment = store_.create(*registry_.find("apps", "v1", "deployments"), "default", d, false).body;
  EXPECT_EQ(deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "2");
}

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string field(int number, const std::string& bytes) { return varint(static_cast<uint64_t>(number) << 3 | 2) + varint(bytes.size()) + bytes; }

TEST(Protobuf, ConfigMapAndHostileInput) {
  const std::string meta = field(1, "cm") + field(3, "ns") + field(11, field(1, "app") + field(2, "x"));
  const std::string cm = field(1, meta) + field(2, field(1, "k") + field(2, "v")) + field(3, field(1, "b") + field(2, std::string("\x00\xff", 2)));
  const std::string body = std::string("k8s\0", 4) + field(1, field(1, "v1") + field(2, "ConfigMap")) + field(2, cm);
  std::string error;
  const json j = decode_protobuf(body, "ConfigMap", error);
  ASSERT_FALSE(j.is_null()) << error;
  EXPECT_EQ(j["metadata"]["name"], "cm");
  EXPECT_EQ(j["metadata"]["labels"]["app"], "x");
  EXPECT_EQ(j["data"]["k"], "v");
  EXPECT_EQ(j["binaryData"]["b"], "AP8=");
  // Every truncation is an error or a shorter object, never a crash or an over-read.
  for (size_t n = 0; n < body.size(); ++n) (void)decode_protobuf(body.substr(0, n), "ConfigMap", error);
  EXPECT_TRUE(decode_protobuf("k8s", "ConfigMap", error).is_null());
  EXPECT_TRUE(decode_protobuf(std::string("k8s\0", 4) + field(2, field(1, std::string(1, '\xff'))), "ConfigMap", error).is_null());
  EXPECT_TRUE(decode_protobuf(std::string("k8s\0", 4) + "\x12\xff\xff\xff\xff\x0f", "ConfigMap", error).is_null());
  EXPECT_TRUE(decode_protobuf(body, "Pod", error).is_null());
  EXPECT_NE(error.find("not Pod"), std::string::npos);
}

TEST_F(StoreTest, ServerSideApplyCreatesWhatIsMissing) {
  const json cm = json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"a":"1"}},"data":{"k":"v"}})");
  const ResourceInfo& cms = *registry_.find("", "v1", "configmaps");
  // Only apply creates: other patch types of a missing object are 404.
  EXPECT_EQ(store_.patch(cms, "default", "c", cm, PatchType::kMerge, Part::kMain, false).code, 404);
  EXPECT_EQ(store_.patch(cms, "default", "c", cm, PatchType::kApply, Part::kMain, true).code, 201);
  EXPECT_EQ(store_.get(cms, "default", "c").code, 404);  // the dry run stored nothing
  EXPECT_EQ(store_.patch(cms, "default", "other", cm, PatchType::kApply, Part::kMain, false).code, 400);
  const Answer created = store_.patch(cms, "default", "c", cm, PatchType::kApply, Part::kMain, false);
  ASSERT_EQ(created.code, 201) << created.body.dump();
  EXPECT_EQ(created.body["metadata"]["namespace"], "default");
  EXPECT_FALSE(created.body["metadata"].value("uid", "").empty());
  EXPECT_EQ(created.body["metadata"]["generation"], 1);
  json changed = cm;
  changed["data"]["k"] = "w";
  const Answer applied = store_.patch(cms, "default", "c", changed, PatchType::kApply, Part::kMain, false);
  ASSERT_EQ(applied.code, 200) << applied.body.dump();
  EXPECT_EQ(applied.body["data"]["k"], "w");
  EXPECT_EQ(applied.body["metadata"]["uid"], created.body["metadata"]["uid"]);
  // A missing namespace is still 404 (apply creates the object, not its namespace).
  EXPECT_EQ(store_.patch(cms, "nowhere", "c", cm, PatchType::kApply, Part::kMain, false).code, 404);
}

std::string tag(int number, int wire) { return varint(static_cast<uint64_t>(number) << 3 | static_cast<uint64_t>(wire)); }
std::string envelope(const std::string& kind, const std::string& raw) {
  return std::string("k8s\0", 4) + field(1, field(1, "v1") + field(2, kind)) + field(2, raw) + field(3, "") + field(4, "");
}

TEST(Protobuf, DeleteOptions) {
  const std::string opts = tag(1, 0) + varint(static_cast<uint64_t>(int64_t{-1})) +
                           field(2, field(1, "uid-1") + field(2, "42")) + tag(3, 0) + varint(1) +
                           field(4, "Background") + field(5, "All") + tag(6, 0) + varint(1);
  const std::string body = envelope("DeleteOptions", opts);
  std::string error;
  const json j = decode_delete_options(body, error);
  ASSERT_FALSE(j.is_null()) << error;
  EXPECT_EQ(j["gracePeriodSeconds"], -1);
  EXPECT_EQ(j["preconditions"], json::parse(R"({"uid":"uid-1","resourceVersion":"42"})"));
  EXPECT_EQ(j["orphanDependents"], true);
  EXPECT_EQ(j["propagationPolicy"], "Background");
  EXPECT_EQ(j["dryRun"], json::array({"All"}));
  // What Helm sends when it deletes a release Secret: an empty message.
  const json empty = decode_delete_options(envelope("DeleteOptions", ""), error);
  ASSERT_FALSE(empty.is_null()) << error;
  EXPECT_EQ(empty, json::object());
  // Truncations are errors or shorter options, never a crash or an over-read.
  for (size_t n = 0; n < body.size(); ++n) (void)decode_delete_options(body.substr(0, n), error);
  EXPECT_TRUE(decode_delete_options(body.substr(0, body.size() - 1), error).is_null());
  // Hostile: another kind, a field numbered 0, a group wire type, a length past the end, a
  // ten-byte-plus varint, malformed preconditions, a string that is not UTF-8, no magic.
  EXPECT_TRUE(decode_delete_options(envelope("Secret", opts), error).is_null());
  EXPECT_NE(error.find("not DeleteOptions"), std::string::npos);
  EXPECT_TRUE(decode_delete_options(envelope("DeleteOptions", tag(0, 0) + varint(1)), error).is_null());
  EXPECT_TRUE(decode_delete_options(envelope("DeleteOptions", tag(7, 3)), error).is_null());
  EXPECT_TRUE(decode_delete_options(envelope("DeleteOptions", tag(4, 2) + varint(1000) + "x"), error).is_null());
  EXPECT_TRUE(decode_delete_options(envelope("DeleteOptions", tag(1, 0) + std::string(11, '\xff') + "\x01"), error).is_null());
  EXPECT_TRUE(decode_delete_options(envelope("DeleteOptions", field(2, tag(1, 2) + varint(9))), error).is_null());
  EXPECT_NE(error.find("Preconditions"), std::string::npos);
  EXPECT_TRUE(decode_delete_options(envelope("DeleteOptions", field(4, "\xc3\x28")), error).is_null());
  EXPECT_NE(error.find("UTF-8"), std::string::npos);
  EXPECT_TRUE(decode_delete_options(opts, error).is_null());
  EXPECT_NE(error.find("magic"), std::string::npos);
}

TEST(Protobuf, SecretUpdateCarriesItsPreconditions) {
  // Helm's release record: metadata with empty server fields, labels, data, type.
  const std::string meta = field(1, "sh.helm.release.v1.r.v1") + field(2, "") + field(3, "") + field(5, "u-1") +
                           field(6, "17") + tag(7, 0) + varint(0) + field(8, "") +
                           field(11, field(1, "owner") + field(2, "helm"));
  const std::string secret = field(1, meta) + field(2, field(1, "release") + field(2, std::string("\x1f\x8b", 2))) +
                             field(3, "helm.sh/release.v1");
  const std::string body = envelope("Secret", secret);
  std::string error;
  const json j = decode_protobuf(body, "Secret", error);
  ASSERT_FALSE(j.is_null()) << error;
  EXPECT_EQ(j["metadata"]["uid"], "u-1");
  EXPECT_EQ(j["metadata"]["resourceVersion"], "17");
  EXPECT_FALSE(j["metadata"].contains("creationTimestamp"));
  EXPECT_EQ(j["metadata"]["labels"]["owner"], "helm");
  EXPECT_EQ(j["data"]["release"], "H4s=");
  EXPECT_EQ(j["type"], "helm.sh/release.v1");
  // Empty uid/resourceVersion (what Helm sends) are no preconditions.
  const json plain = decode_protobuf(envelope("Secret", field(1, field(1, "s") + field(5, "") + field(6, ""))), "Secret", error);
  ASSERT_FALSE(plain.is_null()) << error;
  EXPECT_FALSE(plain["metadata"].contains("uid"));
  EXPECT_FALSE(plain["metadata"].contains("resourceVersion"));
  for (size_t n = 0; n < body.size(); ++n) (void)decode_protobuf(body.substr(0, n), "Secret", error);
  // The envelope must name the kind the URL names.
  EXPECT_TRUE(decode_protobuf(envelope("ConfigMap", secret), "Secret", error).is_null());
  EXPECT_NE(error.find("holds a ConfigMap"), std::string::npos);
}

TEST(Manifests, TypesBoundsAndLists) {
  auto objs = parse_manifests("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {v: \"1\"}}, spec: {x: 1}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "m.yaml");
  ASSERT_TRUE(objs) << objs.error().message;
  ASSERT_EQ(objs->size(), 2u);
  EXPECT_EQ((*objs)[0]["metadata"]["labels"]["v"], "1");
  EXPECT_EQ((*objs)[0]["spec"]["x"], 1);
  EXPECT_FALSE(parse_manifests(std::string(1000, '[') + std::string(1000, ']'), "deep.json"));
  EXPECT_FALSE(parse_manifests("a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                               "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
                               "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
                               "laughs.yaml"));
  EXPECT_TRUE(json_depth_ok(R"({"a":"[[[[[[[["})", 2));
  EXPECT_FALSE(json_depth_ok("[[[", 2));
}

}  // namespace
}  // namespace kgpu::apiserver
