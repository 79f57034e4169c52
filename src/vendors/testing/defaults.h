#pragma once
// Every registered vendor with its defaults, built once, and lookup by Type keyword: what the
// vendor tests share.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "vendors/config.h"

namespace hami::vendors::testing {

inline const std::vector<std::unique_ptr<Vendor>>& All() {
  static const auto* all = new std::vector<std::unique_ptr<Vendor>>(AllVendorsWithDefaults());
  return *all;
}
inline const Vendor& ByWord(const std::string& w) {
  for (const auto& v : All())
    if (v->common_word() == w) return *v;
  ADD_FAILURE() << "no vendor " << w;
  return *All().front();
}

}  // namespace hami::vendors::testing
