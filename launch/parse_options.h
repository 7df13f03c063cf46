// Command-line parsing shared by the subcommands: no prefix guessing (an
// abbreviated or misspelt option is an error, never another option) and
// Boost's errors turned into UsageError.
#pragma once

#include <boost/program_options.hpp>

#include "launch/commands.h"

namespace dlscale {

inline void parse_options(const Args& args, const boost::program_options::options_description& desc,
                          boost::program_options::variables_map& vm,
                          const boost::program_options::positional_options_description* positional = nullptr) {
  namespace po = boost::program_options;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  try {
    po::command_line_parser parser(args);
    parser.options(desc).style(style);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace dlscale
