// A leader-election candidate in its own process, for the hand-over test: campaigns for a Lease on
// the API server named by a kubeconfig and writes "<identity> leading" / "<identity> stopped" lines
// to stdout (flushed) as its state changes. SIGTERM stops it cleanly (releasing the lease); SIGKILL
// is the crash the test simulates.
// Usage: leader_child KUBECONFIG LEASE IDENTITY LEASE_MS RENEW_MS RETRY_MS
#include <csignal>
#include <cstdio>
#include <string>

#include "apiclient/client.h"
#include "apiclient/config.h"
#include "apiclient/leader.h"

namespace {
std::atomic<bool> g_stop{false};
void on_term(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) return 2;
  std::signal(SIGTERM, on_term);
  auto cfg = kgpu::kube::config_from_kubeconfig_files({argv[1]}, "");
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().message.c_str());
    return 1;
  }
  auto client = kgpu::kube::Client::create(*cfg);
  if (!client) return 1;
  const std::string id = argv[3];
  kgpu::kube::LeaderElectionConfig le;
  le.name = argv[2];
  le.identity = id;
  le.lease_duration = std::chrono::milliseconds(std::stoi(argv[4]));
  le.renew_deadline = std::chrono::milliseconds(std::stoi(argv[5]));
  le.retry_period = std::chrono::milliseconds(std::stoi(argv[6]));
  le.on_started_leading = [&] {
    std::printf("%s leading\n", id.c_str());
    std::fflush(stdout);
  };
  le.on_stopped_leading = [&] {
    std::printf("%s stopped\n", id.c_str());
    std::fflush(stdout);
  };
  kgpu::kube::LeaderElector elector(**client, le);
  elector.run(g_stop);
  return 0;
}
