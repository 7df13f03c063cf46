// Error construction and the MPI/HDF5 checks (CUDA checks live in cuda_check.h).
#include "runtime/core/error.h"

#include <mpi.h>

#include <sstream>
#include <string>

namespace dlscale {

void fail(const std::string& message) { throw Error(message); }

namespace {
// "<message> (<call> failed at <file>:<line>: <detail>)"
std::string call_failure(std::string_view message, std::string_view call, std::string_view detail, const char* file,
                         int line) {
  std::ostringstream text;
  text << message << " (" << call << " failed at " << file << ":" << line;
  if (!detail.empty()) text << ": " << detail;
  text << ")";
  return text.str();
}
}  // namespace

void fail_call(std::string_view message, std::string_view call, std::string_view detail, const char* file,
               int line) {
  throw Error(call_failure(message, call, detail, file, line));
}

void check_mpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char detail[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, detail, &length);
  throw MpiError(call_failure("MPI communication failed", call, std::string_view(detail, length), file, line));
}

void check_hdf5(long long rc, const char* call, const char* file, int line) {
  if (rc >= 0) return;
  fail_call("HDF5 operation failed", call, "", file, line);
}

}  // namespace dlscale
