#include "distributed/InfiniCCL.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <vector>

#ifdef TORCH_INFINI_WITH_INFINI_CCL
#include <infiniccl/comm.h>  // InfiniCCL's C API
#endif

#include "core/InfiniStream.h"

namespace torch_infini::distributed {

#ifdef TORCH_INFINI_WITH_INFINI_CCL
namespace {

const char* result_name(infinicclResult_t r) {
  switch (r) {
    case infinicclSuccess: return "success";
    case infinicclUnhandledError: return "unhandled error";
    case infinicclSystemError: return "system error";
    case infinicclInternalError: return "internal error";
    case infinicclInvalidArgument: return "invalid argument";
    case infinicclInvalidUsage: return "invalid usage";
    case infinicclRemoteError: return "remote error";
    case infinicclInProgress: return "in progress";
    case infinicclNotSupported: return "not supported by its backend";
    default: return "unknown result";
  }
}

bool to_ccl_dtype(c10::ScalarType t, infinicclDataType_t* out) {
  switch (t) {
    case c10::ScalarType::Float: *out = infinicclFloat32; return true;
    case c10::ScalarType::Double: *out = infinicclFloat64; return true;
    case c10::ScalarType::Half: *out = infinicclFloat16; return true;
    case c10::ScalarType::BFloat16: *out = infinicclBFloat16; return true;
    case c10::ScalarType::Char: *out = infinicclInt8; return true;
    case c10::ScalarType::Short: *out = infinicclInt16; return true;
    case c10::ScalarType::Int: *out = infinicclInt32; return true;
    case c10::ScalarType::Long: *out = infinicclInt64; return true;
    case c10::ScalarType::Byte: *out = infinicclUInt8; return true;
    default: return false;
  }
}

bool to_ccl_op(const c10d::ReduceOp& op, infinicclRedOp_t* out) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: *out = infinicclSum; return true;
    case c10d::ReduceOp::PRODUCT: *out = infinicclProd; return true;
    case c10d::ReduceOp::MAX: *out = infinicclMax; return true;
    case c10d::ReduceOp::MIN: *out = infinicclMin; return true;
    case c10d::ReduceOp::AVG: *out = infinicclAvg; return true;
    default: return false;  // bitwise and PREMUL_SUM: gloo
  }
}

// The store value: one status byte (0: the id follows) and the id.
std::vector<uint8_t> encode(infinicclResult_t status,
                            const infinicclUniqueId& id) {
  std::vector<uint8_t> value(1 + sizeof(id));
  value[0] = static_cast<uint8_t>(status);
  std::memcpy(value.data() + 1, &id, sizeof(id));
  return value;
}

}  // namespace

bool CclCommunicator::compiled() { return true; }

std::unique_ptr<CclCommunicator> CclCommunicator::create(
    const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
    int rank, int size, std::string* why) {
  const std::string key = prefix + "/infiniccl_unique_id";
  infinicclUniqueId id{};
  if (rank == 0) {
    const infinicclResult_t made = infinicclGetUniqueId(&id);
    store->set(key, encode(made, id));
    if (made != infinicclSuccess) {
      *why = std::string("infinicclGetUniqueId: ") + result_name(made);
      return nullptr;
    }
  } else {
    const std::vector<uint8_t> value = store->get(key);
    TORCH_CHECK(value.size() == 1 + sizeof(id),
                "infini process group: a malformed InfiniCCL unique id in "
                "the store under ", key);
    if (value[0] != infinicclSuccess) {
      *why = std::string("infinicclGetUniqueId on rank 0: ") +
          result_name(static_cast<infinicclResult_t>(value[0]));
      return nullptr;
    }
    std::memcpy(&id, value.data() + 1, sizeof(id));
  }
  infinicclComm_t comm = nullptr;
  const infinicclResult_t joined = infinicclCommInitRank(&comm, size, id, rank);
  if (joined != infinicclSuccess) {
    *why = std::string("infinicclCommInitRank: ") + result_name(joined);
    return nullptr;
  }
  return std::unique_ptr<CclCommunicator>(new CclCommunicator(comm));
}

CclCommunicator::~CclCommunicator() {
  infinicclCommDestroy(comm_);
}

bool CclCommunicator::all_reduce_serves(const at::Tensor& t,
                                        const c10d::ReduceOp& op) {
  infinicclDataType_t dtype;
  infinicclRedOp_t reduction;
  return t.is_contiguous() && to_ccl_dtype(t.scalar_type(), &dtype) &&
      to_ccl_op(op, &reduction) &&
      !(op.op_ == c10d::ReduceOp::AVG && !t.is_floating_point());
}

void CclCommunicator::all_reduce(const at::Tensor& t, const c10d::ReduceOp& op,
                                 const c10::Stream& stream) {
  infinicclDataType_t dtype;
  infinicclRedOp_t reduction;
  TORCH_CHECK(to_ccl_dtype(t.scalar_type(), &dtype) && to_ccl_op(op, &reduction),
              "infini process group: InfiniCCL has no all_reduce for ",
              t.scalar_type());
  const infinicclResult_t r = infinicclAllReduce(
      t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), dtype,
      reduction, comm_, native_stream(stream));
  TORCH_CHECK(r == infinicclSuccess, "infini process group: infinicclAllReduce: ",
              result_name(r));
}

#else  // no InfiniCCL in this build

bool CclCommunicator::compiled() { return false; }

std::unique_ptr<CclCommunicator> CclCommunicator::create(
    const c10::intrusive_ptr<c10d::Store>&, const std::string&, int, int,
    std::string* why) {
  *why = "this build has no InfiniCCL (build with INFINI_CCL_PREFIX set)";
  return nullptr;
}

CclCommunicator::~CclCommunicator() = default;

bool CclCommunicator::all_reduce_serves(const at::Tensor&, const c10d::ReduceOp&) {
  return false;
}

void CclCommunicator::all_reduce(const at::Tensor&, const c10d::ReduceOp&,
                                 const c10::Stream&) {
  TORCH_CHECK(false, "infini process group: this build has no InfiniCCL");
}

#endif

}  // namespace torch_infini::distributed
