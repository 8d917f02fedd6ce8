// Fibers for the SIMT emulator: each emulated GPU thread runs on a stack of its own, so that a
// thread reaching __syncthreads() (or a warp shuffle) can be suspended in the middle of the kernel
// and resumed after the other threads of its block arrive — a barrier is a real barrier.
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

  // Prepares the fiber to run entry(arg) from the start on the next resume() (a finished or
  // abandoned fiber can be restarted).
  void start(void (*entry)(void*), void* arg);
  // Runs the fiber until it calls Fiber::suspend() or its entry returns.
  void resume();
  bool finished() const;

  // Called on a fiber: switches back to the code that resumed it.
  static void suspend();
  // The fiber running on this OS thread, or null outside any fiber.
  static Fiber* current();

  struct Impl;

 private:
  Impl* impl_;
};

}  // namespace tessera::cuda::emu
