"""Graph capture and replay on infini, mirroring ``torch.cuda.graphs``.

``InfiniGraph`` captures the work queued on the current stream; ``replay()``
queues it again at a fraction of the per-operator cost of eager dispatch. The
memory a capture allocates comes from a graph-private pool of the caching
allocator, which replays reuse and which graphs may share (``pool=``). On the
host runtime every provider call is captured; on the Infini stack capture is
InfiniRT's where the backend has it (``capabilities.graphs``), and refused,
naming the backend, elsewhere. See docs/graphs.md.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, NewType, Optional, Union

import torch
from torch import Tensor
from torch.utils import _pytree

from .. import _C

__all__ = [
    "InfiniGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]

#: An opaque graph memory pool id (``torch.cuda._POOL_HANDLE``).
_POOL_HANDLE = NewType("_POOL_HANDLE", tuple[int, int])


def is_current_stream_capturing() -> bool:
    r"""Return True if infini graph capture is underway on the current infini stream, False otherwise.

    Does not initialize the device when no capture is underway.
    """
    return _C._is_current_stream_capturing()


def graph_pool_handle() -> _POOL_HANDLE:
    r"""Return an opaque token representing the id of a graph memory pool.

    Graphs captured with the same token share one pool (see
    :class:`graph`'s ``pool``).
    """
    return _POOL_HANDLE(_C._graph_pool_handle())


class InfiniGraph(_C._InfiniGraph):
    r"""Wrapper around an infini graph.

    Arguments:
        keep_graph (bool, optional): If ``False`` (default), the graph is made
            ready to replay at the end of ``capture_end``. If ``True``, that
            happens at an explicit :meth:`instantiate` or the first
            :meth:`replay`.
    """

    def __init__(self, keep_graph: bool = False) -> None:
        super().__init__(keep_graph)

    def capture_begin(self, pool: Optional[_POOL_HANDLE] = None, capture_error_mode: str = "global") -> None:
        r"""Begin capturing infini work on the current stream.

        Typically, you shouldn't call ``capture_begin`` yourself. Use
        :class:`~torch.infini.graph` or :func:`~torch.infini.make_graphed_callables`,
        which call ``capture_begin`` internally.

        Arguments:
            pool (optional): Token (returned by :func:`~torch.infini.graph_pool_handle` or
                :meth:`other_Graph_instance.pool()<torch.infini.InfiniGraph.pool>`) that hints this graph may
                share memory with the indicated pool.
            capture_error_mode (str, optional): ``"global"`` refuses stream and event synchronization from every
                thread while the capture is underway, ``"thread_local"`` only from this thread, ``"relaxed"``
                only where the call would wait for captured work (which always raises).
        """
        super().capture_begin(pool=pool, capture_error_mode=capture_error_mode)

    def capture_end(self) -> None:
        r"""End infini graph capture on the current stream.

        After ``capture_end``, ``replay`` may be called on this instance. Raises if the capture
        was invalidated (a synchronizing call during it); the instance may then capture again.
        """
        super().capture_end()

    def instantiate(self) -> None:
        r"""Make the captured graph ready to replay. Called by ``capture_end`` if
        ``keep_graph=False``, or by ``replay`` if ``keep_graph=True`` and ``instantiate``
        has not been called."""
        super().instantiate()

    def replay(self) -> None:
        r"""Replay the infini work captured by this graph, on the current stream."""
        super().replay()

    def reset(self) -> None:
        r"""Delete the graph currently held by this instance (and release its memory pool)."""
        super().reset()

    def pool(self) -> _POOL_HANDLE:
        r"""Return an opaque token representing the id of this graph's memory pool.

        This id can optionally be passed to another graph's ``capture_begin``,
        which hints the other graph may share the same memory pool.
        """
        return _POOL_HANDLE(super().pool())

    def enable_debug_mode(self) -> None:
        r"""Enable debugging mode for :meth:`debug_dump`."""
        super().enable_debug_mode()

    def debug_dump(self, debug_path: str) -> None:
        r"""Write the captured graph's nodes to ``debug_path`` (debug mode must be enabled)."""
        super().debug_dump(debug_path)


class graph:
    r"""Context-manager that captures infini work into a :class:`torch.infini.InfiniGraph` object for later replay.

    Arguments:
        infini_graph (torch.infini.InfiniGraph): Graph object used for capture.
        pool (optional): Opaque token (returned by a call to :func:`~torch.infini.graph_pool_handle()` or
            :meth:`other_Graph_instance.pool()<torch.infini.InfiniGraph.pool>`) hinting this graph's capture
            may share memory from the specified pool.
        stream (torch.infini.Stream, optional): If supplied, will be set as the current stream in the context.
            If not supplied, ``graph`` sets its own internal side stream as the current stream in the context.
        capture_error_mode (str, optional): ``"global"``, ``"thread_local"`` or ``"relaxed"``
            (see :meth:`InfiniGraph.capture_begin`).

    .. note::
        For effective memory sharing, if you pass a ``pool`` used by a previous capture and the previous capture
        used an explicit ``stream`` argument, you should pass the same ``stream`` argument to this capture.
    """

    default_capture_stream: Optional[torch.Stream] = None

    def __init__(
        self,
        infini_graph: InfiniGraph,
        pool: Optional[_POOL_HANDLE] = None,
        stream: Optional[torch.Stream] = None,
        capture_error_mode: str = "global",
    ) -> None:
        # Made on first use (not at import, which must not touch the device).
        if stream is None and self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = torch.infini.Stream()
        self.pool: tuple[()] | tuple[_POOL_HANDLE] = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = torch.infini.stream(self.capture_stream)
        self.infini_graph = infini_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        # Free as much memory as we can for the graph.
        torch.infini.synchronize()
        if torch.compiler.config.force_cudagraph_gc:
            gc.collect()
        torch.infini.empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.infini_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)  # no capture: back on the caller's stream
            raise

    def __exit__(self, *args: object) -> None:
        try:
            self.infini_graph.capture_end()
        finally:
            # Back on the caller's stream even when capture_end raises (an
            # invalidated capture), so the next work is not on the side stream.
            self.stream_ctx.__exit__(*args)


_ModuleOrCallable = Union[torch.nn.Module, Callable[..., Any]]


def _check_graphable(func: _ModuleOrCallable, flat_args: tuple[Any, ...]) -> None:
    if isinstance(func, torch.nn.Module):
        if func._backward_hooks or func._forward_hooks or func._forward_pre_hooks:
            raise AssertionError(
                "Modules must not have hooks registered at the time they are passed. However, registering hooks "
                "on modules after passing them through make_graphed_callables is allowed."
            )
        if any(b.requires_grad for b in func.buffers()):
            raise AssertionError(
                "In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, only parameters may be "
                "trainable. All buffers must have ``requires_grad=False``."
            )
    if not all(isinstance(a, torch.Tensor) for a in flat_args):
        raise AssertionError(
            "In the beta API, sample_args for each callable must contain only Tensors. Other types are not allowed."
        )


def _grads(outputs: tuple[Tensor, ...], inputs: tuple[Tensor, ...], grad_outputs: tuple[Tensor, ...],
           allow_unused: bool) -> tuple[Optional[Tensor], ...]:
    return torch.autograd.grad(outputs=outputs, inputs=inputs, grad_outputs=grad_outputs,
                               only_inputs=True, allow_unused=allow_unused)


class _GraphedCallable:
    """One callable's captured forward and backward graphs and their static tensors."""

    def __init__(self, func: _ModuleOrCallable, sample_args: tuple[Any, ...], pool: _POOL_HANDLE) -> None:
        self.func = func
        self.sample_args = sample_args
        self.flat_args = tuple(_pytree.arg_tree_leaves(*sample_args))
        _check_graphable(func, self.flat_args)
        self.params = tuple(func.parameters()) if isinstance(func, torch.nn.Module) else ()
        # Everything the graphs read: the user's arguments, then the parameters.
        self.inputs = self.flat_args + self.params
        self.fwd_graph = InfiniGraph()
        self.bwd_graph = InfiniGraph()
        self.pool = pool

    def grad_inputs(self) -> tuple[Tensor, ...]:
        return tuple(i for i in self.inputs if i.requires_grad)

    def warm_up(self, iters: int, allow_unused: bool) -> None:
        for _ in range(iters):
            outputs = tuple(o for o in _pytree.tree_leaves(self.func(*self.sample_args)) if o.requires_grad)
            if outputs:
                _grads(outputs, self.grad_inputs(), tuple(torch.empty_like(o) for o in outputs), allow_unused)
            del outputs

    def capture_forward(self) -> None:
        with graph(self.fwd_graph, pool=self.pool):
            outputs = self.func(*self.sample_args)
        flat, self.output_spec = _pytree.tree_flatten(outputs)
        self.static_outputs = tuple(flat)

    def capture_backward(self, allow_unused: bool) -> None:
        self.static_grad_outputs = tuple(
            torch.empty_like(o) if o.requires_grad else None for o in self.static_outputs)
        needing = tuple(o for o in self.static_outputs if o.requires_grad)
        grads: tuple[Optional[Tensor], ...] = ()
        if needing:
            with graph(self.bwd_graph, pool=self.pool):
                grads = _grads(needing, self.grad_inputs(),
                               tuple(g for g in self.static_grad_outputs if g is not None), allow_unused)
        # One slot per input: None where the input needs no gradient.
        it = iter(grads)
        self.static_grad_inputs = tuple(next(it) if i.requires_grad and needing else None for i in self.inputs)

    def make_function(self) -> Callable[..., Any]:
        owner = self
        n_user = len(self.flat_args)

        class Graphed(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *inputs: Tensor) -> tuple[Tensor, ...]:
                # Only the user's arguments may be new tensors: copy them into the static ones.
                for static, given in zip(owner.inputs[:n_user], inputs[:n_user]):
                    if static.data_ptr() != given.data_ptr():
                        static.copy_(given)
                owner.fwd_graph.replay()
                return tuple(o.detach() for o in owner.static_outputs)

            @staticmethod
            @torch.autograd.function.once_differentiable
            def backward(ctx: Any, *grads: Tensor) -> tuple[Optional[Tensor], ...]:
                if len(grads) != len(owner.static_grad_outputs):
                    raise AssertionError(
                        f"len(grads)={len(grads)} != len(static_grad_outputs)={len(owner.static_grad_outputs)}")
                for static, grad in zip(owner.static_grad_outputs, grads):
                    if static is not None and static.data_ptr() != grad.data_ptr():
                        static.copy_(grad)
                owner.bwd_graph.replay()
                return tuple(g.detach() if g is not None else None for g in owner.static_grad_inputs)

        def functionalized(*user_args: Any) -> Any:
            flat = tuple(_pytree.arg_tree_leaves(*user_args))
            out = Graphed.apply(*(flat + owner.params))
            return _pytree.tree_unflatten(out, owner.output_spec)

        return functionalized


def make_graphed_callables(
    callables: Union[_ModuleOrCallable, tuple[_ModuleOrCallable, ...]],
    sample_args: Union[tuple[Tensor, ...], tuple[tuple[Tensor, ...], ...]],
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: Optional[_POOL_HANDLE] = None,
) -> Union[_ModuleOrCallable, tuple[_ModuleOrCallable, ...]]:
    r"""Accept callables (functions or :class:`nn.Module<torch.nn.Module>`\ s) and returns graphed versions.

    Each graphed callable's forward pass runs its source callable's forward
    infini work as an infini graph inside a single autograd node. The graphed
    callable's forward pass also appends a backward node to the autograd
    graph; during backward, this node runs the callable's backward work as a
    graph. So each graphed callable is a drop-in replacement for its source
    callable in an autograd-enabled training loop.

    If you pass a tuple of several callables, their captures use the same
    memory pool, and their order in the tuple must be the order they run in.

    Arguments:
        callables (torch.nn.Module or Python function, or tuple of these): Callable or callables to graph.
        sample_args (tuple of Tensors, or tuple of tuples of Tensors): Samples args for each callable.
            If a single callable was passed, ``sample_args`` must be a single tuple of argument Tensors.
            If a tuple of callables was passed, ``sample_args`` must be tuple of tuples of argument Tensors.
        num_warmup_iters (int): The number of warmup iterations. Default: ``3``.
        allow_unused_input (bool): If False, specifying inputs that were not used when computing outputs
            (and therefore their grad is always zero) is an error. Defaults to False.
        pool (optional): Token (returned by :func:`~torch.infini.graph_pool_handle` or
            :meth:`other_Graph_instance.pool()<torch.infini.InfiniGraph.pool>`) that hints this graph may share memory
            with the indicated pool.

    .. note::
        The ``requires_grad`` state of each Tensor in ``sample_args`` must match the state
        that's expected for the corresponding real input in the training loop.

    .. warning::
        ``sample_args`` for each callable must contain only Tensors; only parameters may be trainable
        (buffers must have ``requires_grad=False``); modules must have no hooks when passed; after
        passing a module, you may not add or remove its parameters or buffers; arguments must be
        passed in the order and format of ``sample_args``; double backward is not supported.
    """
    if torch.is_autocast_enabled() and torch.is_autocast_cache_enabled():
        raise RuntimeError(
            "make_graphed_callables does not support the autocast caching. Please set `cache_enabled=False`.")
    just_one = not isinstance(callables, tuple)
    funcs = (callables,) if just_one else callables
    all_args = (sample_args,) if just_one else sample_args
    mempool = graph_pool_handle() if pool is None else pool
    graphed = [_GraphedCallable(f, tuple(a), mempool) for f, a in zip(funcs, all_args)]

    # Warm up on a side stream, so lazy initialization stays out of the captures.
    torch.infini.synchronize()
    with torch.infini.stream(torch.infini.Stream()):
        for g in graphed:
            g.warm_up(num_warmup_iters, allow_unused_input)
    torch.infini.synchronize()

    # One shared pool: capture in the order the passes run (forward 1..N,
    # then backward N..1), so replays do not overwrite each other's memory.
    for g in graphed:
        g.capture_forward()
    for g in reversed(graphed):
        g.capture_backward(allow_unused_input)

    results: list[_ModuleOrCallable] = []
    for g in graphed:
        function = g.make_function()
        if isinstance(g.func, torch.nn.Module):
            module = g.func
            training, eager_forward = module.training, module.forward

            def forward(*args: Any, _m: torch.nn.Module = module, _graphed: Callable[..., Any] = function,
                        _training: bool = training, _eager: Callable[..., Any] = eager_forward, **kwargs: Any) -> Any:
                # The graphs hold the training-or-eval state they were captured in.
                if _m.training == _training:
                    return _graphed(*args, **kwargs)
                return _eager(*args, **kwargs)

            module.forward = forward
            results.append(module)
        else:
            results.append(function)
    return results[0] if just_one else tuple(results)
