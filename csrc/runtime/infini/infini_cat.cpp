// cat on infini::ops::Cat, a byte copy (any dtype of one size).
//
// Two Cat APIs exist (TORCH_INFINI_OPS_CAT_TAKES_LIST, from the build):
// - (first_input, rest_inputs, dim, out), InfiniOps 2962714: at least two
//   inputs, and memcpy of row-major blocks, so inputs and output must be
//   contiguous (a strided one gives wrong results, not an error);
// - (tensors, dim, out), InfiniOps 1f6f9c2: any strides, checked shapes.
// Inputs with no elements contribute nothing and are left out (PyTorch also
// accepts legacy 1-D (0,) inputs of another rank, which Cat would reject).

#include <string>
#include <vector>

#include "runtime/complex_pairs.h"
#include "runtime/infini/infini_aten.h"
#include "runtime/infini/infini_common.h"
#include "runtime/infini/operator_cache.h"

namespace torch_infini::runtime::infini {
namespace {

#ifdef TORCH_INFINI_OPS_CAT_DEVICE_MASK

using CatOperator = iops::Operator<iops::Cat>;
#ifdef TORCH_INFINI_OPS_CAT_TAKES_LIST
using CatMake = std::unique_ptr<CatOperator> (*)(
    const iops::Config&, const std::vector<iops::Tensor>, const int64_t&,
    const iops::Tensor&);
CatMake volatile cat_make =
    &CatOperator::Make<const int64_t&, const iops::Tensor&>;
constexpr const char* kCat =
    "infini::ops::Cat of this InfiniOps build (tensor-list API)";
#else
using CatMake = std::unique_ptr<CatOperator> (*)(
    const iops::Config&, const iops::Tensor, const std::vector<iops::Tensor>&,
    const int64_t&, const iops::Tensor&);
CatMake volatile cat_make =
    &CatOperator::Make<const std::vector<iops::Tensor>&, const int64_t&,
                       const iops::Tensor&>;
constexpr const char* kCat =
    "infini::ops::Cat of this InfiniOps build (first-and-rest API of "
    "InfiniOps 2962714)";
#endif

// Cat copies bytes: the InfiniRT dtype only has to have the element's size.
bool cat_dtype(c10::ScalarType t, irt::DataType* out) {
  if (t == c10::ScalarType::Bool) {
    *out = irt::DataType::kUInt8;
    return true;
  }
  return to_infini_dtype(t, out);
}

struct CatCall {
  std::vector<TensorArg> inputs;  // those with elements
  int64_t dim = 0;                // in [0, rank)
  TensorArg out;
};

std::string cat_call_of(const AtenCall& call, CatCall* cat) {
  const auto& tensors = call.args.at(0).toTensorList();
  cat->out = arg_of(tensor_at(call, 2));
  const int64_t rank = static_cast<int64_t>(cat->out.sizes.size());
  const int64_t dim = call.args.at(1).toInt();
  cat->dim = dim < 0 ? dim + rank : dim;
  for (const at::Tensor& t : tensors) {
    if (t.device().is_cpu()) {
      return std::string(kCat) + " reads device memory only";
    }
    if (t.numel() > 0) {
      cat->inputs.push_back(arg_of(t));
    }
  }
  return {};
}

class CatServer {
 public:
  explicit CatServer(InfiniProvider& provider) : provider_(provider) {}

  std::string unsupported(const AtenCall& call) const {
    CatCall cat;
    std::string reason = cat_call_of(call, &cat);
    if (!reason.empty()) {
      return reason;
    }
    irt::DataType unused;
    if (!cat_dtype(cat.out.dtype, &unused)) {
      return std::string(kCat) + " has no " + dtype_name(cat.out.dtype) +
          " kernel (" + missing_datatype(cat.out.dtype) + ")";
    }
    const size_t rank = cat.out.sizes.size();
    if (cat.dim < 0 || cat.dim >= static_cast<int64_t>(rank)) {
      return std::string(kCat) + " needs a dimension within the output's "
             "rank";
    }
#ifndef TORCH_INFINI_OPS_CAT_TAKES_LIST
    if (cat.inputs.size() < 2) {
      return std::string(kCat) + " needs at least two non-empty inputs";
    }
    if (!is_contiguous(cat.out)) {
      return std::string(kCat) + " writes contiguous outputs only";
    }
#endif
    if (has_broadcast_dim(cat.out)) {
      return std::string(kCat) + " cannot write an output with stride-0 "
             "(expanded) dimensions";
    }
    for (const TensorArg& input : cat.inputs) {
      if (input.dtype != cat.out.dtype) {
        return std::string(kCat) + " copies bytes and cannot convert " +
            dtype_name(input.dtype) + " to " + dtype_name(cat.out.dtype) +
            " (PyTorch's type promotion)";
      }
      if (input.sizes.size() != rank) {
        return std::string(kCat) + " needs every input to have the output's "
               "rank";
      }
#ifndef TORCH_INFINI_OPS_CAT_TAKES_LIST
      if (!is_contiguous(input)) {
        return std::string(kCat) + " reads contiguous inputs only (a "
               "strided one would be copied wrongly)";
      }
#endif
      if (may_overlap(input, cat.out)) {
        return std::string(kCat) + " cannot write an output overlapping "
               "an input";
      }
    }
    return {};
  }

  void run(int device, StreamHandle stream, const AtenCall& call) {
    CatCall cat;
    cat_call_of(call, &cat);
    provider_.bind(device);
    irt::DataType dtype;
    cat_dtype(cat.out.dtype, &dtype);
    const irt::Device where(provider_.device_type(), device);
    std::vector<iops::Tensor> inputs;
    inputs.reserve(cat.inputs.size());
    OperatorKey key;
    key.words.push_back(device);
    key.words.push_back(static_cast<int64_t>(cat.out.dtype));
    key.words.push_back(cat.dim);
    for (const TensorArg& input : cat.inputs) {
      inputs.push_back(view_of(input, dtype, where));
      append_layout(key, input);
    }
    append_layout(key, cat.out);
    const iops::Tensor out = view_of(cat.out, dtype, where);
    const int64_t dim = cat.dim;
#ifdef TORCH_INFINI_OPS_CAT_TAKES_LIST
    thread_local OperatorCache<CatOperator> cache;
    CatOperator& op = cache.get(std::move(key), [&] {
      return cat_make(iops::Config(), inputs, dim, out);
    });
    op.set_stream(stream);
    static_cast<const iops::Cat&>(op)(inputs, dim, out);
#else
    const iops::Tensor first = inputs.front();
    const std::vector<iops::Tensor> rest(inputs.begin() + 1, inputs.end());
    thread_local OperatorCache<CatOperator> cache;
    CatOperator& op = cache.get(std::move(key), [&] {
      return cat_make(iops::Config(), first, rest, dim, out);
    });
    op.set_stream(stream);
    static_cast<const iops::Cat&>(op)(first, rest, dim, out);
#endif
  }

 private:
  InfiniProvider& provider_;
};

#endif  // TORCH_INFINI_OPS_CAT_DEVICE_MASK

}  // namespace

std::vector<AtenServer> cat_servers(InfiniProvider& provider,
                                    std::vector<OpSupport>& support) {
  const std::vector<std::string> overloads = {"aten::cat.out"};
#ifdef TORCH_INFINI_OPS_CAT_DEVICE_MASK
  if (has_implementation(provider.device_type(),
                         TORCH_INFINI_OPS_CAT_DEVICE_MASK)) {
    auto server = std::make_shared<CatServer>(provider);
    OpSupport row;
#ifdef TORCH_INFINI_OPS_CAT_TAKES_LIST
    row.strided = true;
    row.kernel = "infini::ops::Cat (one dtype for inputs and output)";
#else
    row.strided = false;
    row.kernel =
        "infini::ops::Cat (one dtype, contiguous, two or more non-empty "
        "inputs)";
#endif
    row.op = "aten::cat";
    row.dtypes = numeric_dtypes(/*with_bool=*/true);
    support.push_back(std::move(row));
    return {served_by(overloads, server)};
  }
#endif
  return {refused(overloads, "infini::ops::Cat", provider.backend())};
}

}  // namespace torch_infini::runtime::infini
