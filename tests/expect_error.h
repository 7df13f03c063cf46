// expect_error(fn, part): fn must throw dlscale::Error whose message contains
// part. Shared by the tests that check error sentences.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "runtime/core/error.h"

namespace dlscale::testing {

template <class Fn>
void expect_error(Fn&& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace dlscale::testing
