// Prints when this rank entered and left MPI_Init, in seconds of the system
// clock (one clock for all the test cluster's nodes: they are namespaces of
// one machine). startup_barrier_test.sh checks with it that MPI_Init waits
// for every node: no rank may leave it before the last rank entered.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

static double seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  const double entered = seconds_now();
  MPI_Init(&argc, &argv);
  const double left = seconds_now();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  std::printf("rank %d host %s entered %.3f left %.3f\n", rank, host, entered, left);
  MPI_Finalize();
  return 0;
}
