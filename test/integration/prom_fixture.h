// Debian's real `prometheus` serving recorded history: OpenMetrics text written by the test is
// turned into TSDB blocks with `promtool tsdb create-blocks-from openmetrics` and the server is
// started on that data directory (port 0, read back from the kernel's socket table).
#pragma once

#include <memory>
#include <string>

#include "test_env.h"

namespace kgpu::testing {

// Whether /usr/bin/prometheus and /usr/bin/promtool are installed (tests skip without them).
bool prometheus_installed();

class RecordedPrometheus {
 public:
  // Loads `openmetrics` (must end with "# EOF") into a new data directory and starts the server.
  // On failure `error()` says why (promtool's or the server's output) and url() is empty.
  explicit RecordedPrometheus(const std::string& openmetrics);
  const std::string& error() const { return error_; }
  std::string url() const { return port_ == 0 ? "" : "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  TempDir dir_;
  std::unique_ptr<ChildProcess> server_;
  int port_ = 0;
  std::string error_;
};

}  // namespace kgpu::testing
