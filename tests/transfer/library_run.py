"""accelerate's ``Accelerator()`` and transformers' ``Trainer`` picking a
device by themselves (tests/transfer/test_libraries.py runs this).

    python library_run.py MODE

MODE ``switch``: run with TORCH_INFINI_TRANSFER_CUDA=1 (they pick "cuda");
``env``: ACCELERATE_TORCH_DEVICE=infini, switch off; ``cpu``: the CPU, the
oracle. Prints one line ``RESULT{json}``: the device each picked, where the
parameters were during training, and the losses.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402


def accelerate_run(mode: str) -> dict:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, PartialState

    torch.manual_seed(0)
    accelerator = Accelerator(cpu=mode == "cpu", mixed_precision="bf16")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8, generator=torch.Generator().manual_seed(1)),
                                          torch.randn(32, 1, generator=torch.Generator().manual_seed(2)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    seen = set()
    # (accelerate returns the model's outputs in float32: look inside for what autocast did)
    model[0].register_forward_hook(lambda module, args, out: seen.add(f"first layer:{out.dtype}"))
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for x, y in loader:
        seen.add(x.device.type)
        out = model(x)
        loss = torch.nn.functional.mse_loss(out.float(), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    result = {"device": str(accelerator.device), "parameters_on": next(model.parameters()).device.type,
              "batches_on": sorted(seen), "losses": losses}
    AcceleratorState._reset_state(True)
    PartialState._reset_state()
    try:  # fp16: accelerate checks the device type against its own list, and adds a GradScaler
        fp16 = Accelerator(cpu=mode == "cpu", mixed_precision="fp16")
        result["fp16"] = f"scaler on {fp16.scaler._device}" if fp16.scaler is not None else "no scaler"
    except ValueError as error:
        result["fp16"] = f"refused: {error}"
    AcceleratorState._reset_state(True)
    PartialState._reset_state()
    return result


def trainer_run(mode: str) -> dict:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    # No dropout: its masks come from each device's own generator, so they differ between devices (as on CUDA).
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config)
    generator = torch.Generator().manual_seed(3)
    rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(64, (40, 12), generator=generator)]
    placed = []

    class Recording(Trainer):
        def training_step(self, model, inputs, *args, **kwargs):
            placed.append(next(model.parameters()).device.type + "/" + inputs["input_ids"].device.type)
            return super().training_step(model, inputs, *args, **kwargs)

    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, max_steps=10, per_device_train_batch_size=4, learning_rate=1e-3,
                                 logging_steps=1, report_to=[], save_strategy="no", use_cpu=mode == "cpu",
                                 dataloader_pin_memory=mode != "cpu", seed=0, disable_tqdm=True)
        trainer = Recording(model=model, args=args, train_dataset=rows)
        trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return {"device": str(args.device), "placed": sorted(set(placed)), "losses": losses,
            "steps": trainer.state.global_step}


def main() -> None:
    mode = sys.argv[1]
    result = {"accelerate": accelerate_run(mode), "trainer": trainer_run(mode)}
    print("RESULT" + json.dumps(result))


if __name__ == "__main__":
    main()
