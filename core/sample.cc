#include "core/sample.h"

namespace gm {

size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat32: return 4;
  }
  return 1;
}

std::string_view DTypeName(DType d) {
  switch (d) {
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat32: return "float32";
  }
  return "?";
}

std::string_view NumpyDescr(DType d) {
  switch (d) {
    case DType::kUInt8: return "|u1";
    case DType::kInt32: return "<i4";
    case DType::kInt64: return "<i8";
    case DType::kFloat32: return "<f4";
  }
  return "?";
}

size_t Tensor::num_elements() const {
  if (shape.empty()) return 0;
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return n;
}

void Tensor::Reset(DType d, std::vector<int64_t> s) {
  dtype = d;
  shape = std::move(s);
  bytes.resize(num_elements() * DTypeSize(d));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace gm
