// Fibers for the SIMT emulator: each emulated GPU thread runs on a stack of its own, so that a
// thread reaching __syncthreads() (or a warp shuffle) can be suspended in the middle of the kernel
// and resumed after the other threads of its block arrive — a barrier is a real barrier. A thread
// that waits hands over to the next thread of the scheduler's round directly (switch_to).
//
// The switch saves the callee-saved registers and the stack pointer (x86-64: ~20 instructions;
// elsewhere ucontext, whose swapcontext also makes a system call). A fiber's stack is mmap'ed with
// a guard page below it, so a kernel that overflows it faults instead of corrupting memory; the
// switches are annotated for AddressSanitizer, which then checks kernel code run on fibers too.
#pragma once
#include <cstddef>

namespace tessera::cuda::emu {

class Fiber {
 public:
  explicit Fiber(size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // What a fiber's entry returns: the fiber to run next, or null to return to the code that
  // called resume().
  using Entry = Fiber* (*)(void*);
  // Prepares the fiber to run entry(arg) from the start on the next switch to it (a finished or
  // abandoned fiber can be restarted).
  void start(Entry entry, void* arg);
  // Called outside any fiber (the scheduler): runs this fiber, and whichever fibers it switches to,
  // until one of them switches back with switch_to(nullptr) or its entry returns null.
  void resume();
  bool finished() const;

  // Called on a fiber: pauses it and runs `next` (started, not finished), or returns from
  // resume() when `next` is null. The paused fiber continues here when something switches to it.
  // Going from fiber to fiber directly is one switch where a return to the scheduler would be two.
  static void switch_to(Fiber* next);
  // The fiber running on this OS thread, or null outside any fiber.
  static Fiber* current();

  struct Impl;  // opaque outside fiber.cpp
  Impl* impl() const { return impl_; }

 private:
  Impl* impl_;
};

}  // namespace tessera::cuda::emu
