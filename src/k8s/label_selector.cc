#include "k8s/label_selector.h"

#include <set>
#include <string>

namespace hami::k8s {

StatusOr<bool> LabelSelectorMatches(const nlohmann::json& selector, const nlohmann::json& labels) {
  if (!selector.is_object())
    return InvalidArgument("label selector must be an object, got ", selector.type_name());
  auto label = [&](const std::string& key) -> const std::string* {
    if (!labels.is_object()) return nullptr;
    auto it = labels.find(key);
    return it != labels.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
  };
  bool match = true;  // every requirement is read, so a bad one is an error whatever comes first
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && !ml->is_null()) {
    if (!ml->is_object()) return InvalidArgument("matchLabels must be an object");
    for (const auto& [k, v] : ml->items()) {
      if (!v.is_string()) return InvalidArgument("matchLabels[\"", k, "\"] must be a string");
      const std::string* have = label(k);
      match = match && have != nullptr && *have == v.get_ref<const std::string&>();
    }
  }
  if (auto me = selector.find("matchExpressions"); me != selector.end() && !me->is_null()) {
    if (!me->is_array()) return InvalidArgument("matchExpressions must be an array");
    for (size_t i = 0; i < me->size(); ++i) {
      const nlohmann::json& e = (*me)[i];
      const std::string where = StrCat("matchExpressions[", i, "]");
      if (!e.is_object() || !e.contains("key") || !e["key"].is_string() ||
          !e.contains("operator") || !e["operator"].is_string())
        return InvalidArgument(where, " needs a key and an operator");
      std::set<std::string> values;
      if (auto vs = e.find("values"); vs != e.end() && !vs->is_null()) {
        if (!vs->is_array()) return InvalidArgument(where, ".values must be an array");
        for (const auto& v : *vs) {
          if (!v.is_string()) return InvalidArgument(where, ".values must hold strings");
          values.insert(v.get<std::string>());
        }
      }
      const std::string op = e["operator"].get<std::string>();
      const std::string* have = label(e["key"].get<std::string>());
      if (op == "In" || op == "NotIn") {
        if (values.empty()) return InvalidArgument(where, ": ", op, " needs values");
        const bool in = have != nullptr && values.count(*have) != 0;
        match = match && (op == "In" ? in : !in);
      } else if (op == "Exists" || op == "DoesNotExist") {
        if (!values.empty()) return InvalidArgument(where, ": ", op, " takes no values");
        match = match && ((have != nullptr) == (op == "Exists"));
      } else {
        return InvalidArgument(where, ": unknown operator \"", op, "\"");
      }
    }
  }
  return match;
}

}  // namespace hami::k8s
