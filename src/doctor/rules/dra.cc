// DRA: why a Pending pod's ResourceClaims cannot be allocated from the published ResourceSlices.
#include <fmt/format.h>

#include <cctype>
#include <set>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

struct CelCheck {
  enum Kind { kCapacity, kAttribute, kDriver, kUnknown } kind = kUnknown;
  std::string domain, name, op, value;
};

// device.capacity["d"].n.compareTo(quantity("40Gi")) >= 0 | device.attributes["d"].n == "v" | device.driver == "d"
CelCheck parse_cel(sv e) {
  CelCheck c;
  const auto quoted = [&](size_t from, size_t* end) -> std::string {
    size_t a = e.find('"', from);
    if (a == sv::npos) return {};
    size_t b = e.find('"', a + 1);
    if (b == sv::npos) return {};
    *end = b + 1;
    return std::string(e.substr(a + 1, b - a - 1));
  };
  const auto ident = [&](size_t from) {
    size_t a = from;
    while (a < e.size() && (e[a] == ']' || e[a] == '.')) ++a;
    size_t b = a;
    while (b < e.size() && (std::isalnum(static_cast<unsigned char>(e[b])) || e[b] == '_')) ++b;
    return std::pair<std::string, size_t>(std::string(e.substr(a, b - a)), b);
  };
  if (auto pos = e.find("device.capacity["); pos != sv::npos) {
    size_t end = 0;
    c.domain = quoted(pos, &end);
    auto [n, after] = ident(end);
    c.name = n;
    size_t q = e.find("quantity(", after);
    if (q == sv::npos) return {};
    c.value = quoted(q, &end);
    for (sv op : {">=", "<=", "==", ">", "<"}) {
      if (e.find(op, end) != sv::npos) {
        c.op = op;
        break;
      }
    }
    c.kind = CelCheck::kCapacity;
  } else if (pos = e.find("device.attributes["); pos != sv::npos) {
    size_t end = 0;
    c.domain = quoted(pos, &end);
    auto [n, after] = ident(end);
    c.name = n;
    size_t eq = e.find("==", after);
    if (eq == sv::npos) return {};
    size_t vend = 0;
    c.value = quoted(eq, &vend);
    c.op = "==";
    c.kind = CelCheck::kAttribute;
  } else if (pos = e.find("device.driver"); pos != sv::npos) {
    size_t end = 0;
    c.value = quoted(pos, &end);
    c.kind = CelCheck::kDriver;
  }
  return c;
}

bool cel_holds(const CelCheck& c, const k8s::Device& d, sv driver) {
  switch (c.kind) {
    case CelCheck::kDriver:
      return driver == c.value;
    case CelCheck::kAttribute: {
      auto it = d.attributes.find(c.name);
      if (it == d.attributes.end() || it->second.value == nullptr) return false;
      return it->second.value->text() == c.value;
    }
    case CelCheck::kCapacity: {
      auto it = d.capacity.find(c.name);
      auto want = k8s::Quantity::parse(c.value);
      if (it == d.capacity.end() || !want) return false;
      const auto cmp = it->second.value <=> *want;
      if (c.op == ">=") return cmp >= 0;
      if (c.op == ">") return cmp > 0;
      if (c.op == "<=") return cmp <= 0;
      if (c.op == "<") return cmp < 0;
      return cmp == 0;
    }
    case CelCheck::kUnknown:
      return true;
  }
  return true;
}

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
    std::vector<CelCheck> checks;
    std::vector<std::string> exprs;
    for (const auto& sel : dc->v.selectors) checks.push_back(parse_cel(*sel.expression));
    for (const auto& sel : sub.selectors) {
      checks.push_back(parse_cel(*sel.expression));
      exprs.emplace_back(*sel.expression);
    }
    const int64_t want = sub.allocation_mode.value_or("ExactCount") == "All" ? 1 : sub.count.value_or(1);
    int64_t free_ok = 0, total = 0, ok_taken = 0;
    std::string best_seen;
    for (const auto& sl : s_.slices) {
      for (const auto& d : sl.v.devices) {
        bool driver_ok = true;
        for (const auto& c : checks) {
          if (c.kind == CelCheck::kDriver && !cel_holds(c, d, *sl.v.driver)) driver_ok = false;
        }
        if (!driver_ok) continue;
        ++total;
        bool ok = true;
        for (const auto& c : checks) {
          if (c.kind == CelCheck::kCapacity && best_seen.empty()) {
            if (auto it = d.capacity.find(c.name); it != d.capacity.end()) best_seen = c.name;
          }
          if (!cel_holds(c, d, *sl.v.driver)) ok = false;
        }
        if (!ok) continue;
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
          "class {}, {} matching ones already allocated)",
          req_name, want, free_ok, total, cls, ok_taken);
      for (const auto& e : exprs) out.details.push_back(fmt::format("selector: {}", e));
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
