// Fuzz target: `kgpu lint` over any document text: k8s::load_text, lint() with the default options,
// and the three report writers. Contract (src/lint/lint.h): lint() does not fail; malformed fields
// are skipped or reported, never a crash.
#include "fuzz.h"
#include "lint/lint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kgpu;
  k8s::LoadResult loaded = k8s::load_text(fuzz::text(data, size), "<fuzz>.yaml");
  lint::Report report;
  report.findings = lint::lint(loaded.documents);
  report.errors = std::move(loaded.errors);
  (void)lint::to_text(report);
  (void)lint::to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // as the CLI writes it
  (void)lint::to_sarif(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // as the CLI writes it
  (void)report.exit_code();
  return 0;
}
