"""The operations the Edge TPU compiler maps, with their documented limitations, keyed by TFLite builtin name.

Transcribed from the "Supported operations" table of https://coral.ai/docs/edgetpu/models-intro/ (compiler 16,
runtime 14+). Entries were checked against two copies of that table found while writing this (an early one and
the one Axis mirrors for its ARTPEC-7 Edge TPU); those marked ``checked=False`` (Rsqrt, SquaredDifference, Sum,
Transpose, TransposeConv, added in later compiler releases) come from the current Coral page and were not seen
in a second copy. The compiler's own ``-s`` report on the real model is the final word: this list only lets
edgeaccel warn early, on machines where the compiler does not run.
"""

from __future__ import annotations

from dataclasses import dataclass

DOC_URL = "https://coral.ai/docs/edgetpu/models-intro/#supported-operations"
COMPILER_URL = "https://coral.ai/docs/edgetpu/compiler/"


@dataclass(frozen=True)
class SupportedOp:
    doc_name: str
    limitation: str = ""
    checked: bool = True


SUPPORTED: dict[str, SupportedOp] = {
    "ADD": SupportedOp("Add"),
    "AVERAGE_POOL_2D": SupportedOp("AveragePool2d", "No fused activation function."),
    "CONCATENATION": SupportedOp("Concatenation", "No fused activation function. If any input is a compile-time "
                                 "constant tensor, there must be only 2 inputs, and this constant tensor must be "
                                 "all zeroes (effectively, a zero-padding op)."),
    "CONV_2D": SupportedOp("Conv2d", "Must use the same dilation in x and y dimensions."),
    "DEPTHWISE_CONV_2D": SupportedOp("DepthwiseConv2d", "Must use the same dilation in x and y dimensions."),
    "EXPAND_DIMS": SupportedOp("ExpandDims"),
    "FULLY_CONNECTED": SupportedOp("FullyConnected", "Only the default format is supported for fully-connected "
                                   "weights. Output tensor is one-dimensional."),
    "L2_NORMALIZATION": SupportedOp("L2Normalization"),
    "LOGISTIC": SupportedOp("Logistic"),
    "LSTM": SupportedOp("LSTM", "Unidirectional LSTM only."),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": SupportedOp("LSTM", "Unidirectional LSTM only."),
    "MAXIMUM": SupportedOp("Maximum"),
    "MAX_POOL_2D": SupportedOp("MaxPool2d", "No fused activation function."),
    "MEAN": SupportedOp("Mean", "No reduction in batch dimension. If a z-reduction, the z-dimension must be "
                        "multiple of 4."),
    "MINIMUM": SupportedOp("Minimum"),
    "MUL": SupportedOp("Mul"),
    "PACK": SupportedOp("Pack", "No packing in batch dimension."),
    "PAD": SupportedOp("Pad", "No padding in batch dimension."),
    "PRELU": SupportedOp("PReLU", "Alpha must be 1-dimensional (only the innermost dimension can be >1 size)."),
    "QUANTIZE": SupportedOp("Quantize"),
    "REDUCE_MAX": SupportedOp("ReduceMax", "Cannot operate on the batch dimension."),
    "REDUCE_MIN": SupportedOp("ReduceMin", "Cannot operate on the batch dimension."),
    "RELU": SupportedOp("ReLU"),
    "RELU6": SupportedOp("ReLU6"),
    "RELU_N1_TO_1": SupportedOp("ReLUN1To1"),
    "RESHAPE": SupportedOp("Reshape", "Certain reshapes might not be mapped for large tensor sizes."),
    "RESIZE_BILINEAR": SupportedOp("ResizeBilinear", "Input/output is a 3-dimensional tensor. Depending on "
                                   "input/output size, this operation might not be mapped to the Edge TPU to "
                                   "avoid loss in precision."),
    "RESIZE_NEAREST_NEIGHBOR": SupportedOp("ResizeNearestNeighbor", "Input/output is a 3-dimensional tensor. "
                                           "Depending on input/output size, this operation might not be mapped to "
                                           "the Edge TPU to avoid loss in precision."),
    "RSQRT": SupportedOp("Rsqrt", checked=False),
    "SLICE": SupportedOp("Slice"),
    "SOFTMAX": SupportedOp("Softmax", "Supports only 1-D input tensor with a max of 16,000 elements."),
    "SPACE_TO_DEPTH": SupportedOp("SpaceToDepth"),
    "SPLIT": SupportedOp("Split", "No splitting in batch dimension."),
    "SQUARED_DIFFERENCE": SupportedOp("Squared-difference", checked=False),
    "SQUEEZE": SupportedOp("Squeeze"),
    "STRIDED_SLICE": SupportedOp("StridedSlice", "Supported only when all strides are equal to 1 (that is, "
                                 "effectively a Stride op), and with ellipsis-axis-mask == 0, and new-axis-max == 0."),
    "SUB": SupportedOp("Sub"),
    "SUM": SupportedOp("Sum", "Cannot operate on the batch dimension.", checked=False),
    "TANH": SupportedOp("Tanh"),
    "TRANSPOSE": SupportedOp("Transpose", checked=False),
    "TRANSPOSE_CONV": SupportedOp("TransposeConv", checked=False),
}

PARTITION_NOTE = ("The compiler maps the graph up to the first operation it cannot map; that operation and "
                  "everything after it run on the CPU.")
