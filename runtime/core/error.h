// The one error path of dlscale: every failure becomes a dlscale::Error that
// carries the failing call, file:line and a sentence a user understands.
// Only main() catches it; library code never calls exit().
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace dlscale {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A mistake in the command line, config file or the folders it names: the
// CLI exits with code 2 for it. It may still arise on some ranks only (a file
// missing on one node), so it ends the whole job like any other error.
class UsageError : public Error {
 public:
  using Error::Error;
};

// An MPI call that failed: most often a peer gone (its node, its link), which
// the trainer names from the heartbeats before the error ends the rank.
class MpiError : public Error {
 public:
  using Error::Error;
};

// Throws Error("<message>") for mistakes of the user (bad option, bad file):
// those need no file:line, they need the name of the thing that is wrong.
[[noreturn]] void fail(const std::string& message);

// Throws Error("<message> (<call> failed at <file>:<line>: <detail>)").
[[noreturn]] void fail_call(std::string_view message, std::string_view call, std::string_view detail,
                            const char* file, int line);

// Throws MpiError, worded as fail_call.
void check_mpi(int rc, const char* call, const char* file, int line);
// HDF5 calls return a negative herr_t/hid_t on failure.
void check_hdf5(long long rc, const char* call, const char* file, int line);

}  // namespace dlscale

#define DLSCALE_CHECK_MPI(call) ::dlscale::check_mpi((call), #call, __FILE__, __LINE__)
#define DLSCALE_CHECK_HDF5(call) ::dlscale::check_hdf5(static_cast<long long>(call), #call, __FILE__, __LINE__)
// For invariants the user can break (shapes, options): `what` is the sentence.
#define DLSCALE_REQUIRE(cond, what)      \
  do {                                   \
    if (!(cond)) ::dlscale::fail(what);  \
  } while (0)
