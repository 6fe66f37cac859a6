// DRA: why a Pending pod's ResourceClaims cannot be allocated from the published ResourceSlices.
#include <fmt/format.h>

#include <cctype>
#include <set>

#include "cel/cel.h"
#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

std::optional<Finding> Diagnoser::dra(const PodObj& p) {
  if (s_.nodes.empty()) return std::nullopt;  // snapshot-no-nodes
  Finding f;
  set_rule(f, RuleId::kDraClaimUnsatisfiable);
  f.object = pod_ref(p);
  // Devices already allocated to claims: driver/pool/device.
  std::set<std::string> taken;
  for (const auto& c : s_.claims) {
    const k8s::Value* results = c.v.allocation ? c.v.allocation->at({"devices", "results"}) : nullptr;
    if (results == nullptr) continue;
    for (const auto& r : results->items()) {
      const auto* d = r.find("driver");
      const auto* pl = r.find("pool");
      const auto* dv = r.find("device");
      if (d && pl && dv) taken.insert(fmt::format("{}/{}/{}", d->text(), pl->text(), dv->text()));
    }
  }
  // The generated claim names of templates, from status.resourceClaimStatuses.
  std::map<std::string, std::string> generated;
  if (const k8s::Value* st = p.doc->root->at({"status", "resourceClaimStatuses"})) {
    for (const auto& r : st->items()) {
      const auto* n = r.find("name");
      const auto* c = r.find("resourceClaimName");
      if (n && c) generated[std::string(n->text())] = std::string(c->text());
    }
  }
  // One (sub)request: satisfiable now, or why not (into out).
  const auto satisfiable = [&](sv req_name, const k8s::DeviceSubRequest& sub, Finding& out) -> bool {
    const sv cls = *sub.device_class_name;
    const Obj<k8s::DeviceClass>* dc = nullptr;
    for (const auto& d : s_.device_classes) {
      if (d.name() == cls) dc = &d;
    }
    if (dc == nullptr) {
      out.summary = fmt::format("claim request {} names DeviceClass {}, which does not exist", req_name, cls);
      out.fix.push_back("kubectl get deviceclasses");
      return false;
    }
    // Compiled as the API server does; a selector that does not compile never allocates.
    struct Selector {
      cel::Program program;
      bool of_class;
    };
    std::vector<Selector> selectors;
    std::vector<std::string> exprs;
    std::vector<std::string> capacities;
    const auto add = [&](sv expression, bool of_class) {
      auto prog = cel::compile(expression);
      if (!prog) {
        out.summary = fmt::format("the CEL selector of {} does not compile: {}",
                                  of_class ? fmt::format("DeviceClass {}", cls) : fmt::format("claim request {}", req_name),
                                  prog.error().message);
        out.details.push_back(fmt::format("selector: {}", expression));
        out.fix.push_back("fix the expression; kubectl apply --dry-run=server shows the API server's own error");
        return false;
      }
      if (!of_class) {
        exprs.emplace_back(expression);
        for (auto& c : prog->capacities_read()) capacities.push_back(c.substr(c.rfind('/') + 1));
      }
      selectors.push_back(Selector{std::move(*prog), of_class});
      return true;
    };
    for (const auto& sel : dc->v.selectors)
      if (!add(*sel.expression, true)) return false;
    for (const auto& sel : sub.selectors)
      if (!add(*sel.expression, false)) return false;
    const int64_t want = sub.allocation_mode.value_or("ExactCount") == "All" ? 1 : sub.count.value_or(1);
    int64_t free_ok = 0, total = 0, ok_taken = 0, ok_tainted = 0;
    std::string best_seen;
    std::vector<std::string> tainted;  // "device key=value:effect", the first few
    for (const auto& sl : s_.slices) {
      for (const auto& d : sl.v.devices) {
        const cel::DeviceInput in = cel::device_input(d, *sl.v.driver);
        // The class's selectors first, then the request's, each device in turn; an evaluation
        // error aborts the whole allocation in Kubernetes.
        bool ok = true, of_class = true;
        for (const auto& sel : selectors) {
          if (!sel.of_class && of_class) {
            of_class = false;
            ++total;
          }
          auto r = sel.program.matches(in);
          if (!r) {
            out.summary = fmt::format(
                "the CEL selector of {} fails on device {} (driver {}, pool {}): {}; Kubernetes aborts the allocation",
                sel.of_class ? fmt::format("DeviceClass {}", cls) : fmt::format("claim request {}", req_name), d.name,
                *sl.v.driver, *sl.v.pool_name, r.error().message);
            out.details.push_back(fmt::format("selector: {}", sel.program.source()));
            out.fix.push_back("guard attribute lookups with has(device.attributes[\"<domain>\"].<name>)");
            out.fix.push_back("kubectl get resourceslices -o yaml  # the attributes the device publishes");
            return false;
          }
          if (!*r) {
            ok = false;
            break;
          }
        }
        if (of_class && ok) ++total;  // no request selectors
        if (!of_class && best_seen.empty()) {
          for (const auto& c : capacities)
            if (best_seen.empty() && d.capacity.find(c) != d.capacity.end()) best_seen = c;
        }
        if (!ok) continue;
        // A device taint the request does not tolerate keeps the device from being allocated.
        if (const k8s::Taint* t = k8s::first_untolerated(d.taints, sub.tolerations)) {
          ++ok_tainted;
          if (tainted.size() < 4) tainted.push_back(fmt::format("{} {}={}:{}", d.name, t->key, t->value, t->effect));
          continue;
        }
        if (taken.contains(fmt::format("{}/{}/{}", *sl.v.driver, *sl.v.pool_name, d.name))) {
          ++ok_taken;
        } else {
          ++free_ok;
        }
      }
    }
    if (free_ok >= want) return true;
    if (total == 0) {
      out.summary = fmt::format(
          "no ResourceSlice publishes a device of DeviceClass {}: the DRA driver is not running "
          "or not registered",
          cls);
      out.fix.push_back("kubectl get resourceslices -o wide");
      out.fix.push_back("kubectl get pods -A -l app.kubernetes.io/name=nvidia-dra-driver-gpu");
    } else {
      out.summary = fmt::format(
          "no device satisfies claim request {}: {} wanted, {} free match ({} published devices of "
          "class {}, {} matching ones already allocated{})",
          req_name, want, free_ok, total, cls, ok_taken,
          ok_tainted > 0 ? fmt::format(", {} tainted", ok_tainted) : std::string());
      for (const auto& e : exprs) out.details.push_back(fmt::format("selector: {}", e));
      for (const auto& t : tainted) out.details.push_back(fmt::format("tainted (not tolerated): {}", t));
      if (ok_tainted > 0) {
        out.fix.push_back(
            "the driver tainted unhealthy devices (docs/dra.md, \"Health taints\"): check the GPUs on "
            "their node, or tolerate the taint in the claim request");
      }
      if (!best_seen.empty()) {
        std::map<std::string, int> values;
        for (const auto& sl : s_.slices) {
          for (const auto& d : sl.v.devices) {
            if (auto it = d.capacity.find(best_seen); it != d.capacity.end()) ++values[it->second->to_string()];
          }
        }
        std::vector<std::string> listed;
        for (const auto& [v, c] : values) listed.push_back(fmt::format("{} x{}", v, c));
        out.details.push_back(fmt::format("published {} capacities: {}", best_seen, fmt::join(listed, ", ")));
      }
      out.fix.push_back("kubectl get resourceslices -o yaml  # compare device attributes/capacity with the selector");
    }
    return false;
  };
  bool broken = false;
  for (const auto& rc : p.v.spec.resource_claims) {
    const k8s::ResourceClaimSpec* spec = nullptr;
    std::string claim_name;
    if (rc.resource_claim_name) claim_name = std::string(*rc.resource_claim_name);
    if (auto it = generated.find(std::string(rc.name)); it != generated.end()) claim_name = it->second;
    const Obj<k8s::ResourceClaim>* claim = nullptr;
    for (const auto& c : s_.claims) {
      if (c.ns() == p.ns() && c.name() == claim_name) claim = &c;
    }
    if (claim != nullptr) {
      if (claim->v.allocated) continue;
      spec = &claim->v.spec;
    } else if (rc.resource_claim_template_name) {
      for (const auto& t : s_.claim_templates) {
        if (t.ns() == p.ns() && t.name() == *rc.resource_claim_template_name) spec = &t.v.spec;
      }
      if (spec == nullptr) {
        broken = true;
        f.summary = fmt::format("ResourceClaimTemplate {} does not exist", *rc.resource_claim_template_name);
        continue;
      }
    } else {
      broken = true;
      f.summary = fmt::format("ResourceClaim {} does not exist", claim_name);
      continue;
    }
    for (const auto& r : spec->requests) {
      if (r.first_available.empty()) {
        if (!satisfiable(r.name, r.request, f)) broken = true;
        continue;
      }
      // DRA prioritized list: the first satisfiable alternative is allocated.
      Finding why;
      std::vector<std::string> names;
      bool any = false;
      for (const auto& alt : r.first_available) {
        names.push_back(fmt::format("{}/{}", r.name, alt.name));
        Finding attempt;
        if (satisfiable(fmt::format("{}/{}", r.name, alt.name), alt, attempt)) {
          any = true;
          break;
        }
        if (why.summary.empty()) why = std::move(attempt);
      }
      if (any) continue;
      broken = true;
      f.summary = why.summary;
      f.details.push_back(
          fmt::format("none of the firstAvailable alternatives ({}) can be allocated", fmt::join(names, ", ")));
      for (auto& d : why.details) f.details.push_back(std::move(d));
      for (auto& x : why.fix) f.fix.push_back(std::move(x));
    }
  }
  if (!broken) return std::nullopt;
  add_scheduling_evidence(p, f);
  return f;
}

}  // namespace kgpu::doctor::detail
