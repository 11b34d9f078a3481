#include "ops/aten/aten_meta_fixes.h"

#include <ATen/ops/result_type.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/strides.h>

#include <algorithm>
#include <string>
#include <unordered_map>

namespace torch_infini::ops {
namespace {

struct Call {
  const c10::FunctionSchema& schema;
  c10::ArrayRef<c10::IValue> args;
  const std::vector<Layout*>& results;

  // The tensor argument `name`, or nullptr (absent, None or undefined).
  const at::Tensor* tensor(const char* name) const {
    const auto i = schema.argumentIndexWithName(name);
    if (!i || *i >= args.size() || !args[*i].isTensor() ||
        !args[*i].toTensor().defined()) {
      return nullptr;
    }
    return &args[*i].toTensor();
  }

  // The bool argument `name`, or `otherwise` where the overload has none.
  bool flag(const char* name, bool otherwise) const {
    const auto i = schema.argumentIndexWithName(name);
    return i && *i < args.size() && args[*i].isBool() ? args[*i].toBool()
                                                      : otherwise;
  }

  Layout* result(size_t i) const {
    return i < results.size() && results[i] != nullptr &&
            results[i]->defined
        ? results[i]
        : nullptr;
  }
};

// CPU's normalizations keep their statistics in the input's dtype, in
// float32 only where a reduced-precision input comes with float32
// parameters ("mixed type"); the meta functions follow CUDA (float32 for
// every reduced-precision input) or, for group norm, the input.
c10::ScalarType statistics_dtype(const Call& c) {
  const at::Tensor* input = c.tensor("input");
  if (input == nullptr) {
    input = c.tensor("self");
  }
  TORCH_INTERNAL_ASSERT(input != nullptr);
  const c10::ScalarType dtype = input->scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kHalf) {
    return dtype;
  }
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    const at::Tensor* param = c.tensor(name);
    if (param != nullptr && param->scalar_type() != dtype) {
      return at::kFloat;
    }
  }
  return dtype;
}

void statistics(const Call& c, bool saved) {
  const c10::ScalarType dtype = statistics_dtype(c);
  for (size_t i : {1, 2}) {
    if (Layout* stat = c.result(i)) {
      stat->dtype = dtype;
      if (!saved) {
        stat->sizes = {0};
        stat->strides = {1};
      }
    }
  }
}

// CPU's batch norms make their output in the input's suggested memory
// format (contiguous, or channels-last for a 4-D or 5-D input in it); the
// meta functions keep the input's strides (a 3-D input with its channels
// innermost, [N, C, L] transposed from [N, L, C], got an output strided
// alike, which CPU's out= kernel also computes wrongly: see
// needs_contiguous_inputs in aten_registry.cpp). The out= overloads'
// outputs are the caller's.
void output_in_suggested_format(const Call& c) {
  const at::Tensor* input = c.tensor("input");
  Layout* out = c.result(0);
  const std::string& overload = c.schema.overload_name();
  if (input == nullptr || out == nullptr ||
      (overload.size() >= 3 &&
       overload.compare(overload.size() - 3, 3, "out") == 0)) {
    return;
  }
  switch (input->suggest_memory_format()) {
    case c10::MemoryFormat::ChannelsLast:
      out->strides = c10::get_channels_last_strides_2d(out->sizes);
      break;
    case c10::MemoryFormat::ChannelsLast3d:
      out->strides = c10::get_channels_last_strides_3d(out->sizes);
      break;
    default: {
      const auto strides = c10::contiguous_strides(out->sizes);
      out->strides.assign(strides.begin(), strides.end());
    }
  }
}

// CPU's batch norms save no statistics where they use the running ones.
void batch_norm(const Call& c) {
  statistics(c, /*saved=*/c.flag("training", true));
  output_in_suggested_format(c);
}

void batch_norm_without_training(const Call& c) {
  statistics(c, /*saved=*/false);
  output_in_suggested_format(c);
}

void normalization(const Call& c) {
  statistics(c, /*saved=*/true);
}

// LAPACK's matrices are column-major: batched, each matrix contiguous.
void column_major(Layout* layout) {
  if (layout == nullptr || layout->sizes.size() < 2) {
    return;
  }
  auto& sizes = layout->sizes;
  const size_t n = sizes.size();
  std::vector<int64_t> strides(n);
  strides[n - 2] = 1;
  strides[n - 1] = std::max<int64_t>(sizes[n - 2], 1);
  int64_t next = strides[n - 1] * std::max<int64_t>(sizes[n - 1], 1);
  for (size_t d = n - 2; d-- > 0;) {
    strides[d] = next;
    next *= std::max<int64_t>(sizes[d], 1);
  }
  layout->strides = std::move(strides);
}

void svd(const Call& c) {
  column_major(c.result(2));  // Vh; U and S agree
}

void eig(const Call& c) {
  column_major(c.result(1));  // the eigenvectors
}

// CPU's max_unpool2d writes channels-last output for channels-last input.
void unpool_2d(const Call& c) {
  const at::Tensor* self = c.tensor("self");
  Layout* out = c.result(0);
  if (self == nullptr || out == nullptr || out->sizes.size() != 4 ||
      self->suggest_memory_format() != c10::MemoryFormat::ChannelsLast) {
    return;
  }
  out->strides = c10::get_channels_last_strides_2d(out->sizes);
}

// CPU's 2-D convolutions write channels-last output where the input or the
// weight is channels-last (oneDNN's and the slow kernels' choice alike); the
// meta function writes it contiguous. (CPU's 3-D ones choose by the kernel
// they run, which depends on sizes: left as meta has them.)
void convolution(const Call& c) {
  const at::Tensor* input = c.tensor("input");
  const at::Tensor* weight = c.tensor("weight");
  Layout* out = c.result(0);
  if (input == nullptr || weight == nullptr || out == nullptr ||
      out->sizes.size() != 4 ||
      (input->suggest_memory_format() != c10::MemoryFormat::ChannelsLast &&
       weight->suggest_memory_format() != c10::MemoryFormat::ChannelsLast)) {
    return;
  }
  out->strides = c10::get_channels_last_strides_2d(out->sizes);
}

// A power of a tensor by a number has CPU's result dtype, the promotion of
// the tensor and the number (bool ** True is bool); PyTorch's meta function
// promotes a bool number as an integer (int64). The out= overload's output
// is the caller's.
void power_by_a_number(const Call& c) {
  const at::Tensor* self = c.tensor("self");
  const auto exponent = c.schema.argumentIndexWithName("exponent");
  Layout* out = c.result(0);
  if (c.schema.overload_name() != "Tensor_Scalar" || self == nullptr ||
      out == nullptr || !exponent || *exponent >= c.args.size() ||
      !c.args[*exponent].isScalar()) {
    return;
  }
  out->dtype = at::result_type(*self, c.args[*exponent].toScalar());
}

using Rule = void (*)(const Call&);

const std::unordered_map<std::string, Rule>& rules() {
  static const std::unordered_map<std::string, Rule> table = {
      {"aten::native_batch_norm", &batch_norm},
      {"aten::_native_batch_norm_legit", &batch_norm},
      {"aten::_native_batch_norm_legit_no_training",
       &batch_norm_without_training},
      {"aten::_batch_norm_no_update", &batch_norm_without_training},
      {"aten::_batch_norm_with_update", &normalization},
      {"aten::native_layer_norm", &normalization},
      {"aten::native_group_norm", &normalization},
      {"aten::_linalg_svd", &svd},
      {"aten::linalg_eig", &eig},
      {"aten::max_unpool2d", &unpool_2d},
      {"aten::convolution", &convolution},
      {"aten::pow", &power_by_a_number},
  };
  return table;
}

}  // namespace

void conform_meta_layouts_to_cpu(const c10::OperatorHandle& op,
                                 c10::ArrayRef<c10::IValue> args,
                                 const std::vector<Layout*>& results) {
  const auto& table = rules();
  const auto it = table.find(op.schema().name());
  if (it != table.end()) {
    it->second(Call{op.schema(), args, results});
  }
}

}  // namespace torch_infini::ops
