// PLACEHOLDER: replaced by the text ops implementation.
#include "worker/op.h"
namespace gm {
void RegisterTextOps(OpRegistry&) {}
}  // namespace gm
