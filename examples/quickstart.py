"""Quick start: move a tensor to the infini device and back, add on the device."""

import torch

import torch_infini

src = torch.arange(16, dtype=torch.float32).reshape(4, 4)
x = torch.empty(src.shape, dtype=src.dtype, device="infini:0")
x.copy_(src)
out = torch.empty_like(src)
out.copy_(x)
torch.testing.assert_close(out, src)

y = (x + x.t()).cpu()  # runs on the infini device, on the current stream
torch.testing.assert_close(y, src + src.t())

info = torch_infini.diagnostics()
print(f"quickstart OK: provider={info['provider']} backend={info['backend']} "
      f"devices={info['device_count']}")
