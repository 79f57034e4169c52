#include "sim/trace.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace hami::sim {
namespace {

struct ErrorCase {
  std::string name;
  std::string text;
  std::string want;  // substring of the error message
};

constexpr char kNodeHeader[] = "sn,cpu_milli,memory_mib,gpu,model\n";
constexpr char kPodHeader[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";

class NodeErrorTest : public ::testing::TestWithParam<ErrorCase> {};
TEST_P(NodeErrorTest, NamesFileLineAndField) {
  auto r = ParseNodesCsv(GetParam().text, "nodes.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find(GetParam().want), std::string::npos)
      << r.status();
}
INSTANTIATE_TEST_SUITE_P(
    Cases, NodeErrorTest,
    ::testing::Values(ErrorCase{"empty", "", "nodes.csv: empty file"},
                      ErrorCase{"missing_column", "sn,cpu_milli,memory_mib,gpu\nn,1,1,1\n",
                                "lacks column 'model'"},
                      ErrorCase{"negative", std::string(kNodeHeader) + "n1,-5,1,1,T4\n",
                                "nodes.csv:2: field cpu_milli: -5 is negative"},
                      ErrorCase{"not_a_number", std::string(kNodeHeader) + "n1,1,x,1,T4\n",
                                "nodes.csv:2: field memory_mib: 'x'"},
                      ErrorCase{"absurd", std::string(kNodeHeader) + "n1,1,1,1000,T4\n",
                                "field gpu: 1000 is above 64"},
                      ErrorCase{"unknown_model", std::string(kNodeHeader) + "n1,1,1,1,K80\n",
                                "nodes.csv:2: field model: unknown GPU model 'K80'"},
                      ErrorCase{"short_row", std::string(kNodeHeader) + "n1,1,1\n",
                                "nodes.csv:2: 3 fields, header has 5"},
                      ErrorCase{"duplicate",
                                std::string(kNodeHeader) + "n1,1,1,1,T4\nn1,1,1,1,T4\n",
                                "nodes.csv:3: field sn: 'n1' repeats line 2"},
                      ErrorCase{"no_rows", kNodeHeader, "no nodes"}),
    [](const auto& i) { return i.param.name; });

class PodErrorTest : public ::testing::TestWithParam<ErrorCase> {};
TEST_P(PodErrorTest, NamesFileLineAndField) {
  auto r = ParsePodsCsv(GetParam().text, "pods.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find(GetParam().want), std::string::npos)
      << r.status();
}
INSTANTIATE_TEST_SUITE_P(
    Cases, PodErrorTest,
    ::testing::Values(ErrorCase{"milli_too_big", std::string(kPodHeader) + "p,1,1,1,1001,\n",
                                "pods.csv:2: field gpu_milli: 1001 is above 1000"},
                      ErrorCase{"milli_zero", std::string(kPodHeader) + "p,1,1,1,0,\n",
                                "field gpu_milli: 0 with num_gpu 1"},
                      ErrorCase{"multi_partial", std::string(kPodHeader) + "p,1,1,2,500,\n",
                                "multi-GPU tasks take whole GPUs"},
                      ErrorCase{"spec_unknown", std::string(kPodHeader) + "p,1,1,1,500,T4|H100\n",
                                "field gpu_spec: unknown GPU model 'H100'"},
                      ErrorCase{"name_empty", std::string(kPodHeader) + ",1,1,1,500,\n",
                                "pods.csv:2: field name: empty"}),
    [](const auto& i) { return i.param.name; });

TEST(TraceTest, ParsesByHeaderNameWithExtraAndMissingOptionalColumns) {
  auto nodes = ParseNodesCsv(
      "model,gpu,sn,memory_mib,cpu_milli\r\nT4,2,a,1024,8000\r\n\r\n,0,b,2048,4000\r\n", "n.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "a");
  EXPECT_EQ((*nodes)[0].gpus, 2);
  EXPECT_EQ((*nodes)[0].model, "T4");
  EXPECT_EQ((*nodes)[1].cpu_milli, 4000);
  auto pods = ParsePodsCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,100,10,1,460\np2,100,10,0,\n", "p.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ((*pods)[0].total_gpu_milli(), 460);
  EXPECT_EQ((*pods)[1].num_gpu, 0);
  auto spec =
      ParsePodsCsv(std::string(kPodHeader) + "p,1,1,1,500,V100M16|V100M32|V100M32\n", "p.csv");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)[0].gpu_spec, (std::vector<std::string>{"V100M16", "V100M32"}));
}

TEST(TraceTest, MissingFileIsAnError) {
  auto r = ReadNodesCsv("/nonexistent/nodes.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("/nonexistent/nodes.csv: cannot open"),
            std::string::npos);
}

}  // namespace
}  // namespace hami::sim
