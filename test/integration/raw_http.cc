#include "raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

namespace kgpu::testing {

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::optional<std::string> converse(int fd, const std::string& request, std::chrono::milliseconds timeout) {
  size_t sent = 0;
  std::string in;
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, static_cast<short>(POLLIN | (sent < request.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 50) < 0) break;
    if ((p.revents & POLLOUT) != 0 && sent < request.size()) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      if (n < 0) sent = request.size();  // the peer stopped reading: what it answered is what counts
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      char buf[65536];
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
      const auto head_end = in.find("\r\n\r\n");
      std::smatch m;
      const std::string head = in.substr(0, head_end);
      if (head_end != std::string::npos &&
          std::regex_search(head, m, std::regex("[Cc]ontent-[Ll]ength: *([0-9]+)")) &&
          in.size() >= head_end + 4 + std::stoul(m[1].str())) {
        break;
      }
    }
  }
  if (in.empty()) return std::nullopt;
  return in;
}

int status_of(const std::optional<std::string>& response) {
  if (!response || !response->starts_with("HTTP/1.")) return -1;
  return std::stoi(response->substr(9, 3));
}

std::optional<std::string> ask(int port, const std::string& request, std::chrono::milliseconds timeout) {
  const int fd = connect_to(port);
  if (fd < 0) return std::nullopt;
  auto r = converse(fd, request, timeout);
  close(fd);
  return r;
}

std::optional<std::string> get(int port, const std::string& path) {
  return ask(port, "GET " + path + " HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n");
}

}  // namespace kgpu::testing
