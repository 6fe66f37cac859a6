// The main() of every fuzz target (tools/fuzz/README.md): a replay driver and a small
// coverage-guided mutation fuzzer around one LLVMFuzzerTestOneInput.
//
// Replay (the regression tests; plain and sanitizer builds):
//   fuzz_<target> [-timeout=S] PATH...
// runs the target once on every file named, and on every regular file of every directory named
// (not recursive, in name order). Exit 0 when every input returned; a crash, a sanitizer report or
// an input running longer than S seconds (default 10) ends the process with non-zero status and
// names the file.
//
// Fuzzing (run by tools/fuzz/run.sh):
//   fuzz_<target> -fuzz [-max_total_time=S] [-seed=N] [-corpus=DIR] [-artifact_dir=DIR] [-dict=FILE]
//                 [-max_len=BYTES] [-timeout=S] [-rss_limit_mb=MB] [-runs=N] SEED_PATH...
// loads the seeds (files, or the regular files of directories) and DIR's earlier corpus, then
// mutates inputs (bit and byte edits, inserts, deletes, repeats, splices between inputs, line
// edits, numbers, dictionary tokens) for S seconds or N runs. An input that reaches new coverage is
// kept (and written to DIR, named by its hash). Coverage comes from GCC's
// -fsanitize-coverage=trace-pc (the KGPU_FUZZ build option): every instrumented basic block calls
// __sanitizer_cov_trace_pc, defined here, which counts (previous block, block) pairs in a 64 Ki map;
// an input is new when a pair reaches a hit-count class (1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+)
// not seen before. Without that build option the fuzzer still runs, blind (only the seeds are kept).
// The random generator is seeded with N, so a run is reproducible for a deterministic target.
//
// A finding is written to ARTIFACT_DIR (default: the working directory) as crash-<hash> (a signal,
// a sanitizer report, an uncaught exception), timeout-<hash> (one input over S seconds, default 3)
// or oom-<hash> (resident memory over MB, default 2048, checked every 100 ms), where <hash> is the
// input's 64-bit FNV-1a in hex; the process then ends with non-zero status, as libFuzzer does. Under
// AddressSanitizer a single allocation over 512 MiB is a crash (max_allocation_size_mb).
//
// Status lines go to stderr: "#<execs> cov: <pairs> corp: <inputs> exec/s: <n>" every few seconds,
// and "kgpu-fuzz: done execs: <n> cov: <pairs> corp: <inputs> seconds: <s>" at the end.
//
// Threads: the target runs on the main thread; one watchdog thread reads a clock and /proc.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

#if defined(__SANITIZE_ADDRESS__)
// A single allocation over 512 MiB is a finding, not a slow swap; leaks are checked at exit.
extern "C" const char* __asan_default_options() {
  return "max_allocation_size_mb=512:allocator_may_return_null=0:quarantine_size_mb=64";
}
#endif

// A UBSan report aborts (SIGABRT), so the handler below saves the input, and prints its stack.
extern "C" const char* __ubsan_default_options() { return "abort_on_error=1:print_stacktrace=1"; }

// ---- Coverage (KGPU_FUZZ builds: everything but this file is compiled with -fsanitize-coverage=trace-pc) ----

namespace {
constexpr size_t kMapSize = 1 << 16;
uint8_t g_map[kMapSize];
uintptr_t g_prev = 0;
bool g_coverage_seen = false;  // the callback ran at least once: the build is instrumented
}  // namespace

extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_pc() {
  const auto pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const uintptr_t h = static_cast<uintptr_t>((static_cast<uint64_t>(pc) * 0x9E3779B97F4A7C15ull) >> 48);
  ++g_map[(h ^ g_prev) & (kMapSize - 1)];
  g_prev = h >> 1;
  g_coverage_seen = true;
}

namespace {

// ---- The input being run, for the signal handlers ----

const uint8_t* volatile g_cur_data = nullptr;
volatile size_t g_cur_size = 0;
const char* volatile g_cur_path = nullptr;  // replay: the file
std::atomic<int64_t> g_started_ns{0};       // 0 when no input is running
std::string g_artifact_dir = ".";
pthread_t g_main_thread;
int g_timeout_s = 3;
long g_rss_limit_mb = 2048;
std::atomic<bool> g_fuzzing{false};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Async-signal-safe output.
void say(const char* s) {
  if (s) (void)!write(2, s, strlen(s));
}

// Writes the running input to <artifact_dir>/<kind>-<hash> (async-signal-safe) and says where.
void save_current(const char* kind) {
  if (g_cur_path) {
    say("\nkgpu-fuzz: ");
    say(kind);
    say(" on input file ");
    say(g_cur_path);
    say("\n");
    return;
  }
  const uint8_t* data = g_cur_data;
  const size_t size = g_cur_size;
  if (!g_fuzzing.load() || data == nullptr) return;
  char path[4096];
  const uint64_t h = fnv1a(data, size);
  char hex[17];
  for (int i = 0; i < 16; ++i) hex[i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 15];
  hex[16] = 0;
  size_t n = 0;
  auto add = [&](const char* s) {
    while (*s && n + 1 < sizeof path) path[n++] = *s++;
  };
  add(g_artifact_dir.c_str());
  add("/");
  add(kind);
  add("-");
  add(hex);
  path[n] = 0;
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    size_t off = 0;
    while (off < size) {
      const ssize_t w = write(fd, data + off, size - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fd);
  }
  say("\nkgpu-fuzz: ");
  say(kind);
  say(": input saved to ");
  say(path);
  say("\n");
}

void on_fatal_signal(int sig) {
  save_current("crash");
  signal(sig, SIG_DFL);
  raise(sig);
}

#if defined(__SANITIZE_ADDRESS__)
void on_sanitizer_death() { save_current("crash"); }
#endif

std::atomic<int> g_stop_kind{0};  // 1 timeout, 2 oom: set by the watchdog before SIGUSR2

void on_watchdog_signal(int) {
  const int kind = g_stop_kind.load();
  say(kind == 1 ? "\nkgpu-fuzz: an input ran longer than the timeout; its stack:\n"
                : "\nkgpu-fuzz: resident memory over the limit\n");
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_print_stack_trace();
#endif
  save_current(kind == 1 ? "timeout" : "oom");
  _exit(kind == 1 ? 77 : 78);
}

long rss_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

void watchdog() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t started = g_started_ns.load();
    if (started != 0 && g_timeout_s > 0 && now_ns() - started > int64_t{g_timeout_s} * 1'000'000'000) {
      g_stop_kind = 1;
      pthread_kill(g_main_thread, SIGUSR2);
      return;
    }
    if (g_rss_limit_mb > 0 && rss_mb() > g_rss_limit_mb) {
      g_stop_kind = 2;
      pthread_kill(g_main_thread, SIGUSR2);
      return;
    }
  }
}

void run_one(const uint8_t* data, size_t size) {
  g_cur_data = data;
  g_cur_size = size;
  g_prev = 0;
  g_started_ns = now_ns();
  LLVMFuzzerTestOneInput(data, size);
  g_started_ns = 0;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

// The path itself for a file; a directory's regular files (not recursive), sorted.
std::vector<std::string> expand(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  if (!S_ISDIR(st.st_mode)) return {path};
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string p = path + "/" + e->d_name;
      struct stat fs {};
      if (e->d_name[0] != '.' && stat(p.c_str(), &fs) == 0 && S_ISREG(fs.st_mode)) out.push_back(p);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// libFuzzer/AFL dictionary: one token per line, `"text"` or `name="text"`, with \\ \" \xNN escapes;
// `#` comments and blank lines skipped.
std::vector<std::string> load_dict(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t q = line.find('"');
    if (line.empty() || line[0] == '#' || q == std::string::npos) continue;
    const size_t end = line.rfind('"');
    if (end <= q) continue;
    std::string tok;
    for (size_t i = q + 1; i < end; ++i) {
      if (line[i] == '\\' && i + 1 < end) {
        if (line[i + 1] == 'x' && i + 3 < end) {
          tok += static_cast<char>(std::stoi(line.substr(i + 2, 2), nullptr, 16));
          i += 3;
        } else {
          tok += line[++i];
        }
      } else {
        tok += line[i];
      }
    }
    if (!tok.empty()) out.push_back(tok);
  }
  return out;
}

// ---- Mutations ----

class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<std::string> dict) : rng_(seed), dict_(std::move(dict)) {}

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  // Applies 1, 2, 4 or 8 random edits to `s`, keeping it at most max_len bytes.
  void mutate(std::string& s, const std::vector<std::string>& corpus, size_t max_len) {
    const int edits = 1 << below(4);
    for (int i = 0; i < edits; ++i) edit(s, corpus);
    if (s.size() > max_len) s.resize(max_len);
  }

 private:
  static constexpr char kInteresting[] = {'\0', '\x01', '\x7f', '\x80', '\xff', '\n', '\r', '\t', ' ', ':', '-', '"',
                                          '\'', '{',    '}',    '[',    ']',    ',',  '#',  '&',  '*', '!', '|', '>',
                                          '\\', '0',    '9',    '.',    'e',    '%',  '?',  '@',  '=', '+', 'i'};
  static constexpr const char* kNumbers[] = {
      "0",  "-0",   "1",    "-1",   "2147483647",           "2147483648", "-2147483649", "4294967296",
      "9223372036854775807", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
      "1e308", "1e309", "-1e309", "1e-400", "0.5", "1.5e3", "0x10", "1_000", "NaN", "inf", ".inf", "00",
      "99999999999999999999999999999999999999", "0.000000000000000000001", "1e", "1e+", "3.", ".3"};

  size_t pos(const std::string& s) { return below(s.size() + 1); }

  void edit(std::string& s, const std::vector<std::string>& corpus) {
    switch (below(15)) {
      case 0:  // flip a bit
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:  // a random byte
        if (!s.empty()) s[below(s.size())] = static_cast<char>(below(256));
        break;
      case 2:  // an interesting byte, set or inserted
        if (!s.empty() && below(2)) {
          s[below(s.size())] = kInteresting[below(sizeof kInteresting)];
        } else {
          s.insert(pos(s), 1, kInteresting[below(sizeof kInteresting)]);
        }
        break;
      case 3: {  // insert random bytes or a run of one byte
        const size_t n = 1 + below(below(2) ? 8 : 64);
        std::string ins;
        const char c = static_cast<char>(below(256));
        for (size_t i = 0; i < n; ++i) ins += below(2) ? c : static_cast<char>(below(256));
        s.insert(pos(s), ins);
        break;
      }
      case 4: {  // delete a range
        if (s.empty()) break;
        const size_t at = below(s.size());
        const size_t n = 1 + below(std::min<size_t>(s.size() - at, below(4) ? 16 : s.size()));
        s.erase(at, n);
        break;
      }
      case 5: {  // copy a range of this input elsewhere in it
        if (s.empty()) break;
        const size_t at = below(s.size());
        const size_t n = 1 + below(std::min<size_t>(s.size() - at, 256));
        const std::string chunk = s.substr(at, n);
        s.insert(pos(s), chunk);
        break;
      }
      case 6: {  // splice: with another input (prefix of one + suffix of the other, or a chunk inserted)
        if (corpus.empty()) break;
        const std::string& o = corpus[below(corpus.size())];
        if (o.empty()) break;
        if (below(2)) {
          s = s.substr(0, pos(s)) + o.substr(below(o.size()));
        } else {
          const size_t at = below(o.size());
          s.insert(pos(s), o.substr(at, 1 + below(std::min<size_t>(o.size() - at, 512))));
        }
        break;
      }
      case 7:  // insert a dictionary token
      case 8:  // overwrite with a dictionary token
        if (dict_.empty()) {
          s.insert(pos(s), kNumbers[below(std::size(kNumbers))]);
        } else {
          const std::string& t = dict_[below(dict_.size())];
          const size_t at = pos(s);
          if (below(2) || at + t.size() > s.size()) {
            s.insert(at, t);
          } else {
            s.replace(at, t.size(), t);
          }
        }
        break;
      case 9: {  // replace a number (a run of digits) with an interesting one
        const size_t start = pos(s);
        const size_t d = s.find_first_of("0123456789", start);
        const std::string num = kNumbers[below(std::size(kNumbers))];
        if (d == std::string::npos) {
          s.insert(start, num);
        } else {
          size_t e = d;
          while (e < s.size() && ((s[e] >= '0' && s[e] <= '9') || s[e] == '.')) ++e;
          s.replace(d, e - d, num);
        }
        break;
      }
      case 10:
        line_edit(s, corpus);
        break;
      case 11: {  // repeat a chunk many times (nesting, long lines, limits)
        if (s.empty()) break;
        const size_t at = below(s.size());
        const std::string chunk = s.substr(at, 1 + below(std::min<size_t>(s.size() - at, 32)));
        const size_t times = 2 + below(below(4) ? 16 : 512);
        std::string ins;
        for (size_t i = 0; i < times; ++i) ins += chunk;
        s.insert(at, ins);
        break;
      }
      case 12:  // truncate
        if (!s.empty()) s.resize(below(s.size()));
        break;
      case 13:  // nudge a byte (+-1: digits, letters, indentation)
        if (!s.empty()) s[below(s.size())] += below(2) ? 1 : -1;
        break;
      case 14: {  // swap two ranges
        if (s.size() < 4) break;
        const size_t n = 1 + below(std::min<size_t>(s.size() / 2, 64));
        const size_t a = below(s.size() - n + 1), b = below(s.size() - n + 1);
        const std::string ca = s.substr(a, n);
        const std::string cb = s.substr(b, n);
        s.replace(a, n, cb);
        s.replace(b, n, ca);
        break;
      }
    }
  }

  // Text formats: delete, duplicate, swap or borrow a whole line; indent or dedent one.
  void line_edit(std::string& s, const std::vector<std::string>& corpus) {
    std::vector<std::string> lines;
    std::string cur;
    for (char c : s) {
      cur += c;
      if (c == '\n') lines.push_back(std::move(cur)), cur.clear();
    }
    if (!cur.empty()) lines.push_back(cur);
    if (lines.empty()) return;
    const size_t i = below(lines.size()), j = below(lines.size());
    switch (below(6)) {
      case 0:
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 1:
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i), lines[j]);
        break;
      case 2:
        std::swap(lines[i], lines[j]);
        break;
      case 3: {
        if (corpus.empty()) break;
        const std::string& o = corpus[below(corpus.size())];
        if (o.empty()) break;
        size_t start = o.rfind('\n', below(o.size()));
        start = start == std::string::npos ? 0 : start + 1;
        size_t end = o.find('\n', start);
        end = end == std::string::npos ? o.size() : end + 1;
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i), o.substr(start, end - start));
        break;
      }
      case 4:
        lines[i].insert(0, below(2) ? "  " : "- ");
        break;
      case 5:
        if (lines[i].starts_with("  ")) lines[i].erase(0, 2);
        break;
    }
    s.clear();
    for (const auto& l : lines) s += l;
  }

  std::mt19937_64 rng_;
  std::vector<std::string> dict_;
};

// Hit-count class of a map counter (AFL's buckets), as a bit.
uint8_t bucket(uint8_t n) {
  if (n == 0) return 0;
  if (n == 1) return 1;
  if (n == 2) return 2;
  if (n == 3) return 4;
  if (n < 8) return 8;
  if (n < 16) return 16;
  if (n < 32) return 32;
  if (n < 128) return 64;
  return 128;
}

// Folds the last run's map into `seen`; true when it set a new bit. Clears the map.
bool merge_coverage(uint8_t* seen) {
  bool fresh = false;
  auto* words = reinterpret_cast<uint64_t*>(g_map);
  for (size_t w = 0; w < kMapSize / 8; ++w) {
    if (words[w] == 0) continue;
    for (size_t i = w * 8; i < w * 8 + 8; ++i) {
      const uint8_t b = bucket(g_map[i]);
      if (b & ~seen[i]) {
        seen[i] |= b;
        fresh = true;
      }
    }
    words[w] = 0;
  }
  return fresh;
}

size_t count_bits(const uint8_t* seen) {
  size_t n = 0;
  for (size_t i = 0; i < kMapSize; ++i) n += static_cast<size_t>(__builtin_popcount(seen[i]));
  return n;
}

struct Flags {
  bool fuzz = false;
  double max_total_time = 60;
  uint64_t seed = 1;
  uint64_t runs = 0;  // 0: until the time is up
  std::string corpus, dict;
  size_t max_len = 64 * 1024;
  bool timeout_given = false;
  std::vector<std::string> paths;
};

bool flag(const std::string& a, const char* name, std::string& value) {
  const std::string prefix = std::string("-") + name + "=";
  if (!a.starts_with(prefix)) return false;
  value = a.substr(prefix.size());
  return true;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [-timeout=S] PATH...                (replay files and directories)\n"
               "       %s -fuzz [-max_total_time=S] [-seed=N] [-runs=N] [-corpus=DIR] [-artifact_dir=DIR]\n"
               "             [-dict=FILE] [-max_len=BYTES] [-timeout=S] [-rss_limit_mb=MB] SEED_PATH...\n",
               argv0, argv0);
  return 2;
}

int replay(const Flags& flags) {
  size_t n = 0;
  for (const auto& p : flags.paths) {
    const auto files = expand(p);
    if (files.empty()) std::fprintf(stderr, "kgpu-fuzz: %s: no such file or no files in it (skipped)\n", p.c_str());
    for (const auto& f : files) {
      std::string data;
      if (!read_file(f, data)) {
        std::fprintf(stderr, "kgpu-fuzz: cannot read %s\n", f.c_str());
        return 1;
      }
      g_cur_path = f.c_str();
      run_one(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      g_cur_path = nullptr;
      ++n;
    }
  }
  std::fprintf(stderr, "kgpu-fuzz: replayed %zu inputs, all returned\n", n);
  return 0;
}

int fuzz(const Flags& flags) {
  static uint8_t seen[kMapSize];
  Mutator mutator(flags.seed, flags.dict.empty() ? std::vector<std::string>{} : load_dict(flags.dict));
  std::vector<std::string> corpus;
  std::unordered_set<uint64_t> hashes;
  g_fuzzing = true;

  auto keep = [&](const std::string& input, bool write) {
    const uint64_t h = fnv1a(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    if (!hashes.insert(h).second) return;
    corpus.push_back(input);
    if (write && !flags.corpus.empty()) {
      char name[17];
      std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(h));
      std::ofstream(flags.corpus + "/" + name, std::ios::binary) << input;
    }
  };

  // Seeds and the earlier corpus: every one runs; seeds are kept even without new coverage.
  std::vector<std::string> inputs = flags.paths;
  if (!flags.corpus.empty()) {
    mkdir(flags.corpus.c_str(), 0755);
    inputs.push_back(flags.corpus);
  }
  size_t loaded = 0, too_long = 0;
  for (const auto& p : inputs) {
    for (const auto& f : expand(p)) {
      std::string data;
      if (!read_file(f, data)) continue;
      if (data.size() > flags.max_len) {
        ++too_long;
        continue;
      }
      run_one(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      merge_coverage(seen);
      keep(data, false);
      ++loaded;
    }
  }
  if (corpus.empty()) keep("", false);
  const bool guided = g_coverage_seen;
  std::fprintf(stderr, "kgpu-fuzz: %zu seed inputs (%zu over -max_len=%zu skipped), coverage %s, seed %llu\n", loaded,
               too_long, flags.max_len, guided ? "on" : "OFF (not a KGPU_FUZZ build: blind mutation)",
               static_cast<unsigned long long>(flags.seed));

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  uint64_t execs = 0;
  double next_report = 5;
  std::string input;
  while (true) {
    if (flags.runs ? execs >= flags.runs : elapsed() >= flags.max_total_time) break;
    // Recent finds are picked more often: half the picks come from the newest eighth.
    const size_t n = corpus.size();
    const size_t pick = mutator.below(2) ? n - 1 - mutator.below((n + 7) / 8) : mutator.below(n);
    input = corpus[pick];
    mutator.mutate(input, corpus, flags.max_len);
    run_one(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++execs;
    if (merge_coverage(seen)) keep(input, true);
    if ((execs & 63) == 0 && elapsed() >= next_report) {
      std::fprintf(stderr, "#%llu cov: %zu corp: %zu exec/s: %.0f\n", static_cast<unsigned long long>(execs),
                   count_bits(seen), corpus.size(), static_cast<double>(execs) / elapsed());
      next_report = elapsed() + 10;
    }
  }
  std::fprintf(stderr, "kgpu-fuzz: done execs: %llu cov: %zu corp: %zu seconds: %.0f\n",
               static_cast<unsigned long long>(execs), count_bits(seen), corpus.size(), elapsed());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  Flags flags;
  g_timeout_s = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (a == "-fuzz") {
      flags.fuzz = true;
    } else if (flag(a, "max_total_time", v)) {
      flags.max_total_time = std::stod(v);
    } else if (flag(a, "seed", v)) {
      flags.seed = std::stoull(v);
    } else if (flag(a, "runs", v)) {
      flags.runs = std::stoull(v);
    } else if (flag(a, "corpus", v)) {
      flags.corpus = v;
    } else if (flag(a, "artifact_dir", v)) {
      g_artifact_dir = v;
    } else if (flag(a, "dict", v)) {
      flags.dict = v;
    } else if (flag(a, "max_len", v)) {
      flags.max_len = std::stoull(v);
    } else if (flag(a, "timeout", v)) {
      g_timeout_s = std::stoi(v);
      flags.timeout_given = true;
    } else if (flag(a, "rss_limit_mb", v)) {
      g_rss_limit_mb = std::stol(v);
    } else if (a.starts_with("-")) {
      return usage(argv[0]);
    } else {
      flags.paths.push_back(a);
    }
  }
  if (flags.fuzz && !flags.timeout_given) g_timeout_s = 3;
  if (!flags.fuzz && flags.paths.empty()) return usage(argv[0]);

  g_main_thread = pthread_self();
  struct sigaction sa {};
  sa.sa_handler = on_watchdog_signal;
  sigaction(SIGUSR2, &sa, nullptr);
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_DFL) signal(sig, on_fatal_signal);  // a sanitizer's own handler stays
  }
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(on_sanitizer_death);
#endif
  std::thread(watchdog).detach();
  return flags.fuzz ? fuzz(flags) : replay(flags);
}
