#include "k8s/json_prune.h"

#include <cstring>
#include <vector>

namespace hami::k8s {
namespace {

constexpr size_t kNpos = std::string_view::npos;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool IsDelimiter(char c) {
  return IsSpace(c) || c == ',' || c == ':' || c == '{' || c == '}' || c == '[' || c == ']' ||
         c == '"';
}

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && IsSpace(t[i])) ++i;
  return i;
}

// t[i] is '"': the index past the string's closing quote (kNpos: it does not end); *escaped tells
// whether the string holds a backslash.
size_t StringEnd(std::string_view t, size_t i, bool* escaped) {
  size_t j = i + 1;
  while (j < t.size()) {
    const void* q = std::memchr(t.data() + j, '"', t.size() - j);
    if (q == nullptr) return kNpos;
    const size_t end = static_cast<const char*>(q) - t.data();
    size_t slashes = 0;
    while (end - slashes > i + 1 && t[end - slashes - 1] == '\\') ++slashes;
    if (slashes % 2 == 0) {
      *escaped = std::memchr(t.data() + i + 1, '\\', end - i - 1) != nullptr;
      return end + 1;
    }
    j = end + 1;
  }
  return kNpos;
}

// A scalar (number, true, false, null) starting at t[i]: the index past it (kNpos: none there).
size_t ScalarEnd(std::string_view t, size_t i) {
  size_t j = i;
  while (j < t.size() && !IsDelimiter(t[j])) ++j;
  return j == i ? kNpos : j;
}

// The value starting at t[i] (no space before it), scanned only: the index past it, or kNpos.
size_t SkipValue(std::string_view t, size_t i) {
  if (i >= t.size()) return kNpos;
  bool escaped = false;
  if (t[i] == '"') return StringEnd(t, i, &escaped);
  if (t[i] != '{' && t[i] != '[') return ScalarEnd(t, i);
  std::vector<char> open;  // the closers expected, innermost last
  for (size_t j = i; j < t.size();) {
    const char c = t[j];
    if (c == '"') {
      j = StringEnd(t, j, &escaped);
      if (j == kNpos) return kNpos;
      continue;
    }
    if (c == '{' || c == '[') {
      if (open.size() >= kMaxPruneDepth) return kNpos;
      open.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (open.back() != c) return kNpos;
      open.pop_back();
      if (open.empty()) return j + 1;
    }
    ++j;
  }
  return kNpos;
}

enum class Expect { kValue, kValueOrClose, kKey, kKeyOrClose, kCommaOrClose };

struct Frame {
  bool object;
  int kept;  // members or elements written
};

}  // namespace

std::string PruneJson(std::string_view t,
                      const std::function<bool(int depth, const std::string& key)>& cut) {
  std::string out;
  out.reserve(t.size());
  std::vector<Frame> stack;
  Expect expect = Expect::kValue;
  size_t i = 0;
  auto whole = [t] { return std::string(t); };
  // Writes the closer of the innermost container and leaves it.
  auto close = [&](char c) {
    out += c;
    stack.pop_back();
    expect = Expect::kCommaOrClose;
  };
  std::string key;
  for (i = SkipSpace(t, i); i < t.size(); i = SkipSpace(t, i)) {
    const char c = t[i];
    switch (expect) {
      case Expect::kValueOrClose:
        if (c == ']') {
          close(c);
          ++i;
          continue;
        }
        [[fallthrough]];
      case Expect::kValue: {
        if (!stack.empty() && !stack.back().object && stack.back().kept++ > 0) out += ',';
        if (c == '{' || c == '[') {
          if (stack.size() >= kMaxPruneDepth) return whole();
          stack.push_back({c == '{', 0});
          out += c;
          expect = c == '{' ? Expect::kKeyOrClose : Expect::kValueOrClose;
          ++i;
          continue;
        }
        bool escaped = false;
        const size_t end = c == '"' ? StringEnd(t, i, &escaped) : ScalarEnd(t, i);
        if (end == kNpos) return whole();
        out.append(t.data() + i, end - i);
        i = end;
        expect = Expect::kCommaOrClose;
        continue;
      }
      case Expect::kKeyOrClose:
        if (c == '}') {
          close(c);
          ++i;
          continue;
        }
        [[fallthrough]];
      case Expect::kKey: {
        if (c != '"') return whole();
        bool escaped = false;
        const size_t end = StringEnd(t, i, &escaped);
        if (end == kNpos) return whole();
        const size_t colon = SkipSpace(t, end);
        if (colon >= t.size() || t[colon] != ':') return whole();
        key.assign(t.data() + i + 1, end - i - 2);
        if (!escaped && cut(static_cast<int>(stack.size()), key)) {
          i = SkipValue(t, SkipSpace(t, colon + 1));
          if (i == kNpos) return whole();
          expect = Expect::kCommaOrClose;
          continue;
        }
        if (stack.back().kept++ > 0) out += ',';
        out.append(t.data() + i, end - i);
        out += ':';
        i = colon + 1;
        expect = Expect::kValue;
        continue;
      }
      case Expect::kCommaOrClose:
        if (stack.empty()) return whole();  // something after the top-level value
        if (c == ',') {
          expect = stack.back().object ? Expect::kKey : Expect::kValue;
        } else if (c == (stack.back().object ? '}' : ']')) {
          close(c);
        } else {
          return whole();
        }
        ++i;
        continue;
    }
  }
  if (expect != Expect::kCommaOrClose || !stack.empty()) return whole();
  return out;
}

std::optional<std::string_view> TopLevelMember(std::string_view t, std::string_view key) {
  size_t i = SkipSpace(t, 0);
  if (i >= t.size() || t[i] != '{') return std::nullopt;
  i = SkipSpace(t, i + 1);
  if (i < t.size() && t[i] == '}') return std::nullopt;
  while (i < t.size()) {
    if (t[i] != '"') return std::nullopt;
    bool escaped = false;
    const size_t end = StringEnd(t, i, &escaped);
    if (end == kNpos) return std::nullopt;
    const size_t colon = SkipSpace(t, end);
    if (colon >= t.size() || t[colon] != ':') return std::nullopt;
    const size_t value = SkipSpace(t, colon + 1);
    const size_t value_end = SkipValue(t, value);
    if (value_end == kNpos) return std::nullopt;
    if (!escaped && t.substr(i + 1, end - i - 2) == key) return t.substr(value, value_end - value);
    i = SkipSpace(t, value_end);
    if (i >= t.size() || t[i] != ',') return std::nullopt;  // '}' (not found) or not JSON
    i = SkipSpace(t, i + 1);
  }
  return std::nullopt;
}

}  // namespace hami::k8s
