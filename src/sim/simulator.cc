#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>
#include <optional>
#include <queue>
#include <random>

#include <time.h>

#include "framework/framework.h"
#include "sim/scheduling_queue.h"

namespace kgpu::sim {

std::string shape_name(const sched::Pod& p) {
  if (p.num_gpu == 0) return "CPU only";
  if (p.sharing()) return fmt::format("1x{:.2f} GPU", p.gpu_milli / 1000.0);
  return fmt::format("{} GPU", p.num_gpu);
}

namespace {

// CPU time of the calling thread, in seconds.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Recorder {
  RunResult& r;
  const sched::Cluster& c;
  const std::vector<sched::TaskShape>& workload;
  int next_percent = 1;

  void after_arrival(int64_t arrived_milli) {
    const double cap = static_cast<double>(c.gpu_capacity());
    if (cap <= 0) return;
    const double arrived = arrived_milli / cap;
    if (r.frag_ratio_at_90 < 0 && arrived >= 0.9)
      r.frag_ratio_at_90 = sched::cluster_fragmentation(c, workload).ratio();
    while (arrived * 100 >= next_percent) {
      r.curve.push_back({next_percent / 100.0, c.gpu_allocated() / cap});
      ++next_percent;
    }
    r.final_arrived = arrived;
    r.final_allocated = c.gpu_allocated() / cap;
    r.peak_allocated = std::max(r.peak_allocated, r.final_allocated);
  }
};

// FNV-1a, 64-bit, over the decisions of one run (see RunResult::placement_hash).
class PlacementHasher {
 public:
  // `copy`: which copy of the trace pod (RunOptions::pod_copies); copy 0 hashes as the pod alone.
  void add(const sched::Pod& pod, const sched::Cluster& c, const std::optional<sched::Placement>& p, int copy = 0) {
    bytes(pod.name.data(), pod.name.size());
    if (copy > 0) value(copy);
    if (!p) {
      value(-1);
      return;
    }
    const std::string& node = c.node(p->node).name;
    bytes(node.data(), node.size());
    value(static_cast<int64_t>(p->gpus.size()));
    for (int g : p->gpus) value(g);
  }
  uint64_t hash() const { return h_; }

 private:
  void bytes(const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= b[i];
      h_ *= 0x100000001b3ULL;
    }
    h_ ^= 0xff;  // separator, so that ("ab","c") and ("a","bc") differ
    h_ *= 0x100000001b3ULL;
  }
  void value(int64_t v) { bytes(&v, sizeof v); }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

// Counts an unscheduled pod under its shape and the reason most nodes gave.
void count_unscheduled(RunResult& r, const sched::Pod& pod, const sched::Outcome& out) {
  ++r.unscheduled_by_shape[shape_name(pod)];
  std::string reason = "no node";
  int most = -1;
  for (const auto& [why, n] : out.reasons) {
    if (n > most) {
      most = n;
      reason = why;
    }
  }
  ++r.unscheduled_by_reason[reason];
}

// The framework a run uses: the policy, the trace's target workload, the tie-break.
Result<sched::Framework> framework_for(const std::vector<sched::Pod>& pods,
                                       const std::vector<sched::TaskShape>& workload, const RunOptions& o) {
  if (pods.empty()) return fail(ErrorCode::kInvalidArgument, "no pods to simulate");
  sched::SchedulingContext ctx;
  ctx.workload = workload;
  ctx.tie_break = o.tie_break;
  return sched::make_framework(o.policy, ctx);
}

}  // namespace

Result<FgdArrivals> fgd_arrivals(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                 uint64_t seed, double target_arrived) {
  if (pods.empty()) return fail(ErrorCode::kInvalidArgument, "no pods to simulate");
  FgdArrivals a;
  std::mt19937_64 order_rng(seed);
  a.nodes = seeded_order(nodes, order_rng);
  for (const auto& n : a.nodes) a.gpu_capacity += static_cast<int64_t>(n.gpus()) * sched::kMilli;
  if (a.gpu_capacity == 0) return fail(ErrorCode::kInvalidArgument, "the cluster has no GPUs");
  int64_t trace_demand = 0;
  for (const auto& p : pods) trace_demand += p.gpu_request();
  if (trace_demand == 0) return fail(ErrorCode::kInvalidArgument, "the pods ask for no GPUs: nothing to fill to a target");
  std::vector<size_t> order(pods.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), order_rng);
  const auto target = static_cast<int64_t>(target_arrived * static_cast<double>(a.gpu_capacity));
  std::uniform_int_distribution<size_t> pick(0, pods.size() - 1);
  for (size_t k = 0;; ++k) {
    const size_t i = k < order.size() ? order[k] : order[pick(order_rng)];
    if (a.arrived + pods[i].gpu_request() > target) break;
    a.arrived += pods[i].gpu_request();
    a.pods.push_back(i);
  }
  return a;
}

std::vector<sched::NodeState> seeded_order(const std::vector<sched::NodeState>& nodes, std::mt19937_64& rng) {
  std::vector<sched::NodeState> out = nodes;
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

uint64_t scheduling_seed(uint64_t seed) { return seed * 0x9e3779b97f4a7c15ULL + 1; }

Result<RunResult> run_fgd_protocol(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                   const RunOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_seconds();
  auto arrivals = fgd_arrivals(nodes, pods, o.seed, o.target_arrived);
  if (!arrivals) return std::unexpected(arrivals.error());
  const auto workload = sched::target_workload(pods);
  auto fw = framework_for(pods, workload, o);
  if (!fw) return std::unexpected(fw.error());
  sched::Cluster cluster(std::move(arrivals->nodes));
  std::mt19937_64 sched_rng(scheduling_seed(o.seed));

  RunResult r;
  r.policy = o.policy;
  r.seed = o.seed;
  Recorder rec{r, cluster, workload};
  PlacementHasher hasher;
  int64_t arrived = 0;
  double last_progress = 0;
  for (const size_t i : arrivals->pods) {
    const sched::Pod& pod = pods[i];
    ++r.arrivals;
    arrived += pod.gpu_request();
    auto out = fw->schedule(pod, cluster, sched_rng);
    hasher.add(pod, cluster, out.placement);
    if (out.placement) {
      ++r.scheduled;
    } else {
      count_unscheduled(r, pod, out);
    }
    rec.after_arrival(arrived);
    const double done = static_cast<double>(arrived) / static_cast<double>(arrivals->arrived);
    if (o.progress && done - last_progress >= 0.01) {
      last_progress = done;
      o.progress(done);
    }
  }
  r.placement_hash = hasher.hash();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = thread_cpu_seconds() - cpu0;
  return r;
}

namespace {

// The GPU room of the cluster per GPU model, kept in step with placements and releases
// (update() after each change of a node): free GPU milli in total, and how many nodes have a
// given largest free share and a given number of idle GPUs. Answers whether a pending pod waits
// behind fragmentation.
class GpuRoom {
 public:
  explicit GpuRoom(const sched::Cluster& c) : c_(c), seen_(c.nodes().size()) {
    for (size_t i = 0; i < c.nodes().size(); ++i) update(i);
  }

  void update(size_t i) {
    const sched::NodeState& n = c_.node(i);
    if (n.gpus() == 0) return;
    Model& m = models_[n.gpu_model];
    State& old = seen_[i];
    if (old.counted) {
      m.free -= old.free;
      drop(m.by_max_free, old.max_free);
      drop(m.by_idle, old.idle);
    }
    old = {true, n.gpu_free_total(), n.max_gpu_free(), n.full_free_gpus()};
    m.free += old.free;
    ++m.by_max_free[old.max_free];
    ++m.by_idle[old.idle];
  }

  // True when the pod's GPU request fits in the free GPU milli of the nodes of its allowed models
  // together but no single such node has the GPU room for it.
  bool fragmented_for(const sched::Pod& p) const {
    if (p.num_gpu == 0) return false;
    int64_t free = 0;
    bool room = false;
    for (const auto& [model, m] : models_) {
      if (!p.gpu_models.empty() && std::find(p.gpu_models.begin(), p.gpu_models.end(), model) == p.gpu_models.end())
        continue;
      free += m.free;
      if (p.sharing()) {
        room = room || (!m.by_max_free.empty() && m.by_max_free.rbegin()->first >= p.gpu_milli);
      } else {
        room = room || (!m.by_idle.empty() && m.by_idle.rbegin()->first >= p.num_gpu);
      }
    }
    return !room && p.gpu_request() <= free;
  }

 private:
  struct Model {
    int64_t free = 0;
    std::map<int, int> by_max_free, by_idle;  // value -> nodes with it (no zero counts)
  };
  struct State {
    bool counted = false;
    int64_t free = 0;
    int max_free = 0, idle = 0;
  };
  static void drop(std::map<int, int>& m, int key) {
    if (auto it = m.find(key); it != m.end() && --it->second == 0) m.erase(it);
  }
  const sched::Cluster& c_;
  std::vector<State> seen_;
  std::map<std::string, Model> models_;
};

}  // namespace

int64_t backoff_seconds(int attempts) {
  int64_t d = 1;
  for (int i = 1; i < attempts && d < 10; ++i) d *= 2;
  return std::min<int64_t>(d, 10);
}

double percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<double>(sorted.size());
  const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(q * n)));
  return static_cast<double>(sorted[std::min(rank, sorted.size()) - 1]);
}

int gpu_class(const sched::Pod& p) {
  if (p.num_gpu == 0) return 0;
  return p.sharing() ? 1 : 2 * p.num_gpu;
}

std::string gpu_class_name(int c) {
  if (c == 1) return "<1";
  return fmt::format("{}", c / 2);
}

// The event loop. At each trace time `now`, in this order before every scheduling attempt:
// departures due by now (each frees capacity; any departure moves the parked pods back), backoffs
// that expired by now, arrivals due by now; then the best pod of the active queue is tried. When
// the active queue is empty, time advances to the next departure, backoff expiry or arrival; the
// run ends when nothing is left that could place a pod. With no pod ever waiting, the order of
// releases and decisions is exactly the drop mode's (departures at or before an arrival first).
Result<RunResult> run_time_driven(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                  const RunOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_seconds();
  if (!(o.arrival_speedup > 0)) return fail(ErrorCode::kInvalidArgument, "arrival speed-up must be > 0");
  const auto workload = sched::target_workload(pods);
  auto fw = framework_for(pods, workload, o);
  if (!fw) return std::unexpected(fw.error());
  std::mt19937_64 rng(o.seed);
  sched::Cluster cluster(seeded_order(nodes, rng));
  if (cluster.gpu_capacity() == 0) return fail(ErrorCode::kInvalidArgument, "the cluster has no GPUs");
  if (o.pod_copies < 1) return fail(ErrorCode::kInvalidArgument, "pod copies must be >= 1");
  const bool queue = o.pending == Pending::kQueue;
  // Index i stands for copy i % copies of trace pod i / copies.
  const auto copies = static_cast<size_t>(o.pod_copies);
  const size_t n = pods.size() * copies;
  auto trace_pod = [&](size_t i) -> const sched::Pod& { return pods[i / copies]; };
  auto copy_of = [&](size_t i) { return static_cast<int>(i % copies); };
  std::vector<int64_t> arrival(n);
  for (size_t i = 0; i < n; ++i)
    arrival[i] = static_cast<int64_t>(std::floor(static_cast<double>(trace_pod(i).creation) / o.arrival_speedup));
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return arrival[a] < arrival[b]; });

  RunResult r;
  r.policy = o.policy;
  r.seed = o.seed;
  r.queue.enabled = queue;
  Recorder rec{r, cluster, workload};
  PlacementHasher hasher;
  GpuRoom room(cluster);

  // Per pod: failed attempts, end of its backoff, when it was placed, its last outcome's reasons.
  std::vector<int> failures(n, 0);
  std::vector<std::optional<sched::Placement>> placed(n);
  std::vector<int64_t> delay;  // every placed pod's queueing delay (filled at the end)
  std::map<int, std::vector<int64_t>> delays;
  std::map<size_t, sched::Outcome> last_failure;

  // Active queue: higher priority first, then earlier arrival, then trace order.
  auto later = [&](size_t a, size_t b) {
    if (trace_pod(a).priority != trace_pod(b).priority) return trace_pod(a).priority < trace_pod(b).priority;
    if (arrival[a] != arrival[b]) return arrival[a] > arrival[b];
    return a > b;
  };
  SchedulingQueue<size_t, decltype(later)> queued(later);
  using Timed = std::pair<int64_t, size_t>;  // (time, pod index)
  std::priority_queue<Timed, std::vector<Timed>, std::greater<>> departures;
  // Pending pods (parked or backing off) by GPU request, for the fragmentation accounting.
  struct Waiting {
    const sched::Pod* pod;
    int count;
  };
  std::map<std::tuple<std::vector<std::string>, int, int>, Waiting> waiting;
  auto waiting_key = [&](size_t i) { return std::tuple(trace_pod(i).gpu_models, trace_pod(i).num_gpu, trace_pod(i).gpu_milli); };
  size_t pending = 0;

  int64_t arrived = 0;
  size_t next_arrival = 0;
  int64_t now = order.empty() ? 0 : arrival[order[0]];
  for (;;) {
    bool freed = false;
    while (!departures.empty() && departures.top().first <= now) {
      const size_t gone = departures.top().second;
      departures.pop();
      fw->unreserve(trace_pod(gone), *placed[gone], cluster);
      room.update(placed[gone]->node);
      freed = true;
    }
    if (freed) queued.departure(now);
    queued.tick(now);
    while (next_arrival < n && arrival[order[next_arrival]] <= now) queued.push(order[next_arrival++]);

    if (queued.ready()) {
      const size_t i = queued.pop();
      const sched::Pod& pod = trace_pod(i);
      if (failures[i] == 0) {
        ++r.arrivals;
        arrived += pod.gpu_request();
        ++r.queue.by_class[gpu_class(pod)].arrived;
      }
      ++r.queue.attempts;
      auto out = fw->schedule(pod, cluster, rng);
      if (out.placement) {
        hasher.add(pod, cluster, out.placement, copy_of(i));
        ++r.scheduled;
        room.update(out.placement->node);
        placed[i] = *out.placement;
        if (pod.deletion) departures.emplace(now + (*pod.deletion - pod.creation), i);
        const int64_t waited = now - arrival[i];
        delays[gpu_class(pod)].push_back(waited);
        if (failures[i] > 0) {
          auto& w = waiting.at(waiting_key(i));
          if (--w.count == 0) waiting.erase(waiting_key(i));
          --pending;
          last_failure.erase(i);
        }
      } else if (!queue) {
        hasher.add(pod, cluster, out.placement, copy_of(i));
        count_unscheduled(r, pod, out);
      } else {
        if (failures[i]++ == 0) {
          waiting.try_emplace(waiting_key(i), Waiting{&pod, 0}).first->second.count++;
          ++pending;
        }
        queued.park(i, now + backoff_seconds(failures[i]));
        last_failure[i] = std::move(out);
      }
      rec.after_arrival(arrived);
      continue;
    }

    // Nothing to try now: advance to the next event that could change anything.
    int64_t next = INT64_MAX;
    if (next_arrival < n) next = arrival[order[next_arrival]];
    if (pending > 0) {
      if (!departures.empty()) next = std::min(next, departures.top().first);
      next = std::min(next, queued.next_backoff());
    }
    if (next == INT64_MAX) break;
    // Pending pods wait over [now, next) in the state the cluster is in now.
    r.queue.peak_pending = std::max(r.queue.peak_pending, pending);
    const auto span = static_cast<double>(next - now);
    for (const auto& [key, w] : waiting) {
      auto& cls = r.queue.by_class[gpu_class(*w.pod)];
      cls.wait_pod_seconds += span * w.count;
      if (room.fragmented_for(*w.pod)) cls.fragmentation_pod_seconds += span * w.count;
    }
    now = next;
  }
  r.queue.end_time = now;

  // Pods never placed, in arrival order.
  for (size_t i : order) {
    if (placed[i] || failures[i] == 0) continue;
    hasher.add(trace_pod(i), cluster, std::nullopt, copy_of(i));
    count_unscheduled(r, trace_pod(i), last_failure.at(i));
    ++r.queue.by_class[gpu_class(trace_pod(i))].never_placed;
  }
  if (queue) {
    for (auto& [c, stats] : r.queue.by_class) {
      auto& d = delays[c];
      std::sort(d.begin(), d.end());
      stats.placed = d.size();
      stats.waited = static_cast<size_t>(std::count_if(d.begin(), d.end(), [](int64_t x) { return x > 0; }));
      stats.delay_p50 = percentile(d, 0.50);
      stats.delay_p95 = percentile(d, 0.95);
      stats.delay_p99 = percentile(d, 0.99);
      stats.delay_max = d.empty() ? 0 : static_cast<double>(d.back());
      r.queue.all.arrived += stats.arrived;
      r.queue.all.never_placed += stats.never_placed;
      r.queue.all.wait_pod_seconds += stats.wait_pod_seconds;
      r.queue.all.fragmentation_pod_seconds += stats.fragmentation_pod_seconds;
      delay.insert(delay.end(), d.begin(), d.end());
    }
    std::sort(delay.begin(), delay.end());
    r.queue.all.placed = delay.size();
    r.queue.all.waited = static_cast<size_t>(std::count_if(delay.begin(), delay.end(), [](int64_t x) { return x > 0; }));
    r.queue.all.delay_p50 = percentile(delay, 0.50);
    r.queue.all.delay_p95 = percentile(delay, 0.95);
    r.queue.all.delay_p99 = percentile(delay, 0.99);
    r.queue.all.delay_max = delay.empty() ? 0 : static_cast<double>(delay.back());
  } else {
    r.queue.by_class.clear();
  }
  r.placement_hash = hasher.hash();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = thread_cpu_seconds() - cpu0;
  return r;
}

}  // namespace kgpu::sim
