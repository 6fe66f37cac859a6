// Fuzz target: `kgpu doctor` over an arbitrary snapshot: k8s::load_text (JSON when the input starts
// with '{' or '[', else YAML), Snapshot::from, diagnose() for the whole cluster, the text and JSON
// renderings. Contract (src/doctor/*.h): any snapshot is diagnosed; nothing in it crashes doctor.
#include "doctor/diagnose.h"
#include "doctor/findings.h"
#include "doctor/snapshot.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kgpu;
  auto snapshot = doctor::Snapshot::from(k8s::load_text(fuzz::text(data, size), "<fuzz>"));
  doctor::Options options;
  auto findings = doctor::diagnose(snapshot, options);
  if (!findings) return 0;
  (void)doctor::to_text(*findings);
  (void)doctor::to_json(*findings).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // as the CLI writes it
  (void)doctor::exit_code(*findings);
  // A pod target and a node target walk the per-object rules (a few, to bound the time per input).
  for (size_t i = 0; i < snapshot.pods.size() && i < 3; ++i) {
    options.target = {doctor::Target::Kind::kPod, std::string(snapshot.pods[i].ns()), std::string(snapshot.pods[i].name())};
    (void)doctor::diagnose(snapshot, options);
  }
  for (size_t i = 0; i < snapshot.nodes.size() && i < 2; ++i) {
    options.target = {doctor::Target::Kind::kNode, "", std::string(snapshot.nodes[i].name())};
    (void)doctor::diagnose(snapshot, options);
  }
  return 0;
}
