#include "runtime/aten_ops.h"

#include <set>
#include <unordered_map>

#include "runtime/kernels.h"

namespace torch_infini::runtime {
namespace {

using c10::ScalarType;

// Overloads are listed explicitly, never by name alone: a kernel registered
// for a CompositeImplicitAutograd overload would bypass its autograd formula
// (tests check that none is).
std::vector<AtenOpFamily> build() {
  return {
      {"matmul",
       {"aten::mm", "aten::mm.out", "aten::addmm", "aten::addmm.out",
        "aten::addmm_", "aten::bmm", "aten::bmm.out", "aten::baddbmm",
        "aten::baddbmm.out", "aten::baddbmm_", "aten::dot", "aten::addmv",
        "aten::addmv.out", "aten::addmv_"},
       floating_dtypes(), /*elementwise=*/false, /*same_dtype=*/true},
      {"binary arithmetic",
       {"aten::div.Tensor", "aten::div.out", "aten::div_.Tensor",
        "aten::div.Tensor_mode", "aten::div.out_mode", "aten::div_.Tensor_mode",
        "aten::pow.Tensor_Scalar", "aten::pow.Tensor_Scalar_out",
        "aten::pow_.Scalar", "aten::pow.Tensor_Tensor",
        "aten::pow.Tensor_Tensor_out", "aten::pow_.Tensor", "aten::maximum",
        "aten::maximum.out", "aten::minimum", "aten::minimum.out"},
       numeric_dtypes(/*with_bool=*/true), /*elementwise=*/true,
       /*same_dtype=*/false,
       // ops/arithmetic.cpp's own kernels hand over calls that need
       // promotion, and every call of an op the provider has no kernel for.
       {"aten::add.Tensor", "aten::add_.Tensor", "aten::add.out",
        "aten::sub.Tensor", "aten::sub_.Tensor", "aten::sub.out",
        "aten::mul.Tensor", "aten::mul_.Tensor", "aten::mul.out"}},
      {"comparison and logic",
       {"aten::eq.Tensor", "aten::eq.Scalar", "aten::eq.Tensor_out",
        "aten::eq.Scalar_out", "aten::ne.Tensor", "aten::ne.Scalar",
        "aten::ne.Tensor_out", "aten::ne.Scalar_out", "aten::lt.Tensor",
        "aten::lt.Scalar", "aten::lt.Tensor_out", "aten::lt.Scalar_out",
        "aten::le.Tensor", "aten::le.Scalar", "aten::le.Tensor_out",
        "aten::le.Scalar_out", "aten::gt.Tensor", "aten::gt.Scalar",
        "aten::gt.Tensor_out", "aten::gt.Scalar_out", "aten::ge.Tensor",
        "aten::ge.Scalar", "aten::ge.Tensor_out", "aten::ge.Scalar_out",
        "aten::bitwise_and.Tensor", "aten::bitwise_and.Tensor_out",
        "aten::bitwise_or.Tensor", "aten::bitwise_or.Tensor_out",
        "aten::bitwise_not", "aten::bitwise_not.out", "aten::logical_not",
        "aten::logical_not.out"},
       numeric_dtypes(/*with_bool=*/true), /*elementwise=*/true},
      {"unary and activations",
       {"aten::neg", "aten::neg.out", "aten::neg_", "aten::abs.out",
        "aten::relu", "aten::relu_", "aten::silu", "aten::silu.out",
        "aten::silu_", "aten::gelu", "aten::gelu.out", "aten::gelu_",
        "aten::sigmoid", "aten::sigmoid.out", "aten::sigmoid_", "aten::tanh",
        "aten::tanh.out", "aten::tanh_", "aten::exp", "aten::exp.out",
        "aten::exp_", "aten::log", "aten::log.out", "aten::rsqrt",
        "aten::rsqrt.out", "aten::rsqrt_", "aten::sqrt", "aten::sqrt.out",
        "aten::reciprocal", "aten::reciprocal.out", "aten::ceil",
        "aten::ceil.out", "aten::floor", "aten::floor.out",
        "aten::threshold_backward", "aten::threshold_backward.grad_input",
        "aten::silu_backward.grad_input", "aten::gelu_backward",
        "aten::gelu_backward.grad_input", "aten::sigmoid_backward",
        "aten::sigmoid_backward.grad_input", "aten::tanh_backward",
        "aten::tanh_backward.grad_input", "aten::clamp", "aten::clamp.out",
        "aten::clamp_", "aten::clamp_min", "aten::clamp_min.out",
        "aten::clamp_min_", "aten::clamp_max", "aten::clamp_max.out",
        "aten::clamp_max_", "aten::native_dropout_backward"},
       numeric_dtypes(/*with_bool=*/false), /*elementwise=*/true},
      {"softmax",
       {"aten::_softmax.out", "aten::_log_softmax.out",
        "aten::_softmax_backward_data", "aten::_softmax_backward_data.out",
        "aten::_log_softmax_backward_data",
        "aten::_log_softmax_backward_data.out"},
       floating_dtypes(), /*elementwise=*/false, /*same_dtype=*/false,
       // ops/rowwise.cpp's own kernels hand over what their table does not
       // take, and every call where the provider has no row-wise kernel.
       {"aten::_softmax", "aten::_log_softmax"}},
      {"normalization",
       {"aten::native_layer_norm", "aten::native_layer_norm_backward"},
       floating_dtypes()},
      {"reduction",
       {"aten::sum.dim_IntList", "aten::sum.IntList_out", "aten::mean.dim",
        "aten::mean.out", "aten::argmax", "aten::argmax.out", "aten::amax",
        "aten::amax.out", "aten::max", "aten::min", "aten::all",
        "aten::any"},
       numeric_dtypes(/*with_bool=*/true)},
      {"indexing and shape",
       {"aten::index_select", "aten::index_select.out", "aten::index_add.out",
        "aten::embedding_dense_backward", "aten::where.self",
        "aten::where.self_out", "aten::masked_fill_.Scalar",
        "aten::masked_fill_.Tensor", "aten::triu", "aten::triu.out",
        "aten::triu_", "aten::tril", "aten::tril.out", "aten::tril_",
        "aten::cat", "aten::cat.out", "aten::arange.start_out"},
       numeric_dtypes(/*with_bool=*/true)},
      {"mixed precision",
       {"aten::_amp_foreach_non_finite_check_and_unscale_",
        "aten::_amp_update_scale_"},
       floating_dtypes()},
      {"loss",
       {"aten::mse_loss", "aten::mse_loss.out", "aten::mse_loss_backward",
        "aten::mse_loss_backward.grad_input"},
       floating_dtypes()},
  };
}

}  // namespace

const std::vector<AtenOpFamily>& aten_op_families() {
  static const std::vector<AtenOpFamily> families = build();
  return families;
}

const AtenOpFamily* aten_op_family(const std::string& overload) {
  static const auto index = [] {
    std::unordered_map<std::string, const AtenOpFamily*> map;
    for (const auto& family : aten_op_families()) {
      for (const auto& name : family.overloads) {
        map.emplace(name, &family);
      }
      for (const auto& name : family.custom) {
        map.emplace(name, &family);
      }
    }
    return map;
  }();
  const auto it = index.find(overload);
  return it == index.end() ? nullptr : it->second;
}

std::string dtype_list(const std::vector<c10::ScalarType>& dtypes) {
  std::string out;
  for (const auto dtype : dtypes) {
    out += (out.empty() ? "" : ", ") +
        std::string(c10::getDtypeNames(dtype).first);
  }
  return out;
}

OpSupport family_support(const AtenOpFamily& family,
                         std::vector<c10::ScalarType> dtypes,
                         std::string kernel) {
  std::string names;
  std::set<std::string> seen;
  std::vector<std::string> all = family.overloads;
  all.insert(all.end(), family.custom.begin(), family.custom.end());
  for (const auto& overload : all) {
    const std::string name = overload.substr(0, overload.find('.'));
    if (seen.insert(name).second) {
      names += (names.empty() ? "" : ", ") + name;
    }
  }
  OpSupport row;
  row.op = family.family + ": " + names;
  row.dtypes = std::move(dtypes);
  row.broadcast = true;
  row.strided = true;
  row.kernel = std::move(kernel);
  return row;
}

}  // namespace torch_infini::runtime
