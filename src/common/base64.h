// Standard base64 (RFC 4648, with padding), as kubeconfig `*-data` fields and Kubernetes' JSON
// encoding of byte fields use it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kgpu {

std::string base64_encode(std::string_view bytes);
// nullopt on a character outside the alphabet or a bad length; whitespace (line breaks in PEM-like
// wrapped data) is skipped.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace kgpu
