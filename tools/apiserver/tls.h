// Certificates the stand-in generates for itself: a CA, a server certificate signed by it (for
// 127.0.0.1, ::1, localhost and any extra names), and a client certificate signed by it (for
// client-certificate authentication tests). Keys are ECDSA P-256; certificates are valid for a
// day. Files are PEM.
#pragma once

#include <string>
#include <vector>

namespace kgpu::apiserver {

struct CertFiles {
  std::string ca_cert, server_cert, server_key, client_cert, client_key;
};

// Writes ca.crt, server.crt, server.key, client.crt, client.key into `dir` (created if missing).
// `client_cn` is the user name the client certificate carries (its subject CN, with O=system:masters).
// Returns an error message, empty on success.
std::string generate_certificates(const std::string& dir, const std::vector<std::string>& extra_names,
                                  const std::string& client_cn, CertFiles& out);

// The whole content of a small text file (PEM); empty when unreadable.
std::string read_file_text(const std::string& path);

}  // namespace kgpu::apiserver
