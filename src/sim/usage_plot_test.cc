// The per-minute series and the SVG of `hami sim --usage --plot` (usage_plot.h).
#include "sim/usage_plot.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hami::sim {
namespace {

usage::PodSeries Pod(const std::string& name, int32_t first, std::vector<int32_t> duty) {
  usage::PodSeries p;
  p.name = name;
  p.first = first;
  p.mem_mib.assign(duty.size(), 1000);
  p.duty = std::move(duty);
  return p;
}

TEST(UsagePlot, SeriesPerMinute) {
  usage::UsageTrace t;
  t.minutes = 4;
  t.workloads = {""};
  // a: minutes 0-3 on GPU 0; b: minutes 1-3 on GPU 0, moved to GPU 1 at minute 3; c: minutes 2-3,
  // placed only at minute 3 (no segment at 2).
  t.pods = {Pod("a", 0, {6000, 6000, 6000, 2000}), Pod("b", 1, {5000, 4000, 3000}),
            Pod("c", 2, {100, 9000})};
  usage::Placement pl = {{{0, 0, 1000, 0}}, {{1, 0, 1000, 0}, {3, 1, 1000, 0}}, {{3, 1, 1000, 0}}};
  struct Case {
    int32_t warmup;
    std::vector<UsageMinute> want;
  };
  // clang-format off
  const std::vector<Case> cases = {
      // minute, pods, gpus, util (1/100 %), contended GPUs
      {0, {{0, 1, 1, 6000, 0}, {1, 2, 1, 10000, 1}, {2, 3, 1, 10000, 0}, {3, 3, 2, 12000, 1}}},
      {2, {{2, 3, 1, 10000, 0}, {3, 3, 2, 12000, 1}}},
      {4, {}},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.warmup);
    EXPECT_EQ(UsageSeries(t, pl, c.warmup), c.want);
  }
}

TEST(UsagePlot, SvgHasThreePanelsAndAPointPerMinute) {
  const std::vector<UsageMinute> s = {
      {360, 4, 2, 12000, 0}, {361, 4, 2, 20000, 1}, {362, 3, 2, 5000, 0}};
  const std::string svg = UsagePlotSvg(s, "a <title> & more");
  EXPECT_EQ(svg, UsagePlotSvg(s, "a <title> & more"));  // same bytes
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
  for (const char* label : {"GPUs in use", "utilization, % of the GPUs in use",
                            "contended GPUs, % of the GPUs in use", "whole cards"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    ++lines;
    const size_t from = svg.find("points=\"", at) + 8, to = svg.find('"', from);
    EXPECT_EQ(
        std::count(svg.begin() + static_cast<long>(from), svg.begin() + static_cast<long>(to), ','),
        3);
  }
  EXPECT_EQ(lines, 4u);  // GPUs in use, whole cards, utilization, contended
  // The contended panel's top is its largest value (1 of 2 GPUs: 50 %), the GPU panel's the most
  // pods or GPUs (4).
  EXPECT_NE(svg.find(">50.0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">4.0</text>"), std::string::npos);
  EXPECT_EQ(UsagePlotSvg({}, "t").find("<polyline"), std::string::npos);
}

}  // namespace
}  // namespace hami::sim
