// kgpu's Kubernetes API client against the API-server stand-in over HTTPS: every configuration
// form (kubeconfig merging, *-data and file paths, tls-server-name, insecure, client certificates,
// tokens, token files that rotate, exec plugins with expiry, in-cluster files), every verb, typed
// errors, retries (429 with Retry-After, 5xx), and watches (events, bookmarks, stop, 410).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <map>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/base64.h"
#include "standin.h"
#include "test_env.h"
#include "apiclient/client.h"
#include "apiclient/config.h"
#include "common/timestamp.h"
#include "apiclient/credentials.h"

namespace kgpu::kube {
namespace {

using nlohmann::json;
using namespace kgpu::testing;  // the stand-in fixture and its helpers

class KubeClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new StandIn(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static StandIn* server_;
};
StandIn* KubeClientTest::server_ = nullptr;

TEST_F(KubeClientTest, KubeconfigFromTheStandInWorksForEveryContext) {
  for (const std::string ctx : {"standin", "standin-cert", "standin-insecure"}) {
    auto cfg = config_from_kubeconfig_files({server_->kubeconfig()}, ctx == "standin" ? "" : ctx);
    ASSERT_TRUE(cfg) << cfg.error().message;
    EXPECT_EQ(cfg->context, ctx);
    auto c = client_for(*cfg);
    auto ns = c->get(resources::kNamespaces, "", "default");
    ASSERT_TRUE(ns) << ctx << ": " << ns.error().text();
    EXPECT_EQ((*ns)["metadata"]["name"], "default");
  }
}

TEST_F(KubeClientTest, TlsVerificationAndServerName) {
  RestConfig c = token_config(*server_);
  c.ca_pem.clear();  // the system's CAs do not know the stand-in's
  auto r = client_for(c)->get(resources::kNamespaces, "", "default");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().no_answer());
  EXPECT_NE(r.error().text().find("certificate"), std::string::npos) << r.error().text();
  c = token_config(*server_);
  c.server = "https://127.0.0.1:" + std::to_string(server_->port());
  c.tls_server_name = "localhost";  // in the certificate
  EXPECT_TRUE(client_for(c)->get(resources::kNamespaces, "", "default"));
  c.tls_server_name = "wrong.example";
  EXPECT_FALSE(client_for(c)->get(resources::kNamespaces, "", "default"));
}

TEST_F(KubeClientTest, InClusterServiceAccountReachesTheServer) {
  TempDir d;
  d.write("sa/token", "t0k\n");
  d.write("sa/ca.crt", server_->cert("ca.crt"));
  d.write("sa/namespace", "kube-system");
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "127.0.0.1"},
                                         {"KUBERNETES_SERVICE_PORT", std::to_string(server_->port())}};
  LoadOptions o;
  o.getenv = kgpu::testing::env_lookup(env);
  o.service_account_dir = (d.path() / "sa").string();
  auto cfg = load_config(o);
  ASSERT_TRUE(cfg) << cfg.error().message;
  auto c = client_for(*cfg);
  auto r = c->list(resources::kPods, cfg->namespace_);
  ASSERT_TRUE(r) << r.error().text();
  // The token rotates (kubelet rewrites the projected file): the next request carries the new one.
  d.write("sa/token", "rotated\n");
  std::filesystem::last_write_time(d.path() / "sa/token", std::filesystem::file_time_type::clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(c->list(resources::kPods, cfg->namespace_).error().unauthorized());
}

TEST_F(KubeClientTest, WrongTokenIsUnauthorized) {
  RestConfig c = token_config(*server_);
  c.token = "nope";
  auto r = client_for(c)->get(resources::kPods, "default", "x");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().unauthorized());
}

TEST_F(KubeClientTest, TokenFileIsReReadWhenItRotates) {
  TempDir d;
  const std::string file = d.write("token", "old-token\n");
  RestConfig c = token_config(*server_);
  c.token.clear();
  c.token_file = file;
  auto cl = client_for(c);
  EXPECT_TRUE(cl->get(resources::kNamespaces, "", "default").error().unauthorized());
  d.write("token", "t0k\n");
  EXPECT_TRUE(cl->get(resources::kNamespaces, "", "default"));
}

TEST_F(KubeClientTest, ExecPluginWithExpiryAndReExecOn401) {
  TempDir d;
  // Answers a wrong token on its first run, then the right one; every answer expires at
  // 2026-01-01T00:00:30Z, 30 s after the FakeClock's start.
  const std::string plugin = d.write("plugin.sh", R"(#!/bin/sh
n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT"
case "$KUBERNETES_EXEC_INFO" in *'"cluster"'*) echo cluster >> "$COUNT.info";; esac
tok=t0k; [ "$n" = 1 ] && tok=stale
exp=2026-01-01T00:00:30Z
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}' "$tok" "$exp"
)");
  std::filesystem::permissions(plugin, std::filesystem::perms::owner_all);
  const std::string count = (d.path() / "count").string();
  d.write("kubeconfig", fmt::format(R"(apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: {}
    certificate-authority-data: {}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      env: [{{name: COUNT, value: "{}"}}]
      provideClusterInfo: true
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
)",
                                    server_->url(), base64_encode(server_->cert("ca.crt")), count));
  auto cfg = config_from_kubeconfig_files({(d.path() / "kubeconfig").string()}, "");
  ASSERT_TRUE(cfg) << cfg.error().message;
  ASSERT_TRUE(cfg->exec);
  EXPECT_EQ(cfg->exec->command, (d.path() / "plugin.sh").string());  // relative to the kubeconfig
  FakeClock clock;
  ClientOptions options;
  options.clock = &clock;
  auto cl = client_for(*cfg, options);
  auto r = cl->get(resources::kNamespaces, "", "default");
  ASSERT_TRUE(r) << r.error().text();
  EXPECT_EQ(slurp(count), "2\n");  // the 401 re-ran it
  EXPECT_EQ(slurp(count + ".info"), "cluster\ncluster\n");
  EXPECT_TRUE(cl->get(resources::kNamespaces, "", "default"));
  clock.advance(std::chrono::seconds(19));
  EXPECT_TRUE(cl->get(resources::kNamespaces, "", "default"));
  EXPECT_EQ(slurp(count), "2\n");  // cached until it expires (less a 10 s margin)
  clock.advance(std::chrono::seconds(2));
  EXPECT_TRUE(cl->get(resources::kNamespaces, "", "default"));
  EXPECT_EQ(slurp(count), "3\n");  // expired: ran again
}

TEST_F(KubeClientTest, ExecPluginFailuresAreClear) {
  RestConfig c = token_config(*server_);
  c.exec = ExecConfig{"client.authentication.k8s.io/v1", "/nonexistent/gke-gcloud-auth-plugin", {}, {}, false,
                      "Install gke-gcloud-auth-plugin: https://example.invalid/install"};
  auto r = client_for(c)->get(resources::kNamespaces, "", "default");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().text().find("exec credential plugin"), std::string::npos) << r.error().text();
  EXPECT_NE(r.error().text().find("Install gke-gcloud-auth-plugin"), std::string::npos) << r.error().text();
  c.exec->command = "/bin/false";
  r = client_for(c)->get(resources::kNamespaces, "", "default");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().text().find("exit status 1"), std::string::npos) << r.error().text();
}

TEST_F(KubeClientTest, VerbsAndTypedErrors) {
  auto c = client_for(token_config(*server_));
  auto created = c->create(resources::kPods, "default", test_pod("verbs"));
  ASSERT_TRUE(created) << created.error().text();
  EXPECT_EQ((*created)["kind"], "Pod");
  EXPECT_TRUE(c->create(resources::kPods, "default", test_pod("verbs")).error().already_exists());
  EXPECT_TRUE(c->get(resources::kPods, "default", "missing").error().not_found());
  // A stale update is a Conflict.
  json stale = *created;
  json fresh = *created;
  fresh["metadata"]["labels"]["v"] = "1";
  auto updated = c->update(resources::kPods, "default", "verbs", fresh);
  ASSERT_TRUE(updated) << updated.error().text();
  stale["metadata"]["labels"]["v"] = "2";
  auto conflict = c->update(resources::kPods, "default", "verbs", stale);
  ASSERT_FALSE(conflict);
  EXPECT_TRUE(conflict.error().conflict());
  EXPECT_NE(conflict.error().message.find("the object has been modified"), std::string::npos);
  // Three patch types and the status subresource.
  ASSERT_TRUE(c->patch(resources::kPods, "default", "verbs", PatchType::kMerge, json::parse(R"({"metadata":{"annotations":{"a":"1"}}})")));
  ASSERT_TRUE(c->patch(resources::kPods, "default", "verbs", PatchType::kJson,
                       json::parse(R"([{"op":"add","path":"/metadata/labels/j","value":"x"}])")));
  ASSERT_TRUE(c->patch(resources::kPods, "default", "verbs", PatchType::kStrategic,
                       json::parse(R"({"spec":{"containers":[{"name":"c","image":"i:2"}]}})")));
  ASSERT_TRUE(c->patch(resources::kPods, "default", "verbs", PatchType::kMerge, json::parse(R"({"status":{"phase":"Running"}})"), "status"));
  auto got = c->get(resources::kPods, "default", "verbs");
  ASSERT_TRUE(got);
  EXPECT_EQ((*got)["metadata"]["annotations"]["a"], "1");
  EXPECT_EQ((*got)["metadata"]["labels"]["j"], "x");
  EXPECT_EQ((*got)["spec"]["containers"][0]["image"], "i:2");
  EXPECT_EQ((*got)["status"]["phase"], "Running");
  // Binding, with annotations, then the 409 for a bound pod.
  ASSERT_TRUE(c->bind("default", "verbs", (*got)["metadata"]["uid"].get<std::string>(), "gpu-1", json{{"kgpu.io/gpus", "0"}}));
  auto bound = c->get(resources::kPods, "default", "verbs");
  EXPECT_EQ((*bound)["spec"]["nodeName"], "gpu-1");
  EXPECT_EQ((*bound)["metadata"]["annotations"]["kgpu.io/gpus"], "0");
  EXPECT_TRUE(c->bind("default", "verbs", "", "gpu-2").error().conflict());
  // Logs.
  server_->put_log("default/verbs/c", "loading weights\nready\n");
  auto logs = c->logs("default", "verbs", "c", 1);
  ASSERT_TRUE(logs) << logs.error().text();
  EXPECT_EQ(*logs, "ready\n");
  // Delete with a failing precondition, then for real.
  DeleteOptions wrong;
  wrong.uid = "not-it";
  EXPECT_TRUE(c->remove(resources::kPods, "default", "verbs", wrong).error().conflict());
  EXPECT_TRUE(c->remove(resources::kPods, "default", "verbs"));
  EXPECT_TRUE(c->get(resources::kPods, "default", "verbs").error().not_found());
}

TEST_F(KubeClientTest, ListAllPages) {
  auto c = client_for(token_config(*server_));
  ASSERT_TRUE(c->create(resources::kNamespaces, "", json{{"metadata", {{"name", "paging"}}}}));
  for (int i = 0; i < 23; ++i) {
    auto p = c->create(resources::kPods, "paging", test_pod(fmt::format("p{:02}", i)));
    ASSERT_TRUE(p) << p.error().text();
  }
  const uint64_t before = c->requests_sent();
  ListOptions o;
  o.limit = 5;
  std::string rv;
  auto all = c->list_all(resources::kPods, "paging", o, &rv);
  ASSERT_TRUE(all) << all.error().text();
  EXPECT_EQ(all->size(), 23u);
  EXPECT_EQ(c->requests_sent() - before, 5u);
  EXPECT_FALSE(rv.empty());
  o.field_selector = "metadata.name=p07";
  EXPECT_EQ(c->list_all(resources::kPods, "paging", o)->size(), 1u);
  o.field_selector = "spec.bogus=1";
  auto bad = c->list_all(resources::kPods, "paging", o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, 400);
  EXPECT_EQ(bad.error().message, "field label not supported: spec.bogus");
}

TEST_F(KubeClientTest, RetriesFollowTheRules) {
  auto c = client_for(token_config(*server_));
  // 429 with Retry-After: retried, for a POST too.
  server_->fault({{"status", 429}, {"retryAfterSeconds", 0}, {"path", "/api/v1/namespaces/default/configmaps"}, {"times", 2}});
  uint64_t before = c->requests_sent();
  auto cm = c->create(resources::kConfigMaps, "default", json{{"metadata", {{"name", "retry"}}}});
  ASSERT_TRUE(cm) << cm.error().text();
  EXPECT_EQ(c->requests_sent() - before, 3u);
  // 503 without Retry-After: a GET is retried, a POST is not.
  server_->fault({{"status", 503}, {"path", "/api/v1/namespaces/default/configmaps"}, {"times", 1}});
  before = c->requests_sent();
  EXPECT_TRUE(c->get(resources::kConfigMaps, "default", "retry"));
  EXPECT_EQ(c->requests_sent() - before, 2u);
  server_->fault({{"status", 503}, {"path", "/api/v1/namespaces/default/configmaps"}, {"times", 1}});
  auto post = c->create(resources::kConfigMaps, "default", json{{"metadata", {{"name", "once"}}}});
  ASSERT_FALSE(post);
  EXPECT_TRUE(post.error().server_error());
  // Retries stop after max_retries.
  ClientOptions few;
  few.max_retries = 2;
  auto limited = client_for(token_config(*server_), few);
  server_->fault({{"status", 500}, {"path", "/api/v1/namespaces/default/configmaps/retry"}, {"times", 5}});
  before = limited->requests_sent();
  EXPECT_TRUE(limited->get(resources::kConfigMaps, "default", "retry").error().server_error());
  EXPECT_EQ(limited->requests_sent() - before, 3u);
  server_->fault({{"clear", true}});
  // Forbidden keeps RBAC's message.
  server_->fault({{"status", 403}, {"path", "/secrets"}, {"times", 1}});
  auto forbidden = c->list(resources::kSecrets, "default");
  ASSERT_FALSE(forbidden);
  EXPECT_TRUE(forbidden.error().forbidden());
  EXPECT_EQ(forbidden.error().message,
            "secrets is forbidden: User \"kgpu-test\" cannot list resource \"secrets\" in API group \"\" in the "
            "namespace \"default\"");
}

TEST_F(KubeClientTest, RateLimiterPacesRequests) {
  RestConfig cfg = token_config(*server_);
  cfg.qps = 20;
  cfg.burst = 2;
  auto c = client_for(cfg);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(c->get(resources::kNamespaces, "", "default"));
  // 2 at once, then 6 at 20/s: at least 300 ms.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(290));
}

TEST_F(KubeClientTest, WatchDeliversEventsBookmarksAndStops) {
  auto c = client_for(token_config(*server_));
  ASSERT_TRUE(c->create(resources::kNamespaces, "", json{{"metadata", {{"name", "watching"}}}}));
  auto list = c->list(resources::kPods, "watching");
  ASSERT_TRUE(list);
  const std::string rv = (*list)["metadata"]["resourceVersion"];
  std::atomic<bool> stop{false};
  std::vector<std::string> seen;
  int bookmarks = 0;
  std::thread writer([&] {
    auto w = client_for(token_config(*server_));
    w->create(resources::kPods, "watching", test_pod("a"));
    w->patch(resources::kPods, "watching", "a", PatchType::kMerge, json::parse(R"({"metadata":{"labels":{"x":"1"}}})"));
    w->remove(resources::kPods, "watching", "a");
  });
  WatchOptions o;
  o.resource_version = rv;
  o.timeout_seconds = 20;
  auto r = c->watch(resources::kPods, "watching", o, [&](WatchEvent&& ev) {
    if (ev.type == "BOOKMARK") {
      ++bookmarks;
    } else {
      seen.push_back(ev.type + " " + ev.object["metadata"]["name"].get<std::string>());
    }
    if (seen.size() == 4 && bookmarks > 0) stop = true;
    return true;
  }, &stop);
  writer.join();
  ASSERT_TRUE(r) << r.error().text();
  // A pod's deletion is two events, as kube-apiserver sends them: marked (deletionTimestamp), then gone.
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED a", "MODIFIED a", "MODIFIED a", "DELETED a"}));
  EXPECT_GT(bookmarks, 0);
}

TEST_F(KubeClientTest, WatchFromAnExpiredVersionIsGone) {
  auto c = client_for(token_config(*server_));
  auto list = c->list(resources::kPods, "default");
  const std::string rv = (*list)["metadata"]["resourceVersion"];
  server_->fault({{"compact", true}});
  ASSERT_TRUE(c->create(resources::kConfigMaps, "default", json{{"metadata", {{"name", "bump"}}}}));
  WatchOptions o;
  o.resource_version = std::to_string(std::stoull(rv) - 1);
  o.timeout_seconds = 5;
  auto r = c->watch(resources::kPods, "default", o, [](WatchEvent&&) { return true; });
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().gone());
  EXPECT_EQ(r.error().reason, "Expired");
}

TEST(KubeConfig, MergesLikeKubectl) {
  TempDir d;
  d.write("certs/ca.pem", "CA-FROM-FILE");
  const std::string a = d.write("a.yaml", R"(apiVersion: v1
kind: Config
clusters:
- name: shared
  cluster: {server: "https://a.example:6443/", certificate-authority: certs/ca.pem, tls-server-name: api.a}
users:
- name: shared
  user: {token: token-a}
contexts:
- name: ctx-a
  context: {cluster: shared, user: shared, namespace: team-a}
)");
  const std::string b = d.write("b.yaml", R"(apiVersion: v1
kind: Config
clusters:
- name: shared
  cluster: {server: "https://b.example:6443"}
- name: only-b
  cluster: {server: "https://only-b.example", insecure-skip-tls-verify: true, proxy-url: "socks5://proxy:1080"}
users:
- name: shared
  user: {token: token-b}
- name: certs
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ, tokenFile: tok}
contexts:
- name: ctx-b
  context: {cluster: only-b, user: certs}
current-context: ctx-b
)");
  std::map<std::string, std::string> env{{"KUBECONFIG", a + ":/nonexistent:" + b}, {"HOME", d.path().string()}};
  LoadOptions o;
  o.getenv = kgpu::testing::env_lookup(env);
  auto c = load_config(o);  // current-context from b (the first file that sets it)
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->context, "ctx-b");
  EXPECT_EQ(c->server, "https://only-b.example");
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->proxy_url, "socks5://proxy:1080");
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_EQ(c->token_file, (d.path() / "tok").string());
  EXPECT_EQ(c->namespace_, "default");
  o.context = "ctx-a";  // cluster and user "shared" from a, the first file that names them
  c = load_config(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://a.example:6443");
  EXPECT_EQ(c->ca_pem, "CA-FROM-FILE");
  EXPECT_EQ(c->tls_server_name, "api.a");
  EXPECT_EQ(c->token, "token-a");
  EXPECT_EQ(c->namespace_, "team-a");
  o.context = "nope";
  c = load_config(o);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("context \"nope\" does not exist"), std::string::npos);
  o.context.clear();
  o.kubeconfig = a;  // --kubeconfig: that file only (it sets no current-context)
  c = load_config(o);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("no current-context"), std::string::npos);
}

TEST(KubeConfig, BrokenFilesNameTheProblem) {
  TempDir d;
  const auto load = [&](const std::string& text) {
    return config_from_kubeconfig_files({d.write("k.yaml", text)}, "x");
  };
  auto c = load("contexts: [{name: x, context: {cluster: gone}}]\n");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("names cluster \"gone\", which does not exist"), std::string::npos);
  c = load("clusters: [{name: c, cluster: {server: ftp://x}}]\ncontexts: [{name: x, context: {cluster: c}}]\n");
  EXPECT_NE(c.error().message.find("is not an http(s) URL"), std::string::npos);
  c = load("clusters: [{name: c, cluster: {server: https://x, certificate-authority-data: '%%%'}}]\n"
           "contexts: [{name: x, context: {cluster: c}}]\n");
  EXPECT_NE(c.error().message.find("not valid base64"), std::string::npos);
  c = load("clusters: [{name: c, cluster: {server: https://x, certificate-authority: missing.pem}}]\n"
           "contexts: [{name: x, context: {cluster: c}}]\n");
  EXPECT_NE(c.error().message.find("missing.pem"), std::string::npos);
  c = load("clusters: [{name: c, cluster: {server: https://x}}]\nusers: [{name: u, user: {exec: {apiVersion: v9, command: x}}}]\n"
           "contexts: [{name: x, context: {cluster: c, user: u}}]\n");
  EXPECT_NE(c.error().message.find("is not client.authentication.k8s.io/v1"), std::string::npos);
  c = load("a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
           "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n");
  ASSERT_FALSE(c);
}

TEST(KubeConfig, InCluster) {
  TempDir d;
  d.write("sa/token", "sa-token\n");
  d.write("sa/ca.crt", "SA-CA");
  d.write("sa/namespace", "gpu-system");
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  LoadOptions o;
  o.getenv = kgpu::testing::env_lookup(env);
  o.service_account_dir = (d.path() / "sa").string();
  auto c = load_config(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token, "sa-token");
  EXPECT_EQ(c->token_file, (d.path() / "sa/token").string());
  EXPECT_EQ(c->ca_pem, "SA-CA");
  EXPECT_EQ(c->namespace_, "gpu-system");
  env.erase("KUBERNETES_SERVICE_HOST");
  c = load_config(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kNotFound);
}

TEST(KubeCredentials, Rfc3339) {
  EXPECT_EQ(parse_rfc3339("2026-12-01T18:00:00Z"), std::chrono::system_clock::from_time_t(1796148000));
  EXPECT_EQ(parse_rfc3339("2026-12-01T19:00:00.123+01:00"), std::chrono::system_clock::from_time_t(1796148000));
  EXPECT_FALSE(parse_rfc3339("2026-12-01 18:00:00"));
  EXPECT_FALSE(parse_rfc3339("2026-12-01T18:00:00Zjunk"));
}

}  // namespace
}  // namespace kgpu::kube
