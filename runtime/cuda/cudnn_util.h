// cuDNN plumbing shared by the convolution and batch-norm runners: status
// checks that name the node, descriptors that clean up after themselves,
// and operands cast to the dtype of a call.
//
// The runners use cuDNN's descriptor API (cudnnConvolution*,
// cudnnBatchNormalization*). cuDNN 9 marks it deprecated in favour of the
// graph API but ships and supports it; the build compiles without
// CUDNN_WARN_DEPRECATED, so no warnings. See run_conv_pool.cpp for why.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/cuda/conv_plan.h"

#include <cudnn.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

class NodeStaging;

/// Throws mpc::Error naming the node and the cuDNN call unless success.
void checkCudnn(cudnnStatus_t status, const Node &node, const char *call);

/// cuDNN's name for fp32, fp16 and bf16 (throws naming the node otherwise).
cudnnDataType_t cudnnType(const Node &node, DType t);

/// Device pointer to input i (host view v) in dtype t: the input itself, or
/// a copy cast into scratch when its dtype differs (operands of mixed
/// precision meet in one dtype before a cuDNN call).
const void *deviceAs(NodeStaging &s, size_t i, const Tensor &v, DType t);

/// dims as cuDNN's int dims (throws naming the node past INT_MAX).
std::vector<int> cudnnDims(const Node &node, const std::vector<int64_t> &dims);

/// A fully packed tensor descriptor of NCHW-ordered dims (rank 4 or 5),
/// row-major or channels-last (conv_plan.h, packedStrides).
class TensorDesc {
public:
  TensorDesc(const Node &node, DType t, const std::vector<int64_t> &dims,
             ConvLayout layout = ConvLayout::Nchw);
  ~TensorDesc();
  TensorDesc(const TensorDesc &) = delete;
  TensorDesc &operator=(const TensorDesc &) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

/// A filter descriptor [M, C/group, k...], its bytes in NCHW (KCRS) or
/// NHWC (KRSC) order.
class FilterDesc {
public:
  FilterDesc(const Node &node, DType t, const std::vector<int64_t> &dims,
             ConvLayout layout = ConvLayout::Nchw);
  ~FilterDesc();
  FilterDesc(const FilterDesc &) = delete;
  FilterDesc &operator=(const FilterDesc &) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

/// A convolution descriptor (cross-correlation, as ONNX's Conv).
class ConvDesc {
public:
  ConvDesc(const Node &node, const std::vector<int64_t> &pads,
           const std::vector<int64_t> &strides,
           const std::vector<int64_t> &dilations, int64_t groups,
           cudnnDataType_t computeType);
  ~ConvDesc();
  ConvDesc(const ConvDesc &) = delete;
  ConvDesc &operator=(const ConvDesc &) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }
  void setMathType(const Node &node, cudnnMathType_t math);

private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

} // namespace cuda
} // namespace mpc
