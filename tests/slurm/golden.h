// Golden-file comparison for generated scripts: a script must equal
// tests/slurm/golden/<name> exactly. DLSCALE_UPDATE_GOLDEN=1 rewrites the
// files instead (then review the diff before committing it).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dlscale::testing {

inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::filesystem::path file = std::filesystem::path(DLSCALE_GOLDEN_DIR) / name;
  if (const char* update = std::getenv("DLSCALE_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(file) << actual;
    return;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in) << "no golden file " << file << " (DLSCALE_UPDATE_GOLDEN=1 writes it); the script is:\n" << actual;
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "differs from " << file << " (DLSCALE_UPDATE_GOLDEN=1 rewrites it)";
}

}  // namespace dlscale::testing
