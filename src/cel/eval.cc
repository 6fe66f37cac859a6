// CEL evaluation over the `device` variable, with cost accounting.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "cel/value.h"
#include "common/strings.h"
#include "k8s/objects.h"

namespace kgpu::cel {

Result<std::shared_ptr<const Node>> parse(std::string_view expression);

namespace {

using NodeP = std::shared_ptr<const Node>;
using List = std::vector<Value>;

Value err(std::string m) { return Value{Err{std::move(m)}}; }
Value boolean(bool b) { return Value{b}; }
Value integer(int64_t i) { return Value{i}; }
Value str(std::string s) { return Value{std::move(s)}; }

constexpr const char* kCostExceeded = "operation cancelled: actual cost limit exceeded";

struct Ctx {
  std::vector<std::pair<std::string_view, Value>> vars;
  const Value* device = nullptr;
  uint64_t cost = 0, limit = 0;
  bool exceeded = false;
  bool charge(uint64_t units) {
    cost += units;
    if (cost > limit) exceeded = true;
    return !exceeded;
  }
};

// UTF-8 to code points; invalid bytes count as one code point each (strings come from JSON).
std::u32string code_points(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) {
      out += c;
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += cp;
    i += n;
  }
  return out;
}

std::string utf8(std::u32string_view s) {
  std::string out;
  for (char32_t cp : s) append_utf8(out, static_cast<uint32_t>(cp));
  return out;
}

bool is_num(const Value& v) {
  return std::holds_alternative<int64_t>(v.v) || std::holds_alternative<uint64_t>(v.v) ||
         std::holds_alternative<double>(v.v);
}

// -1, 0, 1 for numbers of any CEL numeric kind; nullopt for NaN.
std::optional<int> num_compare(const Value& a, const Value& b) {
  const auto as_double = [](const Value& v) {
    if (auto i = std::get_if<int64_t>(&v.v)) return static_cast<double>(*i);
    if (auto u = std::get_if<uint64_t>(&v.v)) return static_cast<double>(*u);
    return std::get<double>(v.v);
  };
  if (std::holds_alternative<double>(a.v) || std::holds_alternative<double>(b.v)) {
    const double x = as_double(a), y = as_double(b);
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const auto wide = [](const Value& v) -> __int128 {
    if (auto i = std::get_if<int64_t>(&v.v)) return *i;
    return static_cast<__int128>(std::get<uint64_t>(v.v));
  };
  const __int128 x = wide(a), y = wide(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

std::optional<bool> equal(const Value& a, const Value& b);

const Value* map_find(const MapData& m, const Value& key) {
  for (const auto& [k, v] : m.entries)
    if (equal(k, key).value_or(false)) return &v;
  return nullptr;
}

// CEL equality: values of different kinds are unequal, numbers compare across kinds.
std::optional<bool> equal(const Value& a, const Value& b) {
  if (is_num(a) && is_num(b)) return num_compare(a, b) == 0;
  if (a.v.index() != b.v.index()) return false;
  return std::visit(
      [&](const auto& x) -> std::optional<bool> {
        using T = std::decay_t<decltype(x)>;
        const auto& y = std::get<T>(b.v);
        if constexpr (std::is_same_v<T, std::monostate>) {
          return true;
        } else if constexpr (std::is_same_v<T, ListP>) {
          if (x->size() != y->size()) return false;
          for (size_t i = 0; i < x->size(); ++i)
            if (!equal((*x)[i], (*y)[i]).value_or(false)) return false;
          return true;
        } else if constexpr (std::is_same_v<T, MapP>) {
          if (x->entries.size() != y->entries.size()) return false;
          for (const auto& [k, v] : x->entries) {
            const Value* other = map_find(*y, k);
            if (other == nullptr || !equal(v, *other).value_or(false)) return false;
          }
          return true;
        } else if constexpr (std::is_same_v<T, Semver>) {
          return x.compare(y) == 0;
        } else if constexpr (std::is_same_v<T, Err>) {
          return std::nullopt;
        } else {
          return x == y;
        }
      },
      a.v);
}

Value no_overload(std::string_view f, std::initializer_list<const Value*> args) {
  std::vector<std::string> kinds;
  for (const Value* v : args) kinds.emplace_back(value_kind(*v));
  return err(fmt::format("no such overload: {}({})", f, fmt::join(kinds, ", ")));
}

Value checked_int(__int128 v) {
  if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
    return err("return error for overflow");
  return integer(static_cast<int64_t>(v));
}

Value arith(const std::string& op, const Value& a, const Value& b, Ctx& c) {
  if (auto x = std::get_if<int64_t>(&a.v), y = std::get_if<int64_t>(&b.v); x && y) {
    const __int128 l = *x, r = *y;
    if (op == "+") return checked_int(l + r);
    if (op == "-") return checked_int(l - r);
    if (op == "*") return checked_int(l * r);
    if (r == 0) return err(op == "/" ? "division by zero" : "modulus by zero");
    if (l == std::numeric_limits<int64_t>::min() && r == -1) return err("return error for overflow");
    return integer(op == "/" ? *x / *y : *x % *y);
  }
  if (auto x = std::get_if<uint64_t>(&a.v), y = std::get_if<uint64_t>(&b.v); x && y) {
    const unsigned __int128 l = *x, r = *y;
    if (op == "+" || op == "*") {
      const unsigned __int128 v = op == "+" ? l + r : l * r;
      if (v > std::numeric_limits<uint64_t>::max()) return err("return error for overflow");
      return Value{static_cast<uint64_t>(v)};
    }
    if (op == "-") return *x < *y ? err("return error for overflow") : Value{*x - *y};
    if (*y == 0) return err(op == "/" ? "division by zero" : "modulus by zero");
    return Value{op == "/" ? *x / *y : *x % *y};
  }
  if (auto x = std::get_if<double>(&a.v), y = std::get_if<double>(&b.v); x && y && op != "%") {
    return Value{op == "+" ? *x + *y : op == "-" ? *x - *y : op == "*" ? *x * *y : *x / *y};
  }
  if (op == "+") {
    if (auto x = std::get_if<std::string>(&a.v), y = std::get_if<std::string>(&b.v); x && y) {
      c.charge((x->size() + y->size()) / 10 + 1);
      return str(*x + *y);
    }
    if (auto x = std::get_if<ListP>(&a.v), y = std::get_if<ListP>(&b.v); x && y) {
      c.charge((*x)->size() + (*y)->size());
      auto l = std::make_shared<List>(**x);
      l->insert(l->end(), (*y)->begin(), (*y)->end());
      return Value{ListP(std::move(l))};
    }
  }
  return no_overload("_" + op + "_", {&a, &b});
}

Value relation(const std::string& op, const Value& a, const Value& b, Ctx& c) {
  if (op == "==" || op == "!=") {
    const auto e = equal(a, b);
    if (!e) return err("no such overload: equality on an error");
    return boolean(op == "==" ? *e : !*e);
  }
  if (op == "in") {
    if (auto l = std::get_if<ListP>(&b.v)) {
      c.charge((*l)->size());
      for (const auto& x : **l)
        if (equal(a, x).value_or(false)) return boolean(true);
      return boolean(false);
    }
    if (auto m = std::get_if<MapP>(&b.v)) return boolean(map_find(**m, a) != nullptr);
    return no_overload("@in", {&a, &b});
  }
  std::optional<int> cmp;
  if (is_num(a) && is_num(b)) {
    cmp = num_compare(a, b);
    if (!cmp) return boolean(false);  // NaN orders with nothing
  } else if (auto x = std::get_if<std::string>(&a.v), y = std::get_if<std::string>(&b.v); x && y) {
    c.charge(std::min(x->size(), y->size()) / 10 + 1);
    const int r = x->compare(*y);
    cmp = r < 0 ? -1 : r > 0 ? 1 : 0;
  } else if (auto p = std::get_if<bool>(&a.v), q = std::get_if<bool>(&b.v); p && q) {
    cmp = *p == *q ? 0 : *p ? 1 : -1;
  } else {
    return no_overload("_" + op + "_", {&a, &b});
  }
  if (op == "<") return boolean(*cmp < 0);
  if (op == "<=") return boolean(*cmp <= 0);
  if (op == ">") return boolean(*cmp > 0);
  return boolean(*cmp >= 0);
}

Value select(const Value& v, const std::string& field, bool test_only) {
  const auto* m = std::get_if<MapP>(&v.v);
  if (m == nullptr) return err(fmt::format("no such overload: field selection '.{}' on {}", field, value_kind(v)));
  const Value* found = map_find(**m, Value{field});
  if (test_only) return boolean(found != nullptr);
  if (found != nullptr) return *found;
  if ((*m)->missing_is_empty_map) return Value{MapP(std::make_shared<MapData>())};
  return err(fmt::format("no such key: {}", field));
}

Value index(const Value& v, const Value& i) {
  if (auto l = std::get_if<ListP>(&v.v)) {
    if (!is_num(i)) return no_overload("_[_]", {&v, &i});
    int64_t k = -1;
    if (auto x = std::get_if<int64_t>(&i.v)) k = *x;
    if (auto u = std::get_if<uint64_t>(&i.v)) k = *u > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(*u);
    if (auto d = std::get_if<double>(&i.v)) {
      if (*d != std::floor(*d)) return err(fmt::format("unsupported index value {}", *d));
      k = static_cast<int64_t>(*d);
    }
    if (k < 0 || static_cast<size_t>(k) >= (*l)->size()) return err(fmt::format("index out of bounds: {}", k));
    return (**l)[static_cast<size_t>(k)];
  }
  if (auto m = std::get_if<MapP>(&v.v)) {
    if (const Value* f = map_find(**m, i)) return *f;
    if ((*m)->missing_is_empty_map) return Value{MapP(std::make_shared<MapData>())};
    std::string key = std::holds_alternative<std::string>(i.v) ? std::get<std::string>(i.v) : value_kind(i);
    return err(fmt::format("no such key: {}", key));
  }
  return no_overload("_[_]", {&v, &i});
}

std::string format_double(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  std::string s = fmt::format("{}", d);
  return s;
}

Value call(const Node& n, const std::vector<Value>& a, Ctx& c) {
  const std::string& f = n.name;
  const Value* recv = n.has_target ? &a[0] : nullptr;
  const size_t off = n.has_target ? 1 : 0;
  const size_t argc = a.size() - off;
  const auto arg = [&](size_t k) -> const Value& { return a[off + k]; };
  const auto s_arg = [&](size_t k) { return std::get_if<std::string>(&arg(k).v); };
  const auto i_arg = [&](size_t k) { return std::get_if<int64_t>(&arg(k).v); };
  const auto overload = [&]() {
    std::vector<std::string> kinds;
    for (size_t k = 0; k < argc; ++k) kinds.emplace_back(value_kind(arg(k)));
    return err(fmt::format("no such overload: {}{}({})", recv ? std::string(value_kind(*recv)) + "." : "", f,
                           fmt::join(kinds, ", ")));
  };
  if (!n.has_target) {
    const Value& x = arg(0);
    if (f == "size") {
      if (auto s = std::get_if<std::string>(&x.v)) return integer(static_cast<int64_t>(code_points(*s).size()));
      if (auto l = std::get_if<ListP>(&x.v)) return integer(static_cast<int64_t>((*l)->size()));
      if (auto m = std::get_if<MapP>(&x.v)) return integer(static_cast<int64_t>((*m)->entries.size()));
      return overload();
    }
    if (f == "int") {
      if (auto i = std::get_if<int64_t>(&x.v)) return integer(*i);
      if (auto u = std::get_if<uint64_t>(&x.v)) return checked_int(*u);
      if (auto d = std::get_if<double>(&x.v)) {
        if (!(*d > -9.2233720368547758e18 && *d < 9.2233720368547758e18)) return err("integer overflow");
        return integer(static_cast<int64_t>(*d));
      }
      if (auto s = std::get_if<std::string>(&x.v)) {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
        if (ec != std::errc() || p != s->data() + s->size()) return err(fmt::format("cannot convert '{}' to int", *s));
        return integer(v);
      }
      return overload();
    }
    if (f == "uint") {
      if (auto i = std::get_if<int64_t>(&x.v)) return *i < 0 ? err("unsigned integer overflow") : Value{static_cast<uint64_t>(*i)};
      if (auto u = std::get_if<uint64_t>(&x.v)) return Value{*u};
      if (auto d = std::get_if<double>(&x.v)) {
        if (!(*d >= 0 && *d < 1.8446744073709552e19)) return err("unsigned integer overflow");
        return Value{static_cast<uint64_t>(*d)};
      }
      if (auto s = std::get_if<std::string>(&x.v)) {
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
        if (ec != std::errc() || p != s->data() + s->size()) return err(fmt::format("cannot convert '{}' to uint", *s));
        return Value{v};
      }
      return overload();
    }
    if (f == "double") {
      if (is_num(x)) {
        if (auto i = std::get_if<int64_t>(&x.v)) return Value{static_cast<double>(*i)};
        if (auto u = std::get_if<uint64_t>(&x.v)) return Value{static_cast<double>(*u)};
        return x;
      }
      if (auto s = std::get_if<std::string>(&x.v)) {
        char* end = nullptr;
        const std::string copy = *s;
        const double d = std::strtod(copy.c_str(), &end);
        if (copy.empty() || end != copy.c_str() + copy.size()) return err(fmt::format("cannot convert '{}' to double", *s));
        return Value{d};
      }
      return overload();
    }
    if (f == "string") {
      if (std::holds_alternative<std::string>(x.v)) return x;
      if (auto i = std::get_if<int64_t>(&x.v)) return str(std::to_string(*i));
      if (auto u = std::get_if<uint64_t>(&x.v)) return str(std::to_string(*u));
      if (auto d = std::get_if<double>(&x.v)) return str(format_double(*d));
      if (auto b = std::get_if<bool>(&x.v)) return str(*b ? "true" : "false");
      return overload();
    }
    if (f == "bool") {
      if (std::holds_alternative<bool>(x.v)) return x;
      if (auto s = std::get_if<std::string>(&x.v)) {
        for (std::string_view t : {"1", "t", "true", "TRUE", "True"})
          if (*s == t) return boolean(true);
        for (std::string_view t : {"0", "f", "false", "FALSE", "False"})
          if (*s == t) return boolean(false);
        return err(fmt::format("type conversion error from 'string' to 'bool' ('{}')", *s));
      }
      return overload();
    }
    if (f == "quantity" || f == "isQuantity") {
      const std::string* s = s_arg(0);
      if (s == nullptr) return overload();
      auto q = k8s::Quantity::parse(*s);
      if (f == "isQuantity") return boolean(q.has_value());
      if (!q) return err(fmt::format("quantities must match the regular expression: {}", q.error().message));
      return Value{*q};
    }
    if (f == "semver" || f == "isSemver") {
      const std::string* s = s_arg(0);
      if (s == nullptr) return overload();
      auto v = Semver::parse(*s);
      if (f == "isSemver") return boolean(v.has_value());
      if (!v) return err(v.error().message);
      return Value{*v};
    }
  }
  if (f == "matches") {
    const std::string* s = recv ? std::get_if<std::string>(&recv->v) : s_arg(0);
    const std::string* p = recv ? s_arg(0) : s_arg(1);
    if (s == nullptr || p == nullptr) return overload();
    c.charge(s->size() / 10 + p->size() + 1);
    if (n.regex) return boolean(RE2::PartialMatch(*s, *n.regex));
    RE2::Options o;
    o.set_log_errors(false);
    const RE2 re(*p, o);
    if (!re.ok()) return err(fmt::format("invalid regular expression '{}': {}", *p, re.error()));
    return boolean(RE2::PartialMatch(*s, re));
  }
  if (recv == nullptr) return overload();
  if (f == "size") {
    if (auto s = std::get_if<std::string>(&recv->v)) return integer(static_cast<int64_t>(code_points(*s).size()));
    if (auto l = std::get_if<ListP>(&recv->v)) return integer(static_cast<int64_t>((*l)->size()));
    if (auto m = std::get_if<MapP>(&recv->v)) return integer(static_cast<int64_t>((*m)->entries.size()));
    return overload();
  }
  if (auto s = std::get_if<std::string>(&recv->v)) {
    c.charge(s->size() / 10 + 1);
    if ((f == "contains" || f == "startsWith" || f == "endsWith") && argc == 1 && s_arg(0)) {
      const std::string& x = *s_arg(0);
      return boolean(f == "contains" ? s->find(x) != std::string::npos : f == "startsWith" ? s->starts_with(x) : s->ends_with(x));
    }
    if ((f == "lowerAscii" || f == "upperAscii") && argc == 0) {
      std::string out = *s;
      for (char& ch : out) ch = static_cast<char>(f == "lowerAscii" ? std::tolower(static_cast<unsigned char>(ch)) : std::toupper(static_cast<unsigned char>(ch)));
      return str(std::move(out));
    }
    if (f == "trim" && argc == 0) {
      const auto cps = code_points(*s);
      size_t b = 0, e = cps.size();
      const auto space = [](char32_t ch) { return ch == ' ' || (ch >= 0x09 && ch <= 0x0D) || ch == 0x85 || ch == 0xA0 || ch == 0x2028 || ch == 0x2029 || ch == 0x3000 || (ch >= 0x2000 && ch <= 0x200A) || ch == 0x1680 || ch == 0x202F || ch == 0x205F; };
      while (b < e && space(cps[b])) ++b;
      while (e > b && space(cps[e - 1])) --e;
      return str(utf8(std::u32string_view(cps).substr(b, e - b)));
    }
    const auto cps = code_points(*s);
    const auto len = static_cast<int64_t>(cps.size());
    if (f == "charAt" && argc == 1 && i_arg(0)) {
      const int64_t i = *i_arg(0);
      if (i < 0 || i > len) return err(fmt::format("index out of range: {}", i));
      return str(i == len ? "" : utf8(std::u32string(1, cps[static_cast<size_t>(i)])));
    }
    if ((f == "indexOf" || f == "lastIndexOf") && argc >= 1 && s_arg(0) && (argc == 1 || i_arg(1))) {
      const auto needle = code_points(*s_arg(0));
      const std::u32string_view hay(cps);
      if (f == "indexOf") {
        const int64_t from = argc == 2 ? *i_arg(1) : 0;
        if (from < 0 || from > len) return err(fmt::format("index out of range: {}", from));
        const size_t at = hay.find(needle, static_cast<size_t>(from));
        return integer(at == std::u32string_view::npos ? -1 : static_cast<int64_t>(at));
      }
      const int64_t from = argc == 2 ? *i_arg(1) : len;
      if (from < 0 || from > len) return err(fmt::format("index out of range: {}", from));
      const size_t at = hay.rfind(needle, static_cast<size_t>(from));
      return integer(at == std::u32string_view::npos ? -1 : static_cast<int64_t>(at));
    }
    if (f == "substring" && argc >= 1 && i_arg(0) && (argc == 1 || i_arg(1))) {
      const int64_t b = *i_arg(0), e = argc == 2 ? *i_arg(1) : len;
      if (b < 0 || b > len) return err(fmt::format("index out of range: {}", b));
      if (e < b || e > len) return err(fmt::format("index out of range: {}", e));
      return str(utf8(std::u32string_view(cps).substr(static_cast<size_t>(b), static_cast<size_t>(e - b))));
    }
    if (f == "replace" && argc >= 2 && s_arg(0) && s_arg(1) && (argc == 2 || i_arg(2))) {
      const std::string& from = *s_arg(0);
      const std::string& to = *s_arg(1);
      int64_t limit = argc == 3 ? *i_arg(2) : -1;
      std::string out;
      size_t i = 0;
      while (limit != 0) {
        const size_t at = from.empty() ? (i <= s->size() ? i : std::string::npos) : s->find(from, i);
        if (at == std::string::npos) break;
        out.append(*s, i, at - i);
        out += to;
        if (from.empty()) {
          if (at < s->size()) out += (*s)[at];
          i = at + 1;
        } else {
          i = at + from.size();
        }
        if (limit > 0) --limit;
        if (!c.charge(to.size() + 1)) return err(kCostExceeded);  // bytes produced: growth is bounded by the limit
      }
      if (i < s->size()) out.append(*s, i);
      return str(std::move(out));
    }
    if (f == "split" && argc >= 1 && s_arg(0) && (argc == 1 || i_arg(1))) {
      const std::string& sep = *s_arg(0);
      int64_t limit = argc == 2 ? *i_arg(1) : -1;
      auto l = std::make_shared<List>();
      if (limit == 0) return Value{ListP(std::move(l))};
      if (sep.empty()) {
        for (size_t k = 0; k < cps.size(); ++k) {
          if (limit > 0 && static_cast<int64_t>(l->size()) == limit - 1) {
            l->push_back(str(utf8(std::u32string_view(cps).substr(k))));
            break;
          }
          l->push_back(str(utf8(std::u32string(1, cps[k]))));
        }
      } else {
        size_t i = 0;
        while (true) {
          const size_t at = s->find(sep, i);
          if (at == std::string::npos || (limit > 0 && static_cast<int64_t>(l->size()) == limit - 1)) {
            l->push_back(str(s->substr(i)));
            break;
          }
          l->push_back(str(s->substr(i, at - i)));
          i = at + sep.size();
        }
      }
      c.charge(l->size());
      return Value{ListP(std::move(l))};
    }
    return overload();
  }
  if (auto l = std::get_if<ListP>(&recv->v)) {
    if (f == "join" && (argc == 0 || s_arg(0))) {
      std::string out;
      for (size_t k = 0; k < (*l)->size(); ++k) {
        const auto* part = std::get_if<std::string>(&(**l)[k].v);
        if (part == nullptr) return err(fmt::format("join: element {} is a {}, not a string", k, value_kind((**l)[k])));
        if (k > 0 && argc == 1) out += *s_arg(0);
        out += *part;
      }
      c.charge(out.size() / 10 + 1);
      return str(std::move(out));
    }
    return overload();
  }
  if (auto q = std::get_if<k8s::Quantity>(&recv->v)) {
    const auto* other = argc == 1 ? std::get_if<k8s::Quantity>(&arg(0).v) : nullptr;
    if (f == "compareTo" && other) return integer(*q < *other ? -1 : *q > *other ? 1 : 0);
    if (f == "isGreaterThan" && other) return boolean(*q > *other);
    if (f == "isLessThan" && other) return boolean(*q < *other);
    if (f == "isInteger" && argc == 0) return boolean(q->is_integer());
    if (f == "asInteger" && argc == 0) {
      if (!q->is_integer()) return err("cannot convert value to integer");
      const __int128 units = q->nanos() / 1'000'000'000;
      if (units > std::numeric_limits<int64_t>::max() || units < std::numeric_limits<int64_t>::min())
        return err("cannot convert value to integer");
      return integer(static_cast<int64_t>(units));
    }
    if (f == "asApproximateFloat" && argc == 0) return Value{q->as_double()};
    if (f == "sign" && argc == 0) return integer(q->is_negative() ? -1 : q->is_zero() ? 0 : 1);
    if ((f == "add" || f == "sub") && argc == 1) {
      k8s::Quantity rhs;
      if (other) {
        rhs = *other;
      } else if (auto i = i_arg(0)) {
        rhs = k8s::Quantity::from_value(*i);
      } else {
        return overload();
      }
      return Value{f == "add" ? *q + rhs : *q - rhs};
    }
    return overload();
  }
  if (auto v = std::get_if<Semver>(&recv->v)) {
    const auto* other = argc == 1 ? std::get_if<Semver>(&arg(0).v) : nullptr;
    if (f == "compareTo" && other) return integer(v->compare(*other));
    if (f == "isGreaterThan" && other) return boolean(v->compare(*other) > 0);
    if (f == "isLessThan" && other) return boolean(v->compare(*other) < 0);
    const auto clamp = [](uint64_t x) { return integer(static_cast<int64_t>(std::min<uint64_t>(x, INT64_MAX))); };
    if (f == "major" && argc == 0) return clamp(v->major);
    if (f == "minor" && argc == 0) return clamp(v->minor);
    if (f == "patch" && argc == 0) return clamp(v->patch);
    return overload();
  }
  return overload();
}

Value eval(const Node& n, Ctx& c);

Value as_bool_operand(const Node& n, Ctx& c) {
  Value v = eval(n, c);
  if (!v.is_err() && !std::holds_alternative<bool>(v.v)) return err(fmt::format("no such overload: logical operator on {}", value_kind(v)));
  return v;
}

Value eval(const Node& n, Ctx& c) {
  if (!c.charge(1)) return err(kCostExceeded);
  switch (n.kind) {
    case Node::kLit:
      return n.lit;
    case Node::kIdent: {
      for (auto it = c.vars.rbegin(); it != c.vars.rend(); ++it)
        if (it->first == n.name) return it->second;
      return *c.device;
    }
    case Node::kSelect:
    case Node::kHas: {
      Value v = eval(*n.args[0], c);
      if (v.is_err()) return v;
      return select(v, n.name, n.kind == Node::kHas);
    }
    case Node::kIndex: {
      Value v = eval(*n.args[0], c);
      if (v.is_err()) return v;
      Value i = eval(*n.args[1], c);
      if (i.is_err()) return i;
      return index(v, i);
    }
    case Node::kList: {
      auto l = std::make_shared<List>();
      for (const auto& x : n.args) {
        Value v = eval(*x, c);
        if (v.is_err()) return v;
        l->push_back(std::move(v));
      }
      return Value{ListP(std::move(l))};
    }
    case Node::kMap: {
      auto m = std::make_shared<MapData>();
      for (size_t k = 0; k + 1 < n.args.size(); k += 2) {
        Value key = eval(*n.args[k], c);
        if (key.is_err()) return key;
        if (!std::holds_alternative<std::string>(key.v) && !std::holds_alternative<int64_t>(key.v) &&
            !std::holds_alternative<uint64_t>(key.v) && !std::holds_alternative<bool>(key.v))
          return err(fmt::format("unsupported map key type: {}", value_kind(key)));
        if (map_find(*m, key) != nullptr) return err("Failed with repeated key");
        Value v = eval(*n.args[k + 1], c);
        if (v.is_err()) return v;
        m->entries.emplace_back(std::move(key), std::move(v));
      }
      return Value{MapP(std::move(m))};
    }
    case Node::kCond: {
      Value cond = eval(*n.args[0], c);
      if (cond.is_err()) return cond;
      const bool* b = std::get_if<bool>(&cond.v);
      if (b == nullptr) return err(fmt::format("no such overload: ?: on a {} condition", value_kind(cond)));
      return eval(*n.args[*b ? 1 : 2], c);
    }
    case Node::kAnd:
    case Node::kOr: {
      const bool is_and = n.kind == Node::kAnd;
      Value l = as_bool_operand(*n.args[0], c);
      if (const bool* b = std::get_if<bool>(&l.v); b && *b != is_and) return l;  // false && _, true || _
      if (c.exceeded) return err(kCostExceeded);
      Value r = as_bool_operand(*n.args[1], c);
      if (const bool* b = std::get_if<bool>(&r.v); b && *b != is_and) return r;  // an error on the left is absorbed
      if (c.exceeded) return err(kCostExceeded);
      return l.is_err() ? l : r;
    }
    case Node::kNot: {
      Value v = eval(*n.args[0], c);
      if (v.is_err()) return v;
      if (const bool* b = std::get_if<bool>(&v.v)) return boolean(!*b);
      return no_overload("!_", {&v});
    }
    case Node::kNeg: {
      Value v = eval(*n.args[0], c);
      if (v.is_err()) return v;
      if (auto i = std::get_if<int64_t>(&v.v)) return checked_int(-static_cast<__int128>(*i));
      if (auto d = std::get_if<double>(&v.v)) return Value{-*d};
      return no_overload("-_", {&v});
    }
    case Node::kBinary: {
      Value l = eval(*n.args[0], c);
      if (l.is_err()) return l;
      Value r = eval(*n.args[1], c);
      if (r.is_err()) return r;
      const std::string& op = n.name;
      if (op == "+" || op == "-" || op == "*" || op == "/" || op == "%") return arith(op, l, r, c);
      return relation(op, l, r, c);
    }
    case Node::kCall: {
      std::vector<Value> args;
      args.reserve(n.args.size());
      for (const auto& x : n.args) {
        args.push_back(eval(*x, c));
        if (args.back().is_err()) return args.back();
      }
      Value v = call(n, args, c);
      return c.exceeded ? err(kCostExceeded) : v;
    }
    case Node::kBind: {
      Value init = eval(*n.args[0], c);
      c.vars.emplace_back(n.var, std::move(init));
      Value v = eval(*n.args[1], c);
      c.vars.pop_back();
      return v;
    }
    case Node::kComp: {
      Value range = eval(*n.args[0], c);
      if (range.is_err()) return range;
      std::vector<Value> items;
      if (auto l = std::get_if<ListP>(&range.v)) {
        items = **l;
      } else if (auto m = std::get_if<MapP>(&range.v)) {
        for (const auto& [k, v] : (*m)->entries) items.push_back(k);
      } else {
        return err(fmt::format("no such overload: {}() on {}", n.name, value_kind(range)));
      }
      auto out = std::make_shared<List>();
      int64_t count = 0;
      std::optional<Value> first_error;
      for (auto& item : items) {
        c.vars.emplace_back(n.var, item);
        Value v = eval(*n.args[1], c);
        Value mapped;
        if (n.name == "map" && n.args.size() == 3 && !v.is_err()) {
          if (const bool* keep = std::get_if<bool>(&v.v); keep && *keep) mapped = eval(*n.args[2], c);
        }
        c.vars.pop_back();
        if (c.exceeded) return err(kCostExceeded);
        if (n.name == "map") {
          if (v.is_err()) return v;
          if (n.args.size() == 2) {
            out->push_back(std::move(v));
            continue;
          }
          const bool* keep = std::get_if<bool>(&v.v);
          if (keep == nullptr) return err("no such overload: map() filter is not a bool");
          if (*keep) {
            if (mapped.is_err()) return mapped;
            out->push_back(std::move(mapped));
          }
          continue;
        }
        if (v.is_err()) {
          if (!first_error) first_error = v;
          if (n.name == "filter" || n.name == "exists_one") return v;
          continue;
        }
        const bool* b = std::get_if<bool>(&v.v);
        if (b == nullptr) return err(fmt::format("no such overload: {}() predicate gave {}", n.name, value_kind(v)));
        if (n.name == "all" && !*b) return boolean(false);
        if (n.name == "exists" && *b) return boolean(true);
        if (n.name == "exists_one" && *b) ++count;
        if (n.name == "filter" && *b) out->push_back(item);
      }
      if (n.name == "all" || n.name == "exists") return first_error ? *first_error : boolean(n.name == "all");
      if (n.name == "exists_one") return boolean(count == 1);
      return Value{ListP(std::move(out))};
    }
  }
  return err("internal: unknown node");
}

// device.attributes / device.capacity: domain -> name -> value; bare names are the driver's.
template <typename M, typename F>
Value grouped(const M& in, const std::string& driver, F&& convert) {
  std::map<std::string, std::shared_ptr<MapData>> domains;
  for (const auto& [qualified, value] : in) {
    const size_t slash = qualified.rfind('/');
    const std::string domain = slash == std::string::npos ? driver : qualified.substr(0, slash);
    const std::string name = slash == std::string::npos ? qualified : qualified.substr(slash + 1);
    auto& d = domains[domain];
    if (!d) d = std::make_shared<MapData>();
    d->entries.emplace_back(Value{name}, convert(value));
  }
  auto out = std::make_shared<MapData>();
  out->missing_is_empty_map = true;
  for (auto& [domain, d] : domains) out->entries.emplace_back(Value{domain}, Value{MapP(std::move(d))});
  return Value{MapP(std::move(out))};
}

void capacities(const Node& n, std::vector<std::string>& out) {
  // device.capacity["domain"].name
  if (n.kind == Node::kSelect && n.args[0]->kind == Node::kIndex) {
    const Node& idx = *n.args[0];
    if (idx.args[0]->kind == Node::kSelect && idx.args[0]->name == "capacity" && idx.args[0]->args[0]->kind == Node::kIdent &&
        idx.args[0]->args[0]->name == "device" && idx.args[1]->kind == Node::kLit) {
      if (auto d = std::get_if<std::string>(&idx.args[1]->lit.v)) out.push_back(*d + "/" + n.name);
    }
  }
  for (const auto& a : n.args) capacities(*a, out);
}

}  // namespace

const char* value_kind(const Value& v) {
  return std::visit(
      [](const auto& x) -> const char* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "null_type";
        if constexpr (std::is_same_v<T, bool>) return "bool";
        if constexpr (std::is_same_v<T, int64_t>) return "int";
        if constexpr (std::is_same_v<T, uint64_t>) return "uint";
        if constexpr (std::is_same_v<T, double>) return "double";
        if constexpr (std::is_same_v<T, std::string>) return "string";
        if constexpr (std::is_same_v<T, ListP>) return "list";
        if constexpr (std::is_same_v<T, MapP>) return "map";
        if constexpr (std::is_same_v<T, k8s::Quantity>) return "kubernetes.Quantity";
        if constexpr (std::is_same_v<T, Semver>) return "kubernetes.Semver";
        return "error";
      },
      v.v);
}

Result<Semver> Semver::parse(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return fail(ErrorCode::kInvalidArgument, "invalid semver '{}': {}", text.substr(0, 64), why);
  };
  Semver v;
  std::string_view rest = text;
  const auto number = [&](uint64_t& out) -> bool {
    size_t i = 0;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
    if (i == 0 || (i > 1 && rest[0] == '0')) return false;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + i, out);
    if (ec != std::errc()) return false;
    rest.remove_prefix(i);
    return true;
  };
  if (!number(v.major) || !rest.starts_with('.')) return bad("want MAJOR.MINOR.PATCH");
  rest.remove_prefix(1);
  if (!number(v.minor) || !rest.starts_with('.')) return bad("want MAJOR.MINOR.PATCH");
  rest.remove_prefix(1);
  if (!number(v.patch)) return bad("want MAJOR.MINOR.PATCH");
  const auto idents = [&](std::string& out, bool pre) -> bool {
    size_t i = 0;
    while (i < rest.size() && rest[i] != '+') ++i;
    out = std::string(rest.substr(0, i));
    rest.remove_prefix(i);
    size_t start = 0;
    while (true) {
      const size_t dot = out.find('.', start);
      const std::string_view id = std::string_view(out).substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (id.empty()) return false;
      bool numeric = true;
      for (char ch : id) {
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') return false;
        numeric = numeric && std::isdigit(static_cast<unsigned char>(ch));
      }
      if (pre && numeric && id.size() > 1 && id[0] == '0') return false;
      if (dot == std::string::npos) return true;
      start = dot + 1;
    }
  };
  if (rest.starts_with('-')) {
    rest.remove_prefix(1);
    if (!idents(v.pre, true)) return bad("bad pre-release");
  }
  if (rest.starts_with('+')) {
    rest.remove_prefix(1);
    std::string build(rest);
    rest = build;
    if (!idents(v.build, false)) return bad("bad build metadata");
    rest = {};
  }
  if (!rest.empty()) return bad("unexpected text after the version");
  return v;
}

int Semver::compare(const Semver& o) const {
  for (auto [a, b] : {std::pair{major, o.major}, std::pair{minor, o.minor}, std::pair{patch, o.patch}})
    if (a != b) return a < b ? -1 : 1;
  if (pre.empty() || o.pre.empty()) return pre.empty() == o.pre.empty() ? 0 : pre.empty() ? 1 : -1;
  size_t i = 0, j = 0;
  while (true) {
    if (i >= pre.size() + 1 && j >= o.pre.size() + 1) return 0;
    if (i >= pre.size() + 1) return -1;
    if (j >= o.pre.size() + 1) return 1;
    const size_t ei = std::min(pre.find('.', i), pre.size()), ej = std::min(o.pre.find('.', j), o.pre.size());
    const std::string_view x = std::string_view(pre).substr(i, ei - i), y = std::string_view(o.pre).substr(j, ej - j);
    const bool nx = std::all_of(x.begin(), x.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    const bool ny = std::all_of(y.begin(), y.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    if (nx && ny) {
      if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
      if (x != y) return x < y ? -1 : 1;
    } else if (nx != ny) {
      return nx ? -1 : 1;
    } else if (x != y) {
      return x < y ? -1 : 1;
    }
    i = ei + 1;
    j = ej + 1;
  }
}

std::string Semver::to_string() const {
  std::string s = fmt::format("{}.{}.{}", major, minor, patch);
  if (!pre.empty()) s += "-" + pre;
  if (!build.empty()) s += "+" + build;
  return s;
}

Result<Program> compile(std::string_view expression) {
  auto root = parse(expression);
  if (!root) return std::unexpected(root.error());
  Program p;
  p.source_ = std::string(expression);
  p.root_ = std::move(*root);
  return p;
}

Result<bool> Program::matches(const DeviceInput& d, uint64_t cost_limit, uint64_t* cost) const {
  auto dev = std::make_shared<MapData>();
  dev->entries.emplace_back(Value{std::string("driver")}, Value{d.driver});
  dev->entries.emplace_back(Value{std::string("attributes")}, grouped(d.attributes, d.driver, [](const Attribute& a) {
                              return std::visit([](const auto& x) { return Value{x}; }, a);
                            }));
  dev->entries.emplace_back(Value{std::string("capacity")},
                            grouped(d.capacity, d.driver, [](const k8s::Quantity& q) { return Value{q}; }));
  dev->entries.emplace_back(Value{std::string("allowMultipleAllocations")}, Value{d.allow_multiple_allocations});
  const Value device{MapP(std::move(dev))};
  Ctx c;
  c.device = &device;
  c.limit = cost_limit;
  const Value v = eval(*root_, c);
  if (cost != nullptr) *cost = c.cost;
  if (c.exceeded) return fail(ErrorCode::kInvalidArgument, "{}", kCostExceeded);
  if (const auto* e = std::get_if<Err>(&v.v)) return fail(ErrorCode::kInvalidArgument, "{}", e->message);
  if (const bool* b = std::get_if<bool>(&v.v)) return *b;
  return fail(ErrorCode::kInvalidArgument, "the expression gave a {}, not a bool", value_kind(v));
}

std::vector<std::string> Program::capacities_read() const {
  std::vector<std::string> out;
  capacities(*root_, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

DeviceInput device_input(const k8s::Device& d, std::string_view driver) {
  DeviceInput in;
  in.driver = std::string(driver);
  for (const auto& [name, a] : d.attributes) {
    if (a.value == nullptr || !a.value->is_scalar() || a.value->is_null()) continue;
    if (a.type == "int") {
      if (auto i = a.value->as_int()) in.attributes[std::string(name)] = *i;
    } else if (a.type == "bool") {
      if (auto b = a.value->as_bool()) in.attributes[std::string(name)] = *b;
    } else if (a.type == "version") {
      if (auto v = Semver::parse(a.value->text())) in.attributes[std::string(name)] = *v;
    } else if (a.type == "string" && a.value->is_string()) {
      in.attributes[std::string(name)] = std::string(a.value->text());
    }
  }
  for (const auto& [name, q] : d.capacity) in.capacity[std::string(name)] = *q;
  return in;
}

}  // namespace kgpu::cel
