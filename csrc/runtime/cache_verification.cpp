#include "runtime/cache_verification.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/env.h"

namespace torch_infini::runtime {
namespace {

std::atomic<uint64_t> verified{0};
thread_local bool recomputing = false;
std::atomic<uint64_t> differences{0};

// The verified hits by cache, so that a test can tell which cache answered.
struct ByCache {
  std::mutex mutex;  // counting only, in the verification mode
  std::map<std::string, uint64_t> counts;
};

ByCache& by_cache() {
  // Leaked on purpose: a hit may be counted during static destruction.
  static auto& instance = *std::make_unique<ByCache>().release();
  return instance;
}

}  // namespace

bool verify_caches() {
  static const bool on = env_switch("TORCH_INFINI_VERIFY_CACHES", false);
  return on;
}

void count_verified_hit(const char* cache) {
  verified.fetch_add(1, std::memory_order_relaxed);
  ByCache& counts = by_cache();
  std::lock_guard<std::mutex> lock(counts.mutex);
  ++counts.counts[cache];
}

void raise_stale_cache(const char* cache, const std::string& op,
                       const std::string& answer, const DispatchState& was,
                       const std::string& unkeyed) {
  differences.fetch_add(1, std::memory_order_relaxed);
  const std::string state = DispatchState::current().differences_from(was);
  TORCH_CHECK(false, "TORCH_INFINI_VERIFY_CACHES: the ", cache,
              " cache answered ", op, " with a stale answer: ", answer,
              ". State that differs from when it was cached: ",
              state.empty() ? std::string("none of the keyed state") : state,
              unkeyed.empty() ? std::string()
                              : "; arguments that differ outside the key: " +
                                    unkeyed,
              ". The part that differs belongs in the cache's key.");
}

CacheVerificationCounts cache_verification_counts() {
  CacheVerificationCounts out{verified.load(), differences.load(), {}};
  ByCache& counts = by_cache();
  std::lock_guard<std::mutex> lock(counts.mutex);
  out.verified_by_cache = counts.counts;
  return out;
}

RecomputingHit::RecomputingHit() : was_(recomputing) {
  recomputing = true;
}

RecomputingHit::~RecomputingHit() {
  recomputing = was_;
}

bool recomputing_hit() {
  return recomputing;
}

}  // namespace torch_infini::runtime
