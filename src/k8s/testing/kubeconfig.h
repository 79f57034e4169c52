#pragma once
// The kubeconfig the daemon tests hand to `hami <command> --kubeconfig`: one cluster at `server`,
// one user with the bearer token "t" (the fake API server's default identity), one context.
#include <fstream>
#include <string>

namespace hami::k8s::testing {

// Writes the kubeconfig to `path`; returns `path`.
inline std::string WriteTokenKubeconfig(const std::string& path, const std::string& server) {
  std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                         "clusters:\n- name: c\n  cluster:\n    server: "
                      << server
                      << "\nusers:\n- name: u\n  user:\n    token: t\n"
                         "contexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n";
  return path;
}

}  // namespace hami::k8s::testing
