// Fuzz target: the openb trace CSV loaders (sim::parse_nodes and sim::parse_pods) over the same
// bytes. Contract (src/sim/trace.h): every row is validated; a bad one is an error naming
// file:line and the column, never a crash.
#include "fuzz.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = kgpu::fuzz::text(data, size);
  (void)kgpu::sim::parse_nodes(text, "<fuzz>");
  (void)kgpu::sim::parse_pods(text, "<fuzz>");
  return 0;
}
