// Signal handlers that turn SIGTERM/SIGUSR1 into a flag read between steps.
#include "runtime/training/preemption.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace dlscale {

namespace {
volatile std::sig_atomic_t requested = 0;
volatile std::sig_atomic_t boundary_wait_s = 0;  // whole seconds; 0: no bound
volatile std::sig_atomic_t boundary_reached = 0;

// The first stop signal arms an alarm: the handler may only set flags, so
// the bound on the wait for the step boundary is the kernel's timer.
extern "C" void on_stop_signal(int) {
  if (!requested && boundary_wait_s > 0) alarm(static_cast<unsigned>(boundary_wait_s));
  requested = 1;
}

// Only async-signal-safe calls: write(2) and _exit(2).
extern "C" void on_boundary_missed(int) {
  if (boundary_reached) return;
  static const char message[] =
      "dlscale: a stop signal (SIGTERM or SIGUSR1) came and no step boundary was reached within collective-timeout; "
      "exiting without a checkpoint (the newest one written stays whole)\n";
  ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
  _exit(kStepBoundaryMissedExitCode);
}
}  // namespace

void set_step_boundary_wait(double seconds) {
  boundary_wait_s = seconds <= 0 ? 0 : static_cast<std::sig_atomic_t>(seconds < 1 ? 1 : seconds);
}

void step_boundary_reached() {
  boundary_reached = 1;
  alarm(0);
}

void install_preemption_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  struct sigaction missed {};
  missed.sa_handler = on_boundary_missed;
  sigemptyset(&missed.sa_mask);
  sigaction(SIGALRM, &missed, nullptr);
}

bool preemption_requested() { return requested != 0; }
void clear_preemption_request() {
  requested = 0;
  boundary_reached = 0;
  alarm(0);
}

}  // namespace dlscale
