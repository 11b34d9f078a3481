"""Device contracts: availability, device selection and synchronization.

Run on every backend (see conftest.py); each test names the torch.cuda symbols
it gates with ``@pytest.mark.covers``.
"""

from __future__ import annotations

import pytest
import torch


@pytest.mark.covers("is_available", "device_count")
def test_available_backend_counts_devices(mod, backend):
    assert mod.is_available() is True
    count = mod.device_count()
    assert isinstance(count, int)
    assert count >= 1
    if torch.accelerator.current_accelerator().type == backend:
        assert torch.accelerator.device_count() == count


@pytest.mark.covers("init", "is_initialized")
def test_init_initializes(mod):
    mod.init()
    assert mod.is_initialized() is True
    mod.init()  # idempotent
    assert mod.is_initialized() is True


@pytest.mark.covers("current_device", "set_device")
def test_set_device_selects_each_device(mod, backend):
    start = mod.current_device()
    assert isinstance(start, int)
    assert 0 <= start < mod.device_count()
    for index in range(mod.device_count()):
        mod.set_device(index)
        assert mod.current_device() == index
    mod.set_device(torch.device(backend, start))
    assert mod.current_device() == start
    mod.set_device(-1)  # negative: a no-op, as documented for torch.cuda
    assert mod.current_device() == start


@pytest.mark.covers("device")
def test_device_context_selects_and_restores(mod, backend):
    start = mod.current_device()
    last = mod.device_count() - 1
    with mod.device(last):
        assert mod.current_device() == last
    assert mod.current_device() == start
    with mod.device(f"{backend}:{last}"):
        assert mod.current_device() == last
    assert mod.current_device() == start
    with mod.device(None):
        assert mod.current_device() == start
    with pytest.raises(KeyError):
        with mod.device(last):
            raise KeyError("leaves the block")
    assert mod.current_device() == start


@pytest.mark.covers("device_of")
def test_device_of_follows_the_tensor(mod, dev):
    start = mod.current_device()
    on_device = torch.empty(4, device=dev)
    with mod.device_of(on_device):
        assert mod.current_device() == dev.index
    with mod.device_of(torch.empty(4)):  # a CPU tensor: no-op
        assert mod.current_device() == start
    assert mod.current_device() == start


@pytest.mark.covers("synchronize")
def test_synchronize_waits_for_every_stream(mod, dev, hold):
    side = mod.Stream()
    hold(side, 150)
    hold(mod.current_stream(), 50)
    assert not side.query()
    mod.synchronize()
    assert side.query()
    assert mod.current_stream().query()
    # every accepted spelling of the device
    for spelling in (None, 0, dev, str(dev)):
        mod.synchronize(spelling)


@pytest.mark.covers("get_device_name", "get_device_properties")
def test_device_name_and_properties(mod, dev):
    name = mod.get_device_name()
    assert isinstance(name, str) and name
    assert mod.get_device_name(0) == name
    assert mod.get_device_name(dev) == name
    props = mod.get_device_properties(dev)
    assert props.name == name
    assert isinstance(props.total_memory, int) and props.total_memory > 0
    with pytest.raises(AssertionError):
        mod.get_device_properties(mod.device_count())


@pytest.mark.covers("synchronize")
def test_synchronize_with_a_negative_index_is_the_current_device(mod, backend, hold, request):
    s = mod.Stream()
    hold(s, 100)
    mod.synchronize(-1)
    assert s.query() is True


@pytest.mark.covers("get_device_capability", "get_device_properties")
def test_device_capability_is_a_pair_of_ints_matching_the_properties(mod, dev):
    capability = mod.get_device_capability()
    assert isinstance(capability, tuple) and len(capability) == 2
    assert all(isinstance(part, int) and part >= 0 for part in capability)
    assert mod.get_device_capability(dev) == mod.get_device_capability(0) == capability
    props = mod.get_device_properties(dev)
    assert (props.major, props.minor) == capability
    # The fields third-party code reads (schedulers, compilers, memory planners).
    assert isinstance(props.multi_processor_count, int) and props.multi_processor_count >= 0
    assert isinstance(props.is_integrated, (bool, int))


@pytest.mark.covers("get_arch_list")
def test_arch_list_is_a_list_of_names(mod):
    arches = mod.get_arch_list()
    assert isinstance(arches, list)
    assert all(isinstance(a, str) and a for a in arches)


@pytest.mark.covers("is_bf16_supported")
def test_bf16_supported_means_bfloat16_tensors_compute(mod, dev):
    supported = mod.is_bf16_supported()
    assert isinstance(supported, bool)
    assert mod.is_bf16_supported(including_emulation=False) in (True, False)
    if supported:
        a = torch.arange(8, dtype=torch.float32).to(torch.bfloat16)
        got = (a.to(dev) + a.to(dev)).cpu()
        assert got.dtype == torch.bfloat16
        assert torch.equal(got, a + a)


@pytest.mark.covers("is_current_stream_capturing")
def test_no_capture_outside_a_graph(mod):
    assert mod.is_current_stream_capturing() is False
    with mod.stream(mod.Stream()):
        assert mod.is_current_stream_capturing() is False


@pytest.mark.covers("OutOfMemoryError")
def test_out_of_memory_is_torch_out_of_memory_error(mod, dev):
    assert mod.OutOfMemoryError is torch.OutOfMemoryError
    assert issubclass(mod.OutOfMemoryError, RuntimeError)
    too_big = 4 * mod.get_device_properties(dev).total_memory
    with pytest.raises(mod.OutOfMemoryError):
        torch.empty(too_big, dtype=torch.uint8, device=dev)
    # The device is still usable afterwards.
    assert torch.equal(torch.ones(3, device=dev).cpu(), torch.ones(3))
