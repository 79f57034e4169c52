#include "k8s/testing/selectors.h"

#include <algorithm>

namespace hami::k8s::testing {
namespace {

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && s[b] == ' ') ++b;
  while (e > b && s[e - 1] == ' ') --e;
  return std::string(s.substr(b, e - b));
}

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTop(std::string_view text) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(Trim(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  parts.push_back(Trim(cur));
  return parts;
}

}  // namespace

std::string FieldValue(const nlohmann::json& obj, std::string_view path) {
  const nlohmann::json* cur = &obj;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string key(
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (!cur->is_object()) return "";
    auto it = cur->find(key);
    if (it == cur->end()) return "";
    cur = &*it;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  if (cur->is_number()) return cur->dump();
  return "";
}

StatusOr<Selector> Selector::ParseFields(std::string_view text) {
  Selector s;
  s.fields_ = true;
  if (Trim(text).empty()) return s;
  for (const std::string& part : SplitTop(text)) {
    Req r;
    if (!ParseEquality(part, r)) {
      return InvalidArgument("invalid field selector \"", part,
                             "\": expected field=value, field==value or field!=value");
    }
    if (r.key.empty())
      return InvalidArgument("invalid field selector \"", part, "\": empty field name");
    s.reqs_.push_back(std::move(r));
  }
  return s;
}

StatusOr<Selector> Selector::ParseLabels(std::string_view text) {
  Selector s;
  if (Trim(text).empty()) return s;
  for (const std::string& part : SplitTop(text)) {
    if (part.empty())
      return InvalidArgument("invalid label selector \"", std::string(text), "\": empty term");
    Req r;
    size_t pos;
    auto set_values = [&](std::string_view rest) -> Status {
      std::string v = Trim(rest);
      if (v.size() < 2 || v.front() != '(' || v.back() != ')') {
        return InvalidArgument("invalid label selector \"", part,
                               "\": expected a (value, ...) list");
      }
      for (std::string& x : SplitTop(v.substr(1, v.size() - 2))) {
        if (!x.empty()) r.values.push_back(x);
      }
      return OkStatus();
    };
    if (part[0] == '!') {
      r.op = Op::kNotExists;
      r.key = Trim(part.substr(1));
    } else if ((pos = part.find(" notin ")) != std::string::npos) {
      r.op = Op::kNotIn;
      r.key = Trim(part.substr(0, pos));
      HAMI_RETURN_IF_ERROR(set_values(part.substr(pos + 7)));
    } else if ((pos = part.find(" in ")) != std::string::npos) {
      r.op = Op::kIn;
      r.key = Trim(part.substr(0, pos));
      HAMI_RETURN_IF_ERROR(set_values(part.substr(pos + 4)));
    } else if (ParseEquality(part, r)) {
      // k=v, k==v, k!=v
    } else {
      r.op = Op::kExists;
      r.key = part;
    }
    if (r.key.empty() || r.key.find(' ') != std::string::npos) {
      return InvalidArgument("invalid label selector \"", part, "\": bad label key");
    }
    s.reqs_.push_back(std::move(r));
  }
  return s;
}

bool Selector::ParseEquality(const std::string& part, Req& r) {
  size_t pos;
  size_t width;
  if ((pos = part.find("!=")) != std::string::npos) {
    r.op = Op::kNe;
    width = 2;
  } else if ((pos = part.find("==")) != std::string::npos) {
    r.op = Op::kEq;
    width = 2;
  } else if ((pos = part.find('=')) != std::string::npos) {
    r.op = Op::kEq;
    width = 1;
  } else {
    return false;
  }
  r.key = Trim(part.substr(0, pos));
  r.values = {Trim(part.substr(pos + width))};
  return true;
}

bool Selector::Matches(const nlohmann::json& obj) const {
  for (const Req& r : reqs_) {
    bool present;
    std::string value;
    if (fields_) {
      value = FieldValue(obj, r.key);
      present = true;
    } else {
      const nlohmann::json* labels = nullptr;
      if (obj.contains("metadata") && obj["metadata"].is_object() &&
          obj["metadata"].contains("labels") && obj["metadata"]["labels"].is_object()) {
        labels = &obj["metadata"]["labels"];
      }
      present = labels && labels->contains(r.key) && (*labels)[r.key].is_string();
      if (present) value = (*labels)[r.key].get<std::string>();
    }
    const bool in = std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    switch (r.op) {
      case Op::kEq:
      case Op::kIn:
        if (!present || !in) return false;
        break;
      case Op::kNe:
      case Op::kNotIn:
        if (present && in) return false;
        break;
      case Op::kExists:
        if (!present) return false;
        break;
      case Op::kNotExists:
        if (present) return false;
        break;
    }
  }
  return true;
}

}  // namespace hami::k8s::testing
