#include "dra/ledger.h"

#include <gtest/gtest.h>

#include "dra/testing/builders.h"

namespace hami::dra {
namespace {

using testing::TwoGpus;

TEST(Ledger, BooksUntilFullAndRefusesWithoutSideEffects) {
  struct Step {
    const char* claim;
    std::map<std::string, Usage> usage;
    bool ok;
    Usage used_gpu0_after;
  };
  const Step steps[] = {
      {"a", {{"gpu-0", {4096, 30}}}, true, {4096, 30}},
      {"b", {{"gpu-0", {4096, 30}}}, true, {8192, 60}},
      {"c", {{"gpu-0", {4096, 30}}}, true, {12288, 90}},
      // cores would reach 120: refused, nothing booked
      {"d", {{"gpu-0", {4096, 30}}}, false, {12288, 90}},
      // memory would pass 16384 even though the other device fits: refused as a whole
      {"e", {{"gpu-1", {1, 1}}, {"gpu-0", {4097, 10}}}, false, {12288, 90}},
      {"f", {{"gpu-0", {4096, 10}}}, true, {16384, 100}},
      // re-booking a claim is checked without its own earlier booking
      {"a", {{"gpu-0", {4096, 30}}}, true, {16384, 100}},
      {"g", {{"gpu-9", {1, 1}}}, false, {16384, 100}},
  };
  CapacityLedger l(TwoGpus());
  for (const auto& s : steps) {
    Status st = l.Book(s.claim, s.usage);
    EXPECT_EQ(st.ok(), s.ok) << s.claim << ": " << st;
    EXPECT_EQ(l.Used("gpu-0"), s.used_gpu0_after) << s.claim;
  }
  EXPECT_EQ(l.Used("gpu-1"), Usage{}) << "a refused claim left a booking on gpu-1";
  l.Release("a");
  l.Release("nobody");
  EXPECT_EQ(l.Used("gpu-0"), (Usage{12288, 70}));
  EXPECT_TRUE(l.Book("d", {{"gpu-0", {4096, 30}}}).ok());
}

TEST(Ledger, RefusalNamesDeviceAndAmounts) {
  CapacityLedger l(TwoGpus());
  ASSERT_TRUE(l.Book("a", {{"gpu-1", {16000, 10}}}).ok());
  Status s = l.Book("b", {{"gpu-1", {1000, 10}}});
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_NE(s.message().find("device gpu-1 (GPU-1): the claim takes 1000 MiB / 10 cores, "
                             "prepared claims hold 16000 MiB / 10 cores of 16384 MiB / 100"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace hami::dra
