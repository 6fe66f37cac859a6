// Fuzz target: prom::decode_answer (Prometheus HTTP API answers, src/prom/client.h) over any
// bytes, with small limits. Contract: anything it cannot use is an error value naming the query;
// an accepted answer keeps within the series and sample limits.
#include "fuzz.h"
#include "prom/client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kgpu::prom::ClientOptions limits;
  limits.max_series = 50;
  limits.max_samples = 200;
  auto r = kgpu::prom::decode_answer(kgpu::fuzz::text(data, size), 200, "fuzz_query", limits);
  if (!r) {
    kgpu::fuzz::check(r.error().message.starts_with("query 'fuzz_query'"), "an error names the query");
    return 0;
  }
  kgpu::fuzz::check(r->series.size() <= limits.max_series, "series limit");
  size_t samples = 0;
  for (const auto& s : r->series) samples += s.samples.size();
  kgpu::fuzz::check(samples <= limits.max_samples, "sample limit");
  return 0;
}
