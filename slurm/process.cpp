// Child processes, without the MPI variables of this process's own MPI_Init (see process.h).
#include "slurm/process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/core/error.h"

extern char** environ;

namespace dlscale {

namespace {

std::vector<std::string> capture_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

// Initialized when the library loads, before main() and so before MPI_Init.
const std::vector<std::string> g_startup_environment = capture_environment();

bool is_mpi_variable(const std::string& entry) {
  for (const char* prefix : {"OMPI_", "PMIX_", "OPAL_", "ORTE_", "PRTE_"})
    if (entry.rfind(prefix, 0) == 0) return true;
  return false;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Reads both pipes until both are closed, so neither can fill up and block the child.
void drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? out : err).append(buf, static_cast<std::size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

}  // namespace

std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (const auto& entry : capture_environment())
    if (!is_mpi_variable(entry) ||
        std::find(g_startup_environment.begin(), g_startup_environment.end(), entry) != g_startup_environment.end())
      env.push_back(entry);
  return env;
}

ProgramResult run_program(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in, env = child_environment();
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) fail("cannot create a pipe to run " + argv[0]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  pid_t pid = 0;
  auto c_argv = c_strings(argv), c_env = c_strings(env);
  int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  ProgramResult result;
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    result.exit_code = 127;
    result.err = argv[0] + ": " + std::strerror(rc);
    return result;
  }
  drain(out_pipe[0], err_pipe[0], result.out, result.err);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

long start_detached(const std::vector<std::string>& argv_in, const std::string& log) {
  std::vector<std::string> argv = argv_in, env = child_environment();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  auto c_argv = c_strings(argv), c_env = c_strings(env);
  int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) fail("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

unsigned long long process_start_time(long pid) {
  if (pid <= 0) return 0;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return 0;
  // The command name (field 2) may hold spaces: fields count from the last ')'.
  auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(close_paren + 2));
  std::string field;
  char state = 0;
  fields >> state;
  if (state == 'Z' || state == 'X') return 0;  // exited, not yet reaped
  for (int i = 4; i <= 22 && fields >> field; ++i)
    if (i == 22) return std::stoull(field);
  return 0;
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail("cannot find the dlscale executable (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace dlscale
