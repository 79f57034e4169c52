#pragma once
// Where the API server is and how to authenticate: from a kubeconfig file or from the in-cluster
// service account. All files (CA, client certificate and key) are read when the config is loaded,
// so a broken path fails at start-up with a message that names the file and the kubeconfig field.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::k8s {

struct ClientConfig {
  std::string server;              // "https://host:port" (or http:// for local fakes)
  std::string bearer_token;        // sent as "Authorization: Bearer ..."
  std::string token_file;          // when set, the token is re-read from here (bound tokens rotate)
  std::string username, password;  // basic auth (kubeconfig users[].user.username/password)
  std::string ca_pem;              // PEM bundle to verify the server; empty = system CAs
  std::string client_cert_pem;     // client certificate (PEM), with client_key_pem
  std::string client_key_pem;
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;             // overrides the name checked in the server certificate
  std::string namespace_name = "default";  // context namespace / service account namespace

  // Flow control and timeouts (not part of kubeconfig; flags set them).
  double qps = 50;  // <= 0: no client-side limit
  int burst = 100;
  int64_t request_timeout_ms = 30'000;  // per request, excluding watches
  int64_t connect_timeout_ms = 10'000;
  int max_retries = 4;  // retries of 429/5xx/transport failures, with backoff
  // The most bytes one response body (and one watch event) may take; a longer one is cut off with
  // ResourceExhausted, not retried. Lists are read in pages (ListPages), so a page of 500 pods
  // (5 MB with managedFields) is far below it.
  int64_t max_response_bytes = 64 << 20;
  std::string user_agent = "hami-cpp";
};

// Parses kubeconfig YAML. `source` names the file in errors and is the base for relative paths;
// `context` selects a context (empty = current-context).
StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, std::string_view source,
                                       std::string_view context = "");
StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, std::string_view context = "");

// In-cluster config from KUBERNETES_SERVICE_HOST/PORT and the service account files in `sa_dir`.
// Fails with FailedPrecondition when the environment variables are missing (not in a cluster).
StatusOr<ClientConfig> InClusterConfig(
    std::string_view sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// Same, with host and port given (for tests).
StatusOr<ClientConfig> InClusterConfigFrom(std::string_view host, std::string_view port,
                                           std::string_view sa_dir);

// The usual precedence: `kubeconfig` if non-empty, else in-cluster, else $KUBECONFIG (first
// entry), else ~/.kube/config.
StatusOr<ClientConfig> LoadDefaultConfig(const std::string& kubeconfig = "");

}  // namespace hami::k8s
