// A raw HTTP/1.1 client over TCP for tests that must control exactly what is sent, and how
// slowly (half-sent requests, oversized headers, bodies): no HTTP library in between.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kgpu::testing {

// A connected TCP socket to 127.0.0.1:port (owned by the caller); -1 on failure.
int connect_to(int port);

// Sends `request` (ignoring a peer that closes early) and reads until the peer closes, the
// response's Content-Length is complete, or `timeout` passes. nullopt when nothing arrived.
std::optional<std::string> converse(int fd, const std::string& request,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5));

// One request on a new connection.
std::optional<std::string> ask(int port, const std::string& request,
                               std::chrono::milliseconds timeout = std::chrono::seconds(5));

// GET `path` with Connection: close.
std::optional<std::string> get(int port, const std::string& path);

// The status code of a response; -1 for none.
int status_of(const std::optional<std::string>& response);

}  // namespace kgpu::testing
