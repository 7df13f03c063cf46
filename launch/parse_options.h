// Command-line parsing shared by the subcommands: no prefix guessing (an
// abbreviated or misspelt option is an error, never another option) and
// Boost's errors turned into UsageError.
#pragma once

#include <boost/program_options.hpp>
#include <cctype>
#include <string>

#include "launch/commands.h"

namespace dlscale {

// Boost.Program_options 1.74 builds its error messages by replacing tokens
// like %canonical_option% and loops for ever when the text it puts in holds
// the token again (found by fuzz_config). No option name or value needs
// such a "%word%" sequence, so it is refused before Boost sees it.
inline void reject_boost_placeholders(const std::string& text, const std::string& where) {
  for (std::size_t open = text.find('%'); open != std::string::npos; open = text.find('%', open + 1)) {
    std::size_t end = open + 1;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
    if (end > open + 1 && end < text.size() && text[end] == '%')
      throw UsageError(where + ": '" + text.substr(open, end + 1 - open) +
                       "' cannot appear in an option name or value");
  }
}

inline void parse_options(const Args& args, const boost::program_options::options_description& desc,
                          boost::program_options::variables_map& vm,
                          const boost::program_options::positional_options_description* positional = nullptr) {
  namespace po = boost::program_options;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  for (const auto& arg : args) reject_boost_placeholders(arg, "command line");
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
