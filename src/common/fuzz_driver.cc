// A libFuzzer-compatible driver for builds without clang: replays every file of the corpus
// directories given on the command line, then runs --runs=N mutated inputs derived from them
// (byte flips, inserts, deletes, splices, interesting bytes) with a fixed seed, so CI is
// reproducible. Targets define LLVMFuzzerTestOneInput as they would for libFuzzer. An input that
// crashes or fails a FUZZ_CHECK is written to <artifact_prefix>crash-<n> (n: the input's number,
// corpus first; --artifact_prefix= as libFuzzer's, default the working directory), so it can be
// replayed by passing that file as the corpus.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/rng.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Present when a sanitizer runtime is linked: it reports memory errors itself (and exits), so the
// driver saves the input from its death callback and leaves SIGSEGV and friends to it.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

// The input being run, for the crash handler (written before each run, read only there).
const uint8_t* g_input = nullptr;
size_t g_input_size = 0;
unsigned long g_input_number = 0;
char g_artifact_path[4096] = "./crash-";  // the prefix; the handler appends the number

void WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w <= 0) return;
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void SaveInput() {
  char path[sizeof(g_artifact_path) + 24];
  size_t len = std::strlen(g_artifact_path);
  std::memcpy(path, g_artifact_path, len);
  char digits[24];
  size_t nd = 0;
  unsigned long v = g_input_number;
  do {
    digits[nd++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (nd > 0) path[len++] = digits[--nd];
  path[len] = '\0';
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  WriteAll(fd, g_input, g_input_size);
  ::close(fd);
  static const char kMsg[] = "fuzz driver: the failing input is in ";
  WriteAll(2, kMsg, sizeof(kMsg) - 1);
  WriteAll(2, path, len);
  WriteAll(2, "\n", 1);
}

// Async-signal-safe: saves the input, says where, and dies of the same signal.
void OnCrash(int sig) {
  SaveInput();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void Run(const std::string& in, unsigned long number) {
  g_input = reinterpret_cast<const uint8_t*>(in.data());
  g_input_size = in.size();
  g_input_number = number;
  LLVMFuzzerTestOneInput(g_input, g_input_size);
}

std::vector<std::string> LoadCorpus(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(d, ec)) {
      std::ifstream f(d, std::ios::binary);
      out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      continue;
    }
    if (!std::filesystem::is_directory(d, ec)) {
      std::fprintf(stderr, "fuzz driver: corpus path %s does not exist\n", d.c_str());
      std::exit(2);
    }
    for (const auto& e : std::filesystem::recursive_directory_iterator(d)) {
      if (!e.is_regular_file()) continue;
      std::ifstream f(e.path(), std::ios::binary);
      out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
  }
  if (out.empty()) out.emplace_back("");
  return out;
}

std::string Mutate(const std::vector<std::string>& corpus, hami::Rng& rng) {
  std::string s = corpus[rng.Uniform(corpus.size())];
  static const char kInteresting[] = {'\0', '\xff', '"', ',', ':', ';', '{', '}', '[', ']',
                                      '\\', '\n',   '-', '0', '9', ' ', 'e', '.', '%', '\x7f'};
  const int edits = 1 + static_cast<int>(rng.Uniform(8));
  for (int i = 0; i < edits; ++i) {
    switch (rng.Uniform(6)) {
      case 0:  // flip a bit
        if (!s.empty()) s[rng.Uniform(s.size())] ^= static_cast<char>(1u << rng.Uniform(8));
        break;
      case 1:  // insert an interesting byte
        s.insert(s.begin() + static_cast<long>(rng.Uniform(s.size() + 1)),
                 kInteresting[rng.Uniform(sizeof(kInteresting))]);
        break;
      case 2:  // delete a range
        if (!s.empty()) {
          size_t at = rng.Uniform(s.size());
          s.erase(at, 1 + rng.Uniform(std::min<size_t>(16, s.size() - at)));
        }
        break;
      case 3: {  // splice with another input
        const std::string& o = corpus[rng.Uniform(corpus.size())];
        if (!o.empty()) {
          size_t from = rng.Uniform(o.size());
          s.insert(rng.Uniform(s.size() + 1), o.substr(from, 1 + rng.Uniform(32)));
        }
        break;
      }
      case 4:  // duplicate a chunk (grows lists and nesting)
        if (!s.empty()) {
          size_t at = rng.Uniform(s.size());
          s.insert(at, s.substr(at, 1 + rng.Uniform(64)));
        }
        break;
      default:  // overwrite with an interesting byte
        if (!s.empty()) s[rng.Uniform(s.size())] = kInteresting[rng.Uniform(sizeof(kInteresting))];
    }
  }
  if (s.size() > (1u << 16)) s.resize(1u << 16);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 10000;
  uint64_t seed = 1;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--runs=", 7) == 0 || std::strncmp(argv[i], "-runs=", 6) == 0) {
      runs = std::strtol(std::strchr(argv[i], '=') + 1, nullptr, 10);
    } else if (std::strncmp(argv[i], "--seed=", 7) == 0) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (std::strncmp(argv[i], "--artifact_prefix=", 18) == 0 ||
               std::strncmp(argv[i], "-artifact_prefix=", 17) == 0) {
      const std::string prefix = std::string(std::strchr(argv[i], '=') + 1) + "crash-";
      if (prefix.size() >= sizeof(g_artifact_path)) {
        std::fprintf(stderr, "fuzz driver: --artifact_prefix is too long\n");
        return 2;
      }
      std::memcpy(g_artifact_path, prefix.c_str(), prefix.size() + 1);
    } else {
      dirs.emplace_back(argv[i]);
    }
  }
  auto corpus = LoadCorpus(dirs);
  std::signal(SIGABRT, OnCrash);  // FUZZ_CHECK, assertions
  if (&__sanitizer_set_death_callback != nullptr)
    __sanitizer_set_death_callback(SaveInput);
  else
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, OnCrash);
  unsigned long number = 0;
  for (const auto& c : corpus) Run(c, number++);
  hami::Rng rng(seed);
  for (long i = 0; i < runs; ++i) Run(Mutate(corpus, rng), number++);
  std::printf("fuzz driver: %zu corpus inputs and %ld mutated inputs ran without a crash\n",
              corpus.size(), runs);
  return 0;
}
