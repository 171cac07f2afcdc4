// PLACEHOLDER: replaced by the exec stage implementation.
#include "worker/op.h"
namespace gm {
void RegisterExecOps(OpRegistry&) {}
}  // namespace gm
