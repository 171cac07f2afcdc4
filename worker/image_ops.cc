// PLACEHOLDER: replaced by the image ops implementation.
#include "worker/op.h"
namespace gm {
void RegisterImageOps(OpRegistry&) {}
std::unique_ptr<Op> FuseDecode(std::unique_ptr<Op>&, std::unique_ptr<Op>&) { return nullptr; }
}  // namespace gm
