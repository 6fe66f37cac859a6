// `kgpu agent`'s device plugins measured from the kubelet's side: the real binary runs as its own
// process on the fake NVML, and a hand-encoded kubelet peer (test/peers/device_plugin_peer.h) serves
// Registration and calls the plugins, as a kubelet would.
//
// What it measures (milliseconds, wall clock in this process; n, p50, p90, p99, max):
// 0. GetDevicePluginOptions: the gRPC round trip with no work behind it, the floor of 1 and 2.
// 1. Allocate, one container, sequential calls over one kept connection: (a) one whole GPU,
//    exclusive, default strategy cdi-cri; (b) one of 32 time-slicing replicas (4 per GPU), envvar;
//    (c) all 8 GPUs in one request; (d) one GPU with passDeviceSpecs and volume-mounts.
// 2. GetPreferredAllocation: 4 of 8 GPUs on hgx-h100-8 (NVSwitch) and on dgx-a100-8 with two NVLink
//    islands; 1 of 32 replicas.
// 3. Kubelet restart (KubeletRegistry::restart(): every socket deleted, kubelet.sock re-created) on a
//    MIG-mixed dgx-a100-8 (2 resources): until the agent's Register arrived for every resource, and
//    until ListAndWatch on every new plugin socket returned the full list. Also agent process start
//    (fork) until its first Register.
// 4. Config file change (time-slicing replicas 2 <-> 4, written and renamed into place) until the
//    kubelet holds a list with the new device count: on the open ListAndWatch stream, or, if the agent
//    restarts that resource's server instead, on a new stream after the new Register (also timed).
//
// Restarts and reloads are started at a random phase of the agent's poll loops (100 ms sockets,
// 500 ms config), so their spread is the poll interval's.
//
// Usage: device_plugin_bench [--json] [--calls N=2000] [--restarts N=20] [--reloads N=20] [--starts N=10]
// Exit status 0 when every measurement completed and every answer checked out; 1 otherwise (the
// reason and the agent's log tail go to stderr).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../test/integration/test_env.h"
#include "../test/peers/device_plugin_peer.h"

using namespace kgpu::testing;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Nearest-rank percentiles of a sample (milliseconds). An empty sample gives all zeros.
struct Stats {
  size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

Stats summarize(std::vector<double> ms) {
  Stats s;
  s.n = ms.size();
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  auto rank = [&](double p) {
    const auto k = static_cast<size_t>(std::ceil(p * static_cast<double>(ms.size())));
    return ms[std::clamp<size_t>(k, 1, ms.size()) - 1];
  };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  s.max = ms.back();
  return s;
}

// A failed measurement: thrown, so that stack unwinding stops the agent processes.
struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tail(const std::string& text, size_t chars) {
  return text.size() <= chars ? text : "..." + text.substr(text.size() - chars);
}

constexpr const char* kH100 = "preset: hgx-h100-8\n";
constexpr const char* kA100NvLinkIslands = "preset: dgx-a100-8\ntopology:\n  nvlink: [[0,1,2,3],[4,5,6,7]]\n";
constexpr const char* kA100MigMixed =
    "preset: dgx-a100-8\ngpus:\n  - index: 0\n    mig:\n      enabled: true\n"
    "      instances: [{profile: 3g.40gb}, {profile: 3g.40gb}]\n";

std::string time_slicing(int replicas) {
  return fmt::format("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: {}\n",
                     replicas);
}

// One `kgpu agent` process with its own temporary tree (device-plugin dir served by a KubeletRegistry,
// CDI root, labels file, fake node file, config file). The process is started by the constructor and
// stopped (SIGTERM, then SIGKILL) by the destructor.
class BenchAgent {
 public:
  // `config_yaml` empty: no --config-file. `extra`: more agent flags.
  BenchAgent(const std::string& node_yaml, const std::string& config_yaml, const std::vector<std::string>& extra = {})
      : registry_((dir_.path() / "dp").string()) {
    std::filesystem::create_directories(dir_.path() / "dp");
    std::filesystem::create_directories(dir_.path() / "features.d");
    const std::string node = dir_.write("node.yaml", node_yaml);
    config_ = dir_.write("config.yaml", config_yaml);
    registry_.start();
    const std::string root = dir_.path().string();
    std::vector<std::string> argv{KGPU_BINARY,
                                  "agent",
                                  "--nvml-library",
                                  KGPU_FAKE_NVML,
                                  "-a",
                                  "127.0.0.1:0",
                                  "--pod-resources-socket",
                                  "",
                                  "--device-plugin-dir",
                                  root + "/dp",
                                  "--cdi-root",
                                  root + "/cdi",
                                  "--output-file",
                                  root + "/features.d/gfd",
                                  "--machine-type-file",
                                  dir_.write("product_name", "DGX H100\n"),
                                  "--container-driver-root",
                                  root + "/no-driver-root"};
    if (!config_yaml.empty()) {
      argv.push_back("--config-file");
      argv.push_back(config_);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    log_ = root + "/agent.log";
    started_ = Clock::now();
    process_ = std::make_unique<ChildProcess>(argv, std::vector<std::string>{"KGPU_FAKE_NVML_CONFIG=" + node}, log_);
  }

  KubeletRegistry& registry() { return registry_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  const std::string& config_path() const { return config_; }
  Clock::time_point started() const { return started_; }

  // Throws BenchError with `what` and the tail of the agent's log.
  [[noreturn]] void fail(const std::string& what) const {
    throw BenchError(what + "\nagent log (tail):\n" + tail(slurp(log_), 3000));
  }

  // True once the process has exited (a zombie counts; it is not reaped here, so its pid stays ours).
  bool exited() const {
    std::ifstream in("/proc/" + std::to_string(process_->pid()) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
  }

  // Waits until `n` Register calls have arrived in total; returns them all. Fails at once when the
  // agent exits.
  std::vector<Registration> registrations(size_t n, std::chrono::milliseconds timeout = 10s) {
    const auto end = Clock::now() + timeout;
    while (!registry_.wait_for_registrations(n, 20ms)) {
      if (exited()) fail("the agent exited");
      if (Clock::now() >= end) {
        fail(fmt::format("expected {} registrations, got {}", n, registry_.registrations().size()));
      }
    }
    return registry_.registrations();
  }

  // Waits until the Register calls after the first `from` name every resource in `names`. Returns the
  // moment the last one needed was seen, and the latest registration of each resource.
  std::pair<Clock::time_point, std::map<std::string, Registration>> registered_since(
      size_t from, const std::set<std::string>& names, std::chrono::milliseconds timeout = 10s) {
    const auto end = Clock::now() + timeout;
    std::map<std::string, Registration> seen;
    for (size_t next = from + 1;; ++next) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      if (left <= 0ms || !registry_.wait_for_registrations(next, left)) {
        fail(fmt::format("registrations after #{}: {} of {} resources", from, seen.size(), names.size()));
      }
      const auto now = Clock::now();
      const auto r = registry_.registrations()[next - 1];
      if (names.contains(r.resource_name)) seen[r.resource_name] = r;
      if (seen.size() == names.size()) return {now, seen};
    }
  }

  std::string socket(const Registration& r) const { return registry_.plugin_socket(r); }

 private:
  TempDir dir_;
  KubeletRegistry registry_;
  std::string config_, log_;
  Clock::time_point started_;
  std::unique_ptr<ChildProcess> process_;
};

// Opens ListAndWatch and returns the first list of exactly `n` devices (n = 0: the first list).
std::vector<DeviceEntry> first_list(BenchAgent& agent, PluginClient& client, size_t n,
                                    std::chrono::milliseconds timeout = 5s) {
  client.watch();
  auto list = client.wait_for_list([&](const auto& l) { return n == 0 ? !l.empty() : l.size() == n; }, timeout);
  if (!list) agent.fail(fmt::format("no ListAndWatch list of {} devices on {}", n, client.socket_path()));
  return *list;
}

// Runs `call` `warmup` times unmeasured, then `calls` times measured; `call(i)` returns "" when its
// answer checks out, else why not (the run stops there).
Stats time_calls(BenchAgent& agent, const std::string& label, int calls, const std::function<std::string(int)>& call,
                 int warmup = 100) {
  for (int i = 0; i < warmup; ++i) {
    if (auto why = call(i); !why.empty()) agent.fail(label + ": " + why);
  }
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const auto a = Clock::now();
    auto why = call(i);
    const auto b = Clock::now();
    if (!why.empty()) agent.fail(label + ": " + why);
    ms.push_back(ms_between(a, b));
  }
  return summarize(std::move(ms));
}

// Judges one container's Allocate answer to the request `ids`: "" when it checks out, else why not.
using AllocationCheck = std::function<std::string(const std::vector<std::string>& ids, const ContainerAllocation&)>;

// Allocate for one container: requests[i % size] each call; `check` judges the container's answer.
Stats time_allocate(BenchAgent& agent, PluginClient& client, const std::string& label, int calls,
                    const std::vector<std::vector<std::string>>& requests, const AllocationCheck& check) {
  return time_calls(agent, label, calls, [&](int i) -> std::string {
    const auto& ids = requests[static_cast<size_t>(i) % requests.size()];
    auto r = client.allocate({ids});
    if (!r) return "Allocate failed: " + r.error().message;
    if (r->size() != 1) return fmt::format("Allocate answered {} containers", r->size());
    return check(ids, r->front());
  });
}

// GetPreferredAllocation for one container: `size` of `available`; `check` judges the answer.
Stats time_preferred(BenchAgent& agent, PluginClient& client, const std::string& label, int calls,
                     const std::vector<std::string>& available, int size,
                     const std::function<std::string(const std::vector<std::string>&)>& check) {
  return time_calls(agent, label, calls, [&](int) -> std::string {
    auto r = client.preferred({PreferredRequest{available, {}, size}});
    if (!r) return "GetPreferredAllocation failed: " + r.error().message;
    if (r->size() != 1 || r->front().size() != static_cast<size_t>(size)) {
      return fmt::format("GetPreferredAllocation answered {}", *r);
    }
    return check(r->front());
  });
}

std::vector<std::string> ids_of(const std::vector<DeviceEntry>& list) {
  std::vector<std::string> ids;
  for (const auto& d : list) ids.push_back(d.id);
  return ids;
}

// One line of the table. section: 0 the call floor, 1 Allocate, 2 GetPreferredAllocation, 3 start and kubelet restart,
// 4 config change; the table lists by section, Allocate rows by label ((a)..(d)), others as measured.
struct Row {
  int section = 0;
  std::string key, label;
  Stats stats;
};

struct Options {
  bool json = false;
  int calls = 2000, restarts = 20, reloads = 20, starts = 10;
};

// 1 and 2 on hgx-h100-8, exclusive, default strategy: Allocate (a) and (c), preferred 4 of 8.
void exclusive_h100(const Options& o, std::vector<Row>& rows) {
  BenchAgent agent(kH100, "");
  const auto regs = agent.registrations(1);
  PluginClient client(agent.socket(regs[0]));
  const auto ids = ids_of(first_list(agent, client, 8));
  std::vector<std::vector<std::string>> singles;
  for (const auto& id : ids) singles.push_back({id});
  rows.push_back({0, "options_round_trip", "GetDevicePluginOptions (gRPC round trip, no work)",
                  time_calls(agent, "GetDevicePluginOptions", o.calls, [&](int) -> std::string {
                    auto r = client.options();
                    if (!r) return "GetDevicePluginOptions failed: " + r.error().message;
                    return r->get_preferred_allocation_available ? "" : "no GetPreferredAllocation";
                  })});
  rows.push_back({1, "allocate_exclusive_cdi_cri", "Allocate (a) 1 GPU, exclusive, cdi-cri",
                  time_allocate(agent, client, "Allocate (a)", o.calls, singles,
                                [](const std::vector<std::string>& req, const ContainerAllocation& a) -> std::string {
                                  if (a.cdi_devices.size() != 1 || !a.cdi_devices[0].ends_with("=" + req[0])) {
                                    return fmt::format("CDI devices {}", a.cdi_devices);
                                  }
                                  return "";
                                })});
  rows.push_back({1, "allocate_8_gpus", "Allocate (c) 8 GPUs in one request, cdi-cri",
                  time_allocate(agent, client, "Allocate (c)", o.calls, {ids},
                                [](const std::vector<std::string>&, const ContainerAllocation& a) -> std::string {
                                  if (a.cdi_devices.size() != 8) return fmt::format("CDI devices {}", a.cdi_devices);
                                  return "";
                                })});
  rows.push_back({2, "preferred_4_of_8_h100", "GetPreferredAllocation 4 of 8, hgx-h100-8 (NVSwitch)",
                  time_preferred(agent, client, "preferred H100", o.calls, ids, 4,
                                 [](const std::vector<std::string>&) { return std::string(); })});
}

// 1 (b) and 2: time-slicing, 4 replicas per GPU (32 devices), envvar.
void replicas_h100(const Options& o, std::vector<Row>& rows) {
  BenchAgent agent(kH100, time_slicing(4), {"--device-list-strategy", "envvar"});
  const auto regs = agent.registrations(1);
  PluginClient client(agent.socket(regs[0]));
  const auto ids = ids_of(first_list(agent, client, 32));
  std::vector<std::vector<std::string>> singles;
  for (const auto& id : ids) singles.push_back({id});
  rows.push_back({1, "allocate_replica_envvar", "Allocate (b) 1 of 32 replicas (4/GPU), envvar",
                  time_allocate(agent, client, "Allocate (b)", o.calls, singles,
                                [](const std::vector<std::string>& req, const ContainerAllocation& a) -> std::string {
                                  const auto it = a.envs.find("NVIDIA_VISIBLE_DEVICES");
                                  const std::string gpu = req[0].substr(0, req[0].find("::"));
                                  if (it == a.envs.end() || it->second != gpu) return fmt::format("envs {}", a.envs);
                                  return "";
                                })});
  rows.push_back({2, "preferred_1_of_32_replicas", "GetPreferredAllocation 1 of 32 replicas",
                  time_preferred(agent, client, "preferred replicas", o.calls, ids, 1,
                                 [](const std::vector<std::string>&) { return std::string(); })});
}

// 1 (d): passDeviceSpecs + volume-mounts, device nodes under a fake /dev root.
void device_specs_h100(const Options& o, std::vector<Row>& rows) {
  TempDir dev_root;
  for (int i = 0; i < 16; ++i) dev_root.write("dev/nvidia" + std::to_string(i), "");
  for (const char* n : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    dev_root.write(std::string("dev/") + n, "");
  }
  BenchAgent agent(
      kH100, "",
      {"--device-list-strategy", "volume-mounts", "--pass-device-specs=true", "--dev-root", dev_root.path().string()});
  const auto regs = agent.registrations(1);
  PluginClient client(agent.socket(regs[0]));
  const auto ids = ids_of(first_list(agent, client, 8));
  std::vector<std::vector<std::string>> singles;
  for (const auto& id : ids) singles.push_back({id});
  rows.push_back({1, "allocate_device_specs_volume_mounts", "Allocate (d) 1 GPU, passDeviceSpecs + volume-mounts",
                  time_allocate(agent, client, "Allocate (d)", o.calls, singles,
                                [](const std::vector<std::string>& req, const ContainerAllocation& a) -> std::string {
                                  // One mount naming the device; /dev/nvidia<minor> plus the 4 control nodes.
                                  if (a.mounts.size() != 1 || !a.mounts[0].container_path.ends_with("/" + req[0]) ||
                                      a.devices.size() != 5) {
                                    return fmt::format("{} mounts, {} device specs", a.mounts.size(), a.devices.size());
                                  }
                                  return "";
                                })});
}

// 2: preferred 4 of 8 on two NVLink islands; the answer must be one whole island.
void preferred_a100_islands(const Options& o, std::vector<Row>& rows) {
  BenchAgent agent(kA100NvLinkIslands, "");
  const auto regs = agent.registrations(1);
  PluginClient client(agent.socket(regs[0]));
  const auto ids = ids_of(first_list(agent, client, 8));
  std::map<std::string, int> island;
  for (size_t i = 0; i < ids.size(); ++i) island[ids[i]] = i < 4 ? 0 : 1;
  rows.push_back({2, "preferred_4_of_8_a100_nvlink", "GetPreferredAllocation 4 of 8, dgx-a100-8, 2 NVLink islands",
                  time_preferred(agent, client, "preferred A100", o.calls, ids, 4,
                                 [&](const std::vector<std::string>& got) -> std::string {
                                   std::set<int> islands;
                                   for (const auto& id : got) islands.insert(island.at(id));
                                   if (islands.size() != 1) return fmt::format("spans both islands: {}", got);
                                   return "";
                                 })});
}

// 3: agent process start (fork) until its first Register, `starts` times.
void startup(const Options& o, std::vector<Row>& rows) {
  std::vector<double> ms;
  for (int i = 0; i < o.starts; ++i) {
    BenchAgent agent(kH100, "");
    agent.registrations(1);
    ms.push_back(ms_between(agent.started(), Clock::now()));
  }
  rows.push_back({3, "start_to_first_register", "Agent start (fork) -> first Register, hgx-h100-8", summarize(ms)});
}

// 3: kubelet restarts on MIG mixed (nvidia.com/gpu: 7 GPUs, nvidia.com/mig-3g.40gb: 2).
// Returns the number of Register calls beyond one per resource per restart.
size_t kubelet_restarts(const Options& o, std::vector<Row>& rows) {
  BenchAgent agent(kA100MigMixed, "", {"--mig-strategy", "mixed"});
  auto regs = agent.registrations(2);
  std::set<std::string> names;
  for (const auto& r : regs) names.insert(r.resource_name);
  if (names.size() != 2) agent.fail(fmt::format("expected 2 resources, got {}", names));
  std::map<std::string, size_t> sizes;  // resource -> device count
  for (const auto& r : regs) {
    PluginClient c(agent.socket(r));
    sizes[r.resource_name] = first_list(agent, c, 0).size();
  }
  std::this_thread::sleep_for(300ms);  // any late duplicate registration lands before the baseline
  const size_t baseline = agent.registry().registrations().size();

  std::mt19937 rng(42);
  std::uniform_int_distribution<int> phase_ms(0, 100);
  std::vector<double> call_ms, register_ms, list_ms;
  std::vector<std::unique_ptr<PluginClient>> clients;  // the "old kubelet's" streams
  for (int i = 0; i < o.restarts; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(phase_ms(rng)));
    clients.clear();  // the old kubelet dies: its streams end
    const size_t from = agent.registry().registrations().size();
    const auto t0 = Clock::now();
    agent.registry().restart();
    const auto t1 = Clock::now();
    auto [registered, latest] = agent.registered_since(from, names);
    for (const auto& [name, r] : latest) {
      clients.push_back(std::make_unique<PluginClient>(agent.socket(r)));
      first_list(agent, *clients.back(), sizes[name]);
    }
    const auto listed = Clock::now();
    call_ms.push_back(ms_between(t0, t1));
    register_ms.push_back(ms_between(t0, registered));
    list_ms.push_back(ms_between(t0, listed));
  }
  clients.clear();
  std::this_thread::sleep_for(300ms);
  const size_t total = agent.registry().registrations().size() - baseline;
  rows.push_back({3, "kubelet_restart_call", "Kubelet restart: restart() call itself", summarize(call_ms)});
  rows.push_back({3, "kubelet_restart_to_all_registered", "Kubelet restart -> Register for both resources",
                  summarize(register_ms)});
  rows.push_back({3, "kubelet_restart_to_all_listed", "Kubelet restart -> ListAndWatch lists on both new sockets",
                  summarize(list_ms)});
  return total - names.size() * static_cast<size_t>(o.restarts);
}

// 4: config replicas 2 <-> 4 on hgx-h100-8 (16 <-> 32 devices), `reloads` changes. The new list may come
// on the open ListAndWatch stream (the agent keeps the server) or, when the agent restarts the server,
// after a new Register on a new stream; both are timed to the list. Returns how many changes re-registered.
int config_reloads(const Options& o, std::vector<Row>& rows) {
  BenchAgent agent(kH100, time_slicing(2));
  auto regs = agent.registrations(1);
  auto client = std::make_unique<PluginClient>(agent.socket(regs[0]));
  first_list(agent, *client, 16);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> phase_ms(0, 500);
  std::vector<double> up_list, all_list, all_reg;
  for (int i = 0; i < o.reloads; ++i) {
    const int replicas = i % 2 == 0 ? 4 : 2;
    const auto want = static_cast<size_t>(8 * replicas);
    std::this_thread::sleep_for(std::chrono::milliseconds(phase_ms(rng)));
    const size_t from = agent.registry().registrations().size();
    // Write then rename, as a ConfigMap update does: the agent never reads a half-written file.
    const auto next = agent.dir() / "config.next";
    std::ofstream(next) << time_slicing(replicas);
    const auto t0 = Clock::now();
    std::filesystem::rename(next, agent.config_path());
    // nullopt as soon as the stream ends without the new list: the server was restarted.
    auto list = client->wait_for_list([&](const auto& l) { return l.size() == want; }, 10s);
    if (!list) {
      if (!client->stream_ended()) agent.fail(fmt::format("no list of {} devices after the config change", want));
      auto [registered, latest] = agent.registered_since(from, {"nvidia.com/gpu"});
      all_reg.push_back(ms_between(t0, registered));
      client = std::make_unique<PluginClient>(agent.socket(latest.at("nvidia.com/gpu")));
      first_list(agent, *client, want);
    }
    all_list.push_back(ms_between(t0, Clock::now()));
    if (replicas == 4) up_list.push_back(all_list.back());
  }
  rows.push_back({4, "reload_2_to_4_listed", "Config replicas 2->4 -> list of 32 devices", summarize(up_list)});
  rows.push_back({4, "reload_any_listed", "Config replicas 2<->4 (both ways) -> new list", summarize(all_list)});
  if (!all_reg.empty()) {
    rows.push_back(
        {4, "reload_any_registered", "Config replicas 2<->4 -> new Register (restarts only)", summarize(all_reg)});
  }
  return static_cast<int>(all_reg.size());
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto number = [&](int& out) {
      if (i + 1 >= argc) return false;
      out = std::atoi(argv[++i]);
      return out > 0;
    };
    if (a == "--json") {
      o.json = true;
    } else if (a == "--calls") {
      if (!number(o.calls)) return false;
    } else if (a == "--restarts") {
      if (!number(o.restarts)) return false;
    } else if (a == "--reloads") {
      if (!number(o.reloads)) return false;
    } else if (a == "--starts") {
      if (!number(o.starts)) return false;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: %s [--json] [--calls N=2000] [--restarts N=20] [--reloads N=20] [--starts N=10]\n",
                 argv[0]);
    return 2;
  }
  const auto t0 = Clock::now();
  std::vector<Row> rows;
  size_t extra_registrations = 0;
  int reregistered_reloads = 0;
  try {
    exclusive_h100(o, rows);
    replicas_h100(o, rows);
    device_specs_h100(o, rows);
    preferred_a100_islands(o, rows);
    startup(o, rows);
    extra_registrations = kubelet_restarts(o, rows);
    reregistered_reloads = config_reloads(o, rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device_plugin_bench: %s\n", e.what());
    return 1;
  }
  const double total_s = ms_between(t0, Clock::now()) / 1000.0;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.section != b.section) return a.section < b.section;
    return a.section == 1 && a.label < b.label;
  });

  if (o.json) {
    nlohmann::json out;
    out["unit"] = "ms";
    out["total_seconds"] = total_s;
    out["extra_registrations_on_restart"] = extra_registrations;
    out["config_changes"] = o.reloads;
    out["config_changes_reregistered"] = reregistered_reloads;
    for (const auto& r : rows) {
      out["results"][r.key] = {{"label", r.label},   {"n", r.stats.n},     {"p50", r.stats.p50},
                               {"p90", r.stats.p90}, {"p99", r.stats.p99}, {"max", r.stats.max}};
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("kgpu agent device plugins, measured from the kubelet side (fake NVML; milliseconds)\n");
  std::printf("%-60s %6s %9s %9s %9s %9s\n", "measure", "n", "p50", "p90", "p99", "max");
  for (const auto& r : rows) {
    std::printf("%-60s %6zu %9.3f %9.3f %9.3f %9.3f\n", r.label.c_str(), r.stats.n, r.stats.p50, r.stats.p90,
                r.stats.p99, r.stats.max);
  }
  std::printf("Register calls beyond one per resource per kubelet restart: %zu\n", extra_registrations);
  std::printf("config changes answered by a server restart and new Register (else on the open stream): %d of %d\n",
              reregistered_reloads, o.reloads);
  std::printf("total run time: %.1f s\n", total_s);
  return 0;
}
