// Serves recorded agent /metrics pages for `bench/top_bench.py`: one server stands for many nodes'
// agents. Each node's agent pod has its own loopback address (127.0.<b>.<c>), and the page served
// is chosen by the address the request arrived on, so 1,000 "agents" cost one process.
//
//   top_pages --port-file F PAGE...   (listens on 0.0.0.0, a port chosen by the system)
#include <httplib.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::string port_file;
  std::vector<std::string> pages;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--port-file" && i + 1 < argc) {
      port_file = argv[++i];
    } else {
      std::ifstream in(a);
      std::stringstream s;
      s << in.rdbuf();
      if (!in) {
        std::fprintf(stderr, "top_pages: cannot read %s\n", a.c_str());
        return 2;
      }
      pages.push_back(s.str());
    }
  }
  if (pages.empty() || port_file.empty()) {
    std::fprintf(stderr, "usage: top_pages --port-file F PAGE...\n");
    return 2;
  }
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(32); };
  std::atomic<uint64_t> served{0};
  server.Get("/metrics", [&](const httplib::Request& req, httplib::Response& res) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    size_t index = 0;
    if (std::sscanf(req.local_addr.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d) == 4) index = b * 65536 + c * 256 + d;
    res.set_content(pages[index % pages.size()], "text/plain; version=0.0.4; charset=utf-8");
    ++served;
  });
  const int port = server.bind_to_any_port("0.0.0.0");
  if (port <= 0) return 1;
  {
    std::ofstream out(port_file);
    out << port;
  }
  server.listen_after_bind();
  return 0;
}
