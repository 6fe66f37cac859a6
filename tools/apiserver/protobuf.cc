#include "protobuf.h"

#include <cstdint>
#include <optional>

#include "common/base64.h"

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

// A protobuf wire reader over one message; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  bool ok() const { return ok_; }

  // The next field's number and wire type; false at the end or on malformed input.
  bool next(uint32_t& field, uint32_t& wire) {
    if (done()) return false;
    const auto tag = varint();
    if (!tag) return false;
    field = static_cast<uint32_t>(*tag >> 3);
    wire = static_cast<uint32_t>(*tag & 7);
    if (field == 0) ok_ = false;  // field number 0 is never valid
    return field != 0;
  }
  std::optional<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return fail();
      const auto b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return fail();
  }
  std::optional<std::string_view> bytes() {
    const auto n = varint();
    if (!n || *n > data_.size() - pos_) return fail_view();
    const auto out = data_.substr(pos_, *n);
    pos_ += *n;
    return out;
  }
  bool skip(uint32_t wire) {
    switch (wire) {
      case 0:
        return varint().has_value();
      case 1:
        return advance(8);
      case 2:
        return bytes().has_value();
      case 5:
        return advance(4);
      default:
        ok_ = false;
        return false;
    }
  }

 private:
  bool advance(size_t n) {
    if (n > data_.size() - pos_) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  std::nullopt_t fail() {
    ok_ = false;
    return std::nullopt;
  }
  std::optional<std::string_view> fail_view() {
    ok_ = false;
    return std::nullopt;
  }
  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// A map<string, string|bytes> entry {key = 1, value = 2}.
bool map_entry(std::string_view entry, std::string& key, std::string& value) {
  Reader r(entry);
  uint32_t f = 0, w = 0;
  while (r.next(f, w)) {
    if (w == 2 && (f == 1 || f == 2)) {
      const auto b = r.bytes();
      if (!b) return false;
      (f == 1 ? key : value) = std::string(*b);
    } else if (!r.skip(w)) {
      return false;
    }
  }
  return r.ok();
}

bool object_meta(std::string_view data, json& meta) {
  Reader r(data);
  uint32_t f = 0, w = 0;
  meta = json::object();
  while (r.next(f, w)) {
    if (w != 2) {
      if (!r.skip(w)) return false;
      continue;
    }
    const auto b = r.bytes();
    if (!b) return false;
    switch (f) {
      case 1:
        meta["name"] = std::string(*b);
        break;
      case 2:
        meta["generateName"] = std::string(*b);
        break;
      case 3:
        meta["namespace"] = std::string(*b);
        break;
      case 5:  // an update's uid and resourceVersion are its preconditions
        if (!b->empty()) meta["uid"] = std::string(*b);
        break;
      case 6:
        if (!b->empty()) meta["resourceVersion"] = std::string(*b);
        break;
      case 11:
      case 12: {
        std::string k, v;
        if (!map_entry(*b, k, v)) return false;
        meta[f == 11 ? "labels" : "annotations"][k] = v;
        break;
      }
      case 14:
        meta["finalizers"].push_back(std::string(*b));
        break;
      default:
        break;  // server-set fields (timestamps, generation, managedFields) are ignored
    }
  }
  return r.ok();
}

// The runtime.Unknown envelope after the magic: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2.
bool envelope(std::string_view body, std::string& kind, std::string_view& raw, std::string& error) {
  if (!body.starts_with(std::string_view("k8s\0", 4))) {
    error = "protobuf body without the k8s magic prefix";
    return false;
  }
  Reader r(body.substr(4));
  uint32_t f = 0, w = 0;
  while (r.next(f, w)) {
    if (w == 2 && (f == 1 || f == 2)) {
      const auto b = r.bytes();
      if (!b) break;
      if (f == 2) {
        raw = *b;
        continue;
      }
      Reader type_meta(*b);
      uint32_t tf = 0, tw = 0;
      while (type_meta.next(tf, tw)) {
        if (tf == 2 && tw == 2) {
          const auto k = type_meta.bytes();
          if (!k) break;
          kind = std::string(*k);
        } else if (!type_meta.skip(tw)) {
          break;
        }
      }
      if (!type_meta.ok()) {
        error = "malformed protobuf envelope";
        return false;
      }
    } else if (!r.skip(w)) {
      break;
    }
  }
  if (!r.ok()) {
    error = "malformed protobuf envelope";
    return false;
  }
  return true;
}

// Strings must be valid UTF-8 to be JSON; dump() throws otherwise.
bool utf8_ok(const json& j, std::string& error) {
  try {
    (void)j.dump();
  } catch (const json::exception&) {
    error = "a protobuf string field is not valid UTF-8";
    return false;
  }
  return true;
}

}  // namespace

json decode_protobuf(std::string_view body, const std::string& kind, std::string& error) {
  std::string envelope_kind;
  std::string_view raw;
  if (!envelope(body, envelope_kind, raw, error)) return nullptr;
  if (kind != "Namespace" && kind != "ConfigMap" && kind != "Secret") {
    error = "protobuf bodies are understood for Namespace, ConfigMap and Secret only, not " + kind;
    return nullptr;
  }
  if (!envelope_kind.empty() && envelope_kind != kind) {
    error = "the protobuf body holds a " + envelope_kind + ", not a " + kind;
    return nullptr;
  }
  uint32_t f = 0, w = 0;
  json out = json::object();
  Reader r(raw);
  while (r.next(f, w)) {
    if (w != 2) {
      if (kind != "ConfigMap" && kind != "Secret") {
        if (!r.skip(w)) break;
        continue;
      }
      const auto v = r.varint();
      if (!v) break;
      if ((kind == "ConfigMap" && f == 4) || (kind == "Secret" && f == 5)) out["immutable"] = *v != 0;
      continue;
    }
    const auto b = r.bytes();
    if (!b) break;
    if (f == 1) {
      if (!object_meta(*b, out["metadata"])) {
        error = "malformed protobuf ObjectMeta";
        return nullptr;
      }
      continue;
    }
    if (kind == "Namespace" && f == 2) {  // NamespaceSpec {finalizers = 1}
      Reader spec(*b);
      uint32_t sf = 0, sw = 0;
      out["spec"] = json::object();
      while (spec.next(sf, sw)) {
        if (sf == 1 && sw == 2) {
          const auto s = spec.bytes();
          if (!s) break;
          out["spec"]["finalizers"].push_back(std::string(*s));
        } else if (!spec.skip(sw)) {
          break;
        }
      }
    } else if ((kind == "ConfigMap" && (f == 2 || f == 3)) || (kind == "Secret" && (f == 2 || f == 4))) {
      std::string k, v;
      if (!map_entry(*b, k, v)) {
        error = "malformed protobuf map entry";
        return nullptr;
      }
      const bool binary = (kind == "ConfigMap" && f == 3) || (kind == "Secret" && f == 2);
      const char* field = kind == "ConfigMap" ? (f == 2 ? "data" : "binaryData") : (f == 2 ? "data" : "stringData");
      out[field][k] = binary ? base64_encode(v) : v;
    } else if (kind == "Secret" && f == 3) {
      out["type"] = std::string(*b);
    }
  }
  if (!r.ok()) {
    error = "malformed protobuf " + kind;
    return nullptr;
  }
  if (!utf8_ok(out, error)) return nullptr;
  return out;
}

json decode_delete_options(std::string_view body, std::string& error) {
  std::string kind;
  std::string_view raw;
  if (!envelope(body, kind, raw, error)) return nullptr;
  if (!kind.empty() && kind != "DeleteOptions") {
    error = "the protobuf body holds a " + kind + ", not DeleteOptions";
    return nullptr;
  }
  json out = json::object();
  Reader r(raw);
  uint32_t f = 0, w = 0;
  bool ok = true;
  while (ok && r.next(f, w)) {
    if ((f == 1 || f == 3) && w == 0) {
      const auto v = r.varint();
      if (!v) break;
      if (f == 1) {
        out["gracePeriodSeconds"] = static_cast<int64_t>(*v);  // int64: negatives are ten-byte varints
      } else {
        out["orphanDependents"] = *v != 0;
      }
    } else if ((f == 2 || f == 4 || f == 5) && w == 2) {
      const auto b = r.bytes();
      if (!b) break;
      if (f == 4) {
        out["propagationPolicy"] = std::string(*b);
      } else if (f == 5) {
        out["dryRun"].push_back(std::string(*b));
      } else {  // Preconditions {uid = 1, resourceVersion = 2}
        json pre = json::object();
        Reader p(*b);
        uint32_t pf = 0, pw = 0;
        while (p.next(pf, pw)) {
          if ((pf == 1 || pf == 2) && pw == 2) {
            const auto s = p.bytes();
            if (!s) break;
            pre[pf == 1 ? "uid" : "resourceVersion"] = std::string(*s);
          } else if (!p.skip(pw)) {
            break;
          }
        }
        if (!p.ok()) {
          error = "malformed protobuf Preconditions";
          return nullptr;
        }
        out["preconditions"] = std::move(pre);
      }
    } else {
      ok = r.skip(w);
    }
  }
  if (!r.ok()) {
    error = "malformed protobuf DeleteOptions";
    return nullptr;
  }
  if (!utf8_ok(out, error)) return nullptr;
  return out;
}

}  // namespace kgpu::apiserver
