#include "device_plugin_peer.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace kgpu::testing {

namespace {

constexpr const char* kRegister = "/v1beta1.Registration/Register";
constexpr const char* kGetOptions = "/v1beta1.DevicePlugin/GetDevicePluginOptions";
constexpr const char* kListAndWatch = "/v1beta1.DevicePlugin/ListAndWatch";
constexpr const char* kGetPreferred = "/v1beta1.DevicePlugin/GetPreferredAllocation";
constexpr const char* kAllocate = "/v1beta1.DevicePlugin/Allocate";
constexpr const char* kPreStart = "/v1beta1.DevicePlugin/PreStartContainer";
constexpr const char* kVersion = "v1beta1";

// ---- Wire format ----

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

constexpr int kMaxGroupDepth = 64;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, uint32_t number, WireType type) {
  put_varint(out, (static_cast<uint64_t>(number) << 3) | type);
}

// A length-delimited field, always written (repeated strings, submessages, map entries).
void put_len(std::string& out, uint32_t number, std::string_view bytes) {
  put_key(out, number, kLen);
  put_varint(out, bytes.size());
  out += bytes;
}

// Singular proto3 scalars: omitted when default.
void put_string(std::string& out, uint32_t number, std::string_view s) {
  if (!s.empty()) put_len(out, number, s);
}

void put_bool(std::string& out, uint32_t number, bool b) {
  if (!b) return;
  put_key(out, number, kVarint);
  put_varint(out, 1);
}

// int32 and int64: negative values are sign-extended to 64 bits (ten bytes), as protobuf does.
void put_int(std::string& out, uint32_t number, int64_t v) {
  if (v == 0) return;
  put_key(out, number, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_map(std::string& out, uint32_t number, const std::map<std::string, std::string>& m) {
  for (const auto& [key, value] : m) {
    std::string entry;
    put_len(entry, 1, key);
    put_len(entry, 2, value);
    put_len(out, number, entry);
  }
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), which Go's protobuf
// requires of proto3 string fields.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t extra = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i - 1 < extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    if (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// One field read whole. For kVarint `varint` holds the value; for kLen `bytes` views the payload
// (inside the reader's input); other wire types are skipped and carry nothing.
struct Field {
  uint32_t number = 0;
  uint32_t type = 0;
  uint64_t varint = 0;
  std::string_view bytes;
};

// Reads the fields of one message in order. next() returns false at the end of input or on the first
// malformed field; error() then says which (nullopt: clean end). Never reads outside the input.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  bool next(Field& f) {
    if (error_ || pos_ == in_.size()) return false;
    uint64_t key = 0;
    if (!read_key(key)) return false;
    return read_field(key, f, 0);
  }

  const std::optional<std::string>& error() const { return error_; }

 private:
  bool fail(std::string message) {
    error_ = std::move(message) + " at offset " + std::to_string(pos_);
    return false;
  }

  bool read_varint(uint64_t& v) {
    v = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos_ >= in_.size()) return fail("truncated varint");
      const auto b = static_cast<unsigned char>(in_[pos_++]);
      if (i == 9 && b > 1) return fail("varint longer than 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) return true;
    }
    return fail("varint longer than 64 bits");
  }

  bool read_key(uint64_t& key) {
    if (!read_varint(key)) return false;
    if ((key >> 3) == 0) return fail("field number 0");
    if ((key >> 3) > 0x1FFFFFFF) return fail("field number out of range");
    return true;
  }

  bool skip(size_t n, const char* what) {
    if (in_.size() - pos_ < n) return fail(std::string("truncated ") + what);
    pos_ += n;
    return true;
  }

  bool read_field(uint64_t key, Field& f, int depth) {
    f = Field{};
    f.number = static_cast<uint32_t>(key >> 3);
    f.type = static_cast<uint32_t>(key & 7);
    switch (f.type) {
      case kVarint:
        return read_varint(f.varint);
      case kFixed64:
        return skip(8, "fixed64");
      case kFixed32:
        return skip(4, "fixed32");
      case kLen: {
        uint64_t n = 0;
        if (!read_varint(n)) return false;
        if (n > in_.size() - pos_) return fail("length " + std::to_string(n) + " past end");
        f.bytes = in_.substr(pos_, n);
        pos_ += n;
        return true;
      }
      case kStartGroup: {
        if (depth >= kMaxGroupDepth) return fail("groups nested too deep");
        for (;;) {
          if (pos_ == in_.size()) return fail("unterminated group " + std::to_string(f.number));
          uint64_t inner_key = 0;
          if (!read_key(inner_key)) return false;
          if ((inner_key & 7) == kEndGroup) {
            if ((inner_key >> 3) != f.number) return fail("mismatched group end");
            return true;
          }
          Field inner;
          if (!read_field(inner_key, inner, depth + 1)) return false;
        }
      }
      case kEndGroup:
        return fail("group end without a start");
      default:
        return fail("invalid wire type " + std::to_string(f.type));
    }
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::optional<std::string> error_;
};

using Err = std::optional<std::string>;

const char* wire_type_name(uint32_t type) {
  switch (type) {
    case kVarint:
      return "varint";
    case kFixed64:
      return "fixed64";
    case kLen:
      return "length-delimited";
    case kStartGroup:
      return "group";
    case kFixed32:
      return "fixed32";
    default:
      return "invalid";
  }
}

Err field_error(std::string_view message, std::string_view field, std::string_view problem) {
  return std::string(message) + "." + std::string(field) + ": " + std::string(problem);
}

Err check_type(std::string_view message, std::string_view field, const Field& f, WireType want) {
  if (f.type == want) return std::nullopt;
  return field_error(message, field,
                     std::string("wire type ") + wire_type_name(f.type) + ", want " + wire_type_name(want));
}

Err get_string(std::string_view message, std::string_view field, const Field& f, std::string& out) {
  if (auto e = check_type(message, field, f, kLen)) return e;
  if (!valid_utf8(f.bytes)) return field_error(message, field, "invalid UTF-8");
  out.assign(f.bytes);
  return std::nullopt;
}

Err get_bool(std::string_view message, std::string_view field, const Field& f, bool& out) {
  if (auto e = check_type(message, field, f, kVarint)) return e;
  out = f.varint != 0;
  return std::nullopt;
}

// Decodes the submessage in `f` with `parse`; its error is prefixed with "<message>.<field>: ".
template <typename Parse>
Err get_message(std::string_view message, std::string_view field, const Field& f, Parse&& parse) {
  if (auto e = check_type(message, field, f, kLen)) return e;
  if (auto e = parse(f.bytes)) return field_error(message, field, *e);
  return std::nullopt;
}

Err parse_options(std::string_view in, PluginOptions& o) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_bool("DevicePluginOptions", "pre_start_required", f, o.pre_start_required);
    if (f.number == 2) {
      e = get_bool("DevicePluginOptions", "get_preferred_allocation_available", f,
                   o.get_preferred_allocation_available);
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_register(std::string_view in, Registration& reg) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    switch (f.number) {
      case 1:
        e = get_string("RegisterRequest", "version", f, reg.version);
        break;
      case 2:
        e = get_string("RegisterRequest", "endpoint", f, reg.endpoint);
        break;
      case 3:
        e = get_string("RegisterRequest", "resource_name", f, reg.resource_name);
        break;
      case 4:
        e = get_message("RegisterRequest", "options", f,
                        [&](std::string_view b) { return parse_options(b, reg.options); });
        reg.has_options = true;
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

// Messages whose only known field is `repeated string <field> = 1`.
Err parse_string_list(std::string_view in, std::string_view message, std::string_view field,
                      std::vector<std::string>& out) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    std::string s;
    if (auto e = get_string(message, field, f, s)) return e;
    out.push_back(std::move(s));
  }
  return r.error();
}

// Messages whose only known field is `repeated <Sub> <field> = 1`: parse(bytes, T&) per element.
template <typename T, typename Parse>
Err parse_message_list(std::string_view in, std::string_view message, std::string_view field, std::vector<T>& out,
                       Parse&& parse) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    T item{};
    const std::string indexed = std::string(field) + "[" + std::to_string(out.size()) + "]";
    if (auto e = get_message(message, indexed, f, [&](std::string_view b) { return parse(b, item); })) return e;
    out.push_back(std::move(item));
  }
  return r.error();
}

Err parse_numa_node(std::string_view in, int64_t& id) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    if (auto e = check_type("NUMANode", "ID", f, kVarint)) return e;
    id = static_cast<int64_t>(f.varint);
  }
  return r.error();
}

Err parse_device(std::string_view in, DeviceEntry& d) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    switch (f.number) {
      case 1:
        e = get_string("Device", "ID", f, d.id);
        break;
      case 2:
        e = get_string("Device", "health", f, d.health);
        break;
      case 3:  // TopologyInfo; repeated occurrences merge, so nodes append.
        e = get_message("Device", "topology", f, [&](std::string_view b) {
          return parse_message_list<int64_t>(b, "TopologyInfo", "nodes", d.numa_nodes, parse_numa_node);
        });
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_map_entry(std::string_view in, std::string_view message, std::map<std::string, std::string>& m) {
  std::string key, value;
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_string(message, "key", f, key);
    if (f.number == 2) e = get_string(message, "value", f, value);
    if (e) return e;
  }
  if (r.error()) return r.error();
  m[key] = std::move(value);
  return std::nullopt;
}

Err parse_mount(std::string_view in, MountEntry& m) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_string("Mount", "container_path", f, m.container_path);
    if (f.number == 2) e = get_string("Mount", "host_path", f, m.host_path);
    if (f.number == 3) e = get_bool("Mount", "read_only", f, m.read_only);
    if (e) return e;
  }
  return r.error();
}

Err parse_device_spec(std::string_view in, DeviceSpecEntry& d) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_string("DeviceSpec", "container_path", f, d.container_path);
    if (f.number == 2) e = get_string("DeviceSpec", "host_path", f, d.host_path);
    if (f.number == 3) e = get_string("DeviceSpec", "permissions", f, d.permissions);
    if (e) return e;
  }
  return r.error();
}

Err parse_cdi_device(std::string_view in, std::string& name) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    if (auto e = get_string("CDIDevice", "name", f, name)) return e;
  }
  return r.error();
}

Err parse_container_allocation(std::string_view in, ContainerAllocation& c) {
  constexpr const char* kMsg = "ContainerAllocateResponse";
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    switch (f.number) {
      case 1:
        e = get_message(kMsg, "envs", f, [&](std::string_view b) { return parse_map_entry(b, "EnvsEntry", c.envs); });
        break;
      case 2: {
        MountEntry m;
        e = get_message(kMsg, "mounts", f, [&](std::string_view b) { return parse_mount(b, m); });
        c.mounts.push_back(std::move(m));
        break;
      }
      case 3: {
        DeviceSpecEntry d;
        e = get_message(kMsg, "devices", f, [&](std::string_view b) { return parse_device_spec(b, d); });
        c.devices.push_back(std::move(d));
        break;
      }
      case 4:
        e = get_message(kMsg, "annotations", f,
                        [&](std::string_view b) { return parse_map_entry(b, "AnnotationsEntry", c.annotations); });
        break;
      case 5: {
        std::string name;
        e = get_message(kMsg, "cdi_devices", f, [&](std::string_view b) { return parse_cdi_device(b, name); });
        c.cdi_devices.push_back(std::move(name));
        break;
      }
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_preferred_container(std::string_view in, PreferredRequest& p) {
  constexpr const char* kMsg = "ContainerPreferredAllocationRequest";
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    std::string s;
    switch (f.number) {
      case 1:
        e = get_string(kMsg, "available_deviceIDs", f, s);
        if (!e) p.available.push_back(std::move(s));
        break;
      case 2:
        e = get_string(kMsg, "must_include_deviceIDs", f, s);
        if (!e) p.must_include.push_back(std::move(s));
        break;
      case 3:
        e = check_type(kMsg, "allocation_size", f, kVarint);
        p.size = static_cast<int32_t>(static_cast<uint32_t>(f.varint));  // int32: the low 32 bits
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

template <typename T, typename Parse>
Decoded<T> decode_with(std::string_view bytes, Parse&& parse) {
  T value{};
  if (auto e = parse(bytes, value)) return std::unexpected(std::move(*e));
  return value;
}

// ---- gRPC plumbing ----

std::string address(const std::string& socket_path) {
  return "unix://" + std::filesystem::absolute(socket_path).lexically_normal().string();
}

grpc::ByteBuffer to_buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string to_bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Valid() || !buffer.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

RpcResult<std::string> unary(grpc::GenericStub& stub, const std::string& method, const std::string& request,
                             std::chrono::milliseconds deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  grpc::ByteBuffer req = to_buffer(request), resp;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return std::unexpected(RpcError{status.error_code(), status.error_message(), false});
  return to_bytes(resp);
}

template <typename T, typename Decode>
RpcResult<T> decode_response(RpcResult<std::string> bytes, Decode&& decode) {
  if (!bytes) return std::unexpected(std::move(bytes.error()));
  auto value = decode(*bytes);
  if (!value) return std::unexpected(RpcError{grpc::StatusCode::INTERNAL, std::move(value.error()), true});
  return std::move(*value);
}

}  // namespace

// ---- Codec ----

std::string encode_plugin_options(const PluginOptions& options) {
  std::string out;
  put_bool(out, 1, options.pre_start_required);
  put_bool(out, 2, options.get_preferred_allocation_available);
  return out;
}

Decoded<PluginOptions> decode_plugin_options(std::string_view bytes) {
  return decode_with<PluginOptions>(bytes, parse_options);
}

std::string encode_register_request(const Registration& request) {
  std::string out;
  put_string(out, 1, request.version);
  put_string(out, 2, request.endpoint);
  put_string(out, 3, request.resource_name);
  if (request.has_options) put_len(out, 4, encode_plugin_options(request.options));
  return out;
}

Decoded<Registration> decode_register_request(std::string_view bytes) {
  return decode_with<Registration>(bytes, parse_register);
}

std::string encode_list_and_watch_response(const std::vector<DeviceEntry>& devices) {
  std::string out;
  for (const auto& d : devices) {
    std::string device;
    put_string(device, 1, d.id);
    put_string(device, 2, d.health);
    if (!d.numa_nodes.empty()) {
      std::string topology;
      for (int64_t id : d.numa_nodes) {
        std::string node;
        put_int(node, 1, id);
        put_len(topology, 1, node);
      }
      put_len(device, 3, topology);
    }
    put_len(out, 1, device);
  }
  return out;
}

Decoded<std::vector<DeviceEntry>> decode_list_and_watch_response(std::string_view bytes) {
  return decode_with<std::vector<DeviceEntry>>(bytes, [](std::string_view b, std::vector<DeviceEntry>& out) {
    return parse_message_list<DeviceEntry>(b, "ListAndWatchResponse", "devices", out, parse_device);
  });
}

std::string encode_allocate_request(const std::vector<std::vector<std::string>>& per_container_ids) {
  std::string out;
  for (const auto& ids : per_container_ids) {
    std::string container;
    for (const auto& id : ids) put_len(container, 1, id);
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<std::vector<std::string>>> decode_allocate_request(std::string_view bytes) {
  using Ids = std::vector<std::string>;
  return decode_with<std::vector<Ids>>(bytes, [](std::string_view b, std::vector<Ids>& out) {
    return parse_message_list<Ids>(b, "AllocateRequest", "container_requests", out, [](std::string_view c, Ids& ids) {
      return parse_string_list(c, "ContainerAllocateRequest", "devices_ids", ids);
    });
  });
}

std::string encode_allocate_response(const std::vector<ContainerAllocation>& containers) {
  std::string out;
  for (const auto& c : containers) {
    std::string container;
    put_map(container, 1, c.envs);
    for (const auto& m : c.mounts) {
      std::string mount;
      put_string(mount, 1, m.container_path);
      put_string(mount, 2, m.host_path);
      put_bool(mount, 3, m.read_only);
      put_len(container, 2, mount);
    }
    for (const auto& d : c.devices) {
      std::string spec;
      put_string(spec, 1, d.container_path);
      put_string(spec, 2, d.host_path);
      put_string(spec, 3, d.permissions);
      put_len(container, 3, spec);
    }
    put_map(container, 4, c.annotations);
    for (const auto& name : c.cdi_devices) {
      std::string cdi;
      put_string(cdi, 1, name);
      put_len(container, 5, cdi);
    }
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<ContainerAllocation>> decode_allocate_response(std::string_view bytes) {
  return decode_with<std::vector<ContainerAllocation>>(
      bytes, [](std::string_view b, std::vector<ContainerAllocation>& out) {
        return parse_message_list<ContainerAllocation>(b, "AllocateResponse", "container_responses", out,
                                                       parse_container_allocation);
      });
}

std::string encode_preferred_request(const std::vector<PreferredRequest>& containers) {
  std::string out;
  for (const auto& p : containers) {
    std::string container;
    for (const auto& id : p.available) put_len(container, 1, id);
    for (const auto& id : p.must_include) put_len(container, 2, id);
    put_int(container, 3, p.size);
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<PreferredRequest>> decode_preferred_request(std::string_view bytes) {
  return decode_with<std::vector<PreferredRequest>>(bytes, [](std::string_view b, std::vector<PreferredRequest>& out) {
    return parse_message_list<PreferredRequest>(b, "PreferredAllocationRequest", "container_requests", out,
                                                parse_preferred_container);
  });
}

std::string encode_preferred_response(const std::vector<std::vector<std::string>>& per_container_ids) {
  std::string out;
  for (const auto& ids : per_container_ids) {
    std::string container;
    for (const auto& id : ids) put_len(container, 1, id);
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<std::vector<std::string>>> decode_preferred_response(std::string_view bytes) {
  using Ids = std::vector<std::string>;
  return decode_with<std::vector<Ids>>(bytes, [](std::string_view b, std::vector<Ids>& out) {
    return parse_message_list<Ids>(
        b, "PreferredAllocationResponse", "container_responses", out, [](std::string_view c, Ids& ids) {
          return parse_string_list(c, "ContainerPreferredAllocationResponse", "deviceIDs", ids);
        });
  });
}

std::string encode_pre_start_request(const std::vector<std::string>& device_ids) {
  std::string out;
  for (const auto& id : device_ids) put_len(out, 1, id);
  return out;
}

Decoded<std::vector<std::string>> decode_pre_start_request(std::string_view bytes) {
  return decode_with<std::vector<std::string>>(bytes, [](std::string_view b, std::vector<std::string>& out) {
    return parse_string_list(b, "PreStartContainerRequest", "devices_ids", out);
  });
}

Decoded<Empty> decode_empty(std::string_view bytes) {
  Reader r(bytes);
  Field f;
  while (r.next(f)) {
  }
  if (r.error()) return std::unexpected("Empty: " + *r.error());
  return Empty{};
}

RpcResult<std::string> call_unary(const std::string& socket_path, const std::string& method, const std::string& request,
                                  std::chrono::milliseconds deadline) {
  grpc::GenericStub stub(grpc::CreateChannel(address(socket_path), grpc::InsecureChannelCredentials()));
  return unary(stub, method, request, deadline);
}

// ---- KubeletRegistry ----

struct KubeletRegistry::Impl {
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::vector<Registration> received, accepted;  // guarded by mu
  std::vector<std::string> errors;               // guarded by mu
  std::map<std::string, std::string> rejects;    // guarded by mu

  std::mutex server_mu;  // serialises start/stop/restart
  struct Service;
  std::unique_ptr<Service> service;  // one per server: gRPC binds a generic service to one server
  std::unique_ptr<grpc::Server> server;

  // Records a Register call and says how to answer it. Runs on gRPC threads.
  grpc::Status handle(const std::string& method, const std::string& request) {
    if (method != kRegister) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not served: " + method);
    auto reg = decode_register_request(request);
    grpc::Status status;
    {
      std::lock_guard lock(mu);
      if (!reg) {
        errors.push_back(reg.error());
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed RegisterRequest: " + reg.error());
      }
      received.push_back(*reg);
      if (reg->version != kVersion) {
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "requested device plugin API version \"" + reg->version +
                                  "\" is not supported by kubelet; supported versions are [\"v1beta1\"]");
      } else if (auto it = rejects.find(reg->resource_name); it != rejects.end()) {
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, it->second);
      } else {
        accepted.push_back(*reg);
      }
    }
    cv.notify_all();
    return status;
  }

  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(grpc::GenericCallbackServerContext* ctx, Impl* impl) : ctx_(ctx), impl_(impl) { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      grpc::Status status = impl_->handle(ctx_->method(), to_bytes(request_));
      if (!status.ok()) {
        Finish(status);
        return;
      }
      response_ = to_buffer(std::string());
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::GenericCallbackServerContext* ctx_;
    Impl* impl_;
    grpc::ByteBuffer request_, response_;
  };

  void start_locked(const std::string& dir, const std::string& socket);  // throws when it cannot serve
  void stop_locked(const std::string& socket);
};

struct KubeletRegistry::Impl::Service : grpc::CallbackGenericService {
  explicit Service(Impl* i) : impl(i) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Reactor(ctx, impl);
  }
  Impl* impl;
};

void KubeletRegistry::Impl::start_locked(const std::string& dir, const std::string& socket) {
  if (server) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  service = std::make_unique<Service>(this);
  builder.RegisterCallbackGenericService(service.get());
  server = builder.BuildAndStart();
  if (!server) {
    service.reset();
    throw std::runtime_error("KubeletRegistry: cannot serve " + socket);
  }
}

void KubeletRegistry::Impl::stop_locked(const std::string& socket) {
  if (server) {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server.reset();
    service.reset();
  }
  ::unlink(socket.c_str());
}

KubeletRegistry::KubeletRegistry(std::string device_plugin_dir)
    : dir_(std::filesystem::absolute(device_plugin_dir).lexically_normal().string()), impl_(std::make_unique<Impl>()) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  socket_ = dir_ + "/kubelet.sock";
}

KubeletRegistry::~KubeletRegistry() { stop(); }

void KubeletRegistry::start() {
  std::lock_guard lock(impl_->server_mu);
  impl_->start_locked(dir_, socket_);
}

void KubeletRegistry::stop() {
  std::lock_guard lock(impl_->server_mu);
  impl_->stop_locked(socket_);
}

void KubeletRegistry::restart() {
  std::lock_guard lock(impl_->server_mu);
  impl_->stop_locked(socket_);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::error_code entry_ec;
    if (entry.symlink_status(entry_ec).type() == std::filesystem::file_type::socket) {
      std::filesystem::remove(entry.path(), entry_ec);
    }
  }
  impl_->start_locked(dir_, socket_);
}

void KubeletRegistry::set_reject(const std::string& resource_name, const std::string& message) {
  std::lock_guard lock(impl_->mu);
  if (message.empty()) {
    impl_->rejects.erase(resource_name);
  } else {
    impl_->rejects[resource_name] = message;
  }
}

std::vector<Registration> KubeletRegistry::registrations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->received;
}

std::vector<Registration> KubeletRegistry::accepted() const {
  std::lock_guard lock(impl_->mu);
  return impl_->accepted;
}

std::vector<std::string> KubeletRegistry::decode_errors() const {
  std::lock_guard lock(impl_->mu);
  return impl_->errors;
}

bool KubeletRegistry::wait_for_registrations(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->received.size() >= n; });
}

// ---- PluginClient ----

// What the watches report, shared with them: a watch given up on by cancel_watch() may outlive the client.
struct PluginClient::State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<DeviceEntry>> lists;  // guarded by mu, as is everything below
  std::vector<std::string> errors;
  size_t first = 0;     // index in lists of the current watch's first list
  bool opened = false;  // watch() was called
  bool ended = false;   // the current watch's OnDone has run (it touches the watch no more)
  std::optional<RpcError> status;
};

// One ListAndWatch call. Owned by the client and destroyed on a client thread once ended (never in OnDone:
// its ClientContext may hold the last reference to the channel, and gRPC 1.51 must not release a channel's
// callback completion queue from one of that queue's own threads).
struct PluginClient::Watch : grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
  explicit Watch(std::shared_ptr<State> s) : state(std::move(s)), request(to_buffer(std::string())) {}

  void start(grpc::GenericStub& stub) {
    stub.PrepareBidiStreamingCall(&ctx, kListAndWatch, grpc::StubOptions(), this);
    StartWriteLast(&request, grpc::WriteOptions());
    StartRead(&response);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // no more messages; OnDone follows
    auto devices = decode_list_and_watch_response(to_bytes(response));
    {
      std::lock_guard lock(state->mu);
      if (devices) {
        state->lists.push_back(std::move(*devices));
      } else {
        state->errors.push_back(std::move(devices.error()));
      }
    }
    state->cv.notify_all();
    StartRead(&response);
  }

  // The last touch of `this`: once `ended` is seen under the lock, the client may destroy the watch.
  void OnDone(const grpc::Status& s) override {
    std::shared_ptr<State> keep = state;
    std::lock_guard lock(keep->mu);
    keep->ended = true;
    keep->status = RpcError{s.error_code(), s.error_message(), false};
    keep->cv.notify_all();
  }

  std::shared_ptr<State> state;
  grpc::ClientContext ctx;
  grpc::ByteBuffer request, response;
};

struct PluginClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  std::shared_ptr<State> state = std::make_shared<State>();
  std::mutex watch_mu;           // serialises watch() and cancel_watch()
  std::unique_ptr<Watch> watch;  // guarded by watch_mu: the current watch, open or ended
};

PluginClient::PluginClient(std::string socket_path, std::chrono::milliseconds deadline)
    : socket_(std::move(socket_path)), deadline_(deadline), impl_(std::make_unique<Impl>()) {
  impl_->channel = grpc::CreateChannel(address(socket_), grpc::InsecureChannelCredentials());
  impl_->stub = std::make_unique<grpc::GenericStub>(impl_->channel);
}

PluginClient::~PluginClient() { cancel_watch(); }

RpcResult<PluginOptions> PluginClient::options() {
  return decode_response<PluginOptions>(unary(*impl_->stub, kGetOptions, std::string(), deadline_),
                                        decode_plugin_options);
}

RpcResult<std::vector<ContainerAllocation>> PluginClient::allocate(
    const std::vector<std::vector<std::string>>& per_container_ids) {
  return decode_response<std::vector<ContainerAllocation>>(
      unary(*impl_->stub, kAllocate, encode_allocate_request(per_container_ids), deadline_), decode_allocate_response);
}

RpcResult<std::vector<std::vector<std::string>>> PluginClient::preferred(
    const std::vector<PreferredRequest>& requests) {
  return decode_response<std::vector<std::vector<std::string>>>(
      unary(*impl_->stub, kGetPreferred, encode_preferred_request(requests), deadline_), decode_preferred_response);
}

RpcResult<Empty> PluginClient::pre_start(const std::vector<std::string>& device_ids) {
  return decode_response<Empty>(unary(*impl_->stub, kPreStart, encode_pre_start_request(device_ids), deadline_),
                                decode_empty);
}

void PluginClient::watch() {
  std::lock_guard watch_lock(impl_->watch_mu);
  auto& st = *impl_->state;
  {
    std::lock_guard lock(st.mu);
    if (impl_->watch && !st.ended) return;
  }
  impl_->watch.reset();  // ended: OnDone has run
  impl_->watch = std::make_unique<Watch>(impl_->state);
  {
    std::lock_guard lock(st.mu);
    st.opened = true;
    st.ended = false;
    st.status.reset();
    st.first = st.lists.size();
  }
  impl_->watch->start(*impl_->stub);
}

void PluginClient::cancel_watch() {
  std::lock_guard watch_lock(impl_->watch_mu);
  if (!impl_->watch) return;
  impl_->watch->ctx.TryCancel();  // no-op once the call has ended
  auto& st = *impl_->state;
  std::unique_lock lock(st.mu);
  if (st.cv.wait_for(lock, deadline_, [&] { return st.ended; })) {
    lock.unlock();
    impl_->watch.reset();
  } else {
    (void)impl_->watch.release();  // gRPC still holds it: leak it rather than free it under gRPC
  }
}

std::vector<std::vector<DeviceEntry>> PluginClient::lists() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->lists;
}

std::optional<std::vector<DeviceEntry>> PluginClient::wait_for_list(
    const std::function<bool(const std::vector<DeviceEntry>&)>& pred, std::chrono::milliseconds timeout) const {
  auto& st = *impl_->state;
  std::unique_lock lock(st.mu);
  std::optional<std::vector<DeviceEntry>> found;
  st.cv.wait_for(lock, timeout, [&] {
    if (st.lists.size() > st.first && pred(st.lists.back())) {
      found = st.lists.back();
      return true;
    }
    return !st.opened || st.ended;
  });
  return found;
}

bool PluginClient::stream_ended() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->ended;
}

bool PluginClient::wait_for_stream_end(std::chrono::milliseconds timeout) const {
  auto& st = *impl_->state;
  std::unique_lock lock(st.mu);
  return st.cv.wait_for(lock, timeout, [&] { return st.ended; });
}

std::optional<RpcError> PluginClient::stream_status() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->status;
}

std::vector<std::string> PluginClient::watch_errors() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->errors;
}

}  // namespace kgpu::testing
