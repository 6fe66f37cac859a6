#include "cli/report_cmd.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "common/files.h"
#include "common/timestamp.h"
#include "report/report.h"
#include "apiclient/client.h"
#include "prom/client.h"

namespace kgpu::cli {

namespace {

struct ReportFlags {
  std::string prometheus;
  std::string since = "7d";
  std::string until;
  std::string step = "5m";
  std::string idle_after = "24h";
  double idle_threshold = 5;
  double headroom = 0.2;
  std::string prices_file;
  std::vector<std::string> prices;
  std::string owner_label = "owner";
  std::string output = "text";
  std::string out_file;
  std::string sim_out;
  int max_rows = 50;
  std::string kubeconfig, context;
  int request_timeout_s = 60;
  std::string token_file, ca_file, cert_file, key_file;
  bool insecure = false;
};

ReportFlags& report_flags() {
  static ReportFlags f;
  return f;
}

int report_usage(std::string_view message) {
  fmt::print(stderr, "kgpu report: {}\n", message);
  return 2;
}

int failure(std::string_view message) {
  fmt::print(stderr, "kgpu report: {}\n", message);
  return 1;
}

double now_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// RFC 3339 or seconds since the epoch.
std::optional<double> parse_time(const std::string& s) {
  if (auto t = parse_rfc3339(s)) return std::chrono::duration<double>(t->time_since_epoch()).count();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (!s.empty() && end == s.c_str() + s.size() && v > 0) return v;
  return std::nullopt;
}

}  // namespace

CLI::App* add_report_command(CLI::App& app) {
  auto& f = report_flags();
  auto* cmd = app.add_subcommand(
      "report", "GPU cost and waste: idle allocated GPUs, right-sizing, stale notebooks/Jobs, fragmentation vs FGD");
  cmd->add_option("--prometheus", f.prometheus, "Prometheus URL (http(s)://host:port[/prefix])")->required();
  cmd->add_option("--since", f.since, "Window length: 7d, 36h, 90m, 1w ...")->capture_default_str();
  cmd->add_option("--until", f.until, "Window end, RFC 3339 or seconds since the epoch (default: now)");
  cmd->add_option("--step", f.step, "Resolution of the window's figures")->capture_default_str();
  cmd->add_option("--idle-threshold", f.idle_threshold, "Activity (%) below which a GPU counts as idle")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--idle-after", f.idle_after, "Notebooks and Jobs idle this long are listed")->capture_default_str();
  cmd->add_option("--headroom", f.headroom, "Right-sizing: margin over peak memory and mean activity (0.2 = 20%)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  cmd->add_option("--prices", f.prices_file, "YAML file of GPU-hour prices per model (docs/report.md)");
  cmd->add_option("--price", f.prices, "MODEL=PRICE per GPU-hour (repeatable; overrides --prices)");
  cmd->add_option("--owner-label", f.owner_label, "Pod label naming a workload's owner")->capture_default_str();
  cmd->add_option("-o,--output", f.output, "text, json or html")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  cmd->add_option("--file", f.out_file, "Write the report to this file instead of stdout");
  cmd->add_option("--sim-out", f.sim_out,
                  "Also write the cluster as kgpu sim input (DIR/nodes.csv, DIR/pods.csv, openb format)");
  cmd->add_option("--max-rows", f.max_rows, "Rows per table in text and html")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--kubeconfig", f.kubeconfig, "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)");
  cmd->add_option("--context", f.context, "kubeconfig context");
  cmd->add_option("--request-timeout", f.request_timeout_s, "Seconds per API server or Prometheus request")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--prometheus-token-file", f.token_file, "Bearer token for Prometheus, read from this file");
  cmd->add_option("--prometheus-ca-file", f.ca_file, "CA bundle to verify Prometheus's certificate");
  cmd->add_option("--prometheus-cert-file", f.cert_file, "Client certificate for Prometheus");
  cmd->add_option("--prometheus-key-file", f.key_file, "Client key for Prometheus");
  cmd->add_flag("--prometheus-insecure-skip-verify", f.insecure, "Do not verify Prometheus's certificate");
  return cmd;
}

int run_report_command() {
  const auto& f = report_flags();
  auto window = cost::parse_duration(f.since);
  if (!window) return report_usage("--since: " + window.error().message);
  auto step = cost::parse_duration(f.step);
  if (!step) return report_usage("--step: " + step.error().message);
  auto idle_after = cost::parse_duration(f.idle_after);
  if (!idle_after) return report_usage("--idle-after: " + idle_after.error().message);
  if (*step > *window) return report_usage("--step must not be longer than --since");
  if (*window / *step > 100'000) return report_usage("--since / --step gives more than 100,000 points: raise --step");
  double until = now_epoch();
  if (!f.until.empty()) {
    const auto t = parse_time(f.until);
    if (!t) return report_usage(fmt::format("--until {}: expected RFC 3339 (2026-12-01T00:00:00Z) or seconds", f.until));
    until = *t;
  }
  cost::Prices prices;
  if (!f.prices_file.empty()) {
    auto p = cost::load_prices(f.prices_file);
    if (!p) return report_usage(p.error().message);
    prices = std::move(*p);
  }
  for (const auto& p : f.prices) {
    if (auto ok = prices.set_from_flag(p); !ok) return report_usage(ok.error().message);
  }

  prom::ClientOptions po;
  po.url = f.prometheus;
  po.ca_file = f.ca_file;
  po.client_cert_file = f.cert_file;
  po.client_key_file = f.key_file;
  po.insecure_skip_verify = f.insecure;
  po.timeout = std::chrono::seconds(f.request_timeout_s);
  if (!f.token_file.empty()) {
    auto token = read_file_limited(f.token_file, 64 << 10);
    if (!token) return report_usage("--prometheus-token-file: " + token.error().message);
    po.bearer_token = *token;
    while (!po.bearer_token.empty() && std::isspace(static_cast<unsigned char>(po.bearer_token.back()))) {
      po.bearer_token.pop_back();
    }
  }
  auto prom_client = prom::Client::create(po);
  if (!prom_client) return report_usage("--prometheus: " + prom_client.error().message);

  kube::LoadOptions lo;
  lo.kubeconfig = f.kubeconfig;
  lo.context = f.context;
  auto config = kube::load_config(lo);
  if (!config) return failure("reading the cluster: " + config.error().message);
  config->timeout = std::chrono::seconds(f.request_timeout_s);
  config->user_agent = "kgpu-report";
  kube::ClientOptions co;
  co.max_retries = 2;
  auto kube_client = kube::Client::create(*config, co);
  if (!kube_client) return failure("reading the cluster: " + kube_client.error().message);
  auto objects = cost::read_cluster(**kube_client);
  if (!objects) return failure("reading the cluster: " + objects.error().message);
  const auto cluster = cost::cluster_from_objects(*objects, f.owner_label);

  if (!f.sim_out.empty()) {
    const auto csv = cost::to_sim_csv(cost::sim_input(cluster));
    for (const auto& [name, text] : {std::pair{"nodes.csv", &csv.nodes}, std::pair{"pods.csv", &csv.pods}}) {
      const std::string path = f.sim_out + "/" + name;
      if (auto ok = write_file_atomically(path, *text); !ok) return failure(ok.error().message);
    }
    fmt::print(stderr, "kgpu report: wrote {}/nodes.csv and pods.csv (kgpu sim --nodes ... --pods ...)\n", f.sim_out);
  }

  cost::UsageOptions uo;
  uo.until = until;
  uo.window_s = *window;
  uo.step_s = *step;
  uo.idle_threshold = f.idle_threshold;
  auto used = cost::collect_usage(**prom_client, uo);
  if (!used) return failure("reading Prometheus: " + used.error().message);

  cost::ReportOptions ro;
  ro.idle_after_s = *idle_after;
  ro.headroom = f.headroom;
  ro.max_rows = f.max_rows;
  ro.prometheus_url = f.prometheus;
  auto report = cost::build_report(cluster, *used, prices, ro);
  report.generated_at = now_epoch();

  std::string text;
  if (f.output == "json") {
    text = cost::to_json(report).dump(2) + "\n";
  } else if (f.output == "html") {
    text = cost::to_html(report);
  } else {
    text = cost::to_text(report);
  }
  if (f.out_file.empty()) {
    std::cout << text;
    std::cout.flush();
    return std::cout ? 0 : 1;
  }
  if (auto ok = write_file_atomically(f.out_file, text); !ok) return failure(ok.error().message);
  fmt::print(stderr, "kgpu report: wrote {} ({} bytes)\n", f.out_file, text.size());
  return 0;
}

}  // namespace kgpu::cli
