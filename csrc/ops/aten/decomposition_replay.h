#pragma once

// A decomposition, replayed. PyTorch's decompositions are Python: run on
// every call, one costs hundreds of microseconds of Python (the references'
// checks, the primitives' meta functions) around a handful of operator
// calls, more than the operators it calls. Its first run for a call's key is
// recorded at the dispatcher (torch_infini/decompositions/recording.py): the
// operator calls it made, each argument a constant or a tensor of the call's
// or of an earlier call's results. A later call of the same key runs that
// sequence from C++, each operator through the dispatcher as the Python code
// would have called it; no Python runs.
//
// Why a replay is what the Python code would do: the key holds everything
// the code can read (the overload, the state, every argument's metadata,
// offsets, aliasing and value, a CPU scalar's value too), and a recording
// that read anything else is not kept: one whose calls hand a value to
// Python (item(), equal), move device data to the host, or return a
// data-dependent shape (nonzero); one that used a tensor that is neither an
// argument nor a call's result; one that warned, or took a CPU tensor
// argument other than a scalar. TORCH_INFINI_VERIFY_CACHES=1 records every
// hit again and compares the two sequences.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dispatch_state.h"

namespace torch_infini::ops {

// One operator call of a decomposition's first run, as the dispatcher saw
// it: its arguments in schema order, and its returns.
struct RecordedCall {
  c10::OperatorHandle op;
  std::vector<c10::IValue> arguments;
  std::vector<c10::IValue> returns;
};

// A decomposition's first run: its calls, in order, or why it may not be
// replayed (seen by the recorder: a warning).
struct Recording {
  std::vector<RecordedCall> calls;
  std::string not_replayable;
};

class ReplayProgram {
 public:
  // The program of a run of `args` under `state` that made `recording`
  // and left `results`; one that is not replayable (and says why) where
  // the run read what the key does not hold: remembered too, so that a
  // later call of the key is not recorded again.
  static std::shared_ptr<const ReplayProgram> build(
      c10::ArrayRef<c10::IValue> args, const Recording& recording,
      c10::ArrayRef<c10::IValue> results, const runtime::DispatchState& state);

  bool replayable() const { return not_replayable_.empty(); }
  const std::string& not_replayable() const { return not_replayable_; }

  // Runs the calls on the stack's arguments and replaces them by the
  // results. False where an operator it calls is refused, with the
  // refusal's first line, as the Python code's run has it.
  bool run(torch::jit::Stack* stack, size_t nargs, std::string* refusal) const;

  // The calls, written out (or why there are none): two programs of equal
  // signature are the same.
  const std::string& signature() const { return signature_; }

  // The state it was recorded under (part of its key), for the
  // verification mode's message.
  const runtime::DispatchState& state() const { return state_; }

  // The operators it calls, in order ("aten::cumsum"; tests, diagnostics).
  std::vector<std::string> operators() const;

 private:
  // An argument: a constant, or a value whose tensors (in
  // runtime::for_each_tensor's order) are slots; a lift_fresh constant is
  // given as a new copy each run.
  struct Argument {
    c10::IValue value;
    std::vector<int> slots;
    bool fresh_copy = false;
  };
  struct Step {
    c10::OperatorHandle op;
    std::vector<Argument> arguments;
    // Per return, the slots its tensors fill (a list's, in order).
    std::vector<std::vector<int>> returns;
    std::vector<int> release;  // slots no later step or result reads
    bool on_meta_only = false;  // takes and makes meta tensors alone
  };

  void drop_unused_meta_steps(size_t nslots);

  size_t ninputs_ = 0;
  runtime::DispatchState state_;
  std::string not_replayable_;
  size_t nslots_ = 0;
  std::vector<Step> steps_;
  std::vector<Argument> results_;
  std::string signature_;
};

// The key of a call whose decomposition may be recorded, or none where an
// argument cannot be keyed exactly (a CPU tensor other than a scalar, a
// generator, a symbolic size).
std::optional<std::string> replay_key(const std::string& name,
                                      c10::ArrayRef<c10::IValue> args,
                                      const runtime::DispatchState& state);

// The programs, by key, per process (bounded).
std::shared_ptr<const ReplayProgram> find_replay(const std::string& key);
void remember_replay(std::string key,
                     std::shared_ptr<const ReplayProgram> program);
// Forgets every program: the Python code they were recorded from changed
// (torch_infini.decompositions' table was replaced).
void clear_replays();

// The programs remembered for overload `name` ("aten::trace"): how many
// are replayable, and why each other one is not (tests, diagnostics).
std::pair<size_t, std::vector<std::string>> replays_of(const std::string& name);
// The operators each replayable program of overload `name` calls.
std::vector<std::vector<std::string>> replayed_operators_of(const std::string& name);

struct ReplayCounts {
  uint64_t recorded = 0;  // programs kept
  uint64_t replayed = 0;  // calls run from a program
  uint64_t not_replayable = 0;  // first runs that may not be replayed
};
ReplayCounts replay_counts();

}  // namespace torch_infini::ops
