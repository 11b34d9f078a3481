#include "runtime/host/memory_protection.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/current_operator.h"
#include "runtime/env.h"

namespace torch_infini::runtime::host {
namespace {

constexpr const char* kVariable = "TORCH_INFINI_PROTECT_DEVICE_MEMORY";

// The protection key of device memory; -1 while the mode is off.
std::atomic<int> device_key{-1};
struct sigaction previous_handler;

size_t page_rounded(size_t bytes) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// Async-signal-safe output: write(2) of a string, of a number in hex.
void say(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void say_hex(uintptr_t value) {
  char digits[2 + 2 * sizeof(uintptr_t) + 1];
  int n = sizeof(digits) - 1;
  digits[n] = '\0';
  do {
    digits[--n] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value != 0);
  digits[--n] = 'x';
  digits[--n] = '0';
  say(digits + n);
}

void on_fault(int signal, siginfo_t* info, void* context) {
  if (info->si_code == SEGV_PKUERR &&
      static_cast<int>(info->si_pkey) == device_key.load()) {
    say("\ninfini: the host touched infini device memory at ");
    say_hex(reinterpret_cast<uintptr_t>(info->si_addr));
    if (const char* op = current_operator()) {
      say(" while running ");
      say(op);
    }
    say(", outside the runtime's kernels and copies "
        "(TORCH_INFINI_PROTECT_DEVICE_MEMORY=1). On a discrete accelerator "
        "this crashes or reads garbage: copy the tensor to the CPU "
        "(tensor.cpu()) to read it there, or run the code as a kernel on an "
        "infini stream.\n");
  }
  // What was installed before (Python's faulthandler prints the Python
  // stack), else the default action.
  if ((previous_handler.sa_flags & SA_SIGINFO) &&
      previous_handler.sa_sigaction != nullptr) {
    previous_handler.sa_sigaction(signal, info, context);
    return;
  }
  if (previous_handler.sa_handler != SIG_DFL &&
      previous_handler.sa_handler != SIG_IGN) {
    previous_handler.sa_handler(signal);
    return;
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

// The key, made (and the fault handler installed) on the mode's first use.
int key() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int made = pkey_alloc(0, PKEY_DISABLE_ACCESS);
    TORCH_CHECK(made >= 0, kVariable, "=1 needs memory protection keys (x86 "
                "PKU with Linux 4.9 or newer), which this machine does not "
                "offer (pkey_alloc: ", std::strerror(errno), "); unset it");
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_handler);
    device_key.store(made);
  });
  return device_key.load();
}

// libgomp's entry for a parallel region (what `#pragma omp parallel`
// compiles to; Intel's and LLVM's OpenMP runtimes export it too), found in
// the OpenMP runtime PyTorch loaded: this extension is not built with
// -fopenmp, and at::parallel_for compiled here would run serially.
using ParallelRegion = void (*)(void (*)(void*), void*, unsigned, unsigned);

ParallelRegion openmp_parallel_region() {
  static const ParallelRegion found = [] {
    void* symbol = dlsym(RTLD_DEFAULT, "GOMP_parallel");
    for (const char* library : {"libgomp.so.1", "libiomp5.so", "libomp.so"}) {
      if (symbol != nullptr) {
        break;
      }
      if (void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD)) {
        symbol = dlsym(handle, "GOMP_parallel");
      }
    }
    return reinterpret_cast<ParallelRegion>(symbol);
  }();
  return found;
}

void grant_this_thread(void* key) {
  pkey_set(*static_cast<const int*>(key), 0);
}

// Gives the calling thread's intra-op OpenMP threads the right for good, as
// often as its pool grows: they run the parallel regions of its kernels
// (MKL's too). Every thread of a region runs its body once.
void grant_intra_op_threads(int k) {
  thread_local int granted = 1;
  const int threads = at::get_num_threads();
  if (threads <= granted || at::in_parallel_region()) {
    return;
  }
  const ParallelRegion parallel = openmp_parallel_region();
  TORCH_CHECK(parallel != nullptr, kVariable, "=1: the OpenMP runtime "
              "PyTorch uses was not found (no GOMP_parallel), so the threads "
              "of its kernels' parallel regions cannot be given access; unset "
              "it, or set OMP_NUM_THREADS=1");
  parallel(grant_this_thread, &k, 0, 0);
  granted = threads;
}

}  // namespace

bool memory_protection_on() {
  static const bool on = env_switch(kVariable, false) && key() >= 0;
  return on;
}

void* protected_malloc(size_t bytes) {
  const size_t length = page_rounded(bytes);
  void* ptr = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ptr == MAP_FAILED) {
    return nullptr;
  }
  if (pkey_mprotect(ptr, length, PROT_READ | PROT_WRITE, key()) != 0) {
    munmap(ptr, length);
    return nullptr;
  }
  return ptr;
}

void protected_free(void* ptr, size_t bytes) {
  munmap(ptr, page_rounded(bytes));
}

bool protect_mapping(void* ptr, size_t bytes) {
  return pkey_mprotect(ptr, page_rounded(bytes), PROT_READ | PROT_WRITE,
                       key()) == 0;
}

DeviceMemoryAccess::DeviceMemoryAccess() {
  if (!memory_protection_on()) {
    return;
  }
  const int k = device_key.load(std::memory_order_relaxed);
  if (pkey_get(k) != 0) {
    pkey_set(k, 0);
    changed_ = true;
  }
  grant_intra_op_threads(k);
}

DeviceMemoryAccess::~DeviceMemoryAccess() {
  if (changed_) {
    pkey_set(device_key.load(std::memory_order_relaxed), PKEY_DISABLE_ACCESS);
  }
}

namespace {

std::vector<std::unique_ptr<DeviceMemoryAccess>>& open_accesses() {
  thread_local std::vector<std::unique_ptr<DeviceMemoryAccess>> opened;
  return opened;
}

}  // namespace

void begin_device_memory_access() {
  open_accesses().push_back(std::make_unique<DeviceMemoryAccess>());
}

void end_device_memory_access() {
  TORCH_CHECK(!open_accesses().empty(), "end_device_memory_access without "
              "a begin on this thread");
  open_accesses().pop_back();
}

}  // namespace torch_infini::runtime::host
