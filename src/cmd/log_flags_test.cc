#include "cmd/log_flags.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/log.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"

namespace hami::cmd {
namespace {

// Parses args as a daemon's main does: klog rewrite, then CLI11.
LogFlags Parse(std::vector<std::string> args, std::string* log_level) {
  CLI::App app;
  LogFlags f;
  AddLogFlags(app, f);
  app.add_option("--log-level", *log_level);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  NormalizeKlogArgs(static_cast<int>(argv.size()), argv.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return f;
}

TEST(LogFlagsTest, AcceptsUpstreamKlogAndDebugFlags) {
  std::string level = "info";
  LogFlags f = Parse({"hami", "-v=4", "--debug"}, &level);
  EXPECT_EQ(f.verbosity, 4);
  EXPECT_TRUE(f.debug);
  EXPECT_EQ(EffectiveLevel(f, level), "debug");
  EXPECT_EQ(EffectiveLevel(Parse({"hami", "--v=6"}, &level), "info"), "trace");
  EXPECT_EQ(EffectiveLevel(Parse({"hami", "-v", "2"}, &level), "info"), "info");
  // Verbosity raises the level, never lowers an explicit --log-level=trace.
  EXPECT_EQ(EffectiveLevel(Parse({"hami", "-v=4"}, &level), "trace"), "trace");
  EXPECT_EQ(EffectiveLevel(Parse({"hami"}, &level), "warn"), "warn");
}

TEST(LogFlagsTest, RejectsGarbage) {
  std::string level = "info";
  EXPECT_THROW(Parse({"hami", "-v=lots"}, &level), CLI::ParseError);
  EXPECT_THROW(Parse({"hami", "--log-format=xml"}, &level), CLI::ParseError);
  EXPECT_FALSE(ApplyLogFlags(LogFlags{}, "loud").ok());
  EXPECT_FALSE(log::SetFormat("yaml").ok());
}

TEST(LogFlagsTest, JsonLinesAreJsonWithTheMessageEscaped) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "jsontest", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::register_logger(logger);
  LogFlags f;
  f.format = "json";
  ASSERT_TRUE(ApplyLogFlags(f, "info").ok());
  logger->set_level(spdlog::level::info);
  logger->info("pod \"a\\b\" on node\n\tgpu-1 \x01");
  ASSERT_TRUE(log::SetFormat("text").ok());
  spdlog::drop("jsontest");
  std::string line = out.str();
  ASSERT_FALSE(line.empty());
  ASSERT_EQ(line.back(), '\n');
  line.pop_back();
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  auto j = nlohmann::json::parse(line);  // throws (fails the test) when not JSON
  EXPECT_EQ(j["msg"], "pod \"a\\b\" on node\n\tgpu-1 \x01");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["logger"], "jsontest");
  EXPECT_EQ(j["ts"].get<std::string>().back(), 'Z');
}

TEST(BuildInfoTest, MetricNamesVersionAndRevision) {
  const std::string m = BuildInfoMetric("scheduler");
  EXPECT_NE(m.find("# TYPE hami_build_info gauge\n"), std::string::npos);
  EXPECT_NE(
      m.find("hami_build_info{component=\"scheduler\",version=\"" HAMI_VERSION "\",revision=\""),
      std::string::npos)
      << m;
  EXPECT_TRUE(m.ends_with("\"} 1\n")) << m;
  EXPECT_NE(VersionLine().find("hami-cpp " HAMI_VERSION " (revision "), std::string::npos);
}

}  // namespace
}  // namespace hami::cmd
