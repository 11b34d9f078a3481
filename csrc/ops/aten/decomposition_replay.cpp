#include "ops/aten/decomposition_replay.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "ops/common.h"
#include "runtime/cache_key_bytes.h"
#include "runtime/ivalue_tensors.h"

namespace torch_infini::ops {
namespace {

using runtime::append_bytes;
using runtime::append_tagged;
using runtime::for_each_tensor;

// A tensor as far as Python code can read it without calling an operator:
// device, dtype, sizes, strides, offset and flags; a CPU scalar's value too
// (float(t) reads it on the host). False for any other CPU tensor: its
// values are a list away (tolist()), which no operator call would show.
bool append_tensor(std::string& out, const at::Tensor& t) {
  if (!t.defined()) {
    out.push_back('u');
    return true;
  }
  if (t.layout() != c10::kStrided) {
    return false;
  }
  const auto dtype = t.scalar_type();
  const int64_t dim = t.dim();
  out.push_back(t.device().is_cpu() ? 'c' : 't');
  append_bytes(out, &dtype, sizeof(dtype));
  out.push_back(static_cast<char>(
      t.is_conj() | (t.is_neg() << 1) | (t._is_zerotensor() << 2) |
      (t.requires_grad() << 3) |
      (t.unsafeGetTensorImpl()->is_wrapped_number() << 4)));
  if (t.device().is_cpu()) {
    if (dim != 0 || t.const_data_ptr() == nullptr) {  // (a ZeroTensor has no memory)
      return false;
    }
    append_bytes(out, t.const_data_ptr(), t.element_size());
    return true;
  }
  const auto index = t.device().index();
  append_bytes(out, &index, sizeof(index));
  append_bytes(out, &dim, sizeof(dim));
  append_bytes(out, t.sizes().data(), dim * sizeof(int64_t));
  append_bytes(out, t.strides().data(), dim * sizeof(int64_t));
  const int64_t offset = t.storage_offset();
  append_bytes(out, &offset, sizeof(offset));
  return true;
}

// Every value exactly (floats by their bits); tensors by append_tensor.
// False for a value of a kind not keyed (a generator, a symbolic size).
bool append_value(std::string& out, const c10::IValue& value) {
  if (value.isTensor()) {
    return append_tensor(out, value.toTensor());
  }
  if (value.isTensorList() || value.isList()) {  // int[], Tensor?[], ...
    out.push_back('[');
    for (const c10::IValue& element : value.toListRef()) {
      if (!append_value(out, element)) {
        return false;
      }
    }
    out.push_back(']');
    return true;
  }
  return runtime::append_plain_value(out, value);
}

// Which tensors are the very same tensor, or share memory, with an earlier
// one: Python code may compare them (x is out, data_ptr()).
void append_aliasing(std::string& out, c10::ArrayRef<c10::IValue> args) {
  std::vector<const at::Tensor*> seen;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    int32_t same = -1;  // (a list may hold more tensors than an int16 counts)
    int32_t shares = -1;
    for (size_t j = 0; t.defined() && j < seen.size() && same < 0; ++j) {
      const at::Tensor& other = *seen[j];
      if (!other.defined()) {
        continue;
      }
      if (other.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        same = static_cast<int32_t>(j);
      } else if (shares < 0 && other.storage().is_alias_of(t.storage())) {
        shares = static_cast<int32_t>(j);
      }
    }
    append_tagged(out, 'a', same);
    append_bytes(out, &shares, sizeof(shares));
    seen.push_back(&t);
  });
}

// `value` with its tensors' places kept and the tensors let go: a program
// holds none of the recorded run's tensors (a caller's among them).
c10::IValue without_tensors(const c10::IValue& value) {
  return runtime::map_tensors(value, [](const at::Tensor&) { return at::Tensor(); });
}

// Whether the shapes of a call of an operator whose shapes may depend on
// the data (index, by integers or by a mask) follow from its arguments'
// metadata here: its meta function computes them (it raises where the data
// decides), and they are the recorded ones.
bool shapes_follow_metadata(const RecordedCall& call) {
  torch::jit::Stack stack;
  for (const c10::IValue& value : call.arguments) {
    stack.push_back(runtime::map_tensors(value, [](const at::Tensor& t) {
      return t.defined() ? at::empty_strided(t.sizes(), t.strides(),
                                             t.options().device(c10::kMeta))
                         : t;
    }));
  }
  try {
    call.op.callBoxed(&stack);
  } catch (const std::exception&) {
    return false;
  }
  std::vector<std::vector<int64_t>> meta;
  std::vector<std::vector<int64_t>> recorded;
  for_each_tensor(stack, [&](const at::Tensor& t, size_t) {
    meta.push_back(t.defined() ? t.sizes().vec() : std::vector<int64_t>{-1});
  });
  for_each_tensor(call.returns, [&](const at::Tensor& t, size_t) {
    recorded.push_back(t.defined() ? t.sizes().vec() : std::vector<int64_t>{-1});
  });
  return meta == recorded;
}

bool is_lift_fresh(const c10::OperatorHandle& op) {
  return op.schema().name() == "aten::lift_fresh";
}

std::string name_of(const c10::OperatorHandle& op) {
  return full_name(op.operator_name());
}

struct Replays {
  std::mutex mutex;  // a lookup, no device call
  std::unordered_map<std::string, std::shared_ptr<const ReplayProgram>> map;
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> replayed{0};
  std::atomic<uint64_t> not_replayable{0};
};

Replays& replays() {
  static Replays instance;
  return instance;
}

}  // namespace

std::optional<std::string> replay_key(const std::string& name,
                                      c10::ArrayRef<c10::IValue> args,
                                      const runtime::DispatchState& state) {
  std::string key = name;
  key.push_back('\0');
  state.append_to(key);
  for (const c10::IValue& value : args) {
    if (!append_value(key, value)) {
      return std::nullopt;
    }
  }
  append_aliasing(key, args);
  return key;
}

std::shared_ptr<const ReplayProgram> ReplayProgram::build(
    c10::ArrayRef<c10::IValue> args, const Recording& recording,
    c10::ArrayRef<c10::IValue> results, const runtime::DispatchState& state) {
  const auto refuse = [&](std::string why) {
    auto none = std::make_shared<ReplayProgram>();
    none->state_ = state;
    none->not_replayable_ = std::move(why);
    none->signature_ = "not replayable: " + none->not_replayable_;
    replays().not_replayable.fetch_add(1, std::memory_order_relaxed);
    return none;
  };
  if (!recording.not_replayable.empty()) {
    return refuse(recording.not_replayable);
  }
  // The slot of each tensor the run has seen, by identity: the recording
  // holds every one of them, so no address is reused within it.
  std::unordered_map<const c10::TensorImpl*, int> slot_of;
  int nslots = 0;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (t.defined()) {
      slot_of.emplace(t.unsafeGetTensorImpl(), nslots);
    }
    ++nslots;
  });
  auto program = std::make_shared<ReplayProgram>();
  program->ninputs_ = nslots;
  program->state_ = state;
  std::string& signature = program->signature_;
  // The slots of `value`'s tensors; false where one is none of them.
  const auto slots_of = [&](const c10::IValue& value, std::vector<int>* out) {
    bool known = true;
    for_each_tensor(c10::ArrayRef<c10::IValue>(value),
                    [&](const at::Tensor& t, size_t) {
                      const auto it = t.defined()
                          ? slot_of.find(t.unsafeGetTensorImpl())
                          : slot_of.end();
                      known = known && (!t.defined() || it != slot_of.end());
                      out->push_back(t.defined() && known ? it->second : -1);
                    });
    return known;
  };
  const auto has_tensor = [](const c10::IValue& value) {
    bool any = false;
    for_each_tensor(c10::ArrayRef<c10::IValue>(value),
                    [&](const at::Tensor& t, size_t) { any = any || t.defined(); });
    return any;
  };
  for (const RecordedCall& call : recording.calls) {
    const std::string name = name_of(call.op);
    if (call.op.hasTag(at::Tag::data_dependent_output) ||
        (call.op.hasTag(at::Tag::dynamic_output_shape) &&
         !shapes_follow_metadata(call))) {
      return refuse(name + " returns what the data decides (a value or a shape)");
    }
    Step step{call.op, {}, {}, {}};
    signature += name;
    bool reads_device = false;
    // Whether every tensor it takes or makes is a meta tensor (and it takes
    // or makes one).
    bool meta_tensors = false;
    bool others = false;
    const auto see = [&](const c10::IValue& value) {
      for_each_tensor(c10::ArrayRef<c10::IValue>(value),
                      [&](const at::Tensor& t, size_t) {
                        if (t.defined()) {
                          (t.is_meta() ? meta_tensors : others) = true;
                        }
                      });
    };
    for (const c10::IValue& value : call.arguments) {
      see(value);
      for_each_tensor(c10::ArrayRef<c10::IValue>(value),
                      [&](const at::Tensor& t, size_t) {
                        reads_device = reads_device ||
                            (t.defined() && !t.device().is_cpu());
                      });
      Argument argument;
      if (!has_tensor(value)) {
        argument.value = value;
        signature.push_back('c');
        if (!append_value(signature, value)) {
          return refuse(name + " takes an argument of a kind not compared");
        }
      } else if (slots_of(value, &argument.slots)) {
        argument.value = without_tensors(value);
        signature.push_back('s');
        append_bytes(signature, argument.slots.data(), argument.slots.size() * sizeof(int));
      } else if (value.isTensor() &&
                 (is_lift_fresh(call.op) ||
                  value.toTensor().unsafeGetTensorImpl()->is_wrapped_number())) {
        // A constant of the Python code: a number it passed (a wrapped
        // number, never written), or torch.tensor(...)'s values (copied by
        // the recorder when made; given as a new copy each run, as a later
        // call may write it). Either made of numbers the key holds.
        argument.value = value;
        argument.slots.clear();
        argument.fresh_copy = is_lift_fresh(call.op);
        const at::Tensor host = value.toTensor().cpu().contiguous();
        signature.push_back(argument.fresh_copy ? 'f' : 'w');
        append_tagged(signature, 'T', host.scalar_type());
        append_bytes(signature, host.sizes().data(), host.dim() * sizeof(int64_t));
        append_bytes(signature, host.const_data_ptr(), host.nbytes());
      } else {
        return refuse(name + " reads a tensor that is neither an argument "
                             "nor an earlier call's result");
      }
      step.arguments.push_back(std::move(argument));
    }
    bool to_host = false;
    for (const c10::IValue& value : call.returns) {
      std::vector<int> slots;
      if (!value.isNone() && !value.isTensor() && !value.isTensorList()) {
        return refuse(name + " returns a " + value.tagKind() + " to Python");
      }
      for_each_tensor(c10::ArrayRef<c10::IValue>(value),
                      [&](const at::Tensor& t, size_t) {
                        if (!t.defined()) {
                          slots.push_back(-1);
                          return;
                        }
                        to_host = to_host || t.device().is_cpu();
                        const auto [it, made] =
                            slot_of.emplace(t.unsafeGetTensorImpl(), nslots);
                        nslots += made ? 1 : 0;
                        slots.push_back(it->second);
                      });
      signature.push_back('r');
      append_bytes(signature, slots.data(), slots.size() * sizeof(int));
      step.returns.push_back(std::move(slots));
    }
    if (reads_device && to_host) {
      return refuse(name + " copies device memory to the host");
    }
    for (const c10::IValue& value : call.returns) {
      see(value);
    }
    step.on_meta_only = meta_tensors && !others;
    program->steps_.push_back(std::move(step));
  }
  for (const c10::IValue& value : results) {
    Argument result;
    result.value = without_tensors(value);
    if (!value.isNone() && !value.isTensor() && !value.isTensorList()) {
      return refuse(std::string("the decomposition returns a ") +
                    value.tagKind());
    }
    if (has_tensor(value) && !slots_of(value, &result.slots)) {
      return refuse("the decomposition returns a tensor none of its calls made");
    }
    signature.push_back('R');
    append_bytes(signature, result.slots.data(), result.slots.size() * sizeof(int));
    program->results_.push_back(std::move(result));
  }
  program->drop_unused_meta_steps(nslots);
  // Each slot is let go after the last step that reads or fills it, as the
  // Python code's references would be: a long decomposition holds no more
  // memory than its run did.
  std::vector<int> last(nslots, -1);
  const auto touch = [&](const std::vector<int>& slots, int step) {
    for (const int s : slots) {
      if (s >= 0) {
        last[s] = step;
      }
    }
  };
  for (size_t i = 0; i < program->steps_.size(); ++i) {
    for (const Argument& a : program->steps_[i].arguments) {
      touch(a.slots, static_cast<int>(i));
    }
    for (const auto& r : program->steps_[i].returns) {
      touch(r, static_cast<int>(i));
    }
  }
  for (const Argument& r : program->results_) {
    touch(r.slots, static_cast<int>(program->steps_.size()));
  }
  for (int s = 0; s < nslots; ++s) {
    if (last[s] >= 0 && last[s] < static_cast<int>(program->steps_.size())) {
      program->steps_[last[s]].release.push_back(s);
    }
  }
  program->nslots_ = nslots;
  return program;
}

// A step on meta tensors alone whose results no later kept step reads, nor
// the program's results: a meta call the Python code made to learn
// metadata (arange's length, from the meta kernel that checks its bounds as
// CPU's does). Its outcome is fixed by the key, which holds every number and
// every tensor's metadata it was computed from, and it touches no device
// memory; the first run passed its checks, so the replay skips it (a meta
// arange.start_out is a Python meta function, 42 us of a 78 us arange).
void ReplayProgram::drop_unused_meta_steps(size_t nslots) {
  std::vector<bool> read(nslots, false);
  const auto mark = [&](const std::vector<int>& slots) {
    for (const int s : slots) {
      if (s >= 0) {
        read[s] = true;
      }
    }
  };
  for (const Argument& r : results_) {
    mark(r.slots);
  }
  const auto any_read = [&](const std::vector<int>& slots) {
    return std::any_of(slots.begin(), slots.end(),
                       [&](int s) { return s >= 0 && read[s]; });
  };
  std::vector<bool> keep(steps_.size(), true);
  for (size_t i = steps_.size(); i-- > 0;) {
    const Step& step = steps_[i];
    if (step.on_meta_only) {
      // What it makes or changes (a meta tensor's metadata, resize_'s), if
      // anything later reads it.
      keep[i] = std::any_of(step.returns.begin(), step.returns.end(), any_read);
      const auto& schema = step.op.schema().arguments();
      for (size_t j = 0; j < step.arguments.size() && j < schema.size(); ++j) {
        const auto* alias = schema[j].alias_info();
        keep[i] = keep[i] ||
            (alias != nullptr && alias->isWrite() && any_read(step.arguments[j].slots));
      }
    }
    if (keep[i]) {
      for (const Argument& a : step.arguments) {
        mark(a.slots);
      }
    }
  }
  std::vector<Step> kept;
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (keep[i]) {
      kept.push_back(std::move(steps_[i]));
    }
  }
  steps_ = std::move(kept);
}

std::vector<std::string> ReplayProgram::operators() const {
  std::vector<std::string> names;
  for (const Step& step : steps_) {
    names.push_back(name_of(step.op));
  }
  return names;
}

bool ReplayProgram::run(torch::jit::Stack* stack, size_t nargs,
                        std::string* refusal) const {
  std::vector<c10::IValue> slots(nslots_);
  size_t next = 0;
  for_each_tensor(torch::jit::last(*stack, nargs),
                  [&](const at::Tensor& t, size_t) { slots[next++] = t; });
  TORCH_INTERNAL_ASSERT(next == ninputs_, "infini: a replayed decomposition "
                        "met ", next, " tensors where its key had ", ninputs_);
  const auto value_of = [&](const Argument& a) -> c10::IValue {
    if (a.fresh_copy) {
      return a.value.toTensor().clone();
    }
    if (a.slots.empty()) {
      return a.value;
    }
    if (a.value.isTensor()) {
      return a.slots[0] < 0 ? c10::IValue(at::Tensor()) : slots[a.slots[0]];
    }
    size_t i = 0;
    return runtime::map_tensors(a.value, [&](const at::Tensor&) {
      const int s = a.slots[i++];
      return s < 0 ? at::Tensor() : slots[s].toTensor();
    });
  };
  torch::jit::Stack call;
  try {
    for (const Step& step : steps_) {
      call.clear();
      for (const Argument& a : step.arguments) {
        call.push_back(value_of(a));
      }
      step.op.callBoxed(&call);
      for (size_t j = 0; j < step.returns.size(); ++j) {
        const std::vector<int>& to = step.returns[j];
        if (call[j].isTensor()) {
          if (!to.empty() && to[0] >= 0) {
            slots[to[0]] = std::move(call[j]);
          }
        } else if (call[j].isTensorList()) {
          const auto list = call[j].toTensorList();
          for (size_t k = 0; k < to.size() && k < list.size(); ++k) {
            if (to[k] >= 0) {
              slots[to[k]] = list.get(k);
            }
          }
        }
      }
      for (const int s : step.release) {
        slots[s] = c10::IValue();
      }
    }
  } catch (const c10::NotImplementedError& e) {
    // A refused operator, as the Python run meets it: its refusal.
    const std::string message = e.what_without_backtrace();
    *refusal = message.substr(0, message.find('\n'));
    return false;
  }
  torch::jit::drop(*stack, nargs);
  for (const Argument& r : results_) {
    stack->push_back(value_of(r));
  }
  replays().replayed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::shared_ptr<const ReplayProgram> find_replay(const std::string& key) {
  Replays& r = replays();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.map.find(key);
  return it == r.map.end() ? nullptr : it->second;
}

void remember_replay(std::string key,
                     std::shared_ptr<const ReplayProgram> program) {
  Replays& r = replays();
  // Programs let go are destroyed after the lock (their constants may be
  // device memory); `program` outlives it too.
  std::unordered_map<std::string, std::shared_ptr<const ReplayProgram>> dropped;
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.map.size() >= 4096) {
    dropped.swap(r.map);  // bounded: a program per size, in a loop of ever new sizes
  }
  if (r.map.emplace(std::move(key), program).second && program->replayable()) {
    r.recorded.fetch_add(1, std::memory_order_relaxed);
  }
}

void clear_replays() {
  Replays& r = replays();
  std::unordered_map<std::string, std::shared_ptr<const ReplayProgram>> dropped;
  std::lock_guard<std::mutex> lock(r.mutex);
  dropped.swap(r.map);  // destroyed after the lock
}

std::vector<std::vector<std::string>> replayed_operators_of(const std::string& name) {
  Replays& r = replays();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::vector<std::string>> found;
  const std::string prefix = name + '\0';  // a key begins with its overload
  for (const auto& [key, program] : r.map) {
    if (key.compare(0, prefix.size(), prefix) == 0 && program->replayable()) {
      found.push_back(program->operators());
    }
  }
  return found;
}

std::pair<size_t, std::vector<std::string>> replays_of(const std::string& name) {
  Replays& r = replays();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::pair<size_t, std::vector<std::string>> found{0, {}};
  const std::string prefix = name + '\0';  // a key begins with its overload
  for (const auto& [key, program] : r.map) {
    if (key.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    if (program->replayable()) {
      ++found.first;
    } else {
      found.second.push_back(program->not_replayable());
    }
  }
  return found;
}

ReplayCounts replay_counts() {
  Replays& r = replays();
  return {r.recorded.load(), r.replayed.load(), r.not_replayable.load()};
}

}  // namespace torch_infini::ops
