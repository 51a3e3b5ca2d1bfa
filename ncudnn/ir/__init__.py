"""The op-graph IR: tensor descriptors, one node class per op, the graph and its passes.

Every front end (backend descriptors, pygraph, legacy calls) builds an :class:`OpGraph` of these nodes;
``finalize`` validates it, :func:`partition` splits it into engine-executable subgraphs.
"""
from .graph import OpGraph
from .node import GraphContext, Node
from .ops import *  # noqa: F401,F403
from .ops import NODE_TYPES
from .ops import __all__ as _ops_all
from .partition import Subgraph, partition
from .tensor import ITEMSIZE, TensorDesc, nhwc_order, numpy_dtype, packed_strides

__all__ = ["OpGraph", "GraphContext", "Node", "NODE_TYPES", "Subgraph", "partition", "TensorDesc",
           "ITEMSIZE", "nhwc_order", "numpy_dtype", "packed_strides"] + _ops_all
