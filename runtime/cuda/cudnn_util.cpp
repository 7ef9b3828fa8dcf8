// cuDNN status checks, descriptors and operand casts.
#include "runtime/cuda/cudnn_util.h"

#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cast.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <limits>

namespace mpc {
namespace cuda {

const void *deviceAs(NodeStaging &s, size_t i, const Tensor &v, DType t) {
  if (v.dtype == t)
    return s.device(i);
  requireDeviceFloat(s.node(), v, "operand");
  void *p = s.scratch(size_t(v.numel()) * dtypeSize(t));
  if (v.numel())
    launchCast(v.dtype, t, s.device(i), p, v.numel(), s.stream());
  return p;
}

void checkCudnn(cudnnStatus_t status, const Node &node, const char *call) {
  if (status != CUDNN_STATUS_SUCCESS)
    cpu::fail(node, "cuDNN error: ", call,
              " failed: ", cudnnGetErrorString(status));
}

cudnnDataType_t cudnnType(const Node &node, DType t) {
  switch (t) {
  case DType::F32:
    return CUDNN_DATA_FLOAT;
  case DType::F16:
    return CUDNN_DATA_HALF;
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  default:
    cpu::fail(node, "cuDNN takes fp32, fp16 or bf16 here, got ", dtypeName(t));
  }
}

std::vector<int> cudnnDims(const Node &node, const std::vector<int64_t> &dims) {
  std::vector<int> out;
  for (int64_t d : dims) {
    if (d < 0 || d > int64_t(std::numeric_limits<int>::max()))
      cpu::fail(node, "dimension ", d, " of ", cpu::shapeString(dims),
                " is out of cuDNN's int range");
    out.push_back(int(d));
  }
  return out;
}

TensorDesc::TensorDesc(const Node &node, DType t,
                       const std::vector<int64_t> &dims, ConvLayout layout) {
  checkCudnn(cudnnCreateTensorDescriptor(&desc_), node,
             "cudnnCreateTensorDescriptor");
  std::vector<int> d = cudnnDims(node, dims), strides(d.size());
  std::vector<int64_t> wide = packedStrides(dims, layout);
  for (size_t i = 0; i < d.size(); ++i) {
    if (wide[i] > int64_t(std::numeric_limits<int>::max()))
      cpu::fail(node, "tensor of shape ", cpu::shapeString(dims),
                " has strides past cuDNN's int range");
    strides[i] = int(wide[i]);
  }
  checkCudnn(cudnnSetTensorNdDescriptor(desc_, cudnnType(node, t),
                                        int(d.size()), d.data(),
                                        strides.data()),
             node, "cudnnSetTensorNdDescriptor");
}

TensorDesc::~TensorDesc() {
  if (desc_)
    cudnnDestroyTensorDescriptor(desc_);
}

FilterDesc::FilterDesc(const Node &node, DType t,
                       const std::vector<int64_t> &dims, ConvLayout layout) {
  checkCudnn(cudnnCreateFilterDescriptor(&desc_), node,
             "cudnnCreateFilterDescriptor");
  std::vector<int> d = cudnnDims(node, dims);
  checkCudnn(cudnnSetFilterNdDescriptor(desc_, cudnnType(node, t),
                                        layout == ConvLayout::Nhwc
                                            ? CUDNN_TENSOR_NHWC
                                            : CUDNN_TENSOR_NCHW,
                                        int(d.size()), d.data()),
             node, "cudnnSetFilterNdDescriptor");
}

FilterDesc::~FilterDesc() {
  if (desc_)
    cudnnDestroyFilterDescriptor(desc_);
}

ConvDesc::ConvDesc(const Node &node, const std::vector<int64_t> &pads,
                   const std::vector<int64_t> &strides,
                   const std::vector<int64_t> &dilations, int64_t groups,
                   cudnnDataType_t computeType) {
  checkCudnn(cudnnCreateConvolutionDescriptor(&desc_), node,
             "cudnnCreateConvolutionDescriptor");
  std::vector<int> p = cudnnDims(node, pads), s = cudnnDims(node, strides),
                   d = cudnnDims(node, dilations);
  checkCudnn(cudnnSetConvolutionNdDescriptor(
                 desc_, int(p.size()), p.data(), s.data(), d.data(),
                 CUDNN_CROSS_CORRELATION, computeType),
             node, "cudnnSetConvolutionNdDescriptor");
  checkCudnn(cudnnSetConvolutionGroupCount(desc_, int(groups)), node,
             "cudnnSetConvolutionGroupCount");
}

ConvDesc::~ConvDesc() {
  if (desc_)
    cudnnDestroyConvolutionDescriptor(desc_);
}

void ConvDesc::setMathType(const Node &node, cudnnMathType_t math) {
  checkCudnn(cudnnSetConvolutionMathType(desc_, math), node,
             "cudnnSetConvolutionMathType");
}

} // namespace cuda
} // namespace mpc
