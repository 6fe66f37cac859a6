#include "sim/queue_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <random>
#include <tuple>

#include "common/strings.h"
#include "framework/framework.h"
#include "scheduler/queues.h"
#include "sim/scheduling_queue.h"
#include "sim/simulator.h"

namespace kgpu::sim {

namespace {

namespace q = scheduler::queues;

constexpr const char* kQuotaResource = "gpu-milli";
constexpr const char* kCohort = "openb";
constexpr size_t kSamples = 100;
constexpr size_t kMaxTenants = 64;

struct Job {
  std::vector<size_t> members;  // expanded pod indices, largest GPU request first
  size_t tenant = 0;
  int64_t arrival = 0;
  int64_t runtime = 0;  // longest member lifetime; -1 when a member never leaves
  int32_t priority = 0;
  int64_t gpu = 0;  // milli-GPU over the members
};

struct Scenario {
  std::string name, policy;
  bool gangs = false, queues = false;
  bool reclaim = true;  // queues: reclaimWithinCohort Any, else Never
};

std::string tenant_name(std::string qos) {
  std::ranges::transform(qos, qos.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string out;
  for (const char c : qos) out += (std::isalnum(static_cast<unsigned char>(c)) != 0) ? c : '-';
  return out.empty() ? "none" : out;
}

// The expanded pod list (copy j of trace pod i at index i * copies + j) as a run sees it.
struct Trace {
  const std::vector<sched::Pod>& pods;
  size_t copies = 1;
  std::vector<int64_t> arrival;
  std::vector<size_t> tenant;  // per trace pod
  std::vector<std::string> tenants;
  const sched::Pod& pod(size_t i) const { return pods[i / copies]; }
  size_t size() const { return pods.size() * copies; }
  int64_t lifetime(size_t i) const {
    const auto& p = pod(i);
    return p.deletion ? *p.deletion - p.creation : -1;
  }
};

Result<Trace> expand(const std::vector<sched::Pod>& pods, const std::vector<std::string>& qos, const QueueEvalOptions& o) {
  if (!(o.arrival_speedup > 0)) return fail(ErrorCode::kInvalidArgument, "arrival speed-up must be > 0");
  if (o.pod_copies < 1) return fail(ErrorCode::kInvalidArgument, "pod copies must be >= 1");
  if (pods.empty()) return fail(ErrorCode::kInvalidArgument, "no pods to simulate");
  Trace t{pods, static_cast<size_t>(o.pod_copies), {}, {}, {}};
  t.arrival.resize(t.size());
  for (size_t i = 0; i < t.size(); ++i)
    t.arrival[i] = static_cast<int64_t>(std::floor(static_cast<double>(t.pod(i).creation) / o.arrival_speedup));
  std::map<std::string, size_t> index;
  if (o.tenants == "qos") {
    if (qos.size() != pods.size())
      return fail(ErrorCode::kInvalidArgument, "tenants by qos: {} qos values for {} pods", qos.size(), pods.size());
    for (const auto& v : qos) {
      const std::string name = tenant_name(v);
      auto [it, added] = index.try_emplace(name, index.size());
      if (added) t.tenants.push_back(name);
      if (t.tenants.size() > kMaxTenants)
        return fail(ErrorCode::kInvalidArgument, "tenants by qos: more than {} qos values", kMaxTenants);
      t.tenant.push_back(it->second);
    }
  } else if (o.tenants.starts_with("hash:")) {
    size_t n = 0;
    const std::string digits = o.tenants.substr(5);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || n < 1 || n > kMaxTenants)
      return fail(ErrorCode::kInvalidArgument, "tenants {:?}: want hash:<1..{}>", o.tenants, kMaxTenants);
    for (size_t k = 0; k < n; ++k) t.tenants.push_back(fmt::format("tenant-{}", k));
    for (const auto& p : pods) t.tenant.push_back(fnv1a(p.name) % n);
  } else {
    return fail(ErrorCode::kInvalidArgument, "tenants {:?}: want qos or hash:<n>", o.tenants);
  }
  return t;
}

// The jobs of a run, in arrival order: pods, or gangs when `gangs`.
std::vector<Job> jobs_of(const Trace& t, bool gangs) {
  std::vector<size_t> order(t.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::ranges::stable_sort(order, [&](size_t a, size_t b) {
    return std::pair(t.arrival[a], t.pod(a).creation) < std::pair(t.arrival[b], t.pod(b).creation);
  });
  std::vector<Job> jobs;
  using Key = std::tuple<int64_t, size_t, size_t, int64_t, int64_t, int, int, std::vector<std::string>>;
  std::map<Key, size_t> open;  // gang key -> job, for the arrivals of the current second
  int64_t second = -1;
  for (const size_t i : order) {
    const auto& p = t.pod(i);
    if (p.creation != second) {
      open.clear();
      second = p.creation;
    }
    const size_t tenant = t.tenant[i / t.copies];
    size_t at = jobs.size();
    if (gangs && p.num_gpu > 0) {
      const Key k{p.creation, i % t.copies, tenant, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_models};
      at = open.try_emplace(k, jobs.size()).first->second;
    }
    if (at == jobs.size()) jobs.push_back(Job{{}, tenant, t.arrival[i], 0, p.priority, 0});
    Job& j = jobs[at];
    j.members.push_back(i);
    j.gpu += p.gpu_request();
    j.priority = std::max(j.priority, p.priority);
    const int64_t life = t.lifetime(i);
    j.runtime = (life < 0 || j.runtime < 0) ? -1 : std::max(j.runtime, life);
  }
  for (auto& j : jobs)
    std::ranges::stable_sort(j.members, [&](size_t a, size_t b) { return t.pod(a).gpu_request() > t.pod(b).gpu_request(); });
  return jobs;
}

// The queue config: a ClusterQueue per tenant, nominal quota by share of the GPU-seconds.
std::string queues_yaml(const Trace& t, const std::vector<Job>& jobs, int64_t capacity, bool reclaim) {
  std::vector<double> demand(t.tenants.size(), 0);
  for (const auto& j : jobs)
    if (j.gpu > 0) demand[j.tenant] += static_cast<double>(j.gpu) * static_cast<double>(std::max<int64_t>(j.runtime, 1));
  double total = 0;
  for (const double d : demand) total += d;
  std::vector<int64_t> nominal(t.tenants.size(), 0);
  int64_t given = 0;
  size_t largest = 0;
  for (size_t k = 0; k < nominal.size(); ++k) {
    nominal[k] = total > 0 ? static_cast<int64_t>(std::floor(static_cast<double>(capacity) * demand[k] / total)) : 0;
    given += nominal[k];
    if (demand[k] > demand[largest]) largest = k;
  }
  nominal[largest] += capacity - given;
  std::string y = "version: v1\nclusterQueues:\n";
  for (size_t k = 0; k < nominal.size(); ++k) {
    y += fmt::format("  - name: {}\n    cohort: {}\n    namespaces: [{}]\n    reclaimWithinCohort: {}\n    quotas:\n"
                     "      - {{resource: {}, nominalQuota: {}}}\n",
                     t.tenants[k], kCohort, t.tenants[k], reclaim ? "Any" : "Never", kQuotaResource, nominal[k]);
  }
  return y;
}

struct JobState {
  bool started = false, done = false, admitted = false, in_queue = false;
  uint32_t epoch = 0;
  int failures = 0;
  int64_t start = 0, completion = 0, gone = 0;  // gone: members departed
  std::vector<sched::Placement> placements;  // per member, while started
  std::vector<char> left;                    // per member: departed
  size_t evictions = 0;
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Jain's fairness index of positive values: (sum x)^2 / (n * sum x^2).
double jain(const std::vector<double>& v) {
  double s = 0, s2 = 0;
  for (const double x : v) {
    s += x;
    s2 += x * x;
  }
  return s2 > 0 ? s * s / (static_cast<double>(v.size()) * s2) : 1;
}

Result<ScenarioResult> run(const std::vector<sched::NodeState>& nodes, const Trace& t, const std::vector<Job>& jobs,
                           const Scenario& sc, const q::Config* config, int64_t window_start, int64_t window_end,
                           uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  sched::SchedulingContext ctx;
  ctx.workload = sched::target_workload(t.pods);
  // Ties go to the first best node of the per-seed random node order (as `kgpu sim`'s default):
  // kube-scheduler's random pick in distribution, and the framework's indexed path.
  ctx.tie_break = sched::TieBreak::kFirst;
  auto fw = sched::make_framework(sc.policy, ctx);
  if (!fw) return std::unexpected(fw.error());
  std::mt19937_64 rng(seed);
  sched::Cluster cluster(seeded_order(nodes, rng));
  const auto capacity = static_cast<double>(cluster.gpu_capacity());
  if (capacity <= 0) return fail(ErrorCode::kInvalidArgument, "the cluster has no GPUs");

  std::vector<JobState> st(jobs.size());
  ScenarioResult r;
  r.name = sc.name;
  r.policy = sc.policy;
  r.gangs = sc.gangs;
  r.queues = sc.queues;
  r.jobs = jobs.size();
  for (const auto& j : jobs) r.gang_jobs += j.members.size() > 1 ? 1 : 0;
  r.utilization.assign(kSamples, 0);
  std::vector<TenantResult> tenants(t.tenants.size());
  for (size_t k = 0; k < tenants.size(); ++k) tenants[k].name = t.tenants[k];
  if (config != nullptr)
    for (size_t k = 0; k < tenants.size(); ++k) tenants[k].quota = config->queues[k].quotas[0].nominal;

  std::optional<q::Admission> admission;
  if (sc.queues) admission.emplace(*config);
  auto workload = [&](size_t j) {
    q::Workload w;
    w.id = std::to_string(j);
    w.name = w.id;
    w.queue = t.tenants[jobs[j].tenant];
    w.priority = jobs[j].priority;
    w.created = fmt::format("{:020}/{:010}", jobs[j].arrival, j);
    w.request[{kQuotaResource, ""}] = jobs[j].gpu;
    return w;
  };
  auto queued = [&](size_t j) { return sc.queues && jobs[j].gpu > 0; };

  // Scheduler queue: higher priority, then earlier arrival, then job order. Entries carry the
  // job's epoch; an evicted job's old entries are stale.
  using Entry = std::pair<size_t, uint32_t>;
  auto later = [&](const Entry& a, const Entry& b) {
    const Job& x = jobs[a.first];
    const Job& y = jobs[b.first];
    if (x.priority != y.priority) return x.priority < y.priority;
    if (x.arrival != y.arrival) return x.arrival > y.arrival;
    return a.first > b.first;
  };
  SchedulingQueue<Entry, decltype(later)> scheduling(later);
  using Departure = std::tuple<int64_t, size_t, size_t, uint32_t>;  // (time, job, member, epoch)
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  auto enqueue = [&](size_t j) {
    st[j].in_queue = true;
    scheduling.push({j, st[j].epoch});
  };

  int64_t allocated = 0;
  double allocated_integral = 0;
  double lost = 0;
  size_t next_arrival = 0;
  int64_t now = jobs.empty() ? 0 : jobs[0].arrival;
  const double window = static_cast<double>(std::max<int64_t>(1, window_end - window_start));
  bool dirty = false;

  // Member m of started job j leaves now (its end, or an eviction): its GPUs are free again.
  auto leave = [&](size_t j, size_t m) {
    JobState& s = st[j];
    const sched::Pod& pod = t.pod(jobs[j].members[m]);
    fw->unreserve(pod, s.placements[m], cluster);
    allocated -= pod.gpu_request();
    s.left[m] = 1;
    ++s.gone;
    const double gpu_seconds = static_cast<double>(pod.gpu_request()) * static_cast<double>(now - s.start) / sched::kMilli;
    tenants[jobs[j].tenant].gpu_seconds += gpu_seconds;
    return gpu_seconds;
  };
  auto evict = [&](size_t j) {
    JobState& s = st[j];
    if (s.started) {
      for (size_t m = 0; m < jobs[j].members.size(); ++m)
        if (s.left[m] == 0) lost += leave(j, m);
      s.placements.clear();
    }
    s.started = false;
    s.in_queue = false;
    s.admitted = false;
    s.failures = 0;
    ++s.epoch;
    ++s.evictions;
    ++r.evictions;
    ++tenants[jobs[j].tenant].evictions;
    admission->add(workload(j));
  };

  for (;;) {
    bool freed = false;
    while (!departures.empty() && std::get<0>(departures.top()) <= now) {
      const auto [when, j, m, epoch] = departures.top();
      departures.pop();
      if (epoch != st[j].epoch || !st[j].started) continue;
      JobState& s = st[j];
      leave(j, m);
      freed = true;
      if (static_cast<size_t>(s.gone) < jobs[j].members.size()) continue;
      s.placements.clear();
      s.done = true;
      s.completion = now;
      if (queued(j)) {
        admission->remove(std::to_string(j));
        dirty = true;
      }
    }
    if (freed) scheduling.departure(now);
    scheduling.tick(now);
    while (next_arrival < jobs.size() && jobs[next_arrival].arrival <= now) {
      const size_t j = next_arrival++;
      if (queued(j)) {
        admission->add(workload(j));
        dirty = true;
      } else {
        st[j].admitted = true;
        enqueue(j);
      }
    }
    if (dirty) {
      dirty = false;
      ++r.admission_passes;
      const q::Decision d = admission->pass(false);
      for (const auto& id : d.admit) {
        const size_t j = std::stoul(id);
        admission->set_admitted(id);
        st[j].admitted = true;
        enqueue(j);
      }
      for (const auto& [claimant, victims] : d.evict) {
        for (const auto& v : victims) evict(std::stoul(v));
        dirty = true;  // the claimant is admitted by the next pass
      }
      if (!d.evict.empty()) scheduling.departure(now);  // the victims' GPUs are free
    }

    if (scheduling.ready()) {
      const auto [j, epoch] = scheduling.pop();
      if (epoch != st[j].epoch || !st[j].in_queue) continue;
      ++r.attempts;
      JobState& s = st[j];
      bool ok = true;
      for (const size_t m : jobs[j].members) {
        auto out = fw->schedule(t.pod(m), cluster, rng);
        if (!out.placement) {
          ok = false;
          break;
        }
        s.placements.push_back(*out.placement);
        allocated += t.pod(m).gpu_request();
      }
      if (!ok) {
        for (size_t m = 0; m < s.placements.size(); ++m) {
          fw->unreserve(t.pod(jobs[j].members[m]), s.placements[m], cluster);
          allocated -= t.pod(jobs[j].members[m]).gpu_request();
        }
        s.placements.clear();
        scheduling.park({j, epoch}, now + backoff_seconds(++s.failures));
        continue;
      }
      s.in_queue = false;
      s.started = true;
      s.start = now;
      s.gone = 0;
      s.left.assign(jobs[j].members.size(), 0);
      for (size_t m = 0; m < jobs[j].members.size(); ++m)
        if (t.lifetime(jobs[j].members[m]) >= 0) departures.emplace(now + t.lifetime(jobs[j].members[m]), j, m, s.epoch);
      continue;
    }

    if (dirty) continue;  // a reclaim's claimant is admitted by the next pass, at this instant
    int64_t next = INT64_MAX;
    if (next_arrival < jobs.size()) next = jobs[next_arrival].arrival;
    if (!departures.empty()) next = std::min(next, std::get<0>(departures.top()));
    next = std::min(next, scheduling.next_backoff());
    if (next == INT64_MAX) break;
    // [now, next) at the current allocation, clipped to the arrival window.
    const double util = static_cast<double>(allocated) / capacity;
    const int64_t a = std::max(now, window_start), b = std::min(next, window_end);
    if (a < b) {
      allocated_integral += util * static_cast<double>(b - a);
      r.utilization_peak = std::max(r.utilization_peak, util);
      for (size_t k = 0; k < kSamples; ++k) {
        const double at = static_cast<double>(window_start) + window * static_cast<double>(k) / kSamples;
        if (at >= static_cast<double>(a) && at < static_cast<double>(b)) r.utilization[k] = util;
      }
    }
    now = next;
  }
  r.utilization_mean = allocated_integral / window;
  r.lost_gpu_seconds = lost;

  std::vector<int64_t> waits, jcts;
  std::vector<double> slowdowns;
  std::vector<std::vector<int64_t>> tw(tenants.size()), tj(tenants.size());
  std::vector<std::vector<double>> ts(tenants.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    auto& tenant = tenants[jobs[j].tenant];
    ++tenant.jobs;
    if (!st[j].done) {
      if (!st[j].started) ++r.never_started;
      continue;
    }
    const int64_t jct = st[j].completion - jobs[j].arrival;
    const int64_t wait = jct - jobs[j].runtime;
    const double slowdown = static_cast<double>(jct) / static_cast<double>(std::max<int64_t>(1, jobs[j].runtime));
    waits.push_back(wait);
    jcts.push_back(jct);
    slowdowns.push_back(slowdown);
    tw[jobs[j].tenant].push_back(wait);
    tj[jobs[j].tenant].push_back(jct);
    ts[jobs[j].tenant].push_back(slowdown);
    ++tenant.completed;
  }
  r.completed = waits.size();
  std::ranges::sort(waits);
  std::ranges::sort(jcts);
  r.wait_p50 = percentile(waits, 0.5);
  r.wait_p99 = percentile(waits, 0.99);
  r.jct_p50 = percentile(jcts, 0.5);
  r.jct_p99 = percentile(jcts, 0.99);
  r.mean_slowdown = mean(slowdowns);
  std::vector<double> tenant_slowdowns;
  for (size_t k = 0; k < tenants.size(); ++k) {
    std::ranges::sort(tw[k]);
    std::ranges::sort(tj[k]);
    tenants[k].wait_p50 = percentile(tw[k], 0.5);
    tenants[k].wait_p99 = percentile(tw[k], 0.99);
    tenants[k].jct_p50 = percentile(tj[k], 0.5);
    tenants[k].jct_p99 = percentile(tj[k], 0.99);
    tenants[k].mean_slowdown = mean(ts[k]);
    if (!ts[k].empty()) tenant_slowdowns.push_back(tenants[k].mean_slowdown);
  }
  r.jain_slowdown = jain(tenant_slowdowns);
  r.tenants = std::move(tenants);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

Result<QueueEvaluation> evaluate_queues(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                        const std::vector<std::string>& qos, const QueueEvalOptions& o) {
  auto trace = expand(pods, qos, o);
  if (!trace) return std::unexpected(trace.error());
  QueueEvaluation ev;
  ev.nodes = nodes.size();
  for (const auto& n : nodes) ev.gpus += n.gpu_free.size();
  ev.pods = trace->size();
  int64_t capacity = 0;
  for (const auto& n : nodes) capacity += static_cast<int64_t>(n.gpu_free.size()) * sched::kMilli;
  ev.window_start = *std::ranges::min_element(trace->arrival);
  ev.window_end = *std::ranges::max_element(trace->arrival);
  const std::vector<Job> gang_jobs = jobs_of(*trace, true), pod_jobs = jobs_of(*trace, false);
  for (const auto& j : gang_jobs) {
    if (j.members.size() < 2) continue;
    ++ev.gangs;
    ev.gang_pods += j.members.size();
  }
  ev.queues_yaml = queues_yaml(*trace, gang_jobs, capacity, true);
  auto config = q::parse_config(ev.queues_yaml, "queues.yaml (generated)");
  if (!config) return std::unexpected(config.error());
  auto never = q::parse_config(queues_yaml(*trace, gang_jobs, capacity, false), "queues.yaml (generated)");
  if (!never) return std::unexpected(never.error());
  const std::vector<Scenario> scenarios = {
      {"pod-by-pod", "FGDPack", false, false},
      {"gangs+queues", "FGDPack", true, true},
      {"gangs+queues/never", "FGDPack", true, true, false},
      {"fifo", "MostAllocated", false, false},
  };
  for (const auto& sc : scenarios) {
    const q::Config* c = sc.queues ? (sc.reclaim ? &*config : &*never) : nullptr;
    auto r = run(nodes, *trace, sc.gangs ? gang_jobs : pod_jobs, sc, c, ev.window_start, ev.window_end, o.seed);
    if (!r) return std::unexpected(r.error());
    ev.scenarios.push_back(std::move(*r));
  }
  return ev;
}

std::string queue_eval_table(const QueueEvaluation& ev) {
  std::string out = fmt::format(
      "Admission in time: {} nodes, {} GPUs, {} pods ({} in {} gangs), arrival window {} s\n", ev.nodes, ev.gpus, ev.pods,
      ev.gang_pods, ev.gangs, ev.window_end - ev.window_start);
  out += fmt::format("{:<18} {:<14} {:>7} {:>19} {:>19} {:>9} {:>13} {:>6} {:>9} {:>6}\n", "SCENARIO", "POLICY", "JOBS",
                     "WAIT s p50 / p99", "JCT s p50 / p99", "SLOWDOWN", "GPU UTIL mean", "peak", "EVICTIONS", "JAIN");
  for (const auto& s : ev.scenarios) {
    out += fmt::format("{:<18} {:<14} {:>7} {:>19} {:>19} {:>9.2f} {:>12.1f}% {:>5.1f}% {:>9} {:>6.3f}\n", s.name,
                       s.policy, s.jobs, fmt::format("{:.0f} / {:.0f}", s.wait_p50, s.wait_p99),
                       fmt::format("{:.0f} / {:.0f}", s.jct_p50, s.jct_p99), s.mean_slowdown, 100 * s.utilization_mean,
                       100 * s.utilization_peak, s.evictions, s.jain_slowdown);
  }
  out += fmt::format("\n{:<18} {:<12} {:>10} {:>7} {:>19} {:>9} {:>9}\n", "SCENARIO", "TENANT", "QUOTA GPU", "JOBS",
                     "WAIT s p50 / p99", "SLOWDOWN", "EVICTED");
  for (const auto& s : ev.scenarios) {
    for (const auto& t : s.tenants) {
      out += fmt::format("{:<18} {:<12} {:>10} {:>7} {:>19} {:>9.2f} {:>9}\n", s.name, t.name,
                         s.queues ? fmt::format("{:.1f}", static_cast<double>(t.quota) / sched::kMilli) : "-", t.jobs,
                         fmt::format("{:.0f} / {:.0f}", t.wait_p50, t.wait_p99), t.mean_slowdown, t.evictions);
    }
  }
  return out;
}

std::string queue_eval_json(const QueueEvaluation& ev) {
  nlohmann::json scenarios = nlohmann::json::array();
  for (const auto& s : ev.scenarios) {
    nlohmann::json tenants = nlohmann::json::array();
    for (const auto& t : s.tenants) {
      tenants.push_back({{"name", t.name},
                         {"quotaMilliGpu", t.quota},
                         {"jobs", t.jobs},
                         {"completed", t.completed},
                         {"evictions", t.evictions},
                         {"waitSecondsP50", t.wait_p50},
                         {"waitSecondsP99", t.wait_p99},
                         {"jctSecondsP50", t.jct_p50},
                         {"jctSecondsP99", t.jct_p99},
                         {"meanSlowdown", t.mean_slowdown},
                         {"gpuSeconds", t.gpu_seconds}});
    }
    scenarios.push_back({{"scenario", s.name},
                         {"policy", s.policy},
                         {"gangs", s.gangs},
                         {"queues", s.queues},
                         {"jobs", s.jobs},
                         {"gangJobs", s.gang_jobs},
                         {"completed", s.completed},
                         {"neverStarted", s.never_started},
                         {"evictions", s.evictions},
                         {"lostGpuSeconds", s.lost_gpu_seconds},
                         {"waitSecondsP50", s.wait_p50},
                         {"waitSecondsP99", s.wait_p99},
                         {"jctSecondsP50", s.jct_p50},
                         {"jctSecondsP99", s.jct_p99},
                         {"meanSlowdown", s.mean_slowdown},
                         {"utilizationMean", s.utilization_mean},
                         {"utilizationPeak", s.utilization_peak},
                         {"utilization", s.utilization},
                         {"jainSlowdown", s.jain_slowdown},
                         {"tenants", tenants},
                         {"admissionPasses", s.admission_passes},
                         {"attempts", s.attempts},
                         {"seconds", s.seconds}});
  }
  return nlohmann::json{{"nodes", ev.nodes},
                        {"gpus", ev.gpus},
                        {"pods", ev.pods},
                        {"gangs", ev.gangs},
                        {"gangPods", ev.gang_pods},
                        {"windowStart", ev.window_start},
                        {"windowEnd", ev.window_end},
                        {"queuesYaml", ev.queues_yaml},
                        {"scenarios", scenarios}}
             .dump(2);
}

}  // namespace kgpu::sim
