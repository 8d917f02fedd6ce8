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

// A place execution can switch to: a fiber, or the scheduler's own stack (home). `bottom` and
// `size` describe its stack for AddressSanitizer.
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
  const void* bottom = nullptr;
  size_t size = 0;
};

struct Fiber::Impl {
  Fiber* owner = nullptr;
  void* mapping = nullptr;
  size_t mapping_bytes = 0;
  Entry entry = nullptr;
  void* arg = nullptr;
  bool finished = true;
  void* fake_stack = nullptr;  // ASan's fake frames of this fiber while it is paused
  Context context;             // context.bottom/size: the usable stack, above the guard page
};

namespace {

// The fiber running on this OS thread (null on the scheduler's stack), and the scheduler's
// context, which resume() saves and switch_to(nullptr) or a null entry result returns to.
[[gnu::tls_model("initial-exec")]] thread_local Fiber::Impl* running = nullptr;
[[gnu::tls_model("initial-exec")]] thread_local Context home;
// Set by resume() for the fiber it enters, which then learns the scheduler's stack from ASan.
[[gnu::tls_model("initial-exec")]] thread_local bool entering_from_home = false;

Context& target_of(Fiber* next) { return next ? next->impl()->context : home; }

// After every switch into a fiber: ASan is told the switch is complete.
void arrived(void* fake_stack) {
  const void* from_bottom = nullptr;
  size_t from_size = 0;
  asan_finish_switch(fake_stack, &from_bottom, &from_size);
  if (entering_from_home) {
    home.bottom = from_bottom;
    home.size = from_size;
    entering_from_home = false;
  }
}

void jump(Context& save, Context& to) {
#if defined(__x86_64__)
  tessera_emu_switch(&save.sp, to.sp);
#else
  swapcontext(&save.uc, &to.uc);
#endif
}

// A finished fiber leaves for `next` (or home) and is never continued.
[[noreturn]] void finish_and_leave(Fiber::Impl* f, Fiber* next) {
  f->finished = true;
  Context& to = target_of(next);
  running = next ? next->impl() : nullptr;
  asan_start_switch(nullptr, to.bottom, to.size);  // null: this stack is done
#if defined(__x86_64__)
  // The dead fiber's own slot receives the discarded stack pointer: a local here would be a
  // frame with redzones that never returns, left poisoned where start() writes the next frame.
  tessera_emu_switch(&f->context.sp, to.sp);
#else
  setcontext(&to.uc);
#endif
  __builtin_unreachable();
}

// First frame of every fiber. Entered by the switch's `ret` (x86-64) or by makecontext, never returns.
[[noreturn]] void trampoline() noexcept {
  Fiber::Impl* f = running;
  arrived(nullptr);
  Fiber* next = f->entry(f->arg);  // must not throw: the emulator's thread body catches everything
  finish_and_leave(f, next);
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
  impl_->context.bottom = static_cast<char*>(impl_->mapping) + page;
  impl_->context.size = stack_bytes;
}

Fiber::~Fiber() {
  munmap(impl_->mapping, impl_->mapping_bytes);
  delete impl_;
}

void Fiber::start(Entry entry, void* arg) {
  Impl& f = *impl_;
  char* const stack_bottom = static_cast<char*>(const_cast<void*>(f.context.bottom));
  const size_t stack_bytes = f.context.size;
#if defined(TS_EMU_ASAN)
  // A fiber abandoned in the middle of a kernel (the launch failed) left its frames' redzones
  // poisoned; the new run starts on a clean stack. A fiber that finished unpoisoned its frames as
  // they returned, so it is not cleared again (512 KiB of shadow per thread of every block was
  // most of an emulated kernel's time under ASan).
  if (!f.finished) ASAN_UNPOISON_MEMORY_REGION(stack_bottom, stack_bytes);
#endif
  f.entry = entry;
  f.arg = arg;
  f.finished = false;
#if defined(__x86_64__)
  // Initial frame, as tessera_emu_switch would have left it: control words, six registers, the
  // return address (the trampoline) and a zero "return address" of the trampoline itself, with the
  // stack 16-byte aligned at the trampoline's entry as after a call.
  auto* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack_bottom + stack_bytes)) & ~uintptr_t{15});
  uint64_t* sp = top - 10;
  sp[0] = 0x037F;                         // x87 control word: default precision and rounding, exceptions masked
  sp[1] = 0x1F80;                         // MXCSR: the default (round to nearest, exceptions masked)
  for (int i = 2; i < 8; ++i) sp[i] = 0;  // r15 r14 r13 r12 rbx rbp
  sp[8] = reinterpret_cast<uint64_t>(&trampoline);
  sp[9] = 0;
  f.context.sp = sp;
#else
  getcontext(&f.context.uc);
  f.context.uc.uc_stack.ss_sp = stack_bottom;
  f.context.uc.uc_stack.ss_size = stack_bytes;
  f.context.uc.uc_link = nullptr;
  makecontext(&f.context.uc, reinterpret_cast<void (*)()>(&trampoline), 0);
#endif
}

void Fiber::resume() {
  Impl* f = impl_;
  TS_CHECK(!f->finished, "cuda emulator: resuming a fiber that has finished (internal error)");
  TS_CHECK(running == nullptr, "cuda emulator: fibers do not nest (internal error)");
  running = f;
  entering_from_home = true;
  void* fake = nullptr;
  asan_start_switch(&fake, f->context.bottom, f->context.size);
  jump(home, f->context);
  asan_finish_switch(fake, nullptr, nullptr);
  running = nullptr;
}

void Fiber::switch_to(Fiber* next) {
  Impl* f = running;
  Context& to = target_of(next);
  running = next ? next->impl() : nullptr;
  asan_start_switch(&f->fake_stack, to.bottom, to.size);
  jump(f->context, to);
  arrived(f->fake_stack);
}

Fiber* Fiber::current() { return running ? running->owner : nullptr; }

bool Fiber::finished() const { return impl_->finished; }

}  // namespace tessera::cuda::emu
