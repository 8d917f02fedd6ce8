#include "tessera/cuda/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "tessera/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define TS_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_EMU_ASAN 1
#endif
#endif

#if defined(TS_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace tessera::cuda::emu {

namespace {

// AddressSanitizer must be told when the stack changes under it (otherwise it sees a jump to an
// unknown stack and reports false errors); no-ops in other builds.
void asan_start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#if defined(TS_EMU_ASAN)
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

void asan_finish_switch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
#if defined(TS_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

}  // namespace

#if defined(__x86_64__)
// void tessera_emu_switch(void** save_sp, void* next_sp): pushes the System V callee-saved
// registers and the SSE/x87 control words on the current stack, stores the stack pointer in
// *save_sp, loads next_sp and pops the same from there.
extern "C" void tessera_emu_switch(void** save_sp, void* next_sp);
asm(R"(
.text
.globl tessera_emu_switch
.type tessera_emu_switch,@function
tessera_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    stmxcsr 8(%rsp)
    fnstcw (%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    fldcw (%rsp)
    ldmxcsr 8(%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size tessera_emu_switch, .-tessera_emu_switch
.section .note.GNU-stack,"",@progbits
.text
)");
#endif

struct Fiber::Impl {
  Fiber* owner = nullptr;
  void* mapping = nullptr;
  size_t mapping_bytes = 0;
  char* stack_bottom = nullptr;  // lowest usable address (above the guard page)
  size_t stack_bytes = 0;
  void (*entry)(void*) = nullptr;
  void* arg = nullptr;
  bool finished = true;
  // The stack of whoever resumed the fiber (for the switch back and for ASan).
  const void* caller_bottom = nullptr;
  size_t caller_size = 0;
  void* fake_stack = nullptr;
#if defined(__x86_64__)
  void* sp = nullptr;
  void* caller_sp = nullptr;
#else
  ucontext_t context;
  ucontext_t caller_context;
#endif
};

namespace {

thread_local Fiber::Impl* running = nullptr;

[[noreturn]] void finish_and_leave(Fiber::Impl* f) {
  f->finished = true;
  asan_start_switch(nullptr, f->caller_bottom, f->caller_size);  // null: this stack is done
#if defined(__x86_64__)
  tessera_emu_switch(&f->sp, f->caller_sp);
#else
  setcontext(&f->caller_context);
#endif
  __builtin_unreachable();
}

// First frame of every fiber. Entered by the switch's `ret` (x86-64) or by makecontext, never returns.
[[noreturn]] void trampoline() noexcept {
  Fiber::Impl* f = running;
  asan_finish_switch(nullptr, &f->caller_bottom, &f->caller_size);
  f->entry(f->arg);  // must not throw: the emulator's thread body catches everything
  finish_and_leave(f);
}

}  // namespace

Fiber::Fiber(size_t stack_bytes) : impl_(new Impl) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes = (stack_bytes + page - 1) / page * page;
  impl_->owner = this;
  impl_->mapping_bytes = stack_bytes + page;
  impl_->mapping = mmap(nullptr, impl_->mapping_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (impl_->mapping == MAP_FAILED) {
    delete impl_;
    throw Error("cuda emulator: cannot map a fiber stack of " + std::to_string(stack_bytes) + " bytes");
  }
  mprotect(impl_->mapping, page, PROT_NONE);  // guard page: an overflow faults
  impl_->stack_bottom = static_cast<char*>(impl_->mapping) + page;
  impl_->stack_bytes = stack_bytes;
}

Fiber::~Fiber() {
  munmap(impl_->mapping, impl_->mapping_bytes);
  delete impl_;
}

void Fiber::start(void (*entry)(void*), void* arg) {
  Impl& f = *impl_;
#if defined(TS_EMU_ASAN)
  // A fiber abandoned in the middle of a kernel (the launch failed) left its frames' redzones
  // poisoned; the new run starts on a clean stack.
  ASAN_UNPOISON_MEMORY_REGION(f.stack_bottom, f.stack_bytes);
#endif
  f.entry = entry;
  f.arg = arg;
  f.finished = false;
#if defined(__x86_64__)
  // Initial frame, as tessera_emu_switch would have left it: control words, six registers, the
  // return address (the trampoline) and a zero "return address" of the trampoline itself, with the
  // stack 16-byte aligned at the trampoline's entry as after a call.
  auto* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(f.stack_bottom + f.stack_bytes)) & ~uintptr_t{15});
  uint64_t* sp = top - 10;
  sp[0] = 0x037F;  // x87 control word: default precision and rounding, exceptions masked
  sp[1] = 0x1F80;  // MXCSR: the default (round to nearest, exceptions masked)
  for (int i = 2; i < 8; ++i) sp[i] = 0;  // r15 r14 r13 r12 rbx rbp
  sp[8] = reinterpret_cast<uint64_t>(&trampoline);
  sp[9] = 0;
  f.sp = sp;
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack_bottom;
  f.context.uc_stack.ss_size = f.stack_bytes;
  f.context.uc_link = nullptr;
  makecontext(&f.context, reinterpret_cast<void (*)()>(&trampoline), 0);
#endif
}

void Fiber::resume() {
  Impl* f = impl_;
  TS_CHECK(!f->finished, "cuda emulator: resuming a fiber that has finished (internal error)");
  TS_CHECK(running == nullptr, "cuda emulator: fibers do not nest (internal error)");
  running = f;
  void* fake = nullptr;
  asan_start_switch(&fake, f->stack_bottom, f->stack_bytes);
#if defined(__x86_64__)
  tessera_emu_switch(&f->caller_sp, f->sp);
#else
  swapcontext(&f->caller_context, &f->context);
#endif
  asan_finish_switch(fake, nullptr, nullptr);
  running = nullptr;
}

void Fiber::suspend() {
  Impl* f = running;
  asan_start_switch(&f->fake_stack, f->caller_bottom, f->caller_size);
#if defined(__x86_64__)
  tessera_emu_switch(&f->sp, f->caller_sp);
#else
  swapcontext(&f->context, &f->caller_context);
#endif
  asan_finish_switch(f->fake_stack, &f->caller_bottom, &f->caller_size);
}

Fiber* Fiber::current() { return running ? running->owner : nullptr; }

bool Fiber::finished() const { return impl_->finished; }

}  // namespace tessera::cuda::emu
