"""Models for the Python tests: torchvision's as they are, and small versions of their
families (the same module types: BatchNorm, residual blocks, Dropout, Linear heads) that
keep a CI run short.

The small ones pool without max: after a ReLU, max-pooling windows are often all exact
zeros, a tie that the last bit of an input decides, and the whole upstream gradient moves
with it. Any change of rounding (another summation order) can flip such a tie, and the
runs then end ~1e-4 apart for a reason that has nothing to do with synchronisation.
(The CIFAR ResNets drop the stem's max-pool for small images too.)"""
import torch
import torchvision


def _first_conv_channels(model, channels):
    """torchvision's ResNets take 3 channels; Fashion-MNIST has 1."""
    if channels != 3:
        old = model.conv1
        model.conv1 = torch.nn.Conv2d(channels, old.out_channels, old.kernel_size, old.stride, old.padding,
                                      bias=False)
    return model


def build_model(name, classes, channels=3):
    tv = torchvision.models
    if name in ("resnet18", "resnet50"):
        return _first_conv_channels(getattr(tv, name)(num_classes=classes), channels)
    if name == "small_resnet":  # ResNet with one BasicBlock per stage
        model = tv.resnet.ResNet(tv.resnet.BasicBlock, [1, 1, 1, 1], num_classes=classes)
        model.maxpool = torch.nn.Identity()
        return _first_conv_channels(model, channels)
    if name in ("vgg11", "vgg11_bn"):
        model = getattr(tv, name)(num_classes=classes)
        if channels != 3:
            model.features[0] = torch.nn.Conv2d(channels, 64, 3, padding=1)
        return model
    if name == "small_vgg":  # VGG-11's features, a two-layer classifier with Dropout
        model = tv.vgg11(num_classes=classes)
        model.features[0] = torch.nn.Conv2d(channels, 64, 3, padding=1)
        for i, m in enumerate(model.features):
            if isinstance(m, torch.nn.MaxPool2d):
                model.features[i] = torch.nn.AvgPool2d(2)
        model.avgpool = torch.nn.AdaptiveAvgPool2d(1)
        model.classifier = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(True), torch.nn.Dropout(),
                                               torch.nn.Linear(256, classes))
        return model
    if name == "tiny_resnet":
        return TinyResNet(classes, channels)
    if name == "mlp":  # the first Linear's input needs no gradient; ReLU works in place after it
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(channels * 32 * 32, 64),
                                   torch.nn.ReLU(inplace=True), torch.nn.Linear(64, classes))
    raise ValueError(f"unknown model {name}")


class TinyResNet(torch.nn.Module):
    """small_resnet's kinds of module at width 8: a stem (Conv2d, BatchNorm), torchvision's
    BasicBlock once as is and once downsampling (a 1x1 Conv2d + BatchNorm shortcut), global
    average pooling, a Linear head. For autocast on CPUs without native bfloat16 (AVX2
    only): there a bf16 convolution at small_resnet's width runs ~20x slower than fp32
    (5.4 s against 0.29 s for one batch of 16 at 32x32, measured 2026-11-28), this one's
    in ~0.1 s."""

    def __init__(self, classes, channels=3, width=8):
        super().__init__()
        block = torchvision.models.resnet.BasicBlock
        self.conv1 = torch.nn.Conv2d(channels, width, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.layer1 = block(width, width)
        shortcut = torch.nn.Sequential(torch.nn.Conv2d(width, 2 * width, 1, 2, bias=False),
                                       torch.nn.BatchNorm2d(2 * width))
        self.layer2 = block(width, 2 * width, stride=2, downsample=shortcut)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(torch.relu(self.bn1(self.conv1(x)))))
        return self.fc(torch.flatten(self.pool(x), 1))


# --- Sequence models: the module shapes users train today. Their inputs are token ids. ---

class TransformerClassifier(torch.nn.Module):
    """An encoder classifier: Embedding, a positional parameter owned by the root module (read
    outside any child's forward), two TransformerEncoderLayers (MultiheadAttention reads
    in_proj_* and out_proj.weight inside one functional call: out_proj's forward never
    runs), LayerNorm, a Linear head on the mean over positions."""

    def __init__(self, vocab, classes, seq, dim=32, heads=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.position = torch.nn.Parameter(0.02 * torch.randn(seq, 1, dim))
        # As most users write it: nn.TransformerEncoder (a deep copy per layer), sequence
        # first, the default dropout.
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=64)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens.t()) + self.position)  # [seq, batch, dim]
        return self.head(self.norm(h).mean(dim=0))


class TiedLanguageModel(torch.nn.Module):
    """A language-model head tied to its input embedding (GPT-2's lm_head): the Linear's
    weight is the Embedding's, so the Linear owns only its bias; predicts one token per
    sequence (the classes are the vocabulary) from the last position."""

    def __init__(self, vocab, dim=32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.mix = torch.nn.Linear(dim, dim)
        self.lm_head = torch.nn.Linear(dim, vocab)
        self.lm_head.weight = self.embed.weight

    def forward(self, tokens):
        h = torch.tanh(self.mix(self.embed(tokens)))
        return self.lm_head(h[:, -1])


class LstmClassifier(torch.nn.Module):
    """nn.LSTM reads its flat weights inside one fused op; a Linear head on the last state."""

    def __init__(self, vocab, classes, dim=32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.lstm = torch.nn.LSTM(dim, dim, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out[:, -1])


SEQUENCE_MODELS = ("transformer", "tied_lm", "lstm")


def build_sequence_model(name, vocab, classes, seq):
    if name == "transformer":
        return TransformerClassifier(vocab, classes, seq)
    if name == "tied_lm":
        return TiedLanguageModel(vocab)
    if name == "lstm":
        return LstmClassifier(vocab, classes)
    raise ValueError(f"unknown model {name}")
