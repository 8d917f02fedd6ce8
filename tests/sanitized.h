// Whether this test program is built with a sanitizer (ASan + UBSan, or TSan), where code runs
// 5-50x slower. The few tests whose size serves only to show that a model learns (not to reach a
// code path) run smaller there, with the same code paths; the Release suite runs them at full size
// and checks what only the full size can show (docs/ci.md).
#pragma once

namespace tessera::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace tessera::testing
