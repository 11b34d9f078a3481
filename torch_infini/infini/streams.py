"""Streams and events of the infini device, mirroring torch.cuda.Stream/Event.

Each device has a default stream and a pool of streams per priority; the
current stream is per thread and per device. Priorities: 0 (the default,
lowest) and -1 (high); values outside are clamped, as CUDA does.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from .. import _C
from ._device import device as _device_ctx
from ._utils import Device, _check_index, _get_device_index, _resolve_index

_INFINI_TYPE = None


def _infini_device_type() -> int:
    global _INFINI_TYPE
    if _INFINI_TYPE is None:
        _INFINI_TYPE = _C._default_stream(0)[2] if _C._device_count() > 0 else -1
    return _INFINI_TYPE


class Stream(torch.Stream):
    r"""Wrapper around an infini stream.

    An infini stream is a linear sequence of execution that belongs to a
    specific device, independent from other streams.

    Args:
        device (torch.device or int, optional): a device on which to allocate
            the stream. If ``device`` is ``None`` (default) or a negative
            integer, this will use the current device.
        priority (int, optional): priority of the stream, which can be 0
            (default) or -1 (high); lower numbers are higher priorities.
    """

    def __new__(cls, device: Device = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        index = _get_device_index(device, optional=True) if device is not None else _C._current_device()
        if index < 0:
            index = _C._current_device()
        sid, dev, dtype = _C._stream_from_pool(int(priority), _check_index(index))
        return super().__new__(cls, stream_id=sid, device_index=dev, device_type=dtype)

    def wait_event(self, event: "torch.Event") -> None:
        r"""Make all future work submitted to the stream wait for an event."""
        event.wait(self)

    def wait_stream(self, stream: "torch.Stream") -> None:
        r"""Synchronize with another stream: future work on this stream waits
        for all work queued on ``stream`` at the time of the call."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Optional["torch.Event"] = None) -> "Event":
        r"""Record an event (a new one if ``event`` is None) on this stream."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def query(self) -> bool:
        r"""Check if all the work submitted has been completed."""
        return super().query()

    def synchronize(self) -> None:
        r"""Wait for all the kernels in this stream to complete."""
        super().synchronize()

    @property
    def priority(self) -> int:
        r"""The stream's priority (0 or -1)."""
        return _C._stream_priority(self.stream_id, self.device_index)

    @property
    def infini_stream(self) -> int:
        r"""The stream's id in the infini runtime (not a native handle)."""
        return self.stream_id

    def __eq__(self, other: object) -> bool:
        # As torch.cuda.Stream: equal only to streams of the same class.
        if isinstance(other, Stream):
            return (
                self.stream_id == other.stream_id
                and self.device_index == other.device_index
                and self.device_type == other.device_type
            )
        return False

    def __hash__(self) -> int:
        return hash((self.stream_id, self.device_index, self.device_type))

    def __repr__(self) -> str:
        return f"<torch_infini.Stream device=infini:{self.device_index} stream_id={self.stream_id}>"


def _wrap(triple: tuple[int, int, int]) -> Stream:
    sid, dev, dtype = triple
    return Stream(stream_id=sid, device_index=dev, device_type=dtype)


def current_stream(device: Device = None) -> Stream:
    r"""Return the currently selected Stream for a given device (the current
    device if ``device`` is ``None``)."""
    return _wrap(_C._current_stream(_resolve_index(device)))


def default_stream(device: Device = None) -> Stream:
    r"""Return the default Stream for a given device."""
    return _wrap(_C._default_stream(_resolve_index(device)))


def set_stream(stream: Optional[torch.Stream]) -> None:
    r"""Set the current stream (and, like torch.cuda, the current device to the
    stream's). A no-op if ``stream`` is ``None``."""
    if stream is None:
        return
    if stream.device_type != _infini_device_type():
        raise ValueError(f"set_stream expects an infini stream, got {stream}")
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    r"""Context-manager that selects a given stream.

    All infini work queued within its context is enqueued on the selected
    stream; the previous streams (of the current device and of the stream's
    device) are restored on exit, also when an exception leaves the block.

    Args:
        stream (Stream): selected stream. This manager is a no-op if it's ``None``.
    """

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.src_prev_stream: Optional[Stream] = None
        self.dst_prev_stream: Optional[Stream] = None

    def __enter__(self) -> None:
        cur = self.stream
        if cur is None:
            return
        self.src_prev_stream = current_stream(None)
        if self.src_prev_stream.device_index != cur.device_index:
            with _device_ctx(cur.device_index):
                self.dst_prev_stream = current_stream(cur.device_index)
        set_stream(cur)

    def __exit__(self, type: Any, value: Any, traceback: Any) -> bool:
        cur = self.stream
        if cur is None or self.src_prev_stream is None:
            return False
        if self.dst_prev_stream is not None:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    r"""Wrap around the Context-manager StreamContext that selects a given stream.

    Arguments:
        stream (Stream): selected stream. This manager is a no-op if it's ``None``.
    """
    return StreamContext(stream)


class Event(torch.Event):
    r"""Wrapper around an infini event.

    Events are synchronization markers that can be used to monitor the
    device's progress, to accurately measure timing, and to synchronize
    streams.

    Args:
        enable_timing (bool, optional): indicates if the event should measure
            time (default: ``False``)
        blocking (bool, optional): if ``True``, :meth:`wait` will be blocking
            (default: ``False``)
        interprocess (bool): interprocess events are not supported on infini
            and raise ``NotImplementedError``.
        external (bool): external events (graph capture) are not supported
            on infini and raise ``NotImplementedError``.
    """

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, external: bool = False
    ) -> "Event":
        if external:
            raise NotImplementedError(
                "torch.infini.Event(external=True): infini has no graph capture, so external events "
                "are not supported"
            )
        if interprocess:
            raise NotImplementedError(
                "torch.infini.Event(interprocess=True): interprocess events are not supported "
                "on infini; share tensors through files or CPU shared memory instead"
            )
        event = super().__new__(cls, device="infini", enable_timing=enable_timing, blocking=blocking)
        event._enable_timing = bool(enable_timing)
        return event

    @classmethod
    def from_ipc_handle(cls, device: Device, handle: Any) -> "Event":
        r"""Not supported on infini (no interprocess events)."""
        raise NotImplementedError("torch.infini.Event.from_ipc_handle: interprocess events are not supported on infini")

    def ipc_handle(self) -> Any:
        r"""Not supported on infini (no interprocess events)."""
        raise NotImplementedError("torch.infini.Event.ipc_handle: interprocess events are not supported on infini")

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        r"""Record the event in a given stream (the current stream if ``None``)."""
        if stream is None:
            stream = current_stream()
        super().record(stream)

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        r"""Make all future work submitted to the given stream (the current
        stream if ``None``) wait for this event."""
        if stream is None:
            stream = current_stream()
        super().wait(stream)

    def query(self) -> bool:
        r"""Check if all work currently captured by event has completed."""
        return super().query()

    def synchronize(self) -> None:
        r"""Wait for the event to complete."""
        super().synchronize()

    def elapsed_time(self, end_event: "torch.Event") -> float:
        r"""Return the time elapsed in milliseconds after the event was
        recorded and before the end_event was recorded.

        Raises ``RuntimeError`` unless both events were created with
        ``enable_timing=True``, recorded, and have completed.
        """
        # torch.Event.elapsed_time accepts only exact torch.Event objects, so
        # the checks of c10::Event are made here, raising RuntimeError as
        # torch.cuda.Event does.
        end_timing = getattr(end_event, "_enable_timing", True)
        if not (self._enable_timing and end_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not self.event_id or not end_event.event_id:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end_event.query()):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return _C._event_elapsed_time(self.event_id, end_event.event_id, self.device.index)

    def __repr__(self) -> str:
        return f"<torch_infini.Event {self.event_id:#x}>" if self.event_id else "<torch_infini.Event uninitialized>"
