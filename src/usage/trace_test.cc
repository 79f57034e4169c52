#include "usage/trace.h"

#include <gtest/gtest.h>

namespace hami::usage {
namespace {

constexpr char kHead[] = "# hami-usage-trace v1\nminute,pod,duty_pct,mem_mib\n";

TEST(UsageTrace, ReadsPodsInArrivalOrderWithIntegerUnits) {
  auto t = ParseUsageTrace(StrCat(kHead,
                                  "0,b,0.00,100\n0,c,12.5,200\n1,a,100,7\n1,b,0.01,101\n"
                                  "1,c,99.999,201\n2,a,3.456,8\n"),
                           "t.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->minutes, 3);
  ASSERT_EQ(t->pods.size(), 3u);
  EXPECT_EQ(t->pods[0].name, "b");
  EXPECT_EQ(t->pods[1].name, "c");
  EXPECT_EQ(t->pods[2].name, "a");
  EXPECT_EQ(t->pods[2].first, 1);
  EXPECT_EQ(t->pods[2].duty, (std::vector<int32_t>{10000, 346}));
  EXPECT_EQ(t->pods[1].duty, (std::vector<int32_t>{1250, 10000}));  // 99.999 rounds to 100.00
  EXPECT_EQ(t->pods[0].mem_mib, (std::vector<int32_t>{100, 101}));
  EXPECT_EQ(t->pods[0].last(), 1);
  ASSERT_EQ(t->workloads.size(), 1u);  // no workload column: one workload
}

TEST(UsageTrace, WorkloadColumnGroupsPodsAndEmptyIsAWorkloadOfItsOwn) {
  auto t = ParseUsageTrace(
      "minute,pod,duty_pct,mem_mib,workload\n0,a,0,1,web\n0,b,0,1,web\n0,c,0,1,\n", "w.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->workloads, (std::vector<std::string>{"web", "c"}));
  EXPECT_EQ(t->pods[0].workload, 0);
  EXPECT_EQ(t->pods[1].workload, 0);
  EXPECT_EQ(t->pods[2].workload, 1);
}

TEST(UsageTrace, GarbageIsAnErrorNamingTheLine) {
  struct Case {
    const char* name;
    std::string text;
    std::string want;  // substring of the message
  };
  const Case cases[] = {
      {"empty", "", "no header"},
      {"bad header", "minute,pod,duty,mem\n", "t.csv:1: header must be"},
      {"few fields", StrCat(kHead, "0,a,1\n"), "t.csv:3: want 4"},
      {"many fields", StrCat(kHead, "0,a,1,2,3\n"), "t.csv:3: want 4"},
      {"negative minute", StrCat(kHead, "-1,a,1,2\n"), "t.csv:3: minute '-1'"},
      {"huge minute", StrCat(kHead, "99999999999,a,1,2\n"), "t.csv:3: minute"},
      {"duty over 100", StrCat(kHead, "0,a,100.01,2\n"), "t.csv:3: duty_pct '100.01'"},
      {"duty text", StrCat(kHead, "0,a,x,2\n"), "duty_pct 'x'"},
      {"duty trailing dot", StrCat(kHead, "0,a,1.,2\n"), "duty_pct '1.'"},
      {"mem negative", StrCat(kHead, "0,a,1,-2\n"), "t.csv:3: mem_mib '-2'"},
      {"empty pod", StrCat(kHead, "0,,1,2\n"), "pod name ''"},
      {"minutes unsorted", StrCat(kHead, "1,a,1,2\n0,b,1,2\n"), "t.csv:4: rows must be sorted"},
      {"pods unsorted", StrCat(kHead, "0,b,1,2\n0,a,1,2\n"), "t.csv:4: rows must be sorted"},
      {"repeated row", StrCat(kHead, "0,a,1,2\n0,a,1,2\n"), "t.csv:4: rows must be sorted"},
      {"hole", StrCat(kHead, "0,a,1,2\n1,b,1,2\n2,a,1,2\n"), "t.csv:5: pod a has a hole"},
      {"workload changes", "minute,pod,duty_pct,mem_mib,workload\n0,a,0,1,x\n1,a,0,1,y\n",
       "t.csv:3: pod a changes workload"},
  };
  for (const auto& c : cases) {
    auto t = ParseUsageTrace(c.text, "t.csv");
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_NE(std::string(t.status().message()).find(c.want), std::string::npos)
        << c.name << ": " << t.status();
  }
}

TEST(UsageTrace, LimitsBoundTheInput) {
  Limits small;
  small.max_pods = 1;
  EXPECT_FALSE(ParseUsageTrace(StrCat(kHead, "0,a,1,2\n0,b,1,2\n"), "t", small).ok());
  small = {};
  small.max_bytes = 10;
  EXPECT_FALSE(ParseUsageTrace(kHead, "t", small).ok());
  small = {};
  small.max_rows = 1;
  EXPECT_FALSE(ParseUsageTrace(StrCat(kHead, "0,a,1,2\n1,a,1,2\n"), "t", small).ok());
}

TEST(UsageTrace, CutAfterKeepsOnlyWhatWasKnownAndFormatRoundTrips) {
  auto t = ParseUsageTrace(
      "minute,pod,duty_pct,mem_mib,workload\n0,a,1,10,w\n1,a,2,11,w\n1,b,3,12,v\n2,a,4,13,w\n"
      "2,b,5,14,v\n3,c,6,15,w\n",
      "t.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  UsageTrace cut = CutAfter(*t, 1);
  EXPECT_EQ(cut.minutes, 2);
  ASSERT_EQ(cut.pods.size(), 2u);
  EXPECT_EQ(cut.pods[0].mem_mib, (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(cut.pods[1].mem_mib, (std::vector<int32_t>{12}));
  auto again = ParseUsageTrace(FormatUsageTrace(*t), "again");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(FormatUsageTrace(*again), FormatUsageTrace(*t));
  ASSERT_EQ(again->pods.size(), 3u);
  EXPECT_EQ(again->workloads[again->pods[1].workload], "v");
  EXPECT_EQ(again->pods[2].duty, t->pods[2].duty);
}

}  // namespace
}  // namespace hami::usage
