// The live progress bar: drawn in place on a pseudo-terminal (util-linux
// `script` gives the training one), cleared before every table row so rows
// stay whole, never in log.txt, and absent when stdout is a file.
#include <cstdlib>
#include <regex>

#include "cli_helpers.h"

namespace dlscale::testing {
namespace {

class ProgressTerminal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_dataset((dir / "train").string(), separable_images(1600, 4, 1), 2);
    std::ofstream(dir / "mlp.ini") << "train-data = " << (dir / "train").string() << "\n"
                                   << "input = 1x8x8\nlayer = dense units=32\nlayer = relu\n"
                                      "layer = dense units=4\nlayer = softmax\n"
                                      "max-epochs = 3\nmini-batch-size = 16\nverbose-frequency = 25\nthreads = 1\n";
  }
  std::string train(const std::string& run) const {
    return dlscale_binary() + " train " + (dir / "mlp.ini").string() + " --output " + (dir / run).string();
  }
  fs::path dir;
};

// What a terminal leaves visible on each line: the text after the last
// carriage return, without the erase-to-end-of-line codes.
std::vector<std::string> visible_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && line.back() == '\r') line.pop_back();  // the pty's \r\n
    if (auto cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    for (std::size_t k; (k = line.find("\033[K")) != std::string::npos;) line.erase(k, 3);
    lines.push_back(line);
  }
  return lines;
}

TEST_F(ProgressTerminal, BarOnATerminalRowsIntactLogClean) {
  if (std::system("script --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "util-linux script is not installed: no pseudo-terminal to test the bar on";
  RunResult r = run_command("script -qec '" + train("tty") + "' /dev/null </dev/null", dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\repoch 1/3 ["), std::string::npos) << "no bar drawn:\n" << r.out;
  EXPECT_NE(r.out.find("epoch 3/3 [" + std::string(24, '#') + "] 100/100"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" samples/s  ETA "), std::string::npos) << r.out;
  int rows = 0;
  for (const auto& line : visible_lines(r.out)) {
    EXPECT_EQ(line.find("ETA"), std::string::npos) << "the bar was left on a printed line: " << line;
    if (std::regex_search(line, std::regex(R"(^\|\s+\d+ \|\s+\d+ \|)"))) {
      ++rows;
      EXPECT_EQ(line.size(), 120u) << line;  // a whole row, as wide as the table's rules
      EXPECT_EQ(line.back(), '|') << line;
    }
  }
  EXPECT_EQ(rows, 13) << r.out;  // iterations 1, 25, 50, ..., 300 of 3 epochs of 100
  const std::string log = read_file(dir / "tty" / "log.txt");
  EXPECT_EQ(log.find("ETA"), std::string::npos) << log;
  EXPECT_EQ(log.find('\r'), std::string::npos);
  EXPECT_EQ(log.find('\033'), std::string::npos);
}

// Open MPI gives each rank a pty of its own for stdout: what decides is
// whether mpirun's stdout is a terminal.
TEST_F(ProgressTerminal, BarUnderMpirunOnATerminal) {
  if (std::system("script --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "util-linux script is not installed: no pseudo-terminal to test the bar on";
  RunResult r = run_command("script -qec 'mpirun -n 2 --oversubscribe " + train("mpi-tty") + "' /dev/null </dev/null", dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("epoch 3/3 [" + std::string(24, '#') + "] 100/100"), std::string::npos) << r.out;
}

TEST_F(ProgressTerminal, NoBarWhenStdoutIsAFile) {
  for (const std::string& launcher : {std::string(), std::string("mpirun -n 2 --oversubscribe ")}) {
    SCOPED_TRACE(launcher.empty() ? "one process" : launcher);
    const std::string run = launcher.empty() ? "file" : "mpi-file";
    RunResult r = run_command(launcher + train(run), dir);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("ETA"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\r'), std::string::npos);
    EXPECT_EQ(r.out.find('\033'), std::string::npos);
    EXPECT_NE(r.out.find("|       3 |         300 |"), std::string::npos) << r.out;  // the plain rows as before
  }
}

}  // namespace
}  // namespace dlscale::testing
