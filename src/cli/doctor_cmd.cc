#include "cli/doctor_cmd.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "doctor/collect.h"
#include "doctor/diagnose.h"

namespace kgpu::cli {

namespace {

struct DoctorFlags {
  std::vector<std::string> snapshot;
  bool collect = false;
  std::string out_file;
  std::string kubeconfig;
  std::string context;
  int request_timeout_s = 60;
  int tail = 200;
  std::string pod, node, ns;
  bool no_checklist = false;
  bool list_rules = false;
  std::string output = "text";
  double idle_after_h = 24;
};

DoctorFlags& doctor_flags() {
  static DoctorFlags f;
  return f;
}

int doctor_usage(std::string_view message) {
  fmt::print(stderr, "kgpu doctor: {}\n", message);
  return 2;
}

}  // namespace

CLI::App* add_doctor_command(CLI::App& app) {
  auto& f = doctor_flags();
  auto* cmd =
      app.add_subcommand("doctor", "Explain Pending/failing GPU pods layer by layer and check cluster readiness");
  cmd->add_option("--snapshot,-s", f.snapshot, "Snapshot file(s) or directories (kubectl -o json); none: live cluster");
  cmd->add_flag("--collect", f.collect, "Read the cluster through the API and write a snapshot (to -o FILE, or stdout)");
  cmd->add_option("-o,--out", f.out_file, "With --collect: the snapshot file to write");
  cmd->add_option("--kubeconfig", f.kubeconfig, "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)");
  cmd->add_option("--context", f.context, "kubeconfig context");
  cmd->add_option("--request-timeout", f.request_timeout_s, "Seconds per API request when collecting")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--tail", f.tail, "Log lines per container when collecting")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--pod", f.pod, "Diagnose one pod: NAMESPACE/NAME");
  cmd->add_option("--node", f.node, "Diagnose one node and its pods");
  cmd->add_option("--namespace,-n", f.ns, "Diagnose one namespace (with its checklist items)");
  cmd->add_flag("--no-checklist", f.no_checklist, "Skip the production-readiness checklist");
  cmd->add_flag("--list-rules", f.list_rules, "List every rule and exit");
  cmd->add_option("--output", f.output, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd->add_option("--idle-after", f.idle_after_h, "Hours after which a GPU holder is reported as likely idle")
      ->check(CLI::Range(0.0, 100000.0))
      ->capture_default_str();
  return cmd;
}

int run_doctor_command() {
  const auto& f = doctor_flags();
  if (f.list_rules) {
    for (const auto& r : doctor::rule_catalog()) {
      fmt::print("{:<34} {:<9} {:<9} {}\n", r.id, doctor::layer_name(r.layer), doctor::severity_name(r.severity),
                 r.title);
    }
    return 0;
  }
  doctor::CollectOptions co;
  co.kubeconfig = f.kubeconfig;
  co.context = f.context;
  co.request_timeout = std::chrono::seconds(f.request_timeout_s);
  co.tail = f.tail;
  if (f.collect) {
    if (!f.snapshot.empty()) return doctor_usage("--collect and --snapshot exclude each other");
    auto text = doctor::collect_snapshot(co);
    if (!text) return doctor_usage(text.error().message);
    if (f.out_file.empty() || f.out_file == "-") {
      std::cout << *text;
    } else {
      // 0600: a snapshot holds the cluster's objects and container logs.
      const int fd = open(f.out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) return doctor_usage(fmt::format("cannot write {}: {}", f.out_file, std::strerror(errno)));
      bool ok = fchmod(fd, 0600) == 0;
      for (size_t done = 0; ok && done < text->size();) {
        const ssize_t n = write(fd, text->data() + done, text->size() - done);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) done += static_cast<size_t>(n);
      }
      if (close(fd) != 0) ok = false;
      if (!ok) return doctor_usage(fmt::format("cannot write {}: {}", f.out_file, std::strerror(errno)));
      fmt::print(stderr, "kgpu doctor: wrote {} ({} bytes)\n", f.out_file, text->size());
    }
    return 0;
  }
  if (!f.out_file.empty()) return doctor_usage("-o/--out is for --collect");
  doctor::Options opts;
  opts.checklist = !f.no_checklist;
  opts.idle_after_s = static_cast<int64_t>(f.idle_after_h * 3600);
  const int targets = !f.pod.empty() + !f.node.empty() + !f.ns.empty();
  if (targets > 1) return doctor_usage("give at most one of --pod, --node, --namespace");
  if (!f.pod.empty()) {
    const auto slash = f.pod.find('/');
    opts.target.kind = doctor::Target::Kind::kPod;
    opts.target.ns = slash == std::string::npos ? "default" : f.pod.substr(0, slash);
    opts.target.name = slash == std::string::npos ? f.pod : f.pod.substr(slash + 1);
  } else if (!f.node.empty()) {
    opts.target.kind = doctor::Target::Kind::kNode;
    opts.target.name = f.node;
  } else if (!f.ns.empty()) {
    opts.target.kind = doctor::Target::Kind::kNamespace;
    opts.target.ns = f.ns;
  }
  Result<doctor::Snapshot> snap = [&]() -> Result<doctor::Snapshot> {
    if (!f.snapshot.empty()) return doctor::Snapshot::load(f.snapshot);
    auto text = doctor::collect_snapshot(co);
    if (!text) return std::unexpected(text.error());
    return doctor::Snapshot::from(
        k8s::load_text(std::move(*text), "<cluster>", k8s::InputFormat::kJson, doctor::Snapshot::reads_kind));
  }();
  if (!snap) return doctor_usage(snap.error().message);
  for (const auto& e : snap->errors()) fmt::print(stderr, "kgpu doctor: {}\n", e.to_string());
  // A partial snapshot (`kubectl get events,rs -o json`) is diagnosed from what it holds; one with
  // nothing doctor reads is a usage error (the wrong file).
  if (snap->nodes.empty() && snap->pods.empty() && snap->events.empty() && snap->workloads.empty() &&
      snap->jobs.empty() && snap->cron_jobs.empty()) {
    return doctor_usage("the snapshot holds no nodes, pods, workloads or events");
  }
  auto findings = doctor::diagnose(*snap, opts);
  if (!findings) return doctor_usage(findings.error().message);
  if (f.output == "json") {
    auto j = doctor::to_json(*findings);
    j["collectedAt"] = snap->collected_at();
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << doctor::to_text(*findings, isatty(STDOUT_FILENO) != 0);
  }
  return doctor::exit_code(*findings);
}

}  // namespace kgpu::cli
