// Quoting of values in generated scripts: each quoted string, read back by
// bash, is exactly the original, and nothing in it runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/core/error.h"
#include "slurm/process.h"
#include "slurm/quoting.h"

namespace dlscale {
namespace {

namespace fs = std::filesystem;

// What bash makes of `word`: printf's output of it as one argument.
std::string bash_reads(const std::string& word, const std::string& env = "") {
  const fs::path script = fs::temp_directory_path() / ("dlscale-quote-" + std::to_string(getpid()) + ".sh");
  const fs::path out = script.string() + ".out";
  std::ofstream(script) << env << "printf '%s' " << word << " >" << shell_quote(out.string()) << "\n";
  int rc = std::system(("bash " + script.string()).c_str());
  std::ifstream in(out);
  std::stringstream s;
  s << in.rdbuf();
  fs::remove(script);
  fs::remove(out);
  EXPECT_EQ(rc, 0) << word;
  return s.str();
}

const char* kNasty[] = {"",
                        "plain",
                        "with space",
                        "'; touch /tmp/dlscale-pwned-q #",
                        "it's",
                        "''",
                        "\"double\" and \\backslash\\",
                        "$(touch /tmp/dlscale-pwned-q)",
                        "`touch /tmp/dlscale-pwned-q`",
                        "$HOME ${PATH} $1 !! * ? [a] ~",
                        "a;b|c&d>e<f(g)h{i}",
                        "#not a comment",
                        "-n"};

TEST(ShellQuote, BashReadsBackExactlyTheValue) {
  fs::remove("/tmp/dlscale-pwned-q");
  for (const char* s : kNasty) EXPECT_EQ(bash_reads(shell_quote(s)), s);
  EXPECT_FALSE(fs::exists("/tmp/dlscale-pwned-q"));
}

TEST(ShellQuote, SingleQuotesAreClosedEscapedAndReopened) {
  EXPECT_EQ(shell_quote("a'b"), "'a'\\''b'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("/x y"), "'/x y'");
}

TEST(SbatchQuote, EscapesQuotesAndBackslashes) {
  EXPECT_EQ(sbatch_quote("mlp"), "\"mlp\"");
  EXPECT_EQ(sbatch_quote("'; touch /tmp/pwned #"), "\"'; touch /tmp/pwned #\"");
  EXPECT_EQ(sbatch_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
}

TEST(SlurmFilename, PercentIsDoubled) {
  EXPECT_EQ(slurm_filename("/jobs/100%/log.txt"), "/jobs/100%%/log.txt");
  EXPECT_EQ(slurm_filename("/plain"), "/plain");
}

TEST(ShellPathExpression, OnlyTheLeadingVariableExpands) {
  const std::string env = "export DLQ='/tmp/x y';\n";
  EXPECT_EQ(shell_path_expression("$DLQ/a b", "stage-dir"), "\"${DLQ}\"'/a b'");
  EXPECT_EQ(bash_reads(shell_path_expression("$DLQ/a b", "stage-dir"), env), "/tmp/x y/a b");
  EXPECT_EQ(bash_reads(shell_path_expression("${DLQ}sub/$(x)", "stage-dir"), env), "/tmp/x ysub/$(x)");
  EXPECT_EQ(bash_reads(shell_path_expression("$DLQ", "stage-dir"), env), "/tmp/x y");
  EXPECT_EQ(shell_path_expression("/scratch/$USER", "stage-dir"), "'/scratch/$USER'");
  EXPECT_THROW(shell_path_expression("$(touch /tmp/x)", "stage-dir"), UsageError);
  EXPECT_THROW(shell_path_expression("$1/x", "stage-dir"), UsageError);
  EXPECT_THROW(shell_path_expression("${A;b}/x", "stage-dir"), UsageError);
  EXPECT_THROW(shell_path_expression("${A", "stage-dir"), UsageError);
}

TEST(RequirePrintable, RefusesNewlines) {
  EXPECT_NO_THROW(require_printable("fine, with 'quotes' and ;", "name"));
  try {
    require_printable("two\nlines", "the job name");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the job name"), std::string::npos);
  }
  EXPECT_THROW(require_printable("tab\there", "x"), UsageError);
}

// sbatch exports the environment to the job: what MPI_Init of a singleton
// adds must not get there, what the user set must.
TEST(ChildEnvironment, DropsMpiVariablesAddedSinceStart) {
  setenv("OMPI_MCA_ess", "singleton", 1);
  setenv("PMIX_NAMESPACE", "12345", 1);
  setenv("DLSCALE_TEST_SETTING", "kept", 1);
  auto env = child_environment();
  auto has = [&](const std::string& entry) { return std::find(env.begin(), env.end(), entry) != env.end(); };
  EXPECT_FALSE(has("OMPI_MCA_ess=singleton"));
  EXPECT_FALSE(has("PMIX_NAMESPACE=12345"));
  EXPECT_TRUE(has("DLSCALE_TEST_SETTING=kept"));
  if (const char* root = std::getenv("OMPI_ALLOW_RUN_AS_ROOT"))  // set before start: kept
    EXPECT_TRUE(has(std::string("OMPI_ALLOW_RUN_AS_ROOT=") + root));
  unsetenv("OMPI_MCA_ess");
  unsetenv("PMIX_NAMESPACE");
}

TEST(SafeFileName, KeepsOnlyHarmlessCharacters) {
  EXPECT_EQ(safe_file_name("mlp"), "mlp");
  EXPECT_EQ(safe_file_name("'; touch /tmp/pwned #"), "touch_tmp_pwned");
  EXPECT_EQ(safe_file_name("../../etc"), "etc");
  EXPECT_EQ(safe_file_name("a b/c"), "a_b_c");
  EXPECT_EQ(safe_file_name("///"), "job");
  EXPECT_EQ(safe_file_name(std::string(100, 'x')).size(), 60u);
}

}  // namespace
}  // namespace dlscale
