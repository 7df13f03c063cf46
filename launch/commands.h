// The dlscale subcommands; each parses its own options and returns the exit code.
#pragma once

#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/error.h"

namespace dlscale {

// A mistake in the command line or config file: identical on every rank, so
// only rank 0 prints it and no rank needs to abort the others.
class UsageError : public Error {
 public:
  using Error::Error;
};

using Args = std::vector<std::string>;  // the arguments after the subcommand

int train_command(const Args& args, Communicator& comm);
int shard_command(const Args& args, Communicator& comm);
int predict_command(const Args& args, Communicator& comm);
int info_command(const Args& args, Communicator& comm);

}  // namespace dlscale
