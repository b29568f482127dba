#!/usr/bin/env python3
"""A PyTorch Lightning script on Poseidon: the one line marked `# poseidon` is all that
changes from a DDP run, and the launch is mpirun instead of torchrun.

    mpirun -np 2 --oversubscribe .venv/bin/python examples/python/lightning_minimal.py

(Lightning comes with ./run.sh build, or `pip install lightning`.)
"""
import lightning.pytorch as pl
import torch
import torch.nn.functional as F

from poseidon.lightning import PoseidonStrategy  # poseidon


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 256), torch.nn.ReLU(),
                                       torch.nn.Linear(256, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 1, 28, 28, generator=g)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()  # a task the model can learn
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)


torch.manual_seed(0)
trainer = pl.Trainer(strategy=PoseidonStrategy(), accelerator="cpu", max_epochs=2,  # poseidon
                     logger=False, enable_checkpointing=False, enable_progress_bar=False)
trainer.fit(Classifier(), data())
if trainer.is_global_zero:
    print(f"done: train_loss {trainer.callback_metrics['train_loss']:.4f}")
