// A libFuzzer-compatible driver for builds without clang: replays every file of the corpus
// directories given on the command line, then runs --runs=N mutated inputs derived from them
// (byte flips, inserts, deletes, splices, interesting bytes) with a fixed seed, so CI is
// reproducible. Targets define LLVMFuzzerTestOneInput as they would for libFuzzer.
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

namespace {

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
    } else {
      dirs.emplace_back(argv[i]);
    }
  }
  auto corpus = LoadCorpus(dirs);
  for (const auto& c : corpus) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(c.data()), c.size());
  }
  hami::Rng rng(seed);
  for (long i = 0; i < runs; ++i) {
    std::string in = Mutate(corpus, rng);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
  std::printf("fuzz driver: %zu corpus inputs and %ld mutated inputs ran without a crash\n",
              corpus.size(), runs);
  return 0;
}
