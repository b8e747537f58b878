"""Neural-network building blocks: Module, Parameter, containers, layers and losses."""

from tinytrain import _missing
from tinytrain._missing import module_getattr as _module_getattr
from tinytrain.nn import functional, init, utils
from tinytrain.nn.containers import ModuleDict, ModuleList, ParameterDict, ParameterList
from tinytrain.nn.conv import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    MaxPool1d,
    MaxPool2d,
    MaxUnpool2d,
)
from tinytrain.nn.data_parallel import DataParallel
from tinytrain.nn.fold import Fold, Unfold
from tinytrain.nn.layers import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    BCELoss,
    BCEWithLogitsLoss,
    Bilinear,
    ChannelShuffle,
    CosineEmbeddingLoss,
    CosineSimilarity,
    CrossEntropyLoss,
    CTCLoss,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    Embedding,
    Flatten,
    GaussianNLLLoss,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    HingeEmbeddingLoss,
    HuberLoss,
    Identity,
    KLDivLoss,
    L1Loss,
    LeakyReLU,
    Linear,
    LogSigmoid,
    LogSoftmax,
    MarginRankingLoss,
    Mish,
    MSELoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    PairwiseDistance,
    PixelShuffle,
    PixelUnshuffle,
    PoissonNLLLoss,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sequential,
    Sigmoid,
    SiLU,
    SmoothL1Loss,
    SoftMarginLoss,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
    Unflatten,
)
from tinytrain.nn.lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyConv2d, LazyLinear
from tinytrain.nn.module import Module, Parameter, UninitializedBuffer, UninitializedParameter
from tinytrain.nn.normalization import (
    BatchNorm1d,
    BatchNorm2d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    LocalResponseNorm,
    RMSNorm,
)
from tinytrain.nn.padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from tinytrain.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell, RNNCellBase
from tinytrain.nn.sync_batchnorm import SyncBatchNorm
from tinytrain.nn.transformer import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tinytrain.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveMaxPool1d",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "BatchNorm1d",
    "BatchNorm2d", "Conv1d", "GLU", "Hardshrink", "MaxPool1d", "PixelShuffle", "PixelUnshuffle",
    "RMSNorm", "Softshrink", "Tanhshrink", "Threshold", "GaussianNLLLoss",
    "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss",
    "TripletMarginWithDistanceLoss", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "BCELoss",
    "CosineEmbeddingLoss", "HingeEmbeddingLoss", "MarginRankingLoss", "TripletMarginLoss",
    "BCEWithLogitsLoss", "Bilinear", "CELU", "ChannelShuffle", "CTCLoss",
    "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "CosineSimilarity",
    "CrossEntropyLoss", "DataParallel", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "ELU",
    "Embedding", "Flatten",
    "functional", "GELU", "GroupNorm", "Hardsigmoid", "Hardswish", "Hardtanh", "HuberLoss",
    "Identity", "init", "KLDivLoss", "L1Loss", "LayerNorm", "LocalResponseNorm",
    "LazyBatchNorm1d", "LazyBatchNorm2d",
    "LazyConv2d", "LazyLinear", "LeakyReLU", "RReLU", "Linear", "LogSigmoid",
    "LogSoftmax", "MaxPool2d", "MaxUnpool2d", "Mish", "Module", "ModuleDict", "ModuleList",
    "MSELoss",
    "NLLLoss", "PairwiseDistance", "Parameter", "ParameterDict", "ParameterList", "PReLU",
    "ReLU", "ReLU6", "SELU", "Sequential", "Sigmoid", "SiLU", "SmoothL1Loss", "Softmax",
    "Softmax2d",
    "Softmin", "Softplus", "Softsign", "SyncBatchNorm", "Tanh", "Unflatten", "Upsample",
    "UpsamplingBilinear2d",
    "UninitializedBuffer", "UninitializedParameter", "UpsamplingNearest2d",
    "utils",
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "Fold", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "Unfold", "ZeroPad1d",
    "ZeroPad2d", "ZeroPad3d",
    "MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerEncoderLayer",
    "GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell", "RNNCellBase",
]

_LAYERS = ("tinytrain.nn has " + ", ".join(n for n in __all__ if n[0].isupper())
           + ", and the submodules functional, init and utils")
_CONV = ("tinytrain has 2-D convolution and pooling (Conv2d, ConvTranspose2d, MaxPool2d, "
         "AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, MaxUnpool2d) and Conv1d, "
         "ConvTranspose1d, MaxPool1d, "
         "AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool1d; reshape to 2-D or compute the rest "
         "with tensor ops")
_NORM = ("tinytrain has BatchNorm1d/2d, SyncBatchNorm, LayerNorm, GroupNorm, RMSNorm, "
         "LocalResponseNorm and InstanceNorm1d/2d/3d")
_DROPOUT = "tinytrain has Dropout and Dropout1d/2d/3d"
#: PyTorch's layers that client code names (``isinstance(m, (nn.Conv1d, nn.Conv2d,
#: nn.Conv3d))`` in an initialisation loop) and tinytrain does not implement: real Module
#: subclasses, so that such checks work, whose constructor raises NotImplementedError.
_NOT_IMPLEMENTED = {
    **dict.fromkeys(["Conv3d", "ConvTranspose3d", "LazyConv1d",
                     "LazyConv3d", "MaxPool3d", "AvgPool3d",
                     "AdaptiveAvgPool3d", "AdaptiveMaxPool3d"], _CONV),
    **dict.fromkeys(["BatchNorm3d", "LazyBatchNorm3d"], _NORM),
    "AlphaDropout": _DROPOUT,
    "EmbeddingBag": "tinytrain has Embedding; sum or average its rows yourself",
}
for _name, _hint in _NOT_IMPLEMENTED.items():
    globals()[_name] = _missing.layer_placeholder(_name, _hint, Module)

_hints = _module_getattr(__name__, {
    "MaxUnpool1d": _CONV, "LPPool2d": _CONV, "FractionalMaxPool2d": _CONV,
}, _LAYERS)


def __getattr__(name: str):
    if name == "parallel":  # loaded on first use: it brings tinytrain.distributed
        import importlib

        return importlib.import_module("tinytrain.nn.parallel")
    return _hints(name)
