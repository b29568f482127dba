"""PoseidonStrategy against Lightning's DDPStrategy (gloo), under mpirun: the same
LightningModule trained by both, compared parameter by parameter, with a sync_dist metric,
gradient accumulation and clipping, bf16-mixed, ModelCheckpoint (one file per save, written
by rank 0, loading into a fresh module) and a resume through Trainer.fit(ckpt_path=...).

    mpirun -np 2 python tests/python/lightning_parity.py [--cases all] [--tolerance 1e-4]
    python tests/python/lightning_parity.py --failing-job   # a rank's exception ends the job promptly

Exit 77 (ctest's skip) where Lightning is not installed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import lightning.pytorch as pl
except ImportError:
    print("lightning_parity: PyTorch Lightning is not installed (./run.sh build installs it): skipped")
    sys.exit(77)
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy

import poseidon
from ddp_parity import gloo_group
from poseidon.lightning import PoseidonStrategy

CASES = {
    "plain": {},
    "accumulate_clip": {"accumulate_grad_batches": 2, "gradient_clip_val": 0.5},
    "bf16": {"precision": "bf16-mixed"},
    "adam": {},
}


class Net(pl.LightningModule):
    """An MLP with BatchNorm (no bias before it: its gradient would be rounding noise, which Adam
    scales up to whole steps); SGD with momentum (or Adam); losses logged with sync_dist."""

    def __init__(self, optimizer="sgd", fail_at=None):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.Linear(20, 32, bias=False), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 4))
        self.optimizer, self.fail_at = optimizer, fail_at

    def forward(self, x):
        return self.body(x)

    def training_step(self, batch, batch_idx):
        if self.fail_at is not None and self.global_step == self.fail_at and self.global_rank == 1:
            raise RuntimeError("a bug in the user's training_step")
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y), sync_dist=True)

    def configure_optimizers(self):
        if self.optimizer == "adam":
            return torch.optim.Adam(self.parameters(), lr=0.01)
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)}


def loader(train=True):
    g = torch.Generator().manual_seed(1 if train else 2)
    x = torch.randn(96, 20, generator=g)
    y = (x[:, :4].argmax(1) + (x[:, 4] > 1).long()) % 4
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8, shuffle=train)


def fit(strategy, case, epochs=2, ckpt_dir=None, ckpt_path=None, fail_at=None):
    net = Net("adam" if case == "adam" else "sgd", fail_at=fail_at)
    callbacks = [ModelCheckpoint(dirpath=ckpt_dir, filename="{epoch}", save_top_k=-1)] if ckpt_dir else []
    trainer = pl.Trainer(strategy=strategy, accelerator="cpu", devices=poseidon.size() if isinstance(
        strategy, DDPStrategy) else "auto", max_epochs=epochs, logger=False, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=bool(ckpt_dir), callbacks=callbacks,
        num_sanity_val_steps=1, **CASES[case])
    trainer.fit(net, loader(), loader(False), ckpt_path=ckpt_path)
    return net, {k: float(v) for k, v in trainer.callback_metrics.items()}


def worst(a, b):
    """The largest relative difference between two modules' parameters and buffers."""
    sa, sb = a.state_dict(), b.state_dict()
    return max(((sa[k].double() - sb[k].double()).abs().max() / sa[k].double().abs().max().clamp_min(1e-12)).item()
               for k in sa if sa[k].is_floating_point())


def compare(a, cases, tmp):
    rank = poseidon.rank()
    for case in cases:
        ddp, ddp_metrics = fit(DDPStrategy(process_group_backend="gloo"), case)
        ours, our_metrics = fit(PoseidonStrategy(), case)
        diff = worst(ddp, ours)
        metric = max(abs(ddp_metrics[k] - our_metrics[k]) / max(abs(ddp_metrics[k]), 1e-12) for k in ddp_metrics)
        if rank == 0:
            print(f"{case}: worst parameter difference {diff:.3g}, metrics {our_metrics} (DDP {ddp_metrics}, "
                  f"worst relative difference {metric:.3g})", flush=True)
        assert set(ddp_metrics) == set(our_metrics), (ddp_metrics, our_metrics)
        assert diff <= a.tolerance, f"{case}: parameters differ from DDP's by {diff:.3g} (> {a.tolerance})"
        assert metric <= a.tolerance, f"{case}: sync_dist metrics differ: {our_metrics} vs DDP's {ddp_metrics}"


def checkpoint_and_resume(tmp):
    """ModelCheckpoint under PoseidonStrategy: one file per save, by rank 0; each loads into a
    fresh module; a run resumed from the first epoch's ends where the straight run does."""
    rank = poseidon.rank()
    straight_dir, first_dir = os.path.join(tmp, "straight"), os.path.join(tmp, "first")
    straight, _ = fit(PoseidonStrategy(), "plain", epochs=2, ckpt_dir=straight_dir)
    files = sorted(os.listdir(straight_dir)) if rank == 0 else []
    assert rank != 0 or files == ["epoch=0.ckpt", "epoch=1.ckpt"], files
    if rank == 0:
        saved = torch.load(os.path.join(straight_dir, "epoch=1.ckpt"), weights_only=False)
        fresh = Net()
        fresh.load_state_dict(saved["state_dict"])
        assert worst(straight, fresh) == 0, "the last checkpoint does not hold the trained parameters"
        momentum = saved["optimizer_states"][0]["state"]
        assert len(momentum) == len(list(fresh.parameters())), "the checkpoint lacks the optimizer's momentum"
    fit(PoseidonStrategy(), "plain", epochs=1, ckpt_dir=first_dir)
    resumed, _ = fit(PoseidonStrategy(), "plain", epochs=2, ckpt_path=os.path.join(first_dir, "epoch=0.ckpt"))
    diff = worst(straight, resumed)
    if rank == 0:
        print(f"checkpoint: files {files}; resumed from epoch 0 vs straight: worst difference {diff:.3g}", flush=True)
    assert diff == 0, f"the resumed run ends {diff:.3g} away from the straight one"


def refusals():
    """What PoseidonStrategy cannot follow stops every rank with one clear error, before any step."""
    for kwargs, strategy_options, words in (
            ({"accumulate_grad_batches": 4}, {}, "do not split into groups of accumulate_grad_batches=4"),
            ({}, {"backward_passes_per_step": 2}, "drop backward_passes_per_step")):
        net = Net()
        trainer = pl.Trainer(strategy=PoseidonStrategy(**strategy_options), accelerator="cpu", max_epochs=1,
                             logger=False, enable_progress_bar=False, enable_model_summary=False,
                             enable_checkpointing=False, num_sanity_val_steps=0, **kwargs)
        try:
            trainer.fit(net, loader())
        except ValueError as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{kwargs or strategy_options}: trained instead of refusing")
    if poseidon.rank() == 0:
        print("refusals: accumulation that Lightning would cut short, a second accumulation setting", flush=True)


def failing_job():
    """A rank's exception in training_step: the job ends, non-zero, within a minute, saying it."""
    started = time.monotonic()
    job = subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", sys.executable, __file__,
                          "--fail-at", "3"], capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    print(job.stderr[-1500:])
    assert job.returncode != 0, "the job ended with 0 after a rank's exception"
    assert "a bug in the user's training_step" in job.stderr, "the user's exception is not in the output"
    assert took < 60, f"the job took {took:.0f} s to end after the exception"
    print(f"failing job: exit {job.returncode} after {took:.1f} s, naming the exception")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="all", help=f"comma list of {', '.join(CASES)}, or all")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--failing-job", action="store_true", help="launch a 2-rank job whose rank 1 raises")
    ap.add_argument("--fail-at", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.failing_job:
        return failing_job()
    torch.set_num_threads(1)
    poseidon.init()
    if a.fail_at is not None:
        fit(PoseidonStrategy(), "plain", fail_at=a.fail_at)
        return
    cases = list(CASES) if a.cases == "all" else a.cases.split(",")
    # DDPStrategy's ranks (LightningEnvironment) from the MPI launch; its gloo group made here.
    os.environ.update(LOCAL_RANK=str(poseidon.rank()), NODE_RANK="0", WORLD_SIZE=str(poseidon.size()))
    gloo_group(poseidon.rank(), poseidon.size())
    tmp = poseidon.broadcast_object(tempfile.mkdtemp(prefix="lightning-") if poseidon.rank() == 0 else None)
    try:
        compare(a, cases, tmp)
        checkpoint_and_resume(tmp)
        refusals()
    finally:
        poseidon.barrier()
        if poseidon.rank() == 0:
            shutil.rmtree(tmp, ignore_errors=True)
    if poseidon.rank() == 0:
        print("lightning parity: passed")


if __name__ == "__main__":
    main()
