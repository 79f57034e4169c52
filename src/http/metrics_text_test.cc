#include "http/metrics_text.h"

#include <gtest/gtest.h>

namespace hami::http {
namespace {

TEST(MetricSet, LeadingLabelsOrderEscapingAndTypes) {
  MetricSet set;
  auto& mem = set.Add("x_bytes", "Bytes.", prometheus::MetricType::Gauge, {{"zone", "vGPU"}});
  auto& empty = set.Add("x_empty", "Never filled.");
  auto& calls = set.Add("x_calls_total", "Calls.", prometheus::MetricType::Counter);
  mem.Put({{"node", "n\"1\\\n"}, {"device", "0"}}, 8589934592.0);
  mem.Put({{"node", "n2"}, {"device", "1"}}, 0.25);
  calls.Put({}, 3);
  (void)empty;
  const std::string text = set.Render();
  EXPECT_EQ(text,
            "# HELP x_bytes Bytes.\n"
            "# TYPE x_bytes gauge\n"
            "x_bytes{zone=\"vGPU\",node=\"n\\\"1\\\\\\n\",device=\"0\"} 8589934592\n"
            "x_bytes{zone=\"vGPU\",node=\"n2\",device=\"1\"} 0.25\n"
            "# HELP x_calls_total Calls.\n"
            "# TYPE x_calls_total counter\n"
            "x_calls_total 3\n");
  EXPECT_TRUE(set.Take().empty()) << "Render hands the families out once";
}

}  // namespace
}  // namespace hami::http
