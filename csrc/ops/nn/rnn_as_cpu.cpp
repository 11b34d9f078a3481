// nn.RNN, nn.GRU and nn.LSTM (and their cells) on infini, computed as CPU
// computes them.
//
// PyTorch's RNN functions are CompositeImplicitAutograd and branch on the
// input's device: for a CUDA, XPU or PrivateUse1 input an LSTM or GRU cell
// is two matmuls and a fused cell (_thnn_fused_*_cell, composed for infini
// in rnn_cells.cpp), while for a CPU input each layer first computes the
// input's gates for the whole sequence in one linear, and each step adds the
// hidden state's linear and applies the gates in place. The two round
// differently (bias added in the matmul or after, one matmul over the
// sequence or one per step): in bfloat16 GRU and LSTM modules differed from
// CPU by up to 0.047, and in float32 they were not bit-identical. So these
// kernels of infini's autograd key take the composites' place, on every
// provider, and run CPU's algorithm with ATen operators, which record their
// own backward: where the operators compute CPU's results (the host
// runtime, ATen-backed InfiniOps), so does the module, bit for bit, and
// elsewhere it rounds as CPU's algorithm does. It costs no more than the
// device algorithm, whose fused cells are compositions of the same
// operators here (rnn_cells.cpp). Packed sequences take PyTorch's own
// functions.
//
// lstm.input is rnn_cells.cpp's (oneDNN's LSTM where CPU's rule takes it);
// its other cases come here (lstm_as_cpu_steps).

#include "ops/nn/rnn_as_cpu.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>


namespace torch_infini::ops {
namespace {

// One layer-direction's parameters, as PyTorch's CellParams holds them.
struct Params {
  at::Tensor w_ih, w_hh, b_ih, b_hh, w_hr;  // b_*, w_hr may be undefined

  at::Tensor linear_ih(const at::Tensor& x) const {
    return at::linear(x, w_ih, b_ih);
  }
  at::Tensor linear_hh(const at::Tensor& h) const {
    return at::linear(h, w_hh, b_hh);
  }
  at::Tensor matmul_hr(const at::Tensor& h) const {
    return w_hr.defined() ? at::matmul(h, w_hr.t()) : h;
  }
};

enum class Kind { kTanh, kRelu, kGru, kLstm };

// A hidden state: h, and c for an LSTM.
struct Hidden {
  at::Tensor h, c;
};

// One step of CPU's cell. `gates_ih` is the input's linear, computed ahead
// for the whole sequence (CPU's pre_compute_input).
Hidden cell(Kind kind, const at::Tensor& gates_ih, const Hidden& hidden,
            const Params& p) {
  switch (kind) {
    case Kind::kTanh:
      return {p.linear_hh(hidden.h).add_(gates_ih).tanh(), {}};
    case Kind::kRelu:
      return {p.linear_hh(hidden.h).add_(gates_ih).relu(), {}};
    case Kind::kGru: {
      const auto chunked_igates = gates_ih.unsafe_chunk(3, 1);
      auto chunked_hgates = p.linear_hh(hidden.h).unsafe_chunk(3, 1);
      const auto reset_gate =
          chunked_hgates[0].add_(chunked_igates[0]).sigmoid_();
      const auto input_gate =
          chunked_hgates[1].add_(chunked_igates[1]).sigmoid_();
      const auto new_gate =
          chunked_igates[2].add(chunked_hgates[2].mul_(reset_gate)).tanh_();
      return {(hidden.h - new_gate).mul_(input_gate).add_(new_gate), {}};
    }
    case Kind::kLstm: {
      const auto gates = p.linear_hh(hidden.h).add_(gates_ih);
      auto chunked = gates.unsafe_chunk(4, 1);
      auto ingate = chunked[0].sigmoid_();
      auto forgetgate = chunked[1].sigmoid_();
      auto cellgate = chunked[2].tanh_();
      auto outgate = chunked[3].sigmoid_();
      auto cy = (forgetgate * hidden.c).add_(ingate * cellgate);
      auto hy = p.matmul_hr(outgate * cy.tanh());
      return {std::move(hy), std::move(cy)};
    }
  }
  TORCH_CHECK(false, "unknown RNN cell");
}

// One direction of one layer over the whole sequence ([T, B, *]): the
// input's gates in one linear, then the steps, forward or reversed.
std::pair<at::Tensor, Hidden> run_direction(Kind kind, const at::Tensor& input,
                                            Hidden hidden, const Params& p,
                                            bool reverse) {
  std::vector<at::Tensor> steps = p.linear_ih(input).unbind(0);
  TORCH_CHECK(!steps.empty(),
              "Expected sequence length to be larger than 0 in RNN");
  if (reverse) {
    std::reverse(steps.begin(), steps.end());
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(steps.size());
  for (const at::Tensor& gates_ih : steps) {
    hidden = cell(kind, gates_ih, hidden, p);
    outputs.push_back(hidden.h);
  }
  if (reverse) {
    std::reverse(outputs.begin(), outputs.end());
  }
  return {at::stack(outputs, 0), std::move(hidden)};
}

std::vector<Params> gather(at::TensorList params, bool has_biases,
                           bool has_projections) {
  const size_t per = 2 + (has_biases ? 2 : 0) + (has_projections ? 1 : 0);
  TORCH_CHECK(params.size() % per == 0,
              "got an incorrect number of RNN parameters");
  std::vector<Params> out;
  for (size_t i = 0; i < params.size(); i += per) {
    Params p{params[i], params[i + 1], {}, {}, {}};
    if (has_biases) {
      p.b_ih = params[i + 2];
      p.b_hh = params[i + 3];
    }
    if (has_projections) {
      p.w_hr = params[i + per - 1];
    }
    out.push_back(std::move(p));
  }
  return out;
}

void check_devices(const at::Tensor& input, at::TensorList params,
                   at::TensorList hiddens) {
  const auto check = [&](const char* name, const at::Tensor& t) {
    TORCH_CHECK(!t.defined() || t.device() == input.device(), "Input and ",
                name, " tensors are not at the same device, found input "
                "tensor at ", input.device(), " and ", name, " tensor at ",
                t.device());
  };
  for (const at::Tensor& h : hiddens) {
    check("hidden", h);
  }
  for (const at::Tensor& p : params) {
    check("parameter", p);
  }
}

// CPU's _rnn_impl: layers in turn (both directions of a bidirectional
// layer on the same input), dropout between layers in training.
std::pair<at::Tensor, std::vector<Hidden>> run_layers(
    Kind kind, at::Tensor input, const std::vector<Params>& params,
    const std::vector<Hidden>& hiddens, int64_t num_layers, double dropout,
    bool train, bool bidirectional) {
  const size_t directions = bidirectional ? 2 : 1;
  TORCH_CHECK(static_cast<size_t>(num_layers) * directions == hiddens.size(),
              "Expected more hidden states in stacked_rnn");
  TORCH_CHECK(static_cast<size_t>(num_layers) * directions == params.size(),
              "Expected more weights in stacked_rnn");
  std::vector<Hidden> finals;
  for (int64_t l = 0; l < num_layers; ++l) {
    const size_t k = static_cast<size_t>(l) * directions;
    auto [forward, forward_hidden] =
        run_direction(kind, input, hiddens[k], params[k], false);
    finals.push_back(std::move(forward_hidden));
    if (bidirectional) {
      auto [backward, backward_hidden] =
          run_direction(kind, input, hiddens[k + 1], params[k + 1], true);
      finals.push_back(std::move(backward_hidden));
      input = at::cat({forward, backward}, forward.dim() - 1);
    } else {
      input = std::move(forward);
    }
    if (dropout != 0 && train && l < num_layers - 1) {
      input = at::dropout(input, dropout, /*train=*/true);
    }
  }
  return {std::move(input), std::move(finals)};
}

std::tuple<at::Tensor, at::Tensor> one_hidden_as_cpu(
    Kind kind, const at::Tensor& input_, const at::Tensor& hx,
    at::TensorList params, bool has_biases, int64_t num_layers,
    double dropout, bool train, bool bidirectional, bool batch_first) {
  check_devices(input_, params, hx);
  const at::Tensor input = batch_first ? input_.transpose(0, 1) : input_;
  std::vector<Hidden> hiddens;
  for (at::Tensor& h : hx.unbind(0)) {
    hiddens.push_back({std::move(h), {}});
  }
  auto [output, finals] =
      run_layers(kind, input, gather(params, has_biases, false), hiddens,
                 num_layers, dropout, train, bidirectional);
  std::vector<at::Tensor> hy;
  for (Hidden& f : finals) {
    hy.push_back(std::move(f.h));
  }
  if (batch_first) {
    output.transpose_(0, 1);
  }
  return {std::move(output), at::stack(hy, 0)};
}

// gru.input, rnn_tanh.input, rnn_relu.input: CPU's algorithm.
template <Kind kind>
std::tuple<at::Tensor, at::Tensor> one_hidden_rnn(
    const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
    bool has_biases, int64_t num_layers, double dropout, bool train,
    bool bidirectional, bool batch_first) {
  return one_hidden_as_cpu(kind, input, hx, params, has_biases, num_layers,
                           dropout, train, bidirectional, batch_first);
}

void check_cell(const at::Tensor& input, at::TensorList hx,
                const at::Tensor& w_ih, const at::Tensor& w_hh,
                int64_t gates) {
  TORCH_CHECK(w_ih.size(0) == gates * w_hh.size(1), "weight_ih first dim "
              "must be ", gates, " * hidden_size = ", gates * w_hh.size(1),
              ", but got ", w_ih.size(0));
  TORCH_CHECK(w_hh.size(0) == gates * w_hh.size(1), "weight_hh first dim "
              "must be ", gates, " * hidden_size = ", gates * w_hh.size(1),
              ", but got ", w_hh.size(0));
  TORCH_CHECK(input.sym_size(1) == w_ih.sym_size(1),
              "input has inconsistent input_size: got ", input.sym_size(1),
              " expected ", w_ih.sym_size(1));
  for (size_t i = 0; i < hx.size(); ++i) {
    TORCH_CHECK(input.sym_size(0) == hx[i].sym_size(0), "Input batch size ",
                input.sym_size(0), " doesn't match hidden", i,
                " batch size ", hx[i].sym_size(0));
    TORCH_CHECK(hx[i].sym_size(1) == w_hh.sym_size(1), "hidden", i,
                " has inconsistent hidden_size: got ", hx[i].sym_size(1),
                ", expected ", w_hh.sym_size(1));
  }
}

Params cell_params(const at::Tensor& w_ih, const at::Tensor& w_hh,
                   const std::optional<at::Tensor>& b_ih,
                   const std::optional<at::Tensor>& b_hh) {
  return {w_ih, w_hh, b_ih.value_or(at::Tensor()), b_hh.value_or(at::Tensor()),
          {}};
}

// gru_cell, rnn_tanh_cell, rnn_relu_cell (`gates` gates each): CPU's cell.
template <Kind kind, int64_t gates>
at::Tensor one_hidden_cell(const at::Tensor& input, const at::Tensor& hx,
                           const at::Tensor& w_ih, const at::Tensor& w_hh,
                           const std::optional<at::Tensor>& b_ih,
                           const std::optional<at::Tensor>& b_hh) {
  check_cell(input, {hx}, w_ih, w_hh, gates);
  const Params p = cell_params(w_ih, w_hh, b_ih, b_hh);
  return cell(kind, p.linear_ih(input), {hx, {}}, p).h;
}

std::tuple<at::Tensor, at::Tensor> lstm_cell_as_cpu(
    const at::Tensor& input, at::TensorList hx, const at::Tensor& w_ih,
    const at::Tensor& w_hh, const std::optional<at::Tensor>& b_ih,
    const std::optional<at::Tensor>& b_hh) {
  TORCH_CHECK(hx.size() == 2, "lstm_cell expects two hidden states");
  check_cell(input, hx, w_ih, w_hh, 4);
  const Params p = cell_params(w_ih, w_hh, b_ih, b_hh);
  Hidden out = cell(Kind::kLstm, p.linear_ih(input), {hx[0], hx[1]}, p);
  return {std::move(out.h), std::move(out.c)};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_as_cpu_steps(
    const at::Tensor& input_, at::TensorList hx, at::TensorList params,
    bool has_biases, int64_t num_layers, double dropout, bool train,
    bool bidirectional, bool batch_first) {
  TORCH_CHECK(hx.size() == 2, "lstm expects two hidden states");
  check_devices(input_, params, hx);
  if (input_.dim() == 3) {
    const int64_t layers = num_layers * (bidirectional ? 2 : 1);
    for (size_t i = 0; i < 2; ++i) {
      const char* name = i == 0 ? "h_0" : "c_0";
      TORCH_CHECK(hx[i].dim() == 3, "For batched 3-D input, hx[", i, "] (",
                  name, ") should be 3-D but got ", hx[i].dim(), "-D tensor");
      TORCH_CHECK(hx[i].size(0) == layers, "Expected ", name, " size(0) to "
                  "be ", layers, " (num_layers * num_directions), but got ",
                  hx[i].size(0));
    }
  }
  const bool has_projections = hx[0].sym_size(2) != hx[1].sym_size(2);
  const at::Tensor input = batch_first ? input_.transpose(0, 1) : input_;
  std::vector<Hidden> hiddens;
  auto hs = hx[0].unbind(0);
  auto cs = hx[1].unbind(0);
  for (size_t i = 0; i < hs.size(); ++i) {
    hiddens.push_back({std::move(hs[i]), std::move(cs[i])});
  }
  auto [output, finals] =
      run_layers(Kind::kLstm, input, gather(params, has_biases, has_projections),
                 hiddens, num_layers, dropout, train, bidirectional);
  std::vector<at::Tensor> hy, cy;
  for (Hidden& f : finals) {
    hy.push_back(std::move(f.h));
    cy.push_back(std::move(f.c));
  }
  if (batch_first) {
    output.transpose_(0, 1);
  }
  return {std::move(output), at::stack(hy, 0), at::stack(cy, 0)};
}

// The composites are CompositeImplicitAutograd: kernels of infini's autograd
// key take their place for infini tensors, and the operators they call
// record their own backward.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("gru.input", TORCH_FN(one_hidden_rnn<Kind::kGru>));
  m.impl("rnn_tanh.input", TORCH_FN(one_hidden_rnn<Kind::kTanh>));
  m.impl("rnn_relu.input", TORCH_FN(one_hidden_rnn<Kind::kRelu>));
  m.impl("gru_cell", TORCH_FN((one_hidden_cell<Kind::kGru, 3>)));
  m.impl("rnn_tanh_cell", TORCH_FN((one_hidden_cell<Kind::kTanh, 1>)));
  m.impl("rnn_relu_cell", TORCH_FN((one_hidden_cell<Kind::kRelu, 1>)));
  m.impl("lstm_cell", TORCH_FN(lstm_cell_as_cpu));
}

}  // namespace torch_infini::ops
