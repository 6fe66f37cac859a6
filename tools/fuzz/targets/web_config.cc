// Fuzz target: parse_web_config (the exporter-toolkit web config of the metrics port) over any
// bytes, then the GnuTLS priority string it makes. Contract (src/common/web_config.h): a document
// it cannot use is an error value, never a crash or an exception; what it accepts names only
// known versions, suites and curves.
#include "common/web_config.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = kgpu::parse_web_config(kgpu::fuzz::text(data, size), "/nonexistent/fuzz/web.yml");
  if (!config) return 0;
  if (config->tls) (void)config->tls->gnutls_priority();
  for (const auto& [user, hash] : config->users) (void)config->user_hash(user);
  return 0;
}
