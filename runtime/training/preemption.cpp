// Signal handlers that turn SIGTERM/SIGUSR1 into a flag read between steps.
#include "runtime/training/preemption.h"

#include <csignal>

namespace dlscale {

namespace {
volatile std::sig_atomic_t requested = 0;
extern "C" void on_stop_signal(int) { requested = 1; }
}  // namespace

void install_preemption_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

bool preemption_requested() { return requested != 0; }
void clear_preemption_request() { requested = 0; }

}  // namespace dlscale
