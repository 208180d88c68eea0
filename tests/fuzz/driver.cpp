// A small stand-in for libFuzzer's main, for builds without clang (the normal g++ build): replays
// the seed corpus, then runs deterministic pseudo-random and mutated inputs through the target's
// LLVMFuzzerTestOneInput. No coverage feedback: it is a smoke test that runs in seconds under
// ctest (label unit); the long runs use libFuzzer (docs/reliability.md, section "Fuzzing").
//
//   fuzz_TARGET [CORPUS_DIR] [--runs=N] [--seed=S] [--max-seconds=T] [--max-len=L]
//
// Exit status 0 when every input returned (a crash or sanitizer report ends the process), 2 on
// a bad argument or an unreadable corpus.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

struct Options {
  std::string corpus;
  uint64_t runs = 20000;
  uint64_t seed = 1;
  double max_seconds = 4.0;
  size_t max_len = 4096;
};

bool ParseNumber(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

bool ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    uint64_t v = 0;
    if (a.starts_with("--runs=") && ParseNumber(a.substr(7), v)) {
      o.runs = v;
    } else if (a.starts_with("--seed=") && ParseNumber(a.substr(7), v)) {
      o.seed = v;
    } else if (a.starts_with("--max-seconds=") && ParseNumber(a.substr(14), v)) {
      o.max_seconds = static_cast<double>(v);
    } else if (a.starts_with("--max-len=") && ParseNumber(a.substr(10), v) && v > 0) {
      o.max_len = static_cast<size_t>(v);
    } else if (!a.starts_with("--") && o.corpus.empty()) {
      o.corpus = std::string(a);
    } else {
      std::fprintf(stderr, "usage: %s [CORPUS_DIR] [--runs=N] [--seed=S] [--max-seconds=T] [--max-len=L]\n",
                   argv[0]);
      return false;
    }
  }
  return true;
}

// Runs one input from its own exactly-sized heap buffer, so that ASan sees any overread.
void Run(const Bytes& input) {
  Bytes copy(input);
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
}

// Tokens that parsers of numbers, lists, key=value pairs, CSV and JSON tend to treat specially.
const std::vector<std::string_view>& Tokens() {
  static const std::vector<std::string_view> t = {
      "0", "1", "-1", ":", "::", "=", ",", "|", "\n", "\r\n", " ", "\t", std::string_view("\0", 1), "-",
      "+", ".", "e9", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
      "9223372036854775808", "-9223372036854775808", "18446744073709551616", "4294967296", "0x10",
      "nan", "inf", "{", "}", "[", "]", "\"", "\\u0000", "\"v\":1", "\"type\":\"x\"", "null", "true",
      "gres/gpu=", "gres/gpu:a100=", "elastic-ext parent=", " group=", "T", "1970-01-01T00:00:00",
      "9999-12-31 23:59:59", "Unknown", "None", "\xff\xff\xff\xff", std::string_view("\0\0\0\x10", 4)};
  return t;
}

Bytes Mutate(const Bytes& base, const std::vector<Bytes>& pool, std::mt19937_64& rng, size_t max_len) {
  Bytes b = base;
  auto pick = [&rng](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int ops = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < ops; ++i) {
    switch (rng() % 9) {
      case 0:  // flip a bit
        if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // set a byte
        if (!b.empty()) b[pick(b.size())] = static_cast<uint8_t>(rng());
        break;
      case 2:  // insert a byte
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), static_cast<uint8_t>(rng()));
        break;
      case 3: {  // erase a range
        if (b.empty()) break;
        const size_t at = pick(b.size());
        const size_t n = 1 + pick(std::min<size_t>(b.size() - at, 16));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      case 4: {  // duplicate a range
        if (b.empty()) break;
        const size_t at = pick(b.size());
        const size_t n = 1 + pick(std::min<size_t>(b.size() - at, 64));
        const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), chunk.begin(), chunk.end());
        break;
      }
      case 5:
      case 6: {  // insert or overwrite with a token
        const std::string_view t = Tokens()[pick(Tokens().size())];
        const size_t at = pick(b.size() + 1);
        if (rng() % 2 == 0 || at + t.size() > b.size()) {
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), t.begin(), t.end());
        } else {
          std::copy(t.begin(), t.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
        }
        break;
      }
      case 7: {  // splice with another input
        const Bytes& other = pool[pick(pool.size())];
        const size_t keep = pick(b.size() + 1);
        const size_t from = pick(other.size() + 1);
        b.resize(keep);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      default:  // truncate
        b.resize(pick(b.size() + 1));
        break;
    }
  }
  if (b.size() > max_len) b.resize(max_len);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, o)) return 2;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  std::vector<Bytes> seeds;
  if (!o.corpus.empty()) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(o.corpus, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    if (ec) {
      std::fprintf(stderr, "cannot read corpus %s: %s\n", o.corpus.c_str(), ec.message().c_str());
      return 2;
    }
    std::sort(files.begin(), files.end());  // the same order on every file system
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      Run(seeds.back());
    }
  }
  Run(Bytes{});

  std::mt19937_64 rng(o.seed);
  std::vector<Bytes> pool = seeds;
  if (pool.empty()) pool.push_back(Bytes{});
  uint64_t done = 0;
  for (; done < o.runs; ++done) {
    if ((done & 63) == 0 && elapsed() > o.max_seconds) break;
    Bytes input;
    if (done % 8 == 7) {  // purely random bytes, mostly short
      input.resize(static_cast<size_t>(rng() % std::min<size_t>(o.max_len, 256) + 1));
      for (auto& c : input) c = static_cast<uint8_t>(rng());
    } else {
      input = Mutate(pool[static_cast<size_t>(rng() % pool.size())], pool, rng, o.max_len);
      // Keep some mutants as bases for further mutation (stacked mutations reach deeper).
      if (rng() % 16 == 0) {
        if (pool.size() < seeds.size() + 256) {
          pool.push_back(input);
        } else {
          pool[seeds.size() + static_cast<size_t>(rng() % 256)] = input;
        }
      }
    }
    Run(input);
  }
  std::printf("%s: %zu seed(s) replayed, %llu generated input(s) in %.2f s (seed %llu)%s\n", argv[0], seeds.size(),
              static_cast<unsigned long long>(done), elapsed(), static_cast<unsigned long long>(o.seed),
              done < o.runs ? ", stopped at the time limit" : "");
  return 0;
}
