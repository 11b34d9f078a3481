// The fused RNN cells PyTorch's LSTM and GRU call for a PrivateUse1 device
// (as for CUDA and XPU), which only CUDA implements: _thnn_fused_lstm_cell,
// _thnn_fused_gru_cell and their backward kernels. Composed here from ATen
// operators, with CUDA's workspace layouts, so nn.LSTM / nn.GRU / LSTMCell /
// GRUCell run forward and backward. And nn.LSTM's whole sequence as CPU runs
// it (see lstm_as_cpu below).
//
// Where the composition runs:
//   - on the Infini stack, as infini operators, one queued call each;
//   - on the host runtime, as one queued call per cell: the compositions
//     are also the CPU (and Meta) kernels of internal operators
//     infini_host::<name>, which the generic kernel queues like any CPU
//     kernel. An LSTM step's cell was 12 queued operators forward and 25
//     backward, each paying the generic kernel's per-call cost (a few us,
//     where CPU eager pays under one), and nn.LSTM trained 4x slower than
//     on the CPU.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/RNN.h>
#include <ATen/ops/lstm_native.h>
#include <torch/library.h>

#include <tuple>

#include "ops/aten/aten_kernel.h"
#include "ops/nn/rnn_as_cpu.h"
#include "runtime/kernels.h"

namespace torch_infini::ops {
namespace {

// gates: [batch, 4 * hidden] in PyTorch's order (input, forget, cell, output).
// workspace: the activated gates, [batch, 4 * hidden].
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates,
    const at::Tensor& cx, const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) {
    gates = gates + *input_bias + *hidden_bias;
  }
  const auto chunks = gates.chunk(4, 1);
  const at::Tensor i = chunks[0].sigmoid();
  const at::Tensor f = chunks[1].sigmoid();
  const at::Tensor g = chunks[2].tanh();
  const at::Tensor o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy,
    const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const at::Tensor tanh_cy = cy.tanh();
  at::Tensor grad_c = grad_cy.has_value() && grad_cy->defined()
      ? grad_cy->clone()
      : at::zeros_like(cy);
  at::Tensor grad_o = at::zeros_like(o);
  if (grad_hy.has_value() && grad_hy->defined()) {
    grad_c = grad_c + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    grad_o = *grad_hy * tanh_cy * o * (1 - o);
  }
  const at::Tensor grad_i = grad_c * g * i * (1 - i);
  const at::Tensor grad_f = grad_c * cx * f * (1 - f);
  const at::Tensor grad_g = grad_c * i * (1 - g * g);
  at::Tensor grad_gates = at::cat({grad_i, grad_f, grad_g, grad_o}, 1);
  at::Tensor grad_cx = grad_c * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

// gates: [batch, 3 * hidden] (reset, update, new). workspace (CUDA's):
// r, z, n, hx and the hidden gate of n (bias included), [batch, 5 * hidden].
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates,
    const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor ig = input_gates;
  at::Tensor hg = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) {
    ig = ig + *input_bias;
    hg = hg + *hidden_bias;
  }
  const auto in = ig.chunk(3, 1);
  const auto hn = hg.chunk(3, 1);
  const at::Tensor r = (in[0] + hn[0]).sigmoid();
  const at::Tensor z = (in[1] + hn[1]).sigmoid();
  const at::Tensor n = (in[2] + r * hn[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hn[2]}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
fused_gru_cell_backward(const at::Tensor& grad_hy,
                        const at::Tensor& workspace, bool has_bias) {
  const auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const at::Tensor grad_n = grad_hy * (1 - z) * (1 - n * n);
  const at::Tensor grad_z = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor grad_r = grad_n * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  at::Tensor grad_hidden_gates = at::cat({grad_r, grad_z, grad_n * r}, 1);
  at::Tensor grad_hx = grad_hy * z;
  at::Tensor grad_input_bias =
      has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias =
      has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
          grad_hidden_bias};
}

// The cell `composition` as infini runs it: one call of infini_host::<name>
// where the provider has a kernel for it (its CPU kernel: the host
// runtime), the composition of infini operators elsewhere.
template <auto composition, typename Sig>
struct OnDevice;

template <auto composition, typename Result, typename... Args>
struct OnDevice<composition, Result(Args...)> {
  static const char* name;
  static Result call(Args... args) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow(name, "")
                               .template typed<Result(Args...)>();
    static const bool one_kernel = runtime::kernels().has_kernel(op);
    if (!one_kernel) {
      return composition(args...);
    }
    return op.call(args...);
  }
};

using LstmCell = OnDevice<fused_lstm_cell, decltype(fused_lstm_cell)>;
using LstmCellBackward =
    OnDevice<fused_lstm_cell_backward, decltype(fused_lstm_cell_backward)>;
using GruCell = OnDevice<fused_gru_cell, decltype(fused_gru_cell)>;
using GruCellBackward =
    OnDevice<fused_gru_cell_backward, decltype(fused_gru_cell_backward)>;
template <>
const char* LstmCell::name = "infini_host::_thnn_fused_lstm_cell";
template <>
const char* LstmCellBackward::name =
    "infini_host::_thnn_fused_lstm_cell_backward_impl";
template <>
const char* GruCell::name = "infini_host::_thnn_fused_gru_cell";
template <>
const char* GruCellBackward::name =
    "infini_host::_thnn_fused_gru_cell_backward";

// CPU's oneDNN LSTM: the CPU entry of PyTorch's lstm_mkldnn_stub (its
// dispatching call is not exported; every CPU capability level shares one
// kernel). Null in a build without oneDNN.
at::native::lstm_fn onednn_lstm() {
  return at::native::lstm_mkldnn_stub_DECLARE_DISPATCH_type::DEFAULT;
}

// Whether this CPU runs oneDNN in `dtype`: CPU's own check (its
// mkldnn_bf16_device_check and mkldnn_fp16_device_check, asked through the
// operators PyTorch registers for them), once.
bool onednn_device_supports(c10::ScalarType dtype) {
  const auto ask = [](const char* name) {
    const auto op = c10::Dispatcher::singleton().findSchema({name, ""});
    return op.has_value() && op->typed<bool()>().call();
  };
  static const bool bf16 = ask("mkldnn::_is_mkldnn_bf16_supported");
  static const bool fp16 = ask("mkldnn::_is_mkldnn_fp16_supported");
  return dtype == at::kFloat || (dtype == at::kBFloat16 && bf16) ||
      (dtype == at::kHalf && fp16);
}

// CPU's rule (its use_mkldnn): float32, bfloat16 and float16 (without
// gradients) where the CPU runs oneDNN in them (AVX512-BF16 for bfloat16),
// a non-empty input, no projections. Under infini's autocast, never:
// CUDA's autocast policy (infini's) runs an LSTM's matmuls in the lower
// precision, where oneDNN's float32 LSTM would return float32 (CPU's own
// policy casts its oneDNN LSTM instead).
bool lstm_runs_onednn(const at::Tensor& input, at::TensorList hx) {
  const c10::ScalarType dtype = input.scalar_type();
  static const bool onednn_served =
      onednn_lstm() != nullptr &&
      runtime::kernels().has_kernel(
          c10::Dispatcher::singleton().findSchemaOrThrow(
              "aten::mkldnn_rnn_layer", ""));
  return onednn_served &&
      !at::autocast::is_autocast_enabled(c10::DeviceType::PrivateUse1) &&
      at::globalContext().hasMKLDNN() &&
      at::globalContext().userEnabledMkldnn() &&
      onednn_device_supports(dtype) &&
      (dtype != at::kHalf || !at::GradMode::is_enabled()) &&
      input.numel() != 0 && hx.size() == 2 &&
      hx[0].sym_size(2) == hx[1].sym_size(2) &&
      !hx[0].unsafeGetTensorImpl()->has_symbolic_sizes_strides();
}

// nn.LSTM on infini, as CPU runs it. CPU's lstm runs oneDNN's
// LSTM where its rule allows (lstm_runs_onednn; no symbolic sizes): one
// mkldnn_rnn_layer call per layer and direction, and
// one backward. For a PrivateUse1 tensor PyTorch takes the per-step path
// instead: a cell and two matmuls per time step, forward and backward, each
// a queued call (nn.LSTM trained 1.6-1.8x slower than on the CPU). So where
// CPU would take oneDNN's path, infini takes it too where the provider has
// its kernel (the host runtime): the same stub, whose operators
// (mkldnn_rnn_layer, its backward, the views and stacks) the generic kernel
// queues; the results are CPU's. Elsewhere, CPU's per-step LSTM
// (rnn_as_cpu.h).
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_as_cpu(
    const at::Tensor& input, at::TensorList hx, at::TensorList params,
    bool has_biases, int64_t num_layers, double dropout, bool train,
    bool bidirectional, bool batch_first) {
  if (!lstm_runs_onednn(input, hx)) {
    return lstm_as_cpu_steps(input, hx, params, has_biases, num_layers,
                             dropout, train, bidirectional, batch_first);
  }
  at::Tensor output, hy, cy;
  onednn_lstm()(output, hy, cy, input, hx, params, has_biases, num_layers,
                dropout, train, bidirectional, batch_first);
  return {std::move(output), std::move(hy), std::move(cy)};
}

}  // namespace

// Internal: the host runtime's one-call cells (their schemas are ATen's).
TORCH_LIBRARY(infini_host, m) {
  m.def(
      "_thnn_fused_lstm_cell(Tensor input_gates, Tensor hidden_gates, "
      "Tensor cx, Tensor? input_bias=None, Tensor? hidden_bias=None) -> "
      "(Tensor, Tensor, Tensor)");
  m.def(
      "_thnn_fused_lstm_cell_backward_impl(Tensor? grad_hy, Tensor? grad_cy, "
      "Tensor cx, Tensor cy, Tensor workspace, bool has_bias) -> "
      "(Tensor, Tensor, Tensor)");
  m.def(
      "_thnn_fused_gru_cell(Tensor input_gates, Tensor hidden_gates, "
      "Tensor hx, Tensor? input_bias=None, Tensor? hidden_bias=None) -> "
      "(Tensor, Tensor)");
  m.def(
      "_thnn_fused_gru_cell_backward(Tensor grad_hy, Tensor workspace, "
      "bool has_bias) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

// The compositions over CPU tensors (what a queued call runs over aliases
// of device memory) and meta tensors (a call's output metadata in a graph
// capture).
namespace {

void impl_compositions(torch::Library& m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl",
         TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace

TORCH_LIBRARY_IMPL(infini_host, CPU, m) { impl_compositions(m); }
TORCH_LIBRARY_IMPL(infini_host, Meta, m) { impl_compositions(m); }

TORCH_LIBRARY_IMPL(infini_host, PrivateUse1, m) {
  for (const char* name :
       {"_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl",
        "_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward"}) {
    m.impl(name, generic_aten_kernel());
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(LstmCell::call));
  m.impl("_thnn_fused_lstm_cell_backward_impl",
         TORCH_FN(LstmCellBackward::call));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(GruCell::call));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(GruCellBackward::call));
}

// lstm.input is CompositeImplicitAutograd: a kernel of infini's autograd key
// takes its place for infini tensors; the operators it calls record their
// own backward.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(lstm_as_cpu));
}

}  // namespace torch_infini::ops
