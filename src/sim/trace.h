// Loading the Alibaba openb GPU cluster trace (cluster-trace-gpu-v2023, published with Weng et
// al., "Beware of Fragmentation", USENIX ATC'23): node lists and pod lists in every variant,
// including the 5-column multigpu files. Every row is validated; an error names file:line and
// the column.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "framework/cluster.h"

namespace kgpu::sim {

Result<std::vector<sched::NodeState>> load_nodes(const std::string& path);
Result<std::vector<sched::Pod>> load_pods(const std::string& path);

// One text column of a pod list ("qos"), a value per pod in the order load_pods() reads them; an
// error names the file when the column is missing.
Result<std::vector<std::string>> load_pod_column(const std::string& path, const std::string& column);

// The same, from text (tests); `source` names it in errors.
Result<std::vector<sched::NodeState>> parse_nodes(const std::string& text, const std::string& source);
Result<std::vector<sched::Pod>> parse_pods(const std::string& text, const std::string& source);
Result<std::vector<std::string>> parse_pod_column(const std::string& text, const std::string& source,
                                                  const std::string& column);

}  // namespace kgpu::sim
