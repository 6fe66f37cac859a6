#include "standin.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <thread>

namespace kgpu::testing {

using nlohmann::json;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

StandIn::StandIn(std::vector<std::string> extra) {
  std::vector<std::string> argv{KGPU_APISERVER, "--tls", "--cert-dir", (dir_.path() / "certs").string(),
                                "--token", "t0k", "--kubeconfig", kubeconfig(), "--port-file",
                                (dir_.path() / "port").string(), "--bookmark-interval-ms", "200"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  proc_ = std::make_unique<ChildProcess>(argv, std::vector<std::string>{}, (dir_.path() / "log").string());
  for (int i = 0; i < 400 && slurp(dir_.path() / "port").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  const std::string port = slurp(dir_.path() / "port");
  if (port.empty()) {
    ADD_FAILURE() << "kgpu-apiserver did not start: " << slurp(dir_.path() / "log");
    return;
  }
  port_ = std::stoi(port);
}

void StandIn::fault(const json& f) const {
  httplib::SSLClient c("127.0.0.1", port_);
  c.enable_server_certificate_verification(false);
  auto r = c.Post("/standin/v1/faults", f.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 200);
}

void StandIn::put_log(const std::string& path, const std::string& text) const {
  httplib::SSLClient c("127.0.0.1", port_);
  c.enable_server_certificate_verification(false);
  auto r = c.Put("/standin/v1/logs/" + path, text, "text/plain");
  ASSERT_TRUE(r && r->status == 200);
}

kube::RestConfig token_config(const StandIn& s) {
  kube::RestConfig c;
  c.server = s.url();
  c.ca_pem = s.cert("ca.crt");
  c.token = "t0k";
  return c;
}

std::unique_ptr<kube::Client> client_for(kube::RestConfig c, kube::ClientOptions o) {
  o.initial_backoff = std::chrono::milliseconds(20);
  auto cl = kube::Client::create(std::move(c), o);
  EXPECT_TRUE(cl) << cl.error().message;
  return cl ? std::move(*cl) : nullptr;
}

std::function<std::optional<std::string>(std::string_view)> env_lookup(const std::map<std::string, std::string>& env) {
  return [&env](std::string_view k) -> std::optional<std::string> {
    const auto it = env.find(std::string(k));
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

json test_pod(const std::string& name) {
  return json{{"metadata", {{"name", name}, {"labels", {{"app", "t"}}}}},
              {"spec", {{"containers", json::array({json{{"name", "c"}, {"image", "i:1"}}})}}}};
}

}  // namespace kgpu::testing
