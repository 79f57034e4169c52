#pragma once
// The extender's name for the test certificate writer (src/http/testing/self_signed.h).
#include "http/testing/self_signed.h"

namespace hami::extender::testing {
using http::testing::WriteSelfSigned;
}  // namespace hami::extender::testing
