#include "k8s/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/libc.h"
#include "common/status.h"

namespace hami::k8s {
namespace {

constexpr size_t kMaxKubeconfigBytes = 4 << 20;
constexpr int kMaxNesting = 64;

StatusOr<std::string> ReadFile(const std::string& path, size_t limit = kMaxKubeconfigBytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot read ", path, ": ", ErrnoText(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (s.size() > limit) return InvalidArgument(path, " is larger than ", limit, " bytes");
  return s;
}

// yaml-cpp recurses per nesting level; refuse absurd nesting before it can exhaust the stack.
bool NestingTooDeep(std::string_view text) {
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

// Context for error messages: the source file and the YAML field path (+ line when known).
struct Where {
  std::string source;
  Status Err(const YAML::Node& node, std::string_view field, std::string_view what) const {
    std::string line;
    if (node.IsDefined() && node.Mark().line >= 0)
      line = StrCat("line ", node.Mark().line + 1, ": ");
    return InvalidArgument("kubeconfig ", source, ": ", line, field, ": ", what);
  }
};

// Optional string field: absent/null -> "", scalar -> value, anything else -> error.
StatusOr<std::string> Str(const Where& w, const YAML::Node& parent, const char* key,
                          std::string_view field) {
  YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return std::string();
  if (!n.IsScalar()) return w.Err(n, field, "expected a string");
  return n.Scalar();
}

StatusOr<bool> Bool(const Where& w, const YAML::Node& parent, const char* key,
                    std::string_view field) {
  YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return false;
  if (!n.IsScalar()) return w.Err(n, field, "expected true or false");
  const std::string& s = n.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return w.Err(n, field, StrCat("expected true or false, got \"", s, "\""));
}

// Finds the entry named `name` in a list of {name, <inner>} and returns the inner map.
StatusOr<YAML::Node> FindNamed(const Where& w, const YAML::Node& root, const char* list,
                               const char* inner, const std::string& name, const std::string& why) {
  YAML::Node items = root[list];
  std::vector<std::string> names;
  if (items.IsDefined() && !items.IsNull()) {
    if (!items.IsSequence()) return w.Err(items, list, "expected a list");
    for (size_t i = 0; i < items.size(); ++i) {
      YAML::Node item = items[i];
      std::string field = StrCat(list, "[", i, "]");
      if (!item.IsMap()) return w.Err(item, field, StrCat("expected a map with name and ", inner));
      HAMI_ASSIGN_OR_RETURN(std::string n, Str(w, item, "name", field + ".name"));
      if (n == name) {
        YAML::Node body = item[inner];
        if (!body.IsDefined() || !body.IsMap())
          return w.Err(item, StrCat(field, ".", inner), "missing or not a map");
        return body;
      }
      names.push_back(n);
    }
  }
  std::string avail;
  for (const auto& n : names) avail += (avail.empty() ? "" : ", ") + n;
  return InvalidArgument("kubeconfig ", w.source, ": ", why, " \"", name, "\" not found in ", list,
                         " (available: ", avail.empty() ? "none" : avail, ")");
}

std::string ResolvePath(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p[0] == '/' || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).string();
}

// PEM from either "<key>-data" (base64) or "<key>" (path). Data wins, as in client-go.
StatusOr<std::string> PemField(const Where& w, const YAML::Node& parent, const std::string& key,
                               const std::string& prefix, const std::string& base_dir) {
  const std::string data_key = key + "-data";
  HAMI_ASSIGN_OR_RETURN(std::string data, Str(w, parent, data_key.c_str(), prefix + data_key));
  if (!data.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(data, &decoded)) {
      return w.Err(parent[data_key], prefix + data_key, "not valid base64");
    }
    if (decoded.find("-----BEGIN") == std::string::npos) {
      return w.Err(parent[data_key], prefix + data_key,
                   "decoded data is not PEM (no -----BEGIN line)");
    }
    return decoded;
  }
  HAMI_ASSIGN_OR_RETURN(std::string path, Str(w, parent, key.c_str(), prefix + key));
  if (path.empty()) return std::string();
  auto content = ReadFile(ResolvePath(base_dir, path), 1 << 20);
  if (!content.ok())
    return w.Err(parent[key], prefix + key, std::string(content.status().message()));
  return *content;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  return s.substr(i);
}

StatusOr<ClientConfig> ParseKubeconfigImpl(std::string_view yaml, const Where& w,
                                           std::string_view context_override) {
  if (yaml.size() > kMaxKubeconfigBytes)
    return InvalidArgument("kubeconfig ", w.source, ": larger than 4 MiB");
  if (NestingTooDeep(yaml))
    return InvalidArgument("kubeconfig ", w.source, ": nested deeper than ", kMaxNesting,
                           " levels");
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig ", w.source, ": line ", e.mark.line + 1,
                           ": not valid YAML: ", e.msg);
  }
  if (!root.IsMap())
    return InvalidArgument("kubeconfig ", w.source,
                           ": expected a YAML map (apiVersion: v1, kind: Config)");
  HAMI_ASSIGN_OR_RETURN(std::string kind, Str(w, root, "kind", "kind"));
  if (!kind.empty() && kind != "Config")
    return w.Err(root["kind"], "kind", StrCat("expected Config, got \"", kind, "\""));

  std::string ctx_name(context_override);
  if (ctx_name.empty()) {
    HAMI_ASSIGN_OR_RETURN(ctx_name, Str(w, root, "current-context", "current-context"));
    if (ctx_name.empty()) {
      return InvalidArgument("kubeconfig ", w.source,
                             ": no current-context set; set one with `kubectl config use-context "
                             "NAME` or pass a context");
    }
  }
  HAMI_ASSIGN_OR_RETURN(YAML::Node ctx,
                        FindNamed(w, root, "contexts", "context", ctx_name, "context"));
  HAMI_ASSIGN_OR_RETURN(std::string cluster_name, Str(w, ctx, "cluster", "context.cluster"));
  HAMI_ASSIGN_OR_RETURN(std::string user_name, Str(w, ctx, "user", "context.user"));
  HAMI_ASSIGN_OR_RETURN(std::string ns, Str(w, ctx, "namespace", "context.namespace"));
  if (cluster_name.empty())
    return w.Err(ctx, StrCat("contexts[", ctx_name, "].context.cluster"), "missing");

  ClientConfig cfg;
  if (!ns.empty()) cfg.namespace_name = ns;
  const std::string base_dir =
      w.source.empty() ? std::string() : std::filesystem::path(w.source).parent_path().string();

  HAMI_ASSIGN_OR_RETURN(YAML::Node cluster,
                        FindNamed(w, root, "clusters", "cluster", cluster_name, "cluster"));
  const std::string cp = StrCat("clusters[", cluster_name, "].cluster.");
  HAMI_ASSIGN_OR_RETURN(cfg.server, Str(w, cluster, "server", cp + "server"));
  if (cfg.server.empty()) return w.Err(cluster, cp + "server", "missing");
  if (cfg.server.rfind("https://", 0) != 0 && cfg.server.rfind("http://", 0) != 0) {
    return w.Err(cluster["server"], cp + "server",
                 StrCat("\"", cfg.server, "\" must start with https:// or http://"));
  }
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  HAMI_ASSIGN_OR_RETURN(cfg.ca_pem, PemField(w, cluster, "certificate-authority", cp, base_dir));
  HAMI_ASSIGN_OR_RETURN(cfg.insecure_skip_tls_verify, Bool(w, cluster, "insecure-skip-tls-verify",
                                                           cp + "insecure-skip-tls-verify"));
  HAMI_ASSIGN_OR_RETURN(cfg.tls_server_name,
                        Str(w, cluster, "tls-server-name", cp + "tls-server-name"));
  if (cfg.insecure_skip_tls_verify && !cfg.ca_pem.empty()) {
    return w.Err(cluster, cp + "insecure-skip-tls-verify",
                 "cannot be combined with certificate-authority(-data); remove one of them");
  }

  if (!user_name.empty()) {
    HAMI_ASSIGN_OR_RETURN(YAML::Node user, FindNamed(w, root, "users", "user", user_name, "user"));
    const std::string up = StrCat("users[", user_name, "].user.");
    HAMI_ASSIGN_OR_RETURN(cfg.bearer_token, Str(w, user, "token", up + "token"));
    HAMI_ASSIGN_OR_RETURN(std::string token_file, Str(w, user, "tokenFile", up + "tokenFile"));
    if (cfg.bearer_token.empty() && !token_file.empty()) {
      cfg.token_file = ResolvePath(base_dir, token_file);
      auto tok = ReadFile(cfg.token_file, 1 << 20);
      if (!tok.ok())
        return w.Err(user["tokenFile"], up + "tokenFile", std::string(tok.status().message()));
      cfg.bearer_token = Trim(*tok);
    }
    HAMI_ASSIGN_OR_RETURN(cfg.client_cert_pem,
                          PemField(w, user, "client-certificate", up, base_dir));
    HAMI_ASSIGN_OR_RETURN(cfg.client_key_pem, PemField(w, user, "client-key", up, base_dir));
    if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty()) {
      return w.Err(user, up + (cfg.client_cert_pem.empty() ? "client-certificate" : "client-key"),
                   "missing: a client certificate needs both client-certificate(-data) and "
                   "client-key(-data)");
    }
    HAMI_ASSIGN_OR_RETURN(cfg.username, Str(w, user, "username", up + "username"));
    HAMI_ASSIGN_OR_RETURN(cfg.password, Str(w, user, "password", up + "password"));
    const bool has_creds =
        !cfg.bearer_token.empty() || !cfg.client_cert_pem.empty() || !cfg.username.empty();
    if (!has_creds && (user["exec"].IsDefined() || user["auth-provider"].IsDefined())) {
      return w.Err(
          user, up + (user["exec"].IsDefined() ? "exec" : "auth-provider"),
          "credential plugins are not supported; use a token, tokenFile or client certificate "
          "(for example a service account token)");
    }
  }
  return cfg;
}

}  // namespace

StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, std::string_view source,
                                       std::string_view context) {
  Where w{std::string(source)};
  try {
    return ParseKubeconfigImpl(yaml, w, context);
  } catch (const std::exception& e) {  // yaml-cpp conversions may throw on odd input
    return InvalidArgument("kubeconfig ", w.source, ": ", e.what());
  }
}

StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, std::string_view context) {
  auto text = ReadFile(path);
  if (!text.ok()) return Annotate(text.status(), "kubeconfig");
  return ParseKubeconfig(*text, path, context);
}

StatusOr<ClientConfig> InClusterConfigFrom(std::string_view host, std::string_view port,
                                           std::string_view sa_dir) {
  if (host.empty() || port.empty()) {
    return FailedPrecondition(
        "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set");
  }
  ClientConfig cfg;
  const std::string h(host);
  cfg.server =
      StrCat("https://", h.find(':') != std::string::npos ? StrCat("[", h, "]") : h, ":", port);
  const std::string dir(sa_dir);
  cfg.token_file = dir + "/token";
  auto tok = ReadFile(cfg.token_file, 1 << 20);
  if (!tok.ok()) return Annotate(tok.status(), "in-cluster service account token");
  cfg.bearer_token = Trim(*tok);
  auto ca = ReadFile(dir + "/ca.crt", 1 << 20);
  if (!ca.ok()) return Annotate(ca.status(), "in-cluster CA");
  cfg.ca_pem = *ca;
  auto ns = ReadFile(dir + "/namespace", 4096);
  if (ns.ok() && !Trim(*ns).empty()) cfg.namespace_name = Trim(*ns);
  return cfg;
}

StatusOr<ClientConfig> InClusterConfig(std::string_view sa_dir) {
  return InClusterConfigFrom(GetEnvOr("KUBERNETES_SERVICE_HOST"),
                             GetEnvOr("KUBERNETES_SERVICE_PORT"), sa_dir);
}

StatusOr<ClientConfig> LoadDefaultConfig(const std::string& kubeconfig) {
  if (!kubeconfig.empty()) return LoadKubeconfig(kubeconfig);
  auto in_cluster = InClusterConfig();
  if (in_cluster.ok() || !absl::IsFailedPrecondition(in_cluster.status())) return in_cluster;
  if (std::string env = GetEnvOr("KUBECONFIG"); !env.empty()) {
    std::string first = env.substr(0, env.find(':'));
    return LoadKubeconfig(first);
  }
  if (std::string home = GetEnvOr("HOME"); !home.empty()) {
    std::string path = StrCat(home, "/.kube/config");
    if (std::filesystem::exists(path)) return LoadKubeconfig(path);
  }
  return FailedPrecondition(
      "no Kubernetes config: pass --kubeconfig, set KUBECONFIG, or run in a cluster");
}

}  // namespace hami::k8s
