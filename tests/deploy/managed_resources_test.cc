// Every extended resource a vendor of the registry knows must be ignored by kube-scheduler's own
// NodeResourcesFit (pluginConfig ignoredResources of the hami-scheduler profile), in every shipped
// manifest: otherwise it rejects pods that ask for it (no node advertises e.g. hygon.com/dcumem).
// The extender has no managedResources, so kube-scheduler calls it for every pod of the profile,
// those without devices too (docs/sim.md: the policy places them as `hami sim` does).
// The names are taken from the registry itself, built from upstream's chart-rendered
// device-config.yaml, so a new vendor row cannot be forgotten here.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "vendors/registry.h"

namespace hami {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> RegistryResources() {
  YAML::Node config = YAML::Load(Read("src/vendors/testdata/upstream-device-config.yaml"));
  std::set<std::string> names;
  for (const auto& row : vendors::VendorRegistry()) {
    auto made = row.make(config[row.section]);
    EXPECT_TRUE(made.ok()) << row.section << ": " << made.status();
    if (!made.ok()) continue;
    EXPECT_FALSE(made->empty())
        << "section " << row.section
        << " of upstream-device-config.yaml yields no vendor; add one so its resources are checked";
    for (const auto& v : *made) {
      const auto& r = v->resources();
      for (const std::string* n :
           {&r.count, &r.memory, &r.memory_percentage, &r.cores, &r.priority})
        if (!n->empty()) names.insert(*n);
    }
  }
  return names;
}

// The helm chart's list of resource names (files/managed-resources.yaml); every entry
// ignoredByScheduler.
std::set<std::string> Managed(const YAML::Node& list, const std::string& where) {
  std::set<std::string> names;
  EXPECT_TRUE(list.IsSequence()) << where << ": managedResources is not a list";
  if (!list.IsSequence()) return names;
  for (const auto& e : list) {
    names.insert(e["name"].as<std::string>());
    EXPECT_TRUE(e["ignoredByScheduler"] && e["ignoredByScheduler"].as<bool>())
        << where << ": " << e["name"].as<std::string>() << " is not ignoredByScheduler";
  }
  return names;
}

std::set<std::string> FromConfigMap(const std::string& path) {
  YAML::Node cm;
  for (const auto& doc : YAML::LoadAll(Read(path)))
    if (doc["kind"] && doc["kind"].as<std::string>() == "ConfigMap") cm = doc;
  EXPECT_TRUE(cm) << path << ": no ConfigMap";
  if (!cm) return {};
  YAML::Node config = YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  EXPECT_EQ(config["percentageOfNodesToScore"].as<int>(0), 100) << path;
  EXPECT_EQ(config["extenders"][0]["urlPrefix"].as<std::string>(""), "http://127.0.0.1:9444")
      << path;
  EXPECT_FALSE(config["extenders"][0]["managedResources"])
      << path << ": managedResources keeps pods without devices from the extender (docs/sim.md)";
  std::set<std::string> names;
  for (const auto& pc : config["profiles"][0]["pluginConfig"])
    if (pc["name"].as<std::string>("") == "NodeResourcesFit")
      for (const auto& n : pc["args"]["ignoredResources"]) names.insert(n.as<std::string>());
  return names;
}

void ExpectCovers(const std::set<std::string>& have, const std::string& where) {
  static const std::set<std::string> want = RegistryResources();
  ASSERT_GT(want.size(), 10u);
  for (const auto& n : want) EXPECT_TRUE(have.count(n)) << where << " does not ignore " << n;
}

TEST(ManagedResourcesTest, KustomizeBaseListsEveryVendorResource) {
  ExpectCovers(FromConfigMap("deploy/base/scheduler-config.yaml"),
               "deploy/base/scheduler-config.yaml");
}

TEST(ManagedResourcesTest, KustomizeDevOverlayListsEveryVendorResource) {
  ExpectCovers(FromConfigMap("deploy/overlays/dev/scheduler-config.yaml"),
               "deploy/overlays/dev/scheduler-config.yaml");
}

TEST(ManagedResourcesTest, HelmChartListsEveryVendorResource) {
  const std::string path = "deploy/helm/hami/files/managed-resources.yaml";
  ExpectCovers(Managed(YAML::Load(Read(path)), path), path);
}

}  // namespace
}  // namespace hami
