"""Train the custom-op MLP on the XLA device, written as for torch-neuronx on a Trn1 instance.

python -m neuron_emu run build.py
python -m neuron_emu run train.py [--epochs N] [--losses losses.json]

`device = 'xla'`, `xm.mark_step()` after every optimizer step and `xm.save` for the checkpoint, as in the
Neuron custom-op MLP tutorial; the data is scikit-learn's digits instead of MNIST (nothing to download).
Run it from the folder build.py wrote librelu.so to; the checkpoint goes to ./checkpoints/checkpoint.pt.
"""

import argparse
import json
import os

import torch
import torch_xla.core.xla_model as xm
from digits import train_loader
from model import MLP

EPOCHS = 2
BATCH_SIZE = 64
LEARNING_RATE = 0.1
SEED = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--losses", help="write every step's loss to this JSON file")
    args = parser.parse_args()

    torch.manual_seed(SEED)  # fixes the weight initialization
    loader = train_loader(BATCH_SIZE, SEED)

    device = "xla"  # a NeuronCore on Trn1/Inf2; the CPU under neuron_emu
    model = MLP().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    loss_fn = torch.nn.NLLLoss()

    losses: list[float] = []
    model.train()
    for epoch in range(args.epochs):
        for train_x, train_label in loader:
            optimizer.zero_grad()
            train_x = train_x.to(device)
            train_label = train_label.to(device)
            loss = loss_fn(model(train_x), train_label)
            loss.backward()
            optimizer.step()
            xm.mark_step()  # XLA: run the step's graph
            losses.append(loss.detach().to("cpu").item())
        print(f"epoch {epoch}: {len(losses)} steps, loss {losses[-1]:.4f}")

    os.makedirs("checkpoints", exist_ok=True)
    xm.save({"state_dict": model.state_dict()}, "checkpoints/checkpoint.pt")  # XLA: moves tensors to the CPU
    if args.losses:
        with open(args.losses, "w") as fh:
            json.dump(losses, fh)
    print(f"final loss {losses[-1]:.4f}; saved checkpoints/checkpoint.pt")


if __name__ == "__main__":
    main()
