#pragma once

// nn.RNN, nn.GRU and nn.LSTM on infini as CPU computes them (see
// rnn_as_cpu.cpp).

#include <ATen/core/Tensor.h>

#include <tuple>

namespace torch_infini::ops {

// CPU's per-step LSTM (the input's gates for the whole sequence in one
// linear, CPU's cell): lstm.input where CPU does not take oneDNN's LSTM.
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_as_cpu_steps(
    const at::Tensor& input, at::TensorList hx, at::TensorList params,
    bool has_biases, int64_t num_layers, double dropout, bool train,
    bool bidirectional, bool batch_first);

}  // namespace torch_infini::ops
