/* Internal: FERRY_ASSERT, a check of the library's own invariants (a slot's
 * counters, a lock the caller must hold), never of user input or a failed call.
 * It is on in debug and sanitizer builds (the Makefile adds -DFERRY_DEBUG=1 for
 * `make DEBUG=1` and whenever SAN is set) and compiles to nothing in release
 * builds, where the condition is still type-checked but never evaluated: keep
 * side effects out of it. */
#ifndef FERRY_COMMON_ASSERT_H
#define FERRY_COMMON_ASSERT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Prints "file:line: internal assertion failed: cond" to stderr and aborts. */
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void ferry_assert_fail(const char *file, int line, const char *cond);

#if FERRY_DEBUG

#define FERRY_ASSERT(cond) ((cond) ? (void)0 : ferry_assert_fail(__FILE__, __LINE__, #cond))

#else

/* sizeof: checked by the compiler, never run, and variables used only here
 * still count as used. */
#define FERRY_ASSERT(cond) ((void)sizeof(!(cond)))

#endif

#ifdef __cplusplus
}
#endif

#endif
