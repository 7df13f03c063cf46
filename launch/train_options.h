// `dlscale train` options: one table of names shared by the command line and
// the INI config file (the command line wins), turned into TrainingOptions.
#pragma once

#include <string>
#include <vector>

#include "launch/commands.h"
#include "runtime/training/training_options.h"

namespace dlscale {

// Parses args (a config file as the first positional argument or --config).
// Relative data paths are resolved against the working directory; the
// resolved options become TrainingOptions::config_text. Throws UsageError.
TrainingOptions parse_training_options(const Args& args, Communicator& comm);
// The same for one process without MPI (tests, the fuzz target): a default
// output folder is this process's own choice, agreed with nobody.
TrainingOptions parse_training_options(const Args& args);
std::string training_options_help();
// The option names (what a sweep may vary).
std::vector<std::string> training_option_names();

}  // namespace dlscale
