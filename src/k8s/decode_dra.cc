// Views of Dynamic Resource Allocation (resource.k8s.io): ResourceClaim, ResourceClaimTemplate,
// DeviceClass, ResourceSlice (k8s/objects.h).
#include "k8s/decode.h"

namespace kgpu::k8s {

using namespace detail;  // NOLINT: the shared decoder (k8s/decode.h)

namespace {

std::vector<CelSelector> decode_selectors(Decoder& d, const Value* parent, std::string_view path) {
  std::vector<CelSelector> out;
  for (const Value& s : d.seq(parent, "selectors", path)) {
    const Value* cel = Decoder::child(&s, "cel");
    out.push_back(CelSelector{d.text(cel, "expression", fmt::format("{}.selectors[].cel", path)), s.line()});
  }
  return out;
}

DeviceSubRequest decode_sub_request(Decoder& d, const Value& r, std::string_view path) {
  DeviceSubRequest s;
  s.name = Decoder::str(&r, "name");
  s.device_class_name = d.text(&r, "deviceClassName", path);
  s.selectors = decode_selectors(d, &r, path);
  s.allocation_mode = d.text(&r, "allocationMode", path);
  s.count = d.integer(&r, "count", path);
  for (const Value& t : d.seq(&r, "tolerations", path)) {
    s.tolerations.push_back(Toleration{
        Decoder::str(&t, "key"), Decoder::str(&t, "operator"), Decoder::str(&t, "value"), Decoder::str(&t, "effect"),
        d.integer(&t, "tolerationSeconds", fmt::format("{}.tolerations[]", path)), t.line()});
  }
  s.line = r.line();
  return s;
}

ResourceClaimSpec decode_claim_spec(Decoder& d, const Value* spec, std::string_view path, int line) {
  ResourceClaimSpec out;
  out.line = line;
  const std::string p = fmt::format("{}.devices", path);
  const Value* devices = d.map(spec, "devices", path);
  size_t i = 0;
  for (const Value& r : d.seq(devices, "requests", p)) {
    const std::string rp = fmt::format("{}.requests[{}]", p, i++);
    DeviceRequest req;
    req.name = Decoder::str(&r, "name");
    req.line = r.line();
    if (const Value* exactly = d.map(&r, "exactly", rp)) {
      req.exactly = true;
      req.request = decode_sub_request(d, *exactly, rp + ".exactly");
      req.admin_access = d.boolean(exactly, "adminAccess", rp + ".exactly");
    } else {
      req.request = decode_sub_request(d, r, rp);
      req.admin_access = d.boolean(&r, "adminAccess", rp);
    }
    req.request.name = req.name;
    req.request.line = r.line();
    for (const Value& alt : d.seq(&r, "firstAvailable", rp)) {
      req.first_available.push_back(decode_sub_request(d, alt, rp + ".firstAvailable[]"));
    }
    out.requests.push_back(std::move(req));
  }
  for (const Value& c : d.seq(devices, "constraints", p)) {
    out.constraints.push_back(
        DeviceConstraint{Decoder::views(&c, "requests"), d.text(&c, "matchAttribute", p + ".constraints[]"), c.line()});
  }
  out.config = Decoder::child(devices, "config");
  return out;
}

}  // namespace

std::optional<ResourceClaim> as_resource_claim(const Document& doc) {
  if (!is_kind(doc, "ResourceClaim")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  ResourceClaim c;
  const Entry* se = Decoder::entry(doc.root, "spec");
  c.spec = decode_claim_spec(d, se != nullptr ? &se->value() : nullptr, ".spec", se != nullptr ? se->key_line() : 0);
  const Value* status = Decoder::child(doc.root, "status");
  c.allocation = Decoder::child(status, "allocation");
  c.allocated = c.allocation != nullptr;
  if (const Value* reserved = Decoder::child(status, "reservedFor")) {
    for (const Value& r : reserved->items()) c.reserved_for.push_back(Decoder::str(&r, "name"));
  }
  return c;
}

std::optional<ResourceClaimTemplate> as_resource_claim_template(const Document& doc) {
  if (!is_kind(doc, "ResourceClaimTemplate")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  ResourceClaimTemplate t;
  const Value* spec = Decoder::child(doc.root, "spec");
  if (const Entry* meta = Decoder::entry(spec, "metadata"))
    t.claim_metadata = decode_meta(&meta->value(), meta->key_line());
  const Entry* inner = Decoder::entry(spec, "spec");
  t.spec = decode_claim_spec(d, inner != nullptr ? &inner->value() : nullptr, ".spec.spec",
                             inner != nullptr ? inner->key_line() : 0);
  return t;
}

std::optional<DeviceClass> as_device_class(const Document& doc) {
  if (!is_kind(doc, "DeviceClass")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  DeviceClass c;
  const Value* spec = Decoder::child(doc.root, "spec");
  c.selectors = decode_selectors(d, spec, ".spec");
  c.extended_resource_name = d.text(spec, "extendedResourceName", ".spec");
  c.config = Decoder::child(spec, "config");
  return c;
}

// counters: {<name>: {value: <quantity>}}
QuantityMap decode_counters(Decoder& d, const Value* counters, const std::string& path) {
  std::vector<QuantityMap::value_type> kv;
  if (counters == nullptr) return {};
  for (const Entry& c : counters->entries()) {
    if (!c.value().is_map()) continue;
    if (const Entry* v = Decoder::entry(&c.value(), "value")) {
      if (auto q = d.quantity(*v, fmt::format("{}.counters.{}", path, c.key())))
        kv.emplace_back(c.key(), Field<Quantity>{*q, c.key_line()});
    }
  }
  QuantityMap out;
  out.assign_last_wins(std::move(kv));
  return out;
}

std::optional<ResourceSlice> as_resource_slice(const Document& doc) {
  if (!is_kind(doc, "ResourceSlice")) return std::nullopt;
  ResourceSlice s;
  Decoder d(&s.issues);
  const Value* spec = d.map(doc.root, "spec", "");
  s.driver = d.text(spec, "driver", ".spec");
  s.node_name = d.text(spec, "nodeName", ".spec");
  s.all_nodes = d.boolean(spec, "allNodes", ".spec");
  if (const Value* pool = d.map(spec, "pool", ".spec")) {
    s.pool_name = d.text(pool, "name", ".spec.pool");
    s.pool_generation = d.integer(pool, "generation", ".spec.pool");
    s.pool_resource_slice_count = d.integer(pool, "resourceSliceCount", ".spec.pool");
  }
  size_t k = 0;
  for (const Value& set : d.seq(spec, "sharedCounters", ".spec")) {
    const std::string path = fmt::format(".spec.sharedCounters[{}]", k++);
    s.shared_counters.push_back(
        CounterSet{Decoder::str(&set, "name"), decode_counters(d, Decoder::child(&set, "counters"), path), set.line()});
  }
  size_t i = 0;
  for (const Value& dev : d.seq(spec, "devices", ".spec")) {
    const std::string path = fmt::format(".spec.devices[{}]", i++);
    Device out;
    out.name = Decoder::str(&dev, "name");
    out.line = dev.line();
    const Value* body = Decoder::child(&dev, "basic");  // v1beta1
    if (body == nullptr) body = &dev;
    if (const Value* attrs = Decoder::child(body, "attributes")) {
      for (const Entry& a : attrs->entries()) {
        DeviceAttribute attr;
        attr.line = a.key_line();
        for (const Entry& typed : a.value().entries()) {
          attr.type = typed.key();
          attr.value = &typed.value();
        }
        out.attributes[a.key()] = attr;
      }
    }
    if (const Value* cap = Decoder::child(body, "capacity")) {
      std::vector<QuantityMap::value_type> kv;
      for (const Entry& c : cap->entries()) {
        if (c.value().is_map()) {
          if (const Entry* v = Decoder::entry(&c.value(), "value")) {
            if (auto q = d.quantity(*v, fmt::format("{}.capacity.{}", path, c.key())))
              kv.emplace_back(c.key(), Field<Quantity>{*q, c.key_line()});
          }
        } else if (auto q = d.quantity(c, path + ".capacity")) {
          kv.emplace_back(c.key(), q);
        }
      }
      out.capacity.assign_last_wins(std::move(kv));
    }
    for (const Value& t : d.seq(body, "taints", path)) {
      out.taints.push_back(
          Taint{Decoder::str(&t, "key"), Decoder::str(&t, "value"), Decoder::str(&t, "effect"), t.line()});
    }
    size_t c = 0;
    for (const Value& u : d.seq(body, "consumesCounters", path)) {
      const std::string upath = fmt::format("{}.consumesCounters[{}]", path, c++);
      out.consumes_counters.push_back(CounterSet{Decoder::str(&u, "counterSet"),
                                                 decode_counters(d, Decoder::child(&u, "counters"), upath), u.line()});
    }
    s.devices.push_back(std::move(out));
  }
  return s;
}

}  // namespace kgpu::k8s
