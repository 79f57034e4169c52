#pragma once
// IMEX channels handed to every GPU container (upstream v2.11, from NVIDIA's device plugin):
// multi-node NVLink memory export needs the container to hold the channel's device node
// /dev/nvidia-caps-imex-channels/channel<N>. The admin names the channels once for the node
// (--imex-channel-ids / env IMEX_CHANNEL_IDS); the plugin checks at start that each is a character
// device and then names them to the runtime in every GPU container's Allocate answer, beside the
// device list and under the same strategy (deviceplugin/allocate_env.h):
//
//   envvar           NVIDIA_IMEX_CHANNELS=<id>,<id>
//   volume-mounts    /dev/null mounted at /var/run/nvidia-container-devices/imex/<id>
//   cdi-annotations, cdi-cri
//                    the CDI device "<vendor>/imex-channel=<id>" (<vendor> of --cdi-kind)
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::deviceplugin {

inline constexpr char kEnvImexChannels[] = "NVIDIA_IMEX_CHANNELS";
inline constexpr char kImexChannelDir[] = "/dev/nvidia-caps-imex-channels";
// volume-mounts: the channels' mount points, under the device list's root.
inline constexpr char kImexVolumeMountsDir[] = "imex";
// The CDI class of IMEX channels (NVIDIA's CDI specs name them "<vendor>/imex-channel=<id>").
inline constexpr char kImexCdiClass[] = "imex-channel";

// "0", "0,3", " 1 , 2 ": comma separated channel numbers (0 to 2147483647), blanks around each
// ignored; "" (or only blanks) is none. Errors name the bad entry: not a number, negative, too
// large, empty between commas, or given twice.
StatusOr<std::vector<int>> ParseImexChannelIds(std::string_view text);

// /dev/nvidia-caps-imex-channels/channel<id>.
std::string ImexChannelPath(int id);

// The channels among `ids` whose node is a character device, looked for at `dev_root` + the
// channel's path (the host's /dev as the plugin sees it, e.g. a host path mount) and, when
// dev_root is not "/", at the path itself. A channel that is missing or not a character device is
// skipped with a warning, or, when `required`, fails start: the error names the channel and why.
StatusOr<std::vector<int>> ResolveImexChannels(const std::vector<int>& ids, bool required,
                                               const std::string& dev_root);

}  // namespace hami::deviceplugin
