"""Capture a sequence of launches into a CUDA graph and replay it (e.g. one RK stage) cheaply."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from .errors import check
from .stream import Stream


class CudaGraph:
    """An instantiated graph built by stream capture.

    Kernel arguments are frozen at capture time: replays reuse the same pointers and scalars,
    so capture once per buffer set and time-step size.
    """

    def __init__(self, graph: Any, exec_handle: Any, stream: Stream) -> None:
        self.graph = graph
        self.exec = exec_handle
        self.device = stream.device
        self._drv = stream._drv

    @classmethod
    def capture(cls, fn: Callable[[Stream], None], stream: Stream) -> CudaGraph:
        """Run ``fn(stream)`` under thread-local capture; its launches on ``stream`` form the graph.

        If ``fn`` raises, capture is ended and the partial graph discarded before re-raising.
        """
        drv = stream._drv
        stream.device.make_current()
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(drv.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
        try:
            fn(stream)
        except BaseException:
            err, partial = drv.cuStreamEndCapture(stream.handle)
            if int(err) == 0 and partial is not None:
                drv.cuGraphDestroy(partial)
            raise
        graph = check(drv.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
        try:
            # kernel nodes keep the priority of the stream they were captured on; without this flag the
            # replay would run every node at the launching stream's priority, and a plan's confined
            # kernels (composer.sched: priority_streams) would lose their head start over the GEMM
            flags = drv.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY
            exec_handle = check(drv.cuGraphInstantiate(graph, int(flags)), "cuGraphInstantiate")
        except BaseException:
            drv.cuGraphDestroy(graph)
            raise
        return cls(graph, exec_handle, stream)

    def kernel_priorities(self) -> list[int]:
        """The priority attribute of every kernel node of the graph (capture order is not kept): the
        check that confined kernels kept their stream's priority through capture."""
        drv = self._drv
        self.device.make_current()
        _, count = check(drv.cuGraphGetNodes(self.graph, 0), "cuGraphGetNodes")
        nodes, _ = check(drv.cuGraphGetNodes(self.graph, count), "cuGraphGetNodes")
        kernel = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        attribute = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PRIORITY
        return [int(check(drv.cuGraphKernelNodeGetAttribute(n, attribute), "cuGraphKernelNodeGetAttribute").priority)
                for n in nodes if check(drv.cuGraphNodeGetType(n), "cuGraphNodeGetType") == kernel]

    def replay(self, stream: Stream) -> None:
        """Enqueue the whole graph on ``stream`` (asynchronous)."""
        self.device.make_current()
        check(self._drv.cuGraphLaunch(self.exec, stream.handle), "cuGraphLaunch")

    def close(self) -> None:
        """Destroy the executable graph and the graph (idempotent)."""
        ex, g = self.exec, self.graph
        self.exec = self.graph = None
        if ex is not None:
            check(self._drv.cuGraphExecDestroy(ex), "cuGraphExecDestroy")
        if g is not None:
            check(self._drv.cuGraphDestroy(g), "cuGraphDestroy")

    def __del__(self) -> None:
        if getattr(self, "exec", None) is not None and not sys.is_finalizing():
            with contextlib.suppress(Exception):  # a finalizer must never raise
                self.close()


def is_capturing(stream: Stream) -> bool:
    """Whether ``stream`` is being captured into a graph now (a launch enqueued on it then becomes a
    node of that graph; beginning another capture on it would fail)."""
    drv = stream._drv
    stream.device.make_current()
    status = check(drv.cuStreamIsCapturing(stream.handle), "cuStreamIsCapturing")
    return status != drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def capture_graph(fn: Callable[[Stream], None], stream: Stream) -> CudaGraph:
    """Functional alias of CudaGraph.capture."""
    return CudaGraph.capture(fn, stream)
