// Event sets: creating, registering, waiting and freeing them (entry points), and delivering
// the node's new XIDs and lost GPUs to them (Fake::deliver).
#include <algorithm>
#include <chrono>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

namespace kgpu::fake_nvml {

void Fake::deliver(unsigned gpu, unsigned long long type, uint64_t data) {
  if (gpu >= gpu_handles.size()) return;
  for (auto* s : sets) {
    auto it = s->registered.find(gpu);
    if (it == s->registered.end() || (it->second & type) == 0) continue;
    EventData e{};
    e.device = reinterpret_cast<Device>(gpu_handles[gpu]);
    e.eventType = type;
    e.eventData = data;
    e.gpuInstanceId = kInstanceIdNone;
    e.computeInstanceId = kInstanceIdNone;
    s->queue.push_back(e);
  }
  events_cv.notify_all();
}

}  // namespace kgpu::fake_nvml

// ---- events ----

FAKE_API Return nvmlEventSetCreate(EventSet* set) {
  Call c("nvmlEventSetCreate");
  if (c.rc != kSuccess) return c.rc;
  if (set == nullptr) return kErrorInvalidArgument;
  auto* s = new EventSetImpl();
  fake().sets.insert(s);
  *set = reinterpret_cast<EventSet>(s);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetSupportedEventTypes(Device d, unsigned long long* types) {
  Call c("nvmlDeviceGetSupportedEventTypes", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (types == nullptr) return kErrorInvalidArgument;
  *types = kEventXidCriticalError | (c.gpu->model->hbm ? kEventSingleBitEccError | kEventDoubleBitEccError : 0);
  return kSuccess;
}

FAKE_API Return nvmlDeviceRegisterEvents(Device d, unsigned long long types, EventSet set) {
  Call c("nvmlDeviceRegisterEvents", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  auto* s = reinterpret_cast<EventSetImpl*>(set);
  if (s == nullptr || !fake().sets.contains(s)) return kErrorInvalidArgument;
  s->registered[c.index] |= types;
  return kSuccess;
}

FAKE_API Return nvmlEventSetWait_v2(EventSet set, EventData* data, unsigned int timeout_ms) {
  Call c("nvmlEventSetWait_v2");
  if (c.rc != kSuccess) return c.rc;
  Fake& f = fake();
  auto* s = reinterpret_cast<EventSetImpl*>(set);
  if (s == nullptr || data == nullptr || !f.sets.contains(s)) return kErrorInvalidArgument;
  const auto deadline = f.clock.steady_now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (!s->queue.empty()) {
      *data = s->queue.front();
      s->queue.pop_front();
      return kSuccess;
    }
    if (f.clock.steady_now() >= deadline) return kErrorTimeout;
    // Wake at least every 20 ms to notice a rewritten node description.
    f.events_cv.wait_until(c.lock, std::min(deadline, f.clock.steady_now() + std::chrono::milliseconds(20)));
    f.refresh();
  }
}

FAKE_API Return nvmlEventSetFree(EventSet set) {
  Call c("nvmlEventSetFree");
  if (c.rc != kSuccess) return c.rc;
  auto* s = reinterpret_cast<EventSetImpl*>(set);
  if (s == nullptr || fake().sets.erase(s) == 0) return kErrorInvalidArgument;
  delete s;
  return kSuccess;
}
