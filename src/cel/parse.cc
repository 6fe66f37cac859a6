// The CEL lexer, parser and type checker: source text to a typed Node tree.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <optional>

#include "cel/value.h"
#include "common/strings.h"

namespace kgpu::cel {

const char* kind_name(K k) {
  switch (k) {
    case K::kDyn: return "dyn";
    case K::kNull: return "null_type";
    case K::kBool: return "bool";
    case K::kInt: return "int";
    case K::kUint: return "uint";
    case K::kDouble: return "double";
    case K::kString: return "string";
    case K::kList: return "list";
    case K::kMap: return "map";
    case K::kQuantity: return "kubernetes.Quantity";
    case K::kSemver: return "kubernetes.Semver";
    case K::kDevice: return "device";
    case K::kCelNs: return "cel";
  }
  return "?";
}

namespace {

using MutableNodeP = std::shared_ptr<Node>;

struct Token {
  enum Kind { kIdent, kInt, kUint, kDouble, kString, kOp, kEnd } kind = kEnd;
  std::string text;  // identifier, operator, or the decoded string
  uint64_t u = 0;    // int / uint literal magnitude
  double d = 0;
  size_t pos = 0;
};

struct Failure {
  std::string message;
};

bool is_numeric(K k) { return k == K::kInt || k == K::kUint || k == K::kDouble; }

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip_space();
      Token t;
      t.pos = i_;
      if (i_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      const char c = s_[i_];
      const bool after_value = !out.empty() && (out.back().kind != Token::kOp || out.back().text == ")" ||
                                                out.back().text == "]" || out.back().text == "}");
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i_;
        while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
        const std::string_view word = s_.substr(i_, j - i_);
        if (j < s_.size() && (s_[j] == '"' || s_[j] == '\'') && (word == "r" || word == "R")) {
          i_ = j;
          t.kind = Token::kString;
          t.text = string_lit(true);
        } else if (j < s_.size() && (s_[j] == '"' || s_[j] == '\'') &&
                   (word == "b" || word == "B" || word == "br" || word == "rb" || word == "bR" || word == "Rb" ||
                    word == "BR" || word == "RB" || word == "Br" || word == "rB")) {
          fail(i_, "bytes literals are not supported in device selectors");
        } else {
          t.kind = Token::kIdent;
          t.text = std::string(word);
          i_ = j;
        }
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && !after_value && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        number(t);
      } else if (c == '"' || c == '\'') {
        t.kind = Token::kString;
        t.text = string_lit(false);
      } else {
        static constexpr std::array<std::string_view, 24> kOps{"||", "&&", "==", "!=", "<=", ">=", "<", ">",
                                                               "+",  "-",  "*",  "/",  "%",  "!",  "?", ":",
                                                               ".",  ",",  "(",  ")",  "[",  "]",  "{", "}"};
        const auto op = std::find_if(kOps.begin(), kOps.end(), [&](std::string_view o) { return s_.substr(i_).starts_with(o); });
        if (op == kOps.end()) fail(i_, fmt::format("unexpected character '{}'", c));
        t.kind = Token::kOp;
        t.text = std::string(*op);
        i_ += op->size();
      }
      out.push_back(std::move(t));
    }
  }

  [[noreturn]] static void fail(size_t pos, const std::string& what) {
    throw Failure{fmt::format("column {}: {}", pos + 1, what)};
  }

 private:
  void skip_space() {
    while (i_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[i_]))) {
        ++i_;
      } else if (s_.substr(i_).starts_with("//")) {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        return;
      }
    }
  }

  void number(Token& t) {
    const size_t start = i_;
    if (s_.substr(i_).starts_with("0x") || s_.substr(i_).starts_with("0X")) {
      size_t j = i_ + 2;
      uint64_t v = 0;
      while (j < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[j]))) {
        const int dgt = std::isdigit(static_cast<unsigned char>(s_[j])) ? s_[j] - '0' : (std::tolower(s_[j]) - 'a' + 10);
        if (v > (std::numeric_limits<uint64_t>::max() >> 4)) fail(start, "integer literal out of range");
        v = v * 16 + static_cast<uint64_t>(dgt);
        ++j;
      }
      if (j == i_ + 2) fail(start, "hexadecimal literal without digits");
      i_ = j;
      t.u = v;
    } else {
      size_t j = i_;
      while (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) ++j;
      bool is_double = false;
      if (j < s_.size() && s_[j] == '.' && j + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j + 1]))) {
        is_double = true;
        ++j;
        while (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) ++j;
      }
      if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
        size_t k = j + 1;
        if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
        if (k < s_.size() && std::isdigit(static_cast<unsigned char>(s_[k]))) {
          is_double = true;
          j = k;
          while (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) ++j;
        }
      }
      const std::string text(s_.substr(i_, j - i_));
      i_ = j;
      if (is_double) {
        t.kind = Token::kDouble;
        t.d = std::strtod(text.c_str(), nullptr);
        return;
      }
      uint64_t v = 0;
      for (char ch : text) {
        if (v > (std::numeric_limits<uint64_t>::max() - 9) / 10) fail(start, "integer literal out of range");
        v = v * 10 + static_cast<uint64_t>(ch - '0');
      }
      t.u = v;
    }
    t.kind = Token::kInt;
    if (i_ < s_.size() && (s_[i_] == 'u' || s_[i_] == 'U')) {
      t.kind = Token::kUint;
      ++i_;
    }
  }

  std::string string_lit(bool raw) {
    const size_t start = i_;
    const char q = s_[i_];
    const bool triple = s_.substr(i_).starts_with(std::string(3, q));
    i_ += triple ? 3 : 1;
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail(start, "unterminated string literal");
      if (triple ? s_.substr(i_).starts_with(std::string(3, q)) : s_[i_] == q) {
        i_ += triple ? 3 : 1;
        return out;
      }
      const char c = s_[i_];
      if (!triple && c == '\n') fail(start, "newline in a string literal");
      if (c != '\\' || raw) {
        out += c;
        ++i_;
        continue;
      }
      if (i_ + 1 >= s_.size()) fail(i_, "unterminated escape sequence");
      const char e = s_[i_ + 1];
      i_ += 2;
      switch (e) {
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case '\\': case '"': case '\'': case '`': case '?': out += e; break;
        case 'x': case 'X': case 'u': case 'U': {
          const size_t n = (e == 'x' || e == 'X') ? 2 : e == 'u' ? 4 : 8;
          if (i_ + n > s_.size()) fail(i_ - 2, "truncated escape sequence");
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = s_[i_ + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail(i_ - 2, "bad hexadecimal escape");
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
          }
          i_ += n;
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(i_ - n - 2, "escape is not a valid code point");
          append_utf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '3' && i_ + 1 < s_.size() && s_[i_] >= '0' && s_[i_] <= '7' && s_[i_ + 1] >= '0' &&
              s_[i_ + 1] <= '7') {
            append_utf8(out, static_cast<uint32_t>((e - '0') * 64 + (s_[i_] - '0') * 8 + (s_[i_ + 1] - '0')));
            i_ += 2;
            break;
          }
          fail(i_ - 2, fmt::format("unknown escape sequence '\\{}'", e));
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

struct Sig {
  std::string_view name;
  K recv;  // kDyn: a global function
  std::vector<K> args;
  Type result;
};

const std::vector<Sig>& signatures() {
  static const std::vector<Sig> kSigs = [] {
    const Type b = Type::of(K::kBool), i = Type::of(K::kInt), s = Type::of(K::kString), q = Type::of(K::kQuantity),
               v = Type::of(K::kSemver);
    return std::vector<Sig>{
        {"size", K::kDyn, {K::kString}, i}, {"size", K::kDyn, {K::kList}, i}, {"size", K::kDyn, {K::kMap}, i},
        {"size", K::kString, {}, i}, {"size", K::kList, {}, i}, {"size", K::kMap, {}, i},
        {"int", K::kDyn, {K::kInt}, i}, {"int", K::kDyn, {K::kUint}, i}, {"int", K::kDyn, {K::kDouble}, i},
        {"int", K::kDyn, {K::kString}, i},
        {"uint", K::kDyn, {K::kInt}, Type::of(K::kUint)}, {"uint", K::kDyn, {K::kUint}, Type::of(K::kUint)},
        {"uint", K::kDyn, {K::kDouble}, Type::of(K::kUint)}, {"uint", K::kDyn, {K::kString}, Type::of(K::kUint)},
        {"double", K::kDyn, {K::kInt}, Type::of(K::kDouble)}, {"double", K::kDyn, {K::kUint}, Type::of(K::kDouble)},
        {"double", K::kDyn, {K::kDouble}, Type::of(K::kDouble)}, {"double", K::kDyn, {K::kString}, Type::of(K::kDouble)},
        {"string", K::kDyn, {K::kInt}, s}, {"string", K::kDyn, {K::kUint}, s}, {"string", K::kDyn, {K::kDouble}, s},
        {"string", K::kDyn, {K::kString}, s}, {"string", K::kDyn, {K::kBool}, s},
        {"bool", K::kDyn, {K::kBool}, b}, {"bool", K::kDyn, {K::kString}, b},
        {"quantity", K::kDyn, {K::kString}, q}, {"isQuantity", K::kDyn, {K::kString}, b},
        {"semver", K::kDyn, {K::kString}, v}, {"isSemver", K::kDyn, {K::kString}, b},
        {"matches", K::kDyn, {K::kString, K::kString}, b},
        {"contains", K::kString, {K::kString}, b}, {"startsWith", K::kString, {K::kString}, b},
        {"endsWith", K::kString, {K::kString}, b}, {"matches", K::kString, {K::kString}, b},
        {"lowerAscii", K::kString, {}, s}, {"upperAscii", K::kString, {}, s}, {"trim", K::kString, {}, s},
        {"charAt", K::kString, {K::kInt}, s}, {"indexOf", K::kString, {K::kString}, i},
        {"indexOf", K::kString, {K::kString, K::kInt}, i}, {"lastIndexOf", K::kString, {K::kString}, i},
        {"lastIndexOf", K::kString, {K::kString, K::kInt}, i}, {"substring", K::kString, {K::kInt}, s},
        {"substring", K::kString, {K::kInt, K::kInt}, s}, {"replace", K::kString, {K::kString, K::kString}, s},
        {"replace", K::kString, {K::kString, K::kString, K::kInt}, s},
        {"split", K::kString, {K::kString}, Type::list(s)}, {"split", K::kString, {K::kString, K::kInt}, Type::list(s)},
        {"join", K::kList, {}, s}, {"join", K::kList, {K::kString}, s},
        {"compareTo", K::kQuantity, {K::kQuantity}, i}, {"isGreaterThan", K::kQuantity, {K::kQuantity}, b},
        {"isLessThan", K::kQuantity, {K::kQuantity}, b}, {"isInteger", K::kQuantity, {}, b},
        {"asInteger", K::kQuantity, {}, i}, {"asApproximateFloat", K::kQuantity, {}, Type::of(K::kDouble)},
        {"sign", K::kQuantity, {}, i}, {"add", K::kQuantity, {K::kQuantity}, q}, {"add", K::kQuantity, {K::kInt}, q},
        {"sub", K::kQuantity, {K::kQuantity}, q}, {"sub", K::kQuantity, {K::kInt}, q},
        {"compareTo", K::kSemver, {K::kSemver}, i}, {"isGreaterThan", K::kSemver, {K::kSemver}, b},
        {"isLessThan", K::kSemver, {K::kSemver}, b}, {"major", K::kSemver, {}, i}, {"minor", K::kSemver, {}, i},
        {"patch", K::kSemver, {}, i},
    };
  }();
  return kSigs;
}

bool fits(K have, K want) { return have == K::kDyn || have == want; }

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  MutableNodeP parse() {
    MutableNodeP n = expr();
    if (peek().kind != Token::kEnd) fail(peek().pos, fmt::format("unexpected '{}'", peek().text));
    if (n->type.k != K::kBool && n->type.k != K::kDyn)
      fail(0, fmt::format("the expression is of type {}, a selector must give a bool", kind_name(n->type.k)));
    return n;
  }

 private:
  [[noreturn]] static void fail(size_t pos, const std::string& what) { Lexer::fail(pos, what); }

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::kOp && peek(ahead).text == op;
  }
  bool accept(std::string_view op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  void expect(std::string_view op) {
    if (!accept(op))
      fail(peek().pos, fmt::format("expected '{}', found {}", op,
                                   peek().kind == Token::kEnd ? "the end" : "'" + peek().text + "'"));
  }

  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) fail(p_.peek().pos, fmt::format("expression nested deeper than {}", kMaxDepth));
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  static MutableNodeP make(Node::Kind k, size_t pos, Type type, std::vector<std::shared_ptr<const Node>> args = {}) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->pos = pos;
    n->type = std::move(type);
    n->args = std::move(args);
    return n;
  }

  MutableNodeP expr() {
    Depth d(*this);
    MutableNodeP c = or_expr();
    if (!accept("?")) return c;
    const size_t pos = t_[i_ - 1].pos;
    need_bool(*c, "?:");
    MutableNodeP a = or_expr();
    expect(":");
    MutableNodeP b = expr();
    Type t = a->type.k == b->type.k ? a->type : Type{};
    if (a->type.k != K::kDyn && b->type.k != K::kDyn && a->type.k != b->type.k && a->type.k != K::kNull &&
        b->type.k != K::kNull)
      fail(pos, fmt::format("the branches of ?: have different types ({} and {})", kind_name(a->type.k), kind_name(b->type.k)));
    return make(Node::kCond, pos, t, {c, a, b});
  }

  void need_bool(const Node& n, std::string_view op) {
    if (n.type.k != K::kBool && n.type.k != K::kDyn)
      fail(n.pos, fmt::format("found no matching overload for '{}' applied to {}", op, kind_name(n.type.k)));
  }

  MutableNodeP or_expr() {
    MutableNodeP l = and_expr();
    while (is_op("||")) {
      const size_t pos = peek().pos;
      ++i_;
      MutableNodeP r = and_expr();
      need_bool(*l, "_||_");
      need_bool(*r, "_||_");
      l = make(Node::kOr, pos, Type::of(K::kBool), {l, r});
    }
    return l;
  }

  MutableNodeP and_expr() {
    MutableNodeP l = relation();
    while (is_op("&&")) {
      const size_t pos = peek().pos;
      ++i_;
      MutableNodeP r = relation();
      need_bool(*l, "_&&_");
      need_bool(*r, "_&&_");
      l = make(Node::kAnd, pos, Type::of(K::kBool), {l, r});
    }
    return l;
  }

  MutableNodeP relation() {
    MutableNodeP l = addition();
    while (true) {
      std::string op;
      if (peek().kind == Token::kIdent && peek().text == "in") {
        op = "in";
      } else {
        for (std::string_view o : {"==", "!=", "<=", ">=", "<", ">"})
          if (is_op(o)) op = std::string(o);
      }
      if (op.empty()) return l;
      const size_t pos = peek().pos;
      ++i_;
      MutableNodeP r = addition();
      check_relation(op, *l, *r, pos);
      auto n = make(Node::kBinary, pos, Type::of(K::kBool), {l, r});
      n->name = op;
      l = n;
    }
  }

  static void check_relation(const std::string& op, const Node& l, const Node& r, size_t pos) {
    const K a = l.type.k, b = r.type.k;
    const auto bad = [&] {
      fail(pos, fmt::format("found no matching overload for '_{}_' applied to '({}, {})'", op, kind_name(a), kind_name(b)));
    };
    if (op == "in") {
      if (b != K::kDyn && b != K::kList && b != K::kMap) bad();
      return;
    }
    if (a == K::kDyn || b == K::kDyn) return;
    if (op == "==" || op == "!=") {
      if (a != b && !(is_numeric(a) && is_numeric(b))) bad();
      return;
    }
    const bool ok = (is_numeric(a) && is_numeric(b)) || (a == b && (a == K::kString || a == K::kBool));
    if (!ok) bad();
  }

  MutableNodeP addition() {
    MutableNodeP l = multiplication();
    while (is_op("+") || is_op("-")) {
      const size_t pos = peek().pos;
      const std::string op = peek().text;
      ++i_;
      MutableNodeP r = multiplication();
      l = arith(op, l, r, pos);
    }
    return l;
  }

  MutableNodeP multiplication() {
    MutableNodeP l = unary();
    while (is_op("*") || is_op("/") || is_op("%")) {
      const size_t pos = peek().pos;
      const std::string op = peek().text;
      ++i_;
      MutableNodeP r = unary();
      l = arith(op, l, r, pos);
    }
    return l;
  }

  static MutableNodeP arith(const std::string& op, MutableNodeP l, MutableNodeP r, size_t pos) {
    const K a = l->type.k, b = r->type.k;
    Type t;
    if (a != K::kDyn && b != K::kDyn) {
      bool ok = a == b && (is_numeric(a) || (op == "+" && (a == K::kString || a == K::kList)));
      if (op == "%" && a == K::kDouble) ok = false;
      if (!ok)
        fail(pos, fmt::format("found no matching overload for '_{}_' applied to '({}, {})'", op, kind_name(a), kind_name(b)));
      t = l->type;
    } else if (a != K::kDyn) {
      t = l->type;
    } else {
      t = r->type;
    }
    auto n = make(Node::kBinary, pos, t, {l, r});
    n->name = op;
    return n;
  }

  MutableNodeP unary() {
    Depth d(*this);
    if (is_op("!")) {
      const size_t pos = peek().pos;
      ++i_;
      MutableNodeP x = unary();
      need_bool(*x, "!_");
      return make(Node::kNot, pos, Type::of(K::kBool), {x});
    }
    if (is_op("-")) {
      const size_t pos = peek().pos;
      ++i_;
      if (peek().kind == Token::kInt) {  // a negative literal: -9223372036854775808 is in range
        const Token& t = peek();
        if (t.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1) fail(t.pos, "integer literal out of range");
        ++i_;
        auto n = make(Node::kLit, pos, Type::of(K::kInt));
        n->lit.v = static_cast<int64_t>(0 - t.u);
        return member(n);
      }
      MutableNodeP x = unary();
      if (x->type.k != K::kDyn && x->type.k != K::kInt && x->type.k != K::kDouble)
        fail(pos, fmt::format("found no matching overload for '-_' applied to {}", kind_name(x->type.k)));
      return make(Node::kNeg, pos, x->type, {x});
    }
    return member(primary());
  }

  // The static type of `operand.field`.
  static Type select_type(const Node& operand, const std::string& field, size_t pos) {
    switch (operand.type.k) {
      case K::kDevice:
        if (field == "driver") return Type::of(K::kString);
        if (field == "attributes") return Type::map(Type::map(Type{}));
        if (field == "capacity") return Type::map(Type::map(Type::of(K::kQuantity)));
        if (field == "allowMultipleAllocations") return Type::of(K::kBool);
        fail(pos, fmt::format("undefined field '{}' (device has driver, attributes, capacity, allowMultipleAllocations)", field));
      case K::kMap:
        return operand.type.element();
      case K::kDyn:
        return Type{};
      default:
        fail(pos, fmt::format("type '{}' does not support field selection ('.{}')", kind_name(operand.type.k), field));
    }
  }

  MutableNodeP member(MutableNodeP n) {
    while (true) {
      if (accept(".")) {
        if (peek().kind != Token::kIdent) fail(peek().pos, "expected a field or method name after '.'");
        const Token name = peek();
        ++i_;
        if (is_op("(")) {
          n = method(n, name);
        } else {
          if (n->type.k == K::kCelNs) fail(name.pos, "cel." + name.text + " is not supported (only cel.bind)");
          auto s = make(Node::kSelect, name.pos, select_type(*n, name.text, name.pos), {n});
          s->name = name.text;
          n = s;
        }
      } else if (is_op("[")) {
        const size_t pos = peek().pos;
        ++i_;
        MutableNodeP idx = expr();
        expect("]");
        Type t;
        if (n->type.k == K::kList) {
          if (idx->type.k != K::kDyn && idx->type.k != K::kInt && idx->type.k != K::kUint)
            fail(pos, fmt::format("a list index must be an int, not {}", kind_name(idx->type.k)));
          t = n->type.element();
        } else if (n->type.k == K::kMap) {
          t = n->type.element();
        } else if (n->type.k != K::kDyn) {
          fail(pos, fmt::format("type '{}' does not support indexing", kind_name(n->type.k)));
        }
        n = make(Node::kIndex, pos, t, {n, idx});
      } else {
        return n;
      }
    }
  }

  std::string ident_arg() {
    if (peek().kind != Token::kIdent) fail(peek().pos, "expected a variable name");
    std::string v = peek().text;
    ++i_;
    return v;
  }

  MutableNodeP method(MutableNodeP target, const Token& name) {
    expect("(");
    const std::string& f = name.text;
    if (target->type.k == K::kCelNs) {
      if (f != "bind") fail(name.pos, "cel." + f + " is not supported (only cel.bind)");
      auto n = make(Node::kBind, name.pos, Type{});
      n->var = ident_arg();
      expect(",");
      MutableNodeP init = expr();
      expect(",");
      scope_.emplace_back(n->var, init->type);
      MutableNodeP body = expr();
      scope_.pop_back();
      expect(")");
      n->type = body->type;
      n->args = {init, body};
      return n;
    }
    static constexpr std::array<std::string_view, 5> kMacros{"all", "exists", "exists_one", "map", "filter"};
    if (std::find(kMacros.begin(), kMacros.end(), f) != kMacros.end()) {
      if (target->type.k != K::kDyn && target->type.k != K::kList && target->type.k != K::kMap)
        fail(name.pos, fmt::format("{}() needs a list or a map, not {}", f, kind_name(target->type.k)));
      auto n = make(Node::kComp, name.pos, Type{});
      n->name = f;
      n->var = ident_arg();
      expect(",");
      const Type var_type = target->type.k == K::kList ? target->type.element()
                            : target->type.k == K::kMap ? Type::of(K::kString)
                                                        : Type{};
      scope_.emplace_back(n->var, var_type);
      std::vector<std::shared_ptr<const Node>> args{target, expr()};
      if (accept(",")) args.push_back(expr());
      scope_.pop_back();
      expect(")");
      if (f == "map") {
        n->type = Type::list(args.back()->type);
        if (args.size() == 3) need_bool(*args[1], f);
      } else {
        if (args.size() != 2) fail(name.pos, fmt::format("{}() takes a variable and one expression", f));
        need_bool(*args[1], f);
        n->type = f == "filter" ? target->type : Type::of(K::kBool);
      }
      n->args = std::move(args);
      return n;
    }
    std::vector<std::shared_ptr<const Node>> args{target};
    call_args(args);
    return call(f, name.pos, std::move(args), true);
  }

  void call_args(std::vector<std::shared_ptr<const Node>>& args) {
    if (!accept(")")) {
      do {
        args.push_back(expr());
      } while (accept(","));
      expect(")");
    }
  }

  MutableNodeP call(const std::string& f, size_t pos, std::vector<std::shared_ptr<const Node>> args, bool has_target) {
    const K recv = has_target ? args[0]->type.k : K::kDyn;
    const size_t nargs = args.size() - (has_target ? 1 : 0);
    std::vector<const Sig*> named;
    for (const auto& s : signatures())
      if (s.name == f && (s.recv != K::kDyn) == has_target) named.push_back(&s);
    if (named.empty())
      fail(pos, fmt::format("undeclared reference to '{}'{}", f, has_target ? " (no such method)" : " (no such function)"));
    std::vector<const Sig*> fit;
    for (const Sig* s : named) {
      if (s->args.size() != nargs || (has_target && !fits(recv, s->recv))) continue;
      bool ok = true;
      for (size_t k = 0; k < nargs; ++k) ok = ok && fits(args[k + (has_target ? 1 : 0)]->type.k, s->args[k]);
      if (ok) fit.push_back(s);
    }
    if (fit.empty()) {
      std::vector<std::string> kinds;
      for (size_t k = has_target ? 1 : 0; k < args.size(); ++k) kinds.emplace_back(kind_name(args[k]->type.k));
      fail(pos, fmt::format("found no matching overload for '{}' applied to '{}({})'", f,
                            has_target ? std::string(kind_name(recv)) + "." : "", fmt::join(kinds, ", ")));
    }
    Type result = fit[0]->result;
    for (const Sig* s : fit)
      if (s->result.k != result.k) result = Type{};
    auto n = make(Node::kCall, pos, result, std::move(args));
    n->name = f;
    n->has_target = has_target;
    // A literal pattern is compiled here, so a bad one fails the compile and evaluation reuses it.
    const size_t pat = 1;  // the pattern: after the receiver, or the second argument
    if (f == "matches" && n->args.size() == 2 && n->args[pat]->kind == Node::kLit &&
        std::holds_alternative<std::string>(n->args[pat]->lit.v)) {
      RE2::Options o;
      o.set_log_errors(false);
      auto re = std::make_shared<const re2::RE2>(std::get<std::string>(n->args[pat]->lit.v), o);
      if (!re->ok()) fail(n->args[pat]->pos, fmt::format("invalid regular expression: {}", re->error()));
      n->regex = std::move(re);
    }
    return n;
  }

  MutableNodeP primary() {
    Depth d(*this);
    const Token t = peek();
    ++i_;
    switch (t.kind) {
      case Token::kInt: {
        if (t.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(t.pos, "integer literal out of range");
        auto n = make(Node::kLit, t.pos, Type::of(K::kInt));
        n->lit.v = static_cast<int64_t>(t.u);
        return n;
      }
      case Token::kUint: {
        auto n = make(Node::kLit, t.pos, Type::of(K::kUint));
        n->lit.v = t.u;
        return n;
      }
      case Token::kDouble: {
        auto n = make(Node::kLit, t.pos, Type::of(K::kDouble));
        n->lit.v = t.d;
        return n;
      }
      case Token::kString: {
        auto n = make(Node::kLit, t.pos, Type::of(K::kString));
        n->lit.v = t.text;
        return n;
      }
      case Token::kEnd:
        fail(t.pos, "unexpected end of the expression");
      case Token::kIdent:
        return identifier(t);
      case Token::kOp:
        break;
    }
    if (t.text == "(") {
      MutableNodeP n = expr();
      expect(")");
      return n;
    }
    if (t.text == "[") {
      std::vector<std::shared_ptr<const Node>> items;
      while (!accept("]")) {
        items.push_back(expr());
        if (!accept(",")) {
          expect("]");
          break;
        }
      }
      Type elem = items.empty() ? Type{} : items[0]->type;
      for (const auto& x : items)
        if (x->type.k != elem.k) elem = Type{};
      return make(Node::kList, t.pos, Type::list(elem), std::move(items));
    }
    if (t.text == "{") {
      std::vector<std::shared_ptr<const Node>> kv;
      while (!accept("}")) {
        MutableNodeP k = expr();
        if (k->type.k != K::kDyn && k->type.k != K::kString && k->type.k != K::kInt && k->type.k != K::kUint &&
            k->type.k != K::kBool)
          fail(k->pos, fmt::format("a map key must be a string, int, uint or bool, not {}", kind_name(k->type.k)));
        expect(":");
        kv.push_back(k);
        kv.push_back(expr());
        if (!accept(",")) {
          expect("}");
          break;
        }
      }
      Type val = kv.empty() ? Type{} : kv[1]->type;
      for (size_t k = 1; k < kv.size(); k += 2)
        if (kv[k]->type.k != val.k) val = Type{};
      return make(Node::kMap, t.pos, Type::map(val), std::move(kv));
    }
    if (t.text == ".") {  // a name from the root scope: .device
      if (peek().kind != Token::kIdent) fail(peek().pos, "expected a name after '.'");
      const Token name = peek();
      ++i_;
      return identifier(name);
    }
    fail(t.pos, fmt::format("unexpected '{}'", t.text));
  }

  MutableNodeP identifier(const Token& t) {
    static constexpr std::array<std::string_view, 19> kReserved{
        "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
        "loop", "package", "namespace", "return", "var", "void", "while", "in", "__proto__"};
    if (t.text == "true" || t.text == "false") {
      auto n = make(Node::kLit, t.pos, Type::of(K::kBool));
      n->lit.v = t.text == "true";
      return n;
    }
    if (t.text == "null") return make(Node::kLit, t.pos, Type::of(K::kNull));
    if (std::find(kReserved.begin(), kReserved.end(), t.text) != kReserved.end())
      fail(t.pos, fmt::format("reserved identifier '{}'", t.text));
    if (is_op("(")) {
      ++i_;
      if (t.text == "has") {
        MutableNodeP arg = expr();
        expect(")");
        if (arg->kind != Node::kSelect) fail(arg->pos, "invalid argument to has() macro: it takes a field selection (a.b)");
        auto n = make(Node::kHas, t.pos, Type::of(K::kBool), arg->args);
        n->name = arg->name;
        return n;
      }
      if (t.text == "dyn") {
        MutableNodeP arg = expr();
        expect(")");
        auto n = std::make_shared<Node>(*arg);
        n->type = Type{};
        return n;
      }
      std::vector<std::shared_ptr<const Node>> args;
      call_args(args);
      return call(t.text, t.pos, std::move(args), false);
    }
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
      if (it->first == t.text) {
        auto n = make(Node::kIdent, t.pos, it->second);
        n->name = t.text;
        return n;
      }
    }
    if (t.text == "device") {
      auto n = make(Node::kIdent, t.pos, Type::of(K::kDevice));
      n->name = t.text;
      return n;
    }
    if (t.text == "cel" && is_op(".")) return make(Node::kIdent, t.pos, Type::of(K::kCelNs));
    fail(t.pos, fmt::format("undeclared reference to '{}' (a selector sees only 'device')", t.text));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  std::vector<std::pair<std::string, Type>> scope_;
};

}  // namespace

Result<std::shared_ptr<const Node>> parse(std::string_view expression) {
  if (expression.size() > kMaxExpressionBytes)
    return fail(ErrorCode::kInvalidArgument, "the expression is {} bytes; at most {} bytes are allowed", expression.size(),
                kMaxExpressionBytes);
  try {
    Parser p(Lexer(expression).run());
    return std::shared_ptr<const Node>(p.parse());
  } catch (const Failure& f) {
    return fail(ErrorCode::kInvalidArgument, "{}", f.message);
  }
}

}  // namespace kgpu::cel
