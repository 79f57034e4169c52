// fake-apiserver: serves the fake Kubernetes API server on a port, seeded from JSON or YAML files,
// for manual testing with kubectl or the hami binaries:
//   fake-apiserver --port 8080 --seed cluster.yaml
//   kubectl --server http://127.0.0.1:8080 get pods -A
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "k8s/testing/fake_apiserver.h"

namespace {

using nlohmann::json;

json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& v : n) a.push_back(YamlToJson(v));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "false") return s == "true";
      if (s == "null" || s == "~") return nullptr;
      char* end = nullptr;
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == '\0') return i;
      return s;
    }
    default:
      return nullptr;
  }
}

// Reads JSON, or YAML with one or more documents (each a List or an object).
hami::StatusOr<json> ReadSeed(const std::string& path) {
  std::ifstream f(path);
  if (!f) return hami::NotFound("seed file ", path, " cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  auto j = json::parse(text, nullptr, false);
  if (!j.is_discarded()) return j;
  try {
    json all = json::array();
    for (const auto& doc : YAML::LoadAll(text)) {
      if (!doc.IsNull()) all.push_back(YamlToJson(doc));
    }
    return all;
  } catch (const YAML::Exception& e) {
    return hami::InvalidArgument("seed file ", path, ": line ", e.mark.line + 1, ": ", e.msg);
  }
}

volatile std::sig_atomic_t g_stop = 0;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fake Kubernetes API server (hami-cpp test tool)"};
  hami::k8s::testing::FakeApiServerOptions opts;
  std::vector<std::string> seeds;
  app.add_option("--host", opts.host, "address to listen on")->capture_default_str();
  app.add_option("--port", opts.port, "port (0 = any free port, printed on start)")
      ->capture_default_str();
  app.add_option("--seed", seeds, "JSON or YAML file(s) with objects (List, array or documents)");
  app.add_option("--tls-cert-file", opts.tls_cert_file, "serve HTTPS with this certificate (PEM)");
  app.add_option("--tls-key-file", opts.tls_key_file, "private key for --tls-cert-file (PEM)");
  CLI11_PARSE(app, argc, argv);

  hami::k8s::testing::FakeApiServer server(opts);
  for (const auto& path : seeds) {
    auto j = ReadSeed(path);
    hami::Status s = j.ok() ? server.Seed(*j) : j.status();
    if (!s.ok()) {
      std::fprintf(stderr, "fake-apiserver: %s: %s\n", path.c_str(),
                   std::string(s.message()).c_str());
      return 2;
    }
  }
  if (auto s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "fake-apiserver: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("fake-apiserver listening on %s\n", server.url().c_str());
  std::fflush(stdout);
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.Stop();
  return 0;
}
