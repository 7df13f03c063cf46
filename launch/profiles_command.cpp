// dlscale profiles: the cluster profiles this user has, and which one
// `dlscale submit` uses when none is named.
#include <cstdlib>
#include <iomanip>
#include <iostream>

#include "launch/commands.h"
#include "slurm/profiles.h"

namespace dlscale {

int profiles_command(const Args& args, Communicator& comm) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    if (comm.rank() == 0)
      std::cout << "usage: dlscale profiles\n"
                   "Lists the cluster profiles (file: $DLSCALE_PROFILES, $XDG_CONFIG_HOME/dlscale/profiles.ini\n"
                   "or ~/.config/dlscale/profiles.ini; format in docs/slurm.md); * marks the default.\n";
    return 0;
  }
  if (!args.empty()) throw UsageError("profiles: unexpected argument '" + args[0] + "' (usage: dlscale profiles)");
  if (comm.rank() != 0) return 0;
  ProfileSet set = load_profiles(profiles_path());
  const std::string default_name = set.default_name();
  const char* env = std::getenv("DLSCALE_PROFILE");
  std::cout << "profiles file: " << set.path << (set.file_exists ? "" : " (none: only the built-in profile)") << "\n";
  std::string why = env && *env ? "DLSCALE_PROFILE" : !set.file_default.empty() ? "the file's default" : "built-in";
  std::cout << "default: " << default_name << " (" << why << ")"
            << (set.find(default_name) ? "" : ": no such profile, submit will refuse it") << "\n";
  std::size_t width = 4;
  for (const auto& p : set.profiles) width = std::max(width, p.name.size());
  for (const auto& p : set.profiles)
    std::cout << (p.name == default_name ? "* " : "  ") << std::left << std::setw(static_cast<int>(width)) << p.name
              << "  " << std::setw(5) << p.type << "  " << describe(p) << "\n";
  return 0;
}

}  // namespace dlscale
