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
// `qos`, when given, receives the qos column, a value per pod (left empty when the list has none).
Result<std::vector<sched::Pod>> load_pods(const std::string& path, std::vector<std::string>* qos = nullptr);

// The same, from text (tests); `source` names it in errors.
Result<std::vector<sched::NodeState>> parse_nodes(const std::string& text, const std::string& source);
Result<std::vector<sched::Pod>> parse_pods(const std::string& text, const std::string& source,
                                           std::vector<std::string>* qos = nullptr);

}  // namespace kgpu::sim
