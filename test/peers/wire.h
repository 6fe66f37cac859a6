// The protobuf wire format (proto3) for the hand-written peers: encoders for the field kinds the
// kubelet APIs use and a bounded reader whose decoders report "<Message>.<field>: <problem>".
// Rules: see device_plugin_peer.h ("Codec rules"). Shared by device_plugin_peer.cc and
// kubelet_dra_peer.cc so both peers speak the same, independently written wire code.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kgpu::testing::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

constexpr int kMaxGroupDepth = 64;

inline void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

inline void put_key(std::string& out, uint32_t number, WireType type) {
  put_varint(out, (static_cast<uint64_t>(number) << 3) | type);
}

// A length-delimited field, always written (repeated strings, submessages, map entries).
inline void put_len(std::string& out, uint32_t number, std::string_view bytes) {
  put_key(out, number, kLen);
  put_varint(out, bytes.size());
  out += bytes;
}

// Singular proto3 scalars: omitted when default.
inline void put_string(std::string& out, uint32_t number, std::string_view s) {
  if (!s.empty()) put_len(out, number, s);
}

inline void put_bool(std::string& out, uint32_t number, bool b) {
  if (!b) return;
  put_key(out, number, kVarint);
  put_varint(out, 1);
}

// int32 and int64: negative values are sign-extended to 64 bits (ten bytes), as protobuf does.
inline void put_int(std::string& out, uint32_t number, int64_t v) {
  if (v == 0) return;
  put_key(out, number, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

inline void put_map(std::string& out, uint32_t number, const std::map<std::string, std::string>& m) {
  for (const auto& [key, value] : m) {
    std::string entry;
    put_len(entry, 1, key);
    put_len(entry, 2, value);
    put_len(out, number, entry);
  }
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), which Go's protobuf
// requires of proto3 string fields.
inline bool valid_utf8(std::string_view s) {
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

inline const char* wire_type_name(uint32_t type) {
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

inline Err field_error(std::string_view message, std::string_view field, std::string_view problem) {
  return std::string(message) + "." + std::string(field) + ": " + std::string(problem);
}

inline Err check_type(std::string_view message, std::string_view field, const Field& f, WireType want) {
  if (f.type == want) return std::nullopt;
  return field_error(message, field,
                     std::string("wire type ") + wire_type_name(f.type) + ", want " + wire_type_name(want));
}

inline Err get_string(std::string_view message, std::string_view field, const Field& f, std::string& out) {
  if (auto e = check_type(message, field, f, kLen)) return e;
  if (!valid_utf8(f.bytes)) return field_error(message, field, "invalid UTF-8");
  out.assign(f.bytes);
  return std::nullopt;
}

inline Err get_bool(std::string_view message, std::string_view field, const Field& f, bool& out) {
  if (auto e = check_type(message, field, f, kVarint)) return e;
  out = f.varint != 0;
  return std::nullopt;
}

// Decodes the submessage in `f` with `parse`; its error is prefixed with "<message>.<field>: ".
template <typename Parse>
inline Err get_message(std::string_view message, std::string_view field, const Field& f, Parse&& parse) {
  if (auto e = check_type(message, field, f, kLen)) return e;
  if (auto e = parse(f.bytes)) return field_error(message, field, *e);
  return std::nullopt;
}

template <typename T, typename Parse>
std::expected<T, std::string> decode_with(std::string_view bytes, Parse&& parse) {
  T value{};
  if (auto e = parse(bytes, value)) return std::unexpected(std::move(*e));
  return value;
}

}  // namespace kgpu::testing::wire
