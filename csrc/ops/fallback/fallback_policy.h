#pragma once

// The opt-in CPU fallback's switch and operator lists: whether an operator
// without an infini kernel may run on the CPU. Process-wide; read by the
// boxed fallback (ops/fallback/fallback.cpp) on every call it receives, set from
// Python (torch_infini.fallback) or the environment:
//
//   TORCH_INFINI_CPU_FALLBACK        1/0 (also true/false, on/off, yes/no)
//   TORCH_INFINI_CPU_FALLBACK_ALLOW  comma-separated operator names
//   TORCH_INFINI_CPU_FALLBACK_DENY   comma-separated operator names
//
// A name is "aten::cumsum" (every overload) or "aten::cumsum.out" (that
// overload only); a name without a namespace is taken as aten's. A non-empty
// allow-list limits the fallback to the operators it names; the deny-list
// wins over it. The variables are read once, at first use.

#include <ATen/core/operator_name.h>

#include <string>
#include <vector>

namespace torch_infini::ops::fallback_policy {

bool enabled();
void set_enabled(bool on);

// Replace a list (an empty list clears it). Names are normalized ("cumsum"
// becomes "aten::cumsum") and aten names are checked against the registered
// operators; an unknown one raises, naming it.
void set_allow_list(const std::vector<std::string>& names);
void set_deny_list(const std::vector<std::string>& names);
std::vector<std::string> allow_list();
std::vector<std::string> deny_list();

// Empty when the lists let `op` fall back; otherwise why not, phrased to
// follow "<op> ...".
std::string list_refusal(const c10::OperatorName& op);

// True the first time it is asked about `op` in this process: the caller
// warns once per operator.
bool first_fallback(const c10::OperatorName& op);

}  // namespace torch_infini::ops::fallback_policy
