#pragma once
// Kubernetes label and field selectors, as the fake API server evaluates them.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::k8s::testing {

class Selector {
 public:
  // Label selector grammar: "k=v", "k==v", "k!=v", "k in (a,b)", "k notin (a,b)", "k", "!k",
  // comma = AND.
  static StatusOr<Selector> ParseLabels(std::string_view text);
  // Field selector grammar: "path=v", "path==v", "path!=v", comma = AND; path is a dotted JSON
  // path.
  static StatusOr<Selector> ParseFields(std::string_view text);

  // Labels: tested against metadata.labels. Fields: against the object itself.
  bool Matches(const nlohmann::json& obj) const;
  bool empty() const { return reqs_.empty(); }

 private:
  enum class Op { kEq, kNe, kIn, kNotIn, kExists, kNotExists };
  struct Req {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  // "k=v" / "k==v" / "k!=v" into r; false when `part` has none of these operators.
  static bool ParseEquality(const std::string& part, Req& r);
  bool fields_ = false;
  std::vector<Req> reqs_;
};

// The value of a dotted field path as the API server compares it ("" when absent; booleans as
// "true"/"false"; numbers in decimal).
std::string FieldValue(const nlohmann::json& obj, std::string_view path);

}  // namespace hami::k8s::testing
