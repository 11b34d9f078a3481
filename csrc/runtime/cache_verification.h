#pragma once

// The verification mode of the call path's caches,
// TORCH_INFINI_VERIFY_CACHES=1: every cache hit recomputes its answer as a
// miss would and compares. A difference raises, naming the cache, the
// operator, what differs in the answer, and which parts of the state the
// cached answer was made under differ from the caller's (the part of the
// key that should have differed); the counts say how many hits were checked.

#include <cstdint>
#include <map>
#include <string>

#include "runtime/dispatch_state.h"

namespace torch_infini::runtime {

// Whether the mode is on (read once per process).
bool verify_caches();

// Counts one hit of `cache` that was recomputed and agreed.
void count_verified_hit(const char* cache);

// Raises for a hit whose recomputed answer differs: `answer` says how
// (cached against recomputed), `was` is the state the answer was cached
// under, and `unkeyed` what else differs between the two calls (values the
// key leaves out on purpose), if the cache records it.
[[noreturn]] void raise_stale_cache(const char* cache,
                                    const std::string& op,
                                    const std::string& answer,
                                    const DispatchState& was,
                                    const std::string& unkeyed = {});

struct CacheVerificationCounts {
  uint64_t verified = 0;     // hits recomputed and equal
  uint64_t differences = 0;  // hits recomputed and different (each raised)
  std::map<std::string, uint64_t> verified_by_cache;  // `verified`, by cache
};
CacheVerificationCounts cache_verification_counts();

// Held while a hit is recomputed. A recompute may copy device values to
// the host, and so wait on a stream; that wait must not take the stream's
// asynchronous error, which then would be lost (the recompute reads
// CPU's errors as errors of the data) instead of reported by the program's
// next synchronizing call. Streams leave their errors pending for waits
// made inside it (HostStream::take_error), so the mode changes no error's
// place.
class RecomputingHit {
 public:
  RecomputingHit();
  ~RecomputingHit();
  RecomputingHit(const RecomputingHit&) = delete;
  RecomputingHit& operator=(const RecomputingHit&) = delete;

 private:
  bool was_;
};

// Whether the calling thread is recomputing a hit.
bool recomputing_hit();

}  // namespace torch_infini::runtime
