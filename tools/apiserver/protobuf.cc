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
        break;  // server-set fields (uid, resourceVersion, timestamps) are ignored on create
    }
  }
  return r.ok();
}

}  // namespace

json decode_protobuf(std::string_view body, const std::string& kind, std::string& error) {
  if (!body.starts_with(std::string_view("k8s\0", 4))) {
    error = "protobuf body without the k8s magic prefix";
    return nullptr;
  }
  Reader envelope(body.substr(4));
  std::string_view raw;
  uint32_t f = 0, w = 0;
  while (envelope.next(f, w)) {
    if (f == 2 && w == 2) {
      const auto b = envelope.bytes();
      if (!b) break;
      raw = *b;
    } else if (!envelope.skip(w)) {
      break;
    }
  }
  if (!envelope.ok()) {
    error = "malformed protobuf envelope";
    return nullptr;
  }
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
  if (kind != "Namespace" && kind != "ConfigMap" && kind != "Secret") {
    error = "protobuf bodies are understood for Namespace, ConfigMap and Secret only, not " + kind;
    return nullptr;
  }
  // Strings must be valid UTF-8 to be JSON; dump() throws otherwise.
  try {
    (void)out.dump();
  } catch (const json::exception&) {
    error = "a protobuf string field is not valid UTF-8";
    return nullptr;
  }
  return out;
}

}  // namespace kgpu::apiserver
