#include "deviceplugin/refit_client.h"

#include "k8s/client.h"

namespace hami::deviceplugin {
namespace {

class SchedulerRefitClient final : public RefitClient {
 public:
  explicit SchedulerRefitClient(std::unique_ptr<k8s::Client> client) : client_(std::move(client)) {}

  StatusOr<std::vector<core::ContainerDevice>> Refit(const core::RefitRequest& request) override {
    HAMI_ASSIGN_OR_RETURN(
        k8s::HttpReply reply,
        client_->Request("POST", "/refit", core::EncodeRefitRequest(request), "application/json"));
    auto response = core::ParseRefitResponse(reply.body);
    if (reply.code != 200) {
      std::string why = response.ok() ? response->failure_reason : "";
      return Unavailable("scheduler refit returned status ", reply.code, why.empty() ? "" : ": ",
                         why);
    }
    if (!response.ok()) return response.status();
    if (!response->succeeded)
      return FailedPrecondition("scheduler refused refit: ", response->failure_reason);
    HAMI_ASSIGN_OR_RETURN(std::vector<core::ContainerDevice> devices,
                          core::DecodeContainerDevices(response->container_devices));
    if (devices.empty()) return FailedPrecondition("scheduler refit returned no devices");
    return devices;
  }

 private:
  std::unique_ptr<k8s::Client> client_;
};

}  // namespace

StatusOr<std::unique_ptr<RefitClient>> NewSchedulerRefitClient(
    const SchedulerRefitOptions& options) {
  std::string endpoint = options.endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (endpoint.rfind("https://", 0) != 0)
    return InvalidArgument("NUMA refit: scheduler endpoint \"", options.endpoint,
                           "\" is not https:// (the request carries the plugin's token)");
  if (options.timeout_ms <= 0) return InvalidArgument("NUMA refit: timeout must be positive");
  k8s::ClientConfig cfg;
  cfg.server = endpoint;
  cfg.ca_pem = options.ca_pem;
  cfg.token_file = options.token_file;
  cfg.request_timeout_ms = options.timeout_ms;
  cfg.connect_timeout_ms = options.timeout_ms;
  cfg.max_retries = 0;
  cfg.qps = 0;
  cfg.user_agent = "hami-cpp-device-plugin/numa-refit";
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::Client> client, k8s::Client::Create(cfg));
  return std::unique_ptr<RefitClient>(std::make_unique<SchedulerRefitClient>(std::move(client)));
}

}  // namespace hami::deviceplugin
