#pragma once

// Which kind of a library's implementation of an operator is faster, per
// backend, operator and size: native or ATen-backed (InfiniOps built
// WITH_TORCH=ON has both for some operators; on InfiniRT's CPU backend its
// native kernels ran 10-30x slower than its ATen-backed ones). Data, not a
// guess: measured by benchmarks/implementations.py, kept in
// torch_infini/data/implementation_speed.json and set by torch_infini at
// import (torch_infini/_implementations.py). The Infini provider's choice
// reads it (runtime/infini/implementation_choice.h).
//
// Pure C++ (no PyTorch, no InfiniOps): compiled in every build (the host
// runtime ignores it) and, in tests, against a stub InfiniOps install.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_infini::runtime {

enum class ImplementationKind : uint8_t { kUnknown, kNative, kAtenBacked };

// One measured answer: on `backend`, for `op`, calls whose output has fewer
// than `below` elements (any size where `below` < 0) run faster on `faster`.
// `op` "*" is the backend's answer for the operators without rows of their
// own. `dtypes` limits the answer to the outputs of some dtypes: bit k for
// the dtype whose c10::ScalarType value is k (the dtypes a native kernel
// was found to compute exactly as CPU eager does); an output of another
// dtype takes the backend's answer. 0: every dtype.
// A size class holds for the form its calls were measured in
// (benchmarks/implementations.py): contiguous operands, each input of the
// output's size or of one element. A call of another form (a broadcast
// input, a transposed one) walks a native kernel's general index path,
// which no size class measured: it takes the operator's answer for any
// size, else the backend's.
struct PreferenceRow {
  std::string backend;  // an InfiniRT backend name: "cpu", "nvidia", ...
  std::string op;       // an InfiniOps operator: "Mul", "Gemm"; or "*"
  int64_t below;
  ImplementationKind faster;
  uint64_t dtypes = 0;
};

// The rows of one backend, looked up per call.
class BackendPreferences {
 public:
  BackendPreferences() = default;
  BackendPreferences(const std::vector<PreferenceRow>& rows,
                     const std::string& backend) {
    for (const auto& row : rows) {
      if (row.backend != backend) {
        continue;
      }
      if (row.op == "*") {
        fallback_ = row.faster;
        continue;
      }
      int at = find(row.op);
      if (at < 0) {
        at = static_cast<int>(by_op_.size());
        by_op_.push_back({row.op, {}});
      }
      by_op_[at].second.push_back({row.below, row.faster, row.dtypes});
    }
    // Smallest size class first, "any size" last.
    for (auto& entry : by_op_) {
      auto& sizes = entry.second;
      for (size_t i = 1; i < sizes.size(); ++i) {
        for (size_t j = i; j > 0 && before(sizes[j], sizes[j - 1]); --j) {
          std::swap(sizes[j], sizes[j - 1]);
        }
      }
    }
  }

  // The faster kind for a call of `op` writing `numel` elements of the
  // dtype whose c10::ScalarType value is `dtype` (-1: not known), in the
  // measured form or not (see PreferenceRow); kUnknown where nothing was
  // measured for the backend.
  ImplementationKind faster(const std::string& op, int64_t numel,
                            int dtype = -1, bool measured_form = true) const {
    const int at = find(op);
    if (at >= 0) {
      for (const auto& size : by_op_[at].second) {
        if (size.below < 0 || (measured_form && numel < size.below)) {
          const bool of_dtype = size.dtypes == 0 ||
              (dtype >= 0 && dtype < 64 && ((size.dtypes >> dtype) & 1));
          return of_dtype ? size.faster : fallback_;
        }
      }
    }
    return fallback_;
  }

 private:
  struct SizeClass {
    int64_t below;
    ImplementationKind faster;
    uint64_t dtypes;
  };
  using Sizes = std::vector<SizeClass>;

  static bool before(const SizeClass& a, const SizeClass& b) {
    return a.below >= 0 && (b.below < 0 || a.below < b.below);
  }

  int find(const std::string& op) const {
    for (size_t i = 0; i < by_op_.size(); ++i) {
      if (by_op_[i].first == op) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }

  // A few operators per backend: a linear scan beats hashing the name.
  std::vector<std::pair<std::string, Sizes>> by_op_;
  ImplementationKind fallback_ = ImplementationKind::kUnknown;
};

// Replaces the process's rows (torch_infini at import; the benchmark that
// measures them, to force one kind).
void set_implementation_preferences(std::vector<PreferenceRow> rows);

// The process's rows, as set.
std::vector<PreferenceRow> implementation_preferences();

// The rows of `backend` as the calling thread last saw them: a thread-local
// copy, refreshed when the rows change (one atomic load per call otherwise:
// no lock on a kernel's path). Valid until the thread's next call.
const BackendPreferences& preferences_for(const std::string& backend);

}  // namespace torch_infini::runtime
