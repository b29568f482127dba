"""What the in-process API tests share (test_api.py, test_api_saved.py): the job of one,
a small CNN with BatchNorm, batches, and the loops they train with."""
import pytest
import torch
import torch.nn.functional as F

import poseidon


@pytest.fixture(scope="module", autouse=True)
def runtime():
    poseidon.init()
    yield


def small_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 10))


def data(n=5, batch=8):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(batch, 1, 8, 8, generator=g), torch.randint(0, 10, (batch,), generator=g)) for _ in range(n)]


def train(model, optimizer, batches):
    for x, y in batches:
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


def train_zeroing_after_forward(model, optimizer, batches):
    """The tutorials' order: zero_grad() between the forward and the backward."""
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def max_difference(a, b):
    pairs = list(zip(a.parameters(), b.parameters())) + list(zip(a.buffers(), b.buffers()))
    return max((p - q).abs().max().item() for p, q in pairs)
