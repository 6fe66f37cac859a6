// What a GPU fault calls for: the action table (deploy/health/xid-actions.yaml, embedded as the
// default; docs/remediation.md) and the classifier that turns a GPU's stream of XIDs and other
// signals into one recommendation per GPU.
//
// The table maps each XID (with NVIDIA's catalogue rule where one applies), each non-XID signal
// and each NVML GPU recovery action to an Action. An override file of the same shape replaces
// entries one by one. Errors name "<source>:<line>: <field>".
//
// Classifier rules:
// - a GPU's recommendation is the most severe action among its faults since it was last cleared
//   (a reset and validation, or an operator);
// - `defer` (XID 45): decides only when alone; when another XID on the same GPU came within the
//   companion window, that XID decides, and repetitions of a deferring XID never escalate;
// - `recovery-action` (XID 154): the driver's recovery action, when NVML reports it, replaces the
//   recommendation, also downwards (NONE cancels a reset that has not begun: the caller decides
//   what has begun); when NVML cannot say, the XID it is linked to (the GPU's last) decides;
// - an XID that is not in the table: the table's `unknown` action, said with its number.
//
// Thread safety: FaultActions is immutable after loading; a Classifier is not thread-safe (its owner
// serialises calls). The clock (not owned) must outlive the classifier.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"

namespace kgpu::health {

// Least to most severe.
enum class Action { kNone = 0, kRestartApp = 1, kResetGpu = 2, kRebootNode = 3, kReport = 4 };
const char* action_name(Action a);  // "none", "restart-app", "reset-gpu", "reboot-node", "report"
std::optional<Action> parse_action(std::string_view s);
// The action that takes the GPU (or the node) out of service.
inline bool out_of_service(Action a) { return a >= Action::kResetGpu; }

enum class Rule { kPlain, kDefer, kRecoveryAction };

struct XidEntry {
  uint64_t xid = 0;
  std::string mnemonic;  // may be empty
  Action action = Action::kNone;
  Rule rule = Rule::kPlain;
};

// Non-XID signals the agent's probe reads.
enum class Signal {
  kEccVolatileUncorrected,
  kRowRemapPending,
  kRowRemapFailure,
  kRetiredPagesPending,
  kFallenOffBus,
  kNvlinkErrors,
  kThermalSlowdown,
  kPowerSlowdown,
};
constexpr size_t kSignals = 8;
const char* signal_name(Signal s);  // the table's key: "rowRemapPending", ...

// nvmlDeviceGpuRecoveryAction_t: NONE 0 .. SYSTEM_REBOOT 7; the value of NVML field 230.
constexpr size_t kRecoveryActions = 8;
const char* recovery_action_name(unsigned v);  // "GPU_RESET", ...; "UNKNOWN" past the end
constexpr unsigned kRecoveryActionField = 230;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION

struct FaultActions {
  Action unknown = Action::kNone;
  std::chrono::milliseconds companion_window{10'000};
  std::map<uint64_t, XidEntry> xids;
  std::array<Action, kSignals> signals{};
  std::array<Action, kRecoveryActions> recovery{};

  // deploy/health/xid-actions.yaml as built in.
  static const FaultActions& defaults();
  // A copy of this table with the entries of `text` (a file of the same shape; `source` names it
  // in errors) replacing these. Bounded like every kgpu YAML reader (64 KiB, depth, aliases).
  Result<FaultActions> overlay(std::string_view text, const std::string& source) const;

  const XidEntry* xid(uint64_t x) const;
};

// What one fault meant.
struct Verdict {
  Action event_action = Action::kNone;   // this fault's own action
  Action recommendation = Action::kNone;  // the GPU's, after it
  Action previous = Action::kNone;        // the GPU's, before it
  std::string reason;  // "XID 48 (DBE_ECC_ERROR): reset-gpu", "XID 45 follows XID 79", "XID 999: not in the table, no action"
  bool changed() const { return recommendation != previous; }
  bool cancelled() const { return recommendation < previous; }
};

class Classifier {
 public:
  Classifier(const FaultActions& table, Clock& clock) : table_(table), clock_(clock) {}

  // An XID on GPU `gpu` (its UUID); `recovery_action` is NVML field 230 read right after it
  // (nullopt when NVML cannot say).
  Verdict on_xid(const std::string& gpu, uint64_t xid, std::optional<unsigned> recovery_action = std::nullopt);
  Verdict on_signal(const std::string& gpu, Signal s, const std::string& detail = "");

  // The GPU is back in service: its recommendation and history go.
  void clear(const std::string& gpu);

  Action recommendation(const std::string& gpu) const;
  std::string reason(const std::string& gpu) const;  // what set the recommendation

 private:
  struct GpuBook {
    Action recommendation = Action::kNone;
    std::string reason;
    uint64_t last_xid = 0;  // the last XID that does not defer
    Clock::SteadyTime last_xid_at{};
  };
  Verdict raise(GpuBook& b, Action a, std::string reason);

  const FaultActions& table_;
  Clock& clock_;
  std::map<std::string, GpuBook> gpus_;
};

}  // namespace kgpu::health
